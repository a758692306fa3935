"""The collector helpers change the cyclic collector only while entered, nested and across threads."""

from __future__ import annotations

import gc
import threading

import pytest

from pimem.base.collector import collector_paused, young_collections_every
from pimem.experiments.sweep import sweep
from tests.support.summarizers import EchoSummarizer


@pytest.fixture
def threshold():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_young_collections_relaxed_while_entered_and_restored(threshold):
    with young_collections_every(10_000):
        assert gc.get_threshold() == (10_000, 10, 10)
        with young_collections_every(50_000):  # nested: the outer setting stands
            assert gc.get_threshold() == (10_000, 10, 10)
        assert gc.get_threshold() == (10_000, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)
    gc.set_threshold(20_000, 5, 5)
    with young_collections_every(10_000):  # never more often than already set
        assert gc.get_threshold() == (20_000, 5, 5)
    assert gc.get_threshold() == (20_000, 5, 5)


def test_the_last_thread_to_leave_restores(threshold):
    inside, leave = threading.Barrier(2), threading.Event()
    seen = []

    def work() -> None:
        with young_collections_every(10_000):
            inside.wait()
            leave.wait()

    other = threading.Thread(target=work)
    other.start()
    inside_main = young_collections_every(10_000)
    inside_main.__enter__()
    inside.wait()  # both are inside
    inside_main.__exit__(None, None, None)  # the main thread leaves first
    seen.append(gc.get_threshold()[0])
    leave.set()
    other.join()
    assert seen == [10_000]  # the other thread was still inside
    assert gc.get_threshold() == (700, 10, 10)


def test_collector_paused_restores_what_it_found():
    was = gc.isenabled()
    try:
        gc.enable()
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        (gc.enable if was else gc.disable)()


class _ThresholdSeen(EchoSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.seen: set[int] = set()

    def complete(self, request):
        self.seen.add(gc.get_threshold()[0])
        return super().complete(request)


def test_a_sweep_run_collects_less_often_and_restores(sample_paths, threshold):
    summarizer = _ThresholdSeen()
    df = sweep(sample_paths[:1], [{"reserve_tokens": 2000, "keep_recent_tokens": 3000, "context_window": 16000,
                                   "token_source": "chars"}], summarizer=summarizer, workers=1, progress=False)
    assert df.error.isna().all() and int(df.compactions.iloc[0]) > 0
    assert summarizer.seen == {10_000}
    assert gc.get_threshold() == (700, 10, 10)

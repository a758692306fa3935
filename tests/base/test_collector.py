"""The collector pause changes the cyclic collector only while entered, nested and across threads."""

from __future__ import annotations

import gc
import threading

from pimem.base.collector import collector_paused
from pimem.experiments.sweep import sweep
from tests.support.summarizers import EchoSummarizer


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


def test_the_last_thread_to_leave_restores():
    was = gc.isenabled()
    inside, leave = threading.Barrier(2), threading.Event()

    def work() -> None:
        with collector_paused():
            inside.wait()
            leave.wait()

    try:
        gc.enable()
        other = threading.Thread(target=work)
        other.start()
        with collector_paused():
            inside.wait()  # both are inside
        seen = gc.isenabled()  # the main thread has left, the other is still inside
        leave.set()
        other.join()
        assert seen is False
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


class _CollectorSeen(EchoSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.enabled: set[bool] = set()

    def complete(self, request):
        self.enabled.add(gc.isenabled())
        return super().complete(request)


def test_a_sweep_runs_with_the_collector_paused_and_restores_it(sample_paths):
    summarizer = _CollectorSeen()
    assert gc.isenabled()
    df = sweep(sample_paths[:1], [{"reserve_tokens": 2000, "keep_recent_tokens": 3000, "context_window": w,
                                   "token_source": "chars"} for w in (14000, 16000)],
               summarizer=summarizer, workers=1, progress=False)
    assert df.error.isna().all() and int(df.compactions.min()) > 0
    assert summarizer.enabled == {False}
    assert gc.isenabled()

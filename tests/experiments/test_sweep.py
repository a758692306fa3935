"""Sweeps: grids, parallel processes, shared cache, resuming, errors, Dask."""

from __future__ import annotations

import pytest

from pimem.experiments.sweep import SWEEP, chunk_runs, expand_grid, sweep

GRID = {"reserve_tokens": [2000, 4000], "keep_recent_tokens": [3000], "context_window": [16000, 24000],
        "token_source": ["chars"]}


def test_expand_grid_cartesian_and_list():
    settings = expand_grid(GRID)
    assert len(settings) == 4
    assert settings[0] == {"reserve_tokens": 2000, "keep_recent_tokens": 3000, "context_window": 16000,
                           "token_source": "chars"}
    assert expand_grid([{"reserve_tokens": 1}]) == [{"reserve_tokens": 1}]
    with pytest.raises(ValueError, match="reserve_tokenz"):
        expand_grid({"reserve_tokenz": [1]})


def _tasks(sizes: dict[int, int], settings: int) -> list[dict]:
    return [{"session_index": s, "setting_index": k, "size": size} for s, size in sizes.items()
            for k in reversed(range(settings))]


@pytest.mark.parametrize("sessions,settings,workers", [(1000, 20, 2), (1, 20, 2), (3, 5, 4), (7, 1, 2), (2, 3, 1)])
def test_chunks_hold_one_sessions_runs_and_give_every_worker_several(sessions, settings, workers):
    sizes = {s: 1000 + (s * 7919) % 500 for s in range(sessions)}
    tasks = _tasks(sizes, settings)
    chunks = chunk_runs(tasks, workers)
    # every run once, each chunk one session's runs in setting order
    assert sorted(id(t) for c in chunks for t in c) == sorted(id(t) for t in tasks)
    for c in chunks:
        assert len({t["session_index"] for t in c}) == 1
        assert [t["setting_index"] for t in c] == sorted(t["setting_index"] for t in c)
    most = -(-len(tasks) // (4 * workers))
    assert max(len(c) for c in chunks) <= most
    assert len(chunks) >= min(len(tasks), 3 * workers)  # work for every worker till near the end
    # the biggest sessions first
    assert [c[0]["size"] for c in chunks] == sorted((c[0]["size"] for c in chunks), reverse=True)
    if sessions == 1000:  # a large sweep: one chunk a session, its runs together in one process
        assert len(chunks) == sessions


def test_a_sweep_of_one_session_still_uses_every_worker(sample_paths):
    grid = {"reserve_tokens": [2000], "keep_recent_tokens": [3000], "context_window": [14000, 16000, 20000, 24000],
            "token_source": ["chars"]}
    tasks = [{"session_index": 0, "setting_index": k, "size": 1} for k in range(8)]
    assert len(chunk_runs(tasks, 2)) == 8  # eight runs, two workers: one run a chunk
    df = sweep(sample_paths[:1], grid, workers=2, progress=False)
    assert df.error.isna().all() and len(df) == 4
    assert list(df.setting_index) == [0, 1, 2, 3]


def test_sweep_parallel_cached_resumable(sample_paths, tmp_path):
    results = tmp_path / "runs.jsonl"
    cache = tmp_path / "summaries.sqlite"
    df = sweep(sample_paths, GRID, workers=2, cache=cache, results_path=results, progress=False)
    assert len(df) == len(sample_paths) * 4
    assert df.error.isna().all()
    assert (df.compactions > 0).any()
    assert df.summarizer_calls.sum() > 0
    assert df.worker_pid.nunique() >= 1
    assert len(results.read_text().splitlines()) == len(df)
    # the same sweep again: every run is read back, nothing is replayed
    again = sweep(sample_paths, GRID, workers=2, cache=cache, results_path=results, progress=False)
    assert again.resumed.all()
    assert list(again.run_hash) == list(df.run_hash)
    assert list(again.compactions) == list(df.compactions)
    # a fresh results file but the same cache: runs replay, no summarizer call is made
    fresh = sweep(sample_paths, GRID, workers=1, cache=cache, results_path=tmp_path / "b.jsonl", progress=False)
    assert not fresh.resumed.any()
    assert fresh.summarizer_calls.sum() == 0
    assert fresh.summary_calls.sum() == df.summary_calls.sum()
    assert list(fresh.compactions) == list(df.compactions)


def test_sweep_resumes_after_a_crash(sample_paths, tmp_path):
    results = tmp_path / "runs.jsonl"
    first = sweep(sample_paths[:1], GRID, workers=1, results_path=results, progress=False)
    lines = results.read_text().splitlines()
    # simulate a crash: two runs done, the third cut mid-line
    results.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])
    again = sweep(sample_paths[:1], GRID, workers=1, results_path=results, progress=False)
    assert list(again.resumed) == [True, True, False, False]
    assert list(again.compactions) == list(first.compactions)
    # every column is declared, in the declared order
    assert list(again.columns) == [c for c in SWEEP.names if c in again.columns]
    assert {"run_hash", "reserve_tokens", "compactions", "cost_total", "error", "resumed"} <= set(again.columns)


def test_errors_are_captured_per_run(sample_paths, tmp_path):
    grid = [{"token_source": "chars"}, {"token_source": "nonsense"}]
    df = sweep(sample_paths[:1], grid, workers=1, progress=False)
    assert df.error.iloc[0] is None or df.error.isna().iloc[0]
    assert "token_source" in df.error.iloc[1]
    assert set(df.columns) <= set(SWEEP.names) and "traceback" in df.columns


@pytest.mark.slow
def test_sweep_on_a_dask_local_cluster(sample_paths, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            df = sweep(sample_paths, GRID, client=client, cache=tmp_path / "c.sqlite", progress=False)
    local = sweep(sample_paths, GRID, workers=1, progress=False)
    assert df.error.isna().all()
    assert list(df.compactions) == list(local.compactions)
    assert df.worker_pid.notna().all()


def test_the_cache_file_is_opened_once_per_process(sample_paths, tmp_path, monkeypatch):
    """Opening the SQLite cache checks the whole file: a sweep pays it once per process, not per run."""
    from pimem.summarizers.cached import CachedSummarizer

    opened = []
    original = CachedSummarizer._open

    def counting_open(self):
        opened.append(self.path)
        return original(self)

    monkeypatch.setattr(CachedSummarizer, "_open", counting_open)
    cache = tmp_path / "c.sqlite"
    df = sweep(sample_paths, GRID, workers=1, cache=cache, progress=False)
    assert len(df) == len(sample_paths) * 4 and df.summarizer_calls.sum() > 0
    assert opened == [cache]
    # a second sweep in the same process reuses it; misses are still counted per run
    again = sweep(sample_paths, GRID, workers=1, cache=cache, results_path=tmp_path / "r.jsonl", progress=False)
    assert opened == [cache]
    assert again.summarizer_calls.sum() == 0 and again.summary_calls.sum() == df.summary_calls.sum()
    # the cache file deleted between sweeps: a new one is made, not the deleted one written to
    for leftover in tmp_path.glob("c.sqlite*"):
        leftover.unlink()
    third = sweep(sample_paths, GRID, workers=1, cache=cache, progress=False)
    assert opened == [cache, cache]
    assert cache.exists() and third.summarizer_calls.sum() == df.summarizer_calls.sum()


def test_overlapping_runs_of_one_process_count_their_own_cache_misses(tmp_path):
    # Runs in one process share the cache object; a run started meanwhile (another thread of a
    # Dask worker) must not take over the misses of a run in progress.
    from pimem.core.llm import SummaryRequest
    from pimem.summarizers.extractive import ExtractiveSummarizer
    from pimem.experiments.sweep import _make_summarizer

    cache = tmp_path / "cache.sqlite"
    summarizer = ExtractiveSummarizer()
    first, first_calls = _make_summarizer(summarizer, cache)
    second, second_calls = _make_summarizer(summarizer, cache)
    request = SummaryRequest(kind="history", system_prompt="s", prompt="<conversation>[User]: hi</conversation>",
                             max_tokens=100)
    first.complete(request)
    assert (first_calls.calls, second_calls.calls) == (1, 0)
    second.complete(request)  # answered from the cache
    assert (first_calls.calls, second_calls.calls) == (1, 0)


def test_a_process_forgets_the_memos_when_it_moves_on_to_another_sessions_runs(monkeypatch):
    import threading

    import pimem.experiments.sweep as sweep_module

    forgotten = []
    monkeypatch.setattr(sweep_module, "forget_memos", lambda: forgotten.append(1))
    monkeypatch.setattr(sweep_module, "_current_session", None)
    with sweep_module._session_runs("a"):
        pass
    with sweep_module._session_runs("a"):  # the same session's next chunk keeps them
        pass
    assert len(forgotten) == 1
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with sweep_module._session_runs("b"):
            inside.set()
            leave.wait()

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait()
    with sweep_module._session_runs("c"):  # runs of "b" under way in this process: nothing is forgotten
        pass
    leave.set()
    thread.join()
    assert len(forgotten) == 2  # "b" forgot "a"'s; "c" forgot nothing
    with sweep_module._session_runs("c"):
        pass
    assert len(forgotten) == 3

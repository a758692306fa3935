"""Sweeps that die: a worker process killed with SIGKILL mid-sweep, then the sweep run again;
and the Parquet output beside the resumable JSONL log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from pimem.summarizers.extractive import ExtractiveSummarizer
from pimem.experiments.sweep import log_path_for, sweep

GRID = {"reserve_tokens": [2000, 4000], "keep_recent_tokens": [3000], "context_window": [14000, 20000],
        "token_source": ["chars"]}

# Runs in a child process: a sweep with 2 workers whose summarizer, once the results log holds
# two finished runs, announces its worker's pid on stdout and blocks until it is killed.
SCRIPT = textwrap.dedent(
    """
    import os, sys, threading
    from pimem.summarizers.extractive import ExtractiveSummarizer
    from pimem.experiments.sweep import sweep

    log, marker, grid = sys.argv[1], sys.argv[2], eval(sys.argv[3])
    paths = sys.argv[4:]

    class BlockingSummarizer:
        \"\"\"The extractive summarizer, except one call (in one worker) that never returns.\"\"\"

        def __init__(self):
            self.inner = ExtractiveSummarizer()
            self.model = self.inner.model

        def identity(self):
            return self.inner.identity()

        def complete(self, request):
            if os.path.exists(log) and len(open(log, "rb").read().splitlines()) >= 2:
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    pass
                else:
                    print(f"BLOCKED {os.getpid()}", flush=True)
                    threading.Event().wait()
            return self.inner.complete(request)

    sweep(paths, grid, summarizer=BlockingSummarizer(), workers=2, results_path=log, progress=False)
    print("FINISHED", flush=True)
    """
)


def test_a_sweep_whose_worker_is_killed_resumes_without_redoing_finished_runs(sample_paths, tmp_path):
    paths = [str(p) for p in sample_paths]
    log = tmp_path / "runs.jsonl"
    script = tmp_path / "sweep_child.py"
    script.write_text(SCRIPT, encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(log), str(tmp_path / "blocked"), repr(GRID), *paths],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = proc.stdout.readline()  # blocks until a worker announces itself (or the child ends)
        assert line.startswith("BLOCKED "), f"the sweep never blocked: {line!r} {proc.stderr.read()[-2000:]}"
        worker = int(line.split()[1])
        assert worker != proc.pid
        os.kill(worker, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert "BrokenProcessPool" in err or "terminated abruptly" in err

    finished = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x.strip()]
    total = len(paths) * 4
    assert 2 <= len(finished) < total  # the kill came mid-sweep, after some runs were logged
    # started again: the logged runs are read back, only the others are replayed
    again = sweep(paths, GRID, summarizer=ExtractiveSummarizer(), workers=2, results_path=log, progress=False)
    assert len(again) == total and again.error.isna().all()
    assert set(again[again.resumed].run_hash) == {r["run_hash"] for r in finished}
    assert (~again.resumed).sum() == total - len(finished)
    assert len(log.read_text(encoding="utf-8").splitlines()) == total
    # and the result is the one a sweep that never died gives
    clean = sweep(paths, GRID, summarizer=ExtractiveSummarizer(), workers=1, progress=False)
    assert list(again.run_hash) == list(clean.run_hash)
    for column in ("compactions", "summary_calls", "peak_context_tokens", "final_context_tokens"):
        assert list(again[column]) == list(clean[column]), column


def test_parquet_results_with_a_jsonl_log_beside_them(sample_paths, tmp_path):
    out = tmp_path / "sweep.parquet"
    df = sweep(sample_paths[:2], GRID, workers=1, results_path=out, progress=False)
    log = log_path_for(out)
    assert log == tmp_path / "sweep.parquet.jsonl"
    assert len(log.read_text(encoding="utf-8").splitlines()) == len(df) == 8
    table = pd.read_parquet(out)
    assert list(table.run_hash) == list(df.run_hash)
    assert list(table.compactions) == list(df.compactions)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    # resumable through the log; the Parquet file is rewritten with every row
    again = sweep(sample_paths[:2], GRID, workers=1, results_path=out, progress=False)
    assert again.resumed.all()
    assert list(pd.read_parquet(out).compactions) == list(df.compactions)


def test_a_jsonl_results_path_is_its_own_log(tmp_path):
    assert log_path_for(tmp_path / "runs.jsonl") == tmp_path / "runs.jsonl"
    with pytest.raises(TypeError):
        log_path_for(None)  # type: ignore[arg-type]

"""The `pimem` command against hostile input and unlucky users: outputs never read as inputs, sources
never overwritten, duplicates counted once, failures that do not exit 0, escapes that never reach
the terminal, bad numbers refused, deep folders, long names, full disks and killed parents."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from pimem.cli.main import main, terminal_safe
from tests.support.tiny import tiny_session_lines, write_tiny_session

FAST_SWEEP = ["--reserve", "500", "--keep", "500", "--window", "3000", "--workers", "1", "-q"]
FAST_STUDY = ["--reserve", "500", "--keep", "500", "--window", "3000", "--token-source", "calibrated",
              "--workers", "1", "-q"]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- outputs are never inputs


def test_a_second_study_and_sweep_never_read_the_first_ones_outputs(tmp_path, capsys):
    sessions = tmp_path / "sessions"
    write_tiny_session(sessions / "a.jsonl")
    code, out, err = run(["study", "-o", str(sessions / "st1"), str(sessions), *FAST_STUDY], capsys)
    assert code == 0, err
    assert (sessions / "st1" / "replays" / "a.jsonl").exists()
    for folder in ("st1", "st1/replays", "st1/reports"):
        assert (sessions / folder / ".pimem-output").exists()
    code, out, err = run(["sweep", str(sessions), "-o", str(sessions / "r1.csv"), *FAST_SWEEP], capsys)
    assert code == 0, err
    assert (sessions / "r1.csv.jsonl").exists()
    code, out, err = run(["sweep", str(sessions), "-o", str(sessions / "r2.csv"), *FAST_SWEEP], capsys)
    assert code == 0, err
    assert set(pd.read_csv(sessions / "r2.csv")["session"]) == {str(sessions / "a.jsonl")}  # one session, no logs
    code, out, err = run(["ls", str(sessions), "--format", "csv"], capsys)
    assert code == 0 and pd.read_csv(pd.io.common.StringIO(out))["path"].tolist() == [str(sessions / "a.jsonl")]


def test_a_study_refuses_to_write_over_its_source(tmp_path, capsys):
    source = write_tiny_session(tmp_path / "st" / "replays" / "x.jsonl")
    before = source.read_bytes()
    code, out, err = run(["study", "-o", str(tmp_path / "st"), str(source), *FAST_STUDY], capsys)
    assert code == 2 and "would overwrite the source session" in err and str(source) in err
    assert source.read_bytes() == before
    assert not (tmp_path / "st" / "sweep.csv").exists()  # refused before any work


def test_the_same_file_by_path_symlink_and_copy_counts_once(tmp_path, capsys):
    a = write_tiny_session(tmp_path / "a.jsonl")
    (tmp_path / "link.jsonl").symlink_to(a)
    shutil.copy(a, tmp_path / "copy.jsonl")
    (tmp_path / "out").mkdir()  # an output's folder must exist (none is made)
    code, out, err = run(["sweep", str(a), str(tmp_path / "link.jsonl"), str(tmp_path / "copy.jsonl"), str(a),
                          "-o", str(tmp_path / "out" / "r.csv"), *FAST_SWEEP], capsys)
    assert code == 0, err
    assert len(pd.read_csv(tmp_path / "out" / "r.csv")) == 1
    assert "link.jsonl: the same file as" in err and "copy.jsonl: the same content as" in err
    assert err.count("counted once") == 3


def test_results_and_summary_must_be_two_files(tmp_path, capsys):
    a = write_tiny_session(tmp_path / "a.jsonl")
    out = str(tmp_path / "r.csv")
    code, _, err = run(["sweep", str(a), "-o", out, "--summary", out, *FAST_SWEEP], capsys)
    assert code == 2 and "--summary names the results file" in err


@pytest.mark.parametrize("price", ["-1", "NaN", "1e999", '"Infinity"'])
def test_prices_must_be_finite_and_not_negative(tmp_path, capsys, price):
    a = write_tiny_session(tmp_path / "a.jsonl")
    prices = tmp_path / "p.json"
    prices.write_text('{"m": {"input": %s, "output": 1, "cache_read": 0, "cache_write": 0}}' % price)
    code, _, err = run(["sweep", str(a), "-o", str(tmp_path / "r.csv"), "--prices", str(prices), *FAST_SWEEP],
                       capsys)
    assert code == 2 and "p.json" in err


@pytest.mark.parametrize("command", [["replay"], ["sweep", "-o", "r.csv"], ["study", "-o", "st"]])
def test_a_window_of_0_is_refused_like_any_window_without_room(tmp_path, capsys, command):
    a = write_tiny_session(tmp_path / "a.jsonl")
    code, _, err = run([command[0], str(a), *command[1:], "--window", "0"], capsys)
    assert code == 2 and "positive" in err


# --------------------------------------------------------------------------- failures do not exit 0


@pytest.fixture
def failing_model(server, monkeypatch):
    from tests.support.fake_openai_server import Reply

    server.responder = None
    server.script(*[Reply(status=400, error_message="model refuses")] * 200)
    monkeypatch.setenv("PIMEM_BASE_URL", server.base_url)
    monkeypatch.setenv("PIMEM_MODEL", "m")
    monkeypatch.setenv("PIMEM_RETRIES", "0")
    return server


def test_a_replay_whose_every_compaction_fails_exits_1(tmp_path, capsys, failing_model, monkeypatch):
    monkeypatch.setenv("PIMEM_CACHE", str(tmp_path / "c.sqlite"))
    a = write_tiny_session(tmp_path / "a.jsonl")
    code, out, err = run(["replay", str(a), "--summarizer", "env", "--window", "3000", "--reserve", "500",
                          "--keep", "500", "-q"], capsys)
    assert code == 1 and "every compaction failed" in err and "model refuses" in err
    code, out, err = run(["sweep", str(a), "--summarizer", "env", "-o", str(tmp_path / "r.csv"), *FAST_SWEEP],
                         capsys)
    assert code == 1 and "failed every compaction" in err


def test_a_study_whose_every_compaction_fails_says_so_and_exits_1(tmp_path, capsys, monkeypatch):
    from pimem.core.llm import SummaryResponse
    from pimem.summarizers.extractive import ExtractiveSummarizer

    def refuse(self, request):  # a summarizer that always fails (as a damaged cache did)
        return SummaryResponse(text="", stop_reason="error", error_message="cannot summarize")

    monkeypatch.setattr(ExtractiveSummarizer, "complete", refuse)
    a = write_tiny_session(tmp_path / "a.jsonl")
    code, out, err = run(["study", "-o", str(tmp_path / "st"), str(a), *FAST_STUDY], capsys)
    assert code == 1 and "a: failed: SummarizationError: every compaction failed" in out
    assert "cannot summarize" in out


# --------------------------------------------------------------------------- terminal escapes

EVIL = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x9b1m\rback"


def test_escapes_from_session_text_never_reach_the_terminal(tmp_path, capsys):
    lines = tiny_session_lines(3, text=EVIL)
    lines.append({"type": "session_info", "id": "n1", "parentId": "a0002", "timestamp": lines[0]["timestamp"],
                  "name": "name " + EVIL})
    path = tmp_path / "evil.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    for argv in (["show", str(path)], ["ls", str(tmp_path)], ["context", str(path)]):
        code, out, err = run(argv, capsys)
        assert code == 0, err
        for control in ("\x1b", "\x07", "\x9b", "\r"):
            assert control not in out + err, (argv, control)
        assert "\\x1b]0;owned\\x07" in out, argv  # shown, as text
    assert terminal_safe("tab\tnew\nline é 😀") == "tab\tnew\nline é 😀"


# --------------------------------------------------------------------------- deep folders, long names, full disks


def test_folders_nested_1100_deep(tmp_path, capsys):
    deep = tmp_path / "root"
    folder = str(deep)
    os.mkdir(folder)
    for _ in range(1100):  # one level at a time (os.makedirs itself recurses per level)
        folder = os.path.join(folder, "d")
        os.mkdir(folder)
    write_tiny_session(Path(folder) / "a.jsonl")
    code, out, err = run(["ls", str(deep), "--format", "csv"], capsys)
    assert code == 0, err
    assert len(pd.read_csv(pd.io.common.StringIO(out))) == 1
    code, out, err = run(["sweep", str(deep), "-o", str(tmp_path / "r.csv"), *FAST_SWEEP], capsys)
    assert code == 0, err
    assert len(pd.read_csv(tmp_path / "r.csv")) == 1
    for name in os.listdir(folder):  # removed bottom up here: the recursive cleanup would overflow too
        os.unlink(os.path.join(folder, name))
    while folder != str(deep):
        os.rmdir(folder)
        folder = os.path.dirname(folder)


def test_output_names_near_the_length_limit(tmp_path, capsys):
    a = write_tiny_session(tmp_path / "a.jsonl")
    name = "r" * (255 - len(".jsonl") - len(".csv")) + ".csv"  # the log beside it is exactly 255 bytes
    code, out, err = run(["sweep", str(a), "-o", str(tmp_path / name), *FAST_SWEEP], capsys)
    assert code == 0, err
    assert len(pd.read_csv(tmp_path / name)) == 1
    replayed = tmp_path / ("x" * 249 + ".jsonl")
    code, out, err = run(["replay", str(a), "-o", str(replayed), "-q", "--window", "3000", "--reserve", "500",
                          "--keep", "500"], capsys)
    assert code == 0, err
    assert replayed.exists() and [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_full_disk_names_the_file_and_leaves_no_torn_line(tmp_path, monkeypatch):
    from pimem.base.files import atomic_write_text
    from pimem.experiments import sweep as sweep_mod

    log = tmp_path / "runs.jsonl"
    sweep_mod._append_result(log, {"run_hash": "a", "x": 1})
    real_write = os.write

    def half_then_full(fd, data):  # the disk fills half way through the line
        if len(data) > 4:
            real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError, match="runs.jsonl") as info:
        sweep_mod._append_result(log, {"run_hash": "b", "x": 2})
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert log.read_bytes() == b'{"run_hash":"a","x":1}\n'  # the first line whole, no torn second one
    with open("/dev/full", "w") if os.path.exists("/dev/full") else open(os.devnull, "w"):
        pass

    class Full:
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    import pimem.base.files as files

    real_fdopen = os.fdopen

    def full_fdopen(*args, **kwargs):
        f = real_fdopen(*args, **kwargs)
        f.write = Full().write
        return f

    monkeypatch.setattr(files.os, "fdopen", full_fdopen)
    with pytest.raises(OSError, match=r"cannot write .*index\.html: No space left") as info:
        atomic_write_text(tmp_path / "index.html", "x")
    assert info.value.filename == str(tmp_path / "index.html")
    assert list(tmp_path.glob(".index.html.*")) == []


# --------------------------------------------------------------------------- a killed parent

SWEEP_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pimem.experiments.sweep import sweep

    class Stuck:
        model = "stuck"
        def identity(self):
            return {"class": "Stuck"}
        def complete(self, request):
            with open(os.path.join(sys.argv[2], f"worker-{os.getpid()}"), "w"):
                pass
            while True:
                time.sleep(1)

    sweep([sys.argv[1]], {"reserve_tokens": [500, 600], "keep_recent_tokens": [500], "context_window": [3000]},
          summarizer=Stuck(), workers=2, progress=False, measures=False)
""")


def test_pool_workers_end_when_the_sweep_is_killed(tmp_path):
    a = write_tiny_session(tmp_path / "a.jsonl")
    marks = tmp_path / "marks"
    marks.mkdir()
    parent = subprocess.Popen([sys.executable, "-c", SWEEP_SCRIPT, str(a), str(marks)],
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        deadline = time.monotonic() + 120
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.2)
        workers = [int(p.name.split("-")[1]) for p in marks.iterdir()]
        assert len(workers) == 2, "the workers never started their runs"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 60
    while any(os.path.exists(f"/proc/{w}") and _alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [w for w in workers if _alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert left == []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"

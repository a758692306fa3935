"""The `pimem` command end to end on the bundled samples, including user mistakes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pimem.cli.main import build_parser, main

COMMANDS = ["ls", "show", "context", "replay", "sweep", "drift", "study", "advise"]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse exits for --help and bad arguments
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys) -> None:
    code, out, _ = run([command, "--help"], capsys)
    assert code == 0
    assert out.startswith("usage: pimem " + command)


def test_parser_lists_every_command() -> None:
    text = build_parser().format_help()
    for command in COMMANDS:
        assert command in text


def test_show_prints_tree_and_stats(sample_paths: list[Path], capsys) -> None:
    from pimem import load_session

    path = sample_paths[0]
    s = load_session(path)
    code, out, err = run(["show", str(path)], capsys)
    assert code == 0, err
    assert f"entries  {len(s.entries)}" in out
    assert s.leaf_id in out  # the tree marks the leaf


def test_context_json_is_exactly_convert_to_llm(sample_paths: list[Path], capsys) -> None:
    from pimem import build_session_context, convert_to_llm, load_session
    from pimem.base.js import js_stringify

    path = sample_paths[0]
    s = load_session(path)
    code, out, _ = run(["context", str(path), "--json"], capsys)
    assert code == 0
    assert out.strip() == js_stringify(convert_to_llm(build_session_context(s).messages))


def test_context_table_for_another_leaf(sample_paths: list[Path], capsys) -> None:
    from pimem import build_session_context, load_session

    for path in sample_paths:
        s = load_session(path)
        if len(s.leaves()) > 1:
            break
    else:
        pytest.skip("no sample with several leaves")
    other = next(e["id"] for e in s.leaves() if e["id"] != s.leaf_id)
    code, out, _ = run(["context", str(path), "--leaf", other], capsys)
    assert code == 0
    n = len(build_session_context(s, other).messages)
    assert f"{n} messages; context" in out


def test_context_unknown_leaf_is_a_user_error(sample_paths: list[Path], capsys) -> None:
    code, out, err = run(["context", str(sample_paths[0]), "--leaf", "nope0000"], capsys)
    assert code == 2
    assert "nope0000" in err and "Traceback" not in err


def test_ls_lists_sessions_in_a_folder(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    nested = tmp_path / "--home-user-project--"
    nested.mkdir()
    for p in sample_paths:
        (nested / p.name).write_bytes(p.read_bytes())
    (nested / "broken.jsonl").write_text("not json at all\n")
    code, out, _ = run(["ls", str(tmp_path), "--format", "csv"], capsys)
    assert code == 0
    from io import StringIO

    df = pd.read_csv(StringIO(out))
    assert len(df) == len(sample_paths) + 1
    assert df["error"].notna().sum() == 1


def test_ls_missing_folder(tmp_path: Path, capsys) -> None:
    code, _, err = run(["ls", str(tmp_path / "missing")], capsys)
    assert code == 2 and "no such file or folder" in err and "missing" in err


def test_ls_one_session_file(sample_paths: list[Path], capsys) -> None:
    from pimem import load_session

    path = sample_paths[0]
    code, out, err = run(["ls", str(path), "--format", "json"], capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 1
    assert rows[0]["path"] == str(path) and rows[0]["session_id"] == load_session(path).header["id"]


def _options(parser) -> list[tuple[str, str, object]]:
    """(command, option, action) for every option of every sub-command."""
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(name, action.option_strings[-1], action) for name, p in sub.choices.items() for action in p._actions
            if action.option_strings and not isinstance(action, argparse._HelpAction)]


def test_every_option_has_help_and_says_its_default() -> None:
    options = _options(build_parser())
    assert len(options) > 30
    for command, option, action in options:
        assert action.help and len(action.help) > 8, (command, option)
        takes_value = action.nargs != 0
        if takes_value:
            assert "default:" in action.help or "required" in action.help, (command, option, action.help)
        if takes_value and action.default is not None and not action.required:
            shown = action.default if not isinstance(action.default, list) else ",".join(map(str, action.default))
            assert f"default: {shown}" in action.help, (command, option, action.help)


def test_study_help_states_the_real_default_grid() -> None:
    from pimem.experiments.study import STUDY_KEEPS, STUDY_RESERVES, STUDY_TOKEN_SOURCES, STUDY_WINDOWS

    helps = {(c, o): a.help % {} for c, o, a in _options(build_parser())}
    for command, option, values in (("study", "--reserve", STUDY_RESERVES), ("study", "--keep", STUDY_KEEPS),
                                    ("study", "--window", STUDY_WINDOWS), ("advise", "--reserve", STUDY_RESERVES),
                                    ("advise", "--keep", STUDY_KEEPS)):
        text = helps[(command, option)]
        assert ",".join(str(v) for v in values) + ")" in text, (option, text)
    assert f"default: {','.join(STUDY_TOKEN_SOURCES)})" in helps[("study", "--token-source")]


def test_every_command_has_a_description() -> None:
    import argparse

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        assert p.description and len(p.description) > 20, name


@pytest.mark.parametrize("command", ["replay", "sweep"])
def test_summarizer_env_without_a_model_is_a_clear_error(command: str, tmp_path: Path, sample_paths: list[Path],
                                                         capsys, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("PIMEM_BASE_URL", raising=False)
    argv = [command, str(sample_paths[0]), "--summarizer", "env", "-q"]
    out_file = tmp_path / ("r.jsonl" if command == "replay" else "r.csv")
    code, out, err = run(argv + ["-o", str(out_file)], capsys)
    assert code == 2
    assert "OPENAI_API_KEY" in err and "PIMEM_BASE_URL" in err and "Traceback" not in err
    assert not out_file.exists()  # nothing replayed with a summarizer the user did not ask for


def test_replay_prints_formatted_numbers(sample_paths: list[Path], capsys) -> None:
    import re

    code, out, err = run(["replay", str(sample_paths[0]), "--window", "16000", "--reserve", "4000", "--keep", "4000",
                          "-q"], capsys)
    assert code == 0, err
    values = dict(line.split(None, 1) for line in out.splitlines() if line.strip())
    assert re.fullmatch(r"\d{1,3}(,\d{3})*", values["peak_context_tokens"]), values["peak_context_tokens"]
    assert re.fullmatch(r"\d+(\.\d{1,3})?", values["calibration_slope"]), values["calibration_slope"]
    assert not re.search(r"\d\.0*[1-9]\d{3,}", out)  # no raw floats: at most 3 significant digits


def test_replay_writes_a_session_pi_can_load(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    from pimem import load_session

    path = max(sample_paths, key=lambda p: p.stat().st_size)
    out = tmp_path / "replayed.jsonl"
    events = tmp_path / "events.csv"
    code, text, err = run(["replay", str(path), "--reserve", "4096", "--keep", "4000", "--window", "24000",
                           "-q", "-o", str(out), "--events", str(events)], capsys)
    assert code == 0, err
    replayed = load_session(out)
    assert not replayed.warnings
    n_compactions = sum(e["type"] == "compaction" for e in replayed.entries)
    assert n_compactions > 0
    ev = pd.read_csv(events)
    assert len(ev) > 0
    assert "compactions" in text


def test_sweep_writes_results(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    out = tmp_path / "results.csv"
    code, text, err = run(["sweep", *map(str, sample_paths), "--reserve", "4096,8192", "--keep", "4000",
                           "--window", "32000", "--workers", "1", "-q", "-o", str(out)], capsys)
    assert code == 0, err
    df = pd.read_csv(out)
    assert len(df) == 2 * len(sample_paths)
    assert set(df["reserve_tokens"]) == {4096, 8192}


def test_sweep_rejects_unknown_output_format(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    code, _, err = run(["sweep", str(sample_paths[0]), "-q", "-o", str(tmp_path / "r.xlsx")], capsys)
    assert code == 2 and ".csv or .parquet" in err


def test_drift_writes_html(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    out = tmp_path / "report.html"
    code, _, err = run(["drift", str(sample_paths[0]), "-o", str(out)], capsys)
    assert code == 0, err
    html = out.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "<img" in html


@pytest.mark.parametrize("argv", [
    ["replay"],                                   # missing session
    ["replay", "x.jsonl", "--reserve", "-5"],     # negative number
    ["sweep", "x.jsonl", "--keep", "a,b", "-o", "r.csv"],
    ["frobnicate"],
])
def test_bad_arguments_exit_2(argv: list[str], capsys) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2
    assert "Traceback" not in err


@pytest.mark.parametrize("content", [b"", b"\x00\x01\x02garbage", b'{"type":"message","id":"a"}\n',
                                     b"[1, 2, 3]\n"])
def test_broken_files_exit_2_without_traceback(tmp_path: Path, content: bytes, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    for command in (["show", str(bad)], ["context", str(bad)], ["drift", str(bad), "-o", str(tmp_path / "r.html")]):
        code, _, err = run(command, capsys)
        assert code == 2, (command, err)
        assert "pimem: error:" in err and "Traceback" not in err
        assert str(bad) in err


def test_missing_file_exit_2(tmp_path: Path, capsys) -> None:
    code, _, err = run(["show", str(tmp_path / "nope.jsonl")], capsys)
    assert code == 2 and "no such file" in err


def test_installed_entry_point_runs(sample_paths: list[Path]) -> None:
    """The console script, as a user runs it, in its own process."""
    exe = Path(sys.executable).with_name("pimem")
    if not exe.exists():
        pytest.skip("pimem console script not installed in this environment")
    proc = subprocess.run([str(exe), "context", str(sample_paths[0]), "--json"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONIOENCODING": "utf-8"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    messages = json.loads(proc.stdout)
    assert isinstance(messages, list) and messages
    assert {m["role"] for m in messages} <= {"user", "assistant", "toolResult", "system"}


def test_entries_pi_cannot_process_give_one_line_not_a_traceback(tmp_path: Path, capsys, monkeypatch) -> None:
    """A user message whose content is a number makes Pi's own estimator throw: `context` shows the
    messages with the token counts unknown, `replay` (which needs them) ends with one line."""
    ts = "2025-01-01T00:00:00.000Z"
    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": ts, "cwd": "/"},
             {"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": ts,
              "message": {"role": "user", "content": 5, "timestamp": 1}}]
    bad = tmp_path / "odd.jsonl"
    bad.write_text("".join(json.dumps(line) + "\n" for line in lines))
    monkeypatch.delenv("PIMEM_DEBUG", raising=False)
    code, out, err = run(["context", str(bad)], capsys)
    assert code == 0 and "context tokens unknown (Pi's estimate throws" in out and "Traceback" not in err
    code, _, err = run(["replay", str(bad), "-q"], capsys)
    assert code == 2
    assert err.startswith(f"pimem: error: {bad}: Pi's own code throws") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_replay_refuses_to_overwrite_its_source(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    source = tmp_path / "s.jsonl"
    source.write_bytes(sample_paths[0].read_bytes())
    before = source.read_bytes()
    code, _, err = run(["replay", str(source), "-q", "-o", str(source)], capsys)
    assert code == 2 and "source session" in err
    assert source.read_bytes() == before


def test_drift_refuses_to_overwrite_its_source(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    source = tmp_path / "s.jsonl"
    source.write_bytes(sample_paths[0].read_bytes())
    before = source.read_bytes()
    code, _, err = run(["drift", str(source), "-o", str(source)], capsys)
    assert code == 2 and "source session" in err
    assert source.read_bytes() == before


def test_replay_checks_the_events_format_before_replaying(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    out = tmp_path / "replayed.jsonl"
    code, _, err = run(["replay", str(sample_paths[0]), "-q", "-o", str(out), "--events", str(tmp_path / "e.xlsx")],
                       capsys)
    assert code == 2 and ".csv or .parquet" in err
    assert not out.exists()  # nothing was replayed or written


def test_show_counts_entries_with_a_broken_type(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1}}\n'
        '{"type":null,"id":"a2","parentId":"a1","timestamp":"2025-01-01T00:00:02.000Z"}\n'
    )
    code, out, err = run(["show", str(path)], capsys)
    assert code == 0, err
    assert "None=1" in out and "message=1" in out


def test_replay_offers_every_token_source(capsys) -> None:
    from pimem.replays.engine import TOKEN_SOURCES

    for command in ("replay", "sweep"):
        code, out, _ = run([command, "--help"], capsys)
        assert code == 0
        for source in TOKEN_SOURCES:
            assert source in out, (command, source)


def test_ls_table_shows_blanks_not_na(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    (tmp_path / sample_paths[0].name).write_bytes(sample_paths[0].read_bytes())
    code, out, _ = run(["ls", str(tmp_path)], capsys)
    assert code == 0
    assert "<NA>" not in out and "NaN" not in out and "None" not in out
    assert sample_paths[0].name in out


def test_settings_that_leave_no_room_exit_2_before_any_work(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    """``--window 16000`` with Pi's default reserve 16384 has a negative threshold: a clear error."""
    out = tmp_path / "replayed.jsonl"
    code, text, err = run(["replay", str(sample_paths[0]), "--window", "16000", "-q", "-o", str(out)], capsys)
    assert code == 2 and "Traceback" not in err
    assert "reserve_tokens 16,384 is not below the context window 16,000" in err
    assert not out.exists() and text == ""
    code, _, err = run(["sweep", str(sample_paths[0]), "--reserve", "4096,20000", "--window", "16000,32000",
                        "-q", "-o", str(tmp_path / "r.csv")], capsys)
    assert code == 2 and "reserve_tokens 20,000 is not below the context window 16,000" in err
    assert not (tmp_path / "r.csv").exists()


def test_degenerate_settings_are_a_warning(sample_paths: list[Path], capsys) -> None:
    path = next(p for p in sample_paths if p.name == "auth-login-bug.jsonl")
    code, text, err = run(["replay", str(path), "--window", "16000", "--reserve", "4000", "--keep", "12000", "-q"],
                          capsys)
    assert code == 0, err
    assert "pimem: warning: keep_recent_tokens 12,000 is not below the threshold" in err


def test_sweep_summary_with_intervals_and_token_source_bands(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    out, summary = tmp_path / "runs.csv", tmp_path / "summary.csv"
    code, text, err = run(["sweep", *map(str, sample_paths), "--reserve", "2048", "--keep", "2000", "--window",
                           "16000", "--token-source", "calibrated,chars", "--workers", "1", "-q", "-o", str(out),
                           "--summary", str(summary)], capsys)
    assert code == 0, err
    assert "{band across token sources}" in text
    runs, table = pd.read_csv(out), pd.read_csv(summary)
    assert set(runs["token_source"]) == {"calibrated", "chars"} and len(runs) == 2 * len(sample_paths)
    assert len(table) == 1 and table["n_sessions"].iloc[0] == len(sample_paths)
    row = table.iloc[0]
    assert row.compactions_band_low <= row.compactions <= row.compactions_band_high
    # a handful of sessions: no 95% interval, and the warning says why
    assert pd.isna(row.compactions_ci_low) and pd.isna(row.compactions_ci_high) and row.interval_coverage < 0.92
    assert "no 95% interval" in err
    code, _, err = run(["sweep", str(sample_paths[0]), "--token-source", "calibrated,bogus", "-o", str(out)], capsys)
    assert code == 2 and "token sources are" in err


def test_sweep_strategy_and_summarizer_axes(tmp_path: Path, sample_paths: list[Path], capsys) -> None:
    out = tmp_path / "results.csv"
    prices = tmp_path / "prices.json"
    prices.write_text('{"claude-sonnet-4-5": {"input": 1, "output": 2, "cache_read": 0, "cache_write": 1}}')
    session = str(sample_paths[0])
    code, text, err = run(["sweep", session, "--reserve", "4096", "--keep", "4000", "--window", "24000",
                           "--strategy", "pi-0.87.1", "--strategy", "masking:keep_turns=5",
                           "--summarizer", "extractive,fact-dump", "--prices", str(prices),
                           "--workers", "1", "-q", "-o", str(out)], capsys)
    assert code == 0, err
    df = pd.read_csv(out)
    assert sorted(df["strategy"]) == ["masking:keep_turns=5"] * 2 + ["pi-0.87.1"] * 2
    assert set(df["summarizer"]) == {"extractive", "fact-dump"}
    assert df["cost_total"].gt(0).all() and "needed_recall" in df.columns
    assert "cost_total" in text and "needed_recall" in text


@pytest.mark.parametrize("args, words", [
    (["--strategy", "nope"], "unknown compaction strategy 'nope'"),
    (["--summarizer", "extractive,gpt-9"], "summarizers are"),
])
def test_sweep_rejects_unknown_strategies_and_summarizers(args, words, tmp_path: Path, sample_paths: list[Path],
                                                          capsys) -> None:
    code, _, err = run(["sweep", str(sample_paths[0]), *args, "-q", "-o", str(tmp_path / "r.csv")], capsys)
    assert code == 2 and words in err


def test_replay_with_a_strategy(sample_paths: list[Path], capsys) -> None:
    code, text, err = run(["replay", str(sample_paths[0]), "--window", "24000", "--reserve", "4096", "--keep",
                           "4000", "--strategy", "masking:keep_turns=3", "-q"], capsys)
    assert code == 0, err
    assert "masking:keep_turns=3" in text
    edits = next(line for line in text.splitlines() if line.startswith("context_edits"))
    assert int(edits.split()[-1].replace(",", "")) > 0

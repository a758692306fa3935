"""The command line's messages for everyday mistakes: one clear line, a non-zero exit where nothing
useful was done, the same words for the same problem in every command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pimem.cli.main import main

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "sessions" / "ventas-pipeline-refactor.jsonl"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_study_into_an_existing_file_says_it_needs_a_folder(tmp_path, capsys) -> None:
    target = tmp_path / "results.txt"
    target.write_text("keep me")
    code, _, err = run(["study", str(SAMPLE), "-o", str(target), "-q"], capsys)
    assert code == 2
    assert "exists and is not a folder" in err and "FileExistsError" not in err and "Errno" not in err
    assert target.read_text() == "keep me"


def test_drift_refuses_to_write_html_into_a_text_file(tmp_path, capsys) -> None:
    code, _, err = run(["drift", str(SAMPLE), "-o", str(tmp_path / "d.txt")], capsys)
    assert code == 2 and "expected a .html or .htm file" in err
    assert not (tmp_path / "d.txt").exists()


def test_a_sweep_whose_every_run_fails_exits_non_zero_with_the_reason(tmp_path, capsys) -> None:
    bad = tmp_path / "notsession.json"
    bad.write_text(json.dumps({"a": 1}) + "\n")
    code, out, err = run(["sweep", str(bad), "-o", str(tmp_path / "r.csv"), "-q"], capsys)
    assert code == 2
    assert "not a Pi session" in err and "every run failed" in err
    assert (tmp_path / "r.csv").exists()  # the table with the per-run reasons is still written


@pytest.mark.parametrize("first, what", [
    ({"a": 1}, 'an object without a "type" field'),
    ({"type": None}, 'an object whose "type" is null'),
    ({"type": 3}, 'an object whose "type" is a number'),
    ({"type": "message"}, 'a "message" entry'),
    ([1, 2], "a JSON array"),
])
def test_ls_and_show_word_a_non_session_the_same_way(tmp_path, capsys, first, what) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(first) + "\n")
    expected = f"not a Pi session: the first entry is {what}, not a session header"
    code, _, err = run(["show", str(path)], capsys)
    assert code == 2 and f"bad.jsonl:1: {expected}" in err
    assert "type None" not in err and "has type" not in err
    code, out, _ = run(["ls", str(tmp_path), "--format", "json"], capsys)
    assert code == 0
    rows = json.loads(out)
    assert [r["error"] for r in rows] == [f"line 1: {expected}"]


def test_ls_and_show_word_a_missing_path_the_same_way(tmp_path, capsys) -> None:
    missing = tmp_path / "missing.jsonl"
    messages = set()
    for command in ("ls", "show", "context", "drift"):
        argv = [command, str(missing)] + (["-o", str(tmp_path / "d.html")] if command == "drift" else [])
        code, _, err = run(argv, capsys)
        assert code == 2, command
        messages.add(err.strip())
    assert messages == {f"pimem: error: no such file or folder: {missing}"}


def test_ls_without_a_sessions_folder_says_where_it_looked(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.delenv("PI_CODING_AGENT_SESSION_DIR", raising=False)
    code, _, err = run(["ls"], capsys)
    assert code == 0
    assert str(tmp_path / ".pi" / "agent" / "sessions") in err and "does not exist" in err


def test_show_groups_the_token_count_digits(capsys) -> None:
    from pimem import build_session_context, load_session
    from pimem.core.compaction.compaction import estimate_context_tokens

    path = SAMPLE.with_name("auth-login-bug.jsonl")
    tokens = estimate_context_tokens(build_session_context(load_session(path)).messages).tokens
    assert tokens >= 1000
    code, out, _ = run(["show", str(path)], capsys)
    assert code == 0 and f"~{tokens:,} tokens at the leaf" in out


@pytest.mark.parametrize("value, parsed", [("1e4", [10_000]), ("8_192,1e4", [8192, 10_000]), ("4096", [4096])])
def test_token_lists_take_whole_numbers_in_any_notation(value, parsed) -> None:
    from pimem.cli.main import _int_list

    assert _int_list(value) == parsed


@pytest.mark.parametrize("value", ["1.5", "2.5e0", "abc", "4096,x", "1e999"])
def test_a_token_list_that_is_not_whole_numbers_is_one_clear_line(value, tmp_path, capsys) -> None:
    code, _, err = run(["sweep", str(SAMPLE), "--reserve", value, "-o", str(tmp_path / "unused.csv")], capsys)
    assert code == 2
    assert "expected whole numbers of tokens, comma-separated" in err and repr(value) in err

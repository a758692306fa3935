"""Values Pi tolerates or rejects clearly: pimem answers with a warning or a clear error, never a crash.

``"message": null`` or a string, a null block in a content list, usage of 1e308, a provider that is
a list, a timestamp of 1e20, a deeply nested settings.json, a summary flooded with blank lines.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from pimem import build_session_context, load_session
from pimem.cli.main import main
from pimem.core.compaction.compaction import estimate_tokens
from pimem.core.pi_ai import content_text
from pimem.errors import JavaScriptTypeError, SessionFormatError
from tests.support.tiny import tiny_session_lines

REPLAY = ["--window", "3000", "--reserve", "500", "--keep", "500", "-q"]


def _session(tmp_path: Path, mutate) -> Path:
    lines = tiny_session_lines(6)
    mutate(lines)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("message, error", [(None, JavaScriptTypeError), ("hello", SessionFormatError),
                                            (5, SessionFormatError), ([1], SessionFormatError)])
def test_a_message_that_is_not_an_object(tmp_path, capsys, message, error):
    path = _session(tmp_path, lambda L: L[3].__setitem__("message", message))
    s = load_session(path)
    assert [(w.line, w.reason) for w in s.warnings] == [(4, "message entry without a message object")]
    with pytest.raises(error, match="u0001"):
        build_session_context(s)
    code, out, err = _run(["show", str(path)], capsys)
    assert code == 0 and "context cannot be built" in out and "line 4: message entry without" in out
    for argv in (["context", str(path)], ["replay", str(path), *REPLAY], ["drift", str(path), "-o",
                                                                           str(tmp_path / "d.html")]):
        code, out, err = _run(argv, capsys)
        assert code == 2 and str(path) in err and "u0001" in err and "Traceback" not in err, argv


def test_a_null_block_throws_as_in_pi_and_other_blocks_are_skipped():
    with pytest.raises(JavaScriptTypeError, match=re.escape("Cannot read properties of null (reading 'type')")):
        estimate_tokens({"role": "user", "content": [None]})
    with pytest.raises(JavaScriptTypeError, match="reading 'type'"):
        estimate_tokens({"role": "assistant", "content": [{"type": "text", "text": "ab"}, None]})
    with pytest.raises(JavaScriptTypeError, match="reading 'type'"):
        content_text([None])
    # a number, a string or a list has no "type" in JavaScript: skipped, as Pi skips it
    assert estimate_tokens({"role": "user", "content": [5, "abc", [1], {"type": "text", "text": "abcd"}]}) == 1
    assert content_text([7, {"type": "text", "text": "x"}]) == "x"


def test_a_null_block_in_a_session_is_a_clear_error(tmp_path, capsys):
    path = _session(tmp_path, lambda L: L[4]["message"].__setitem__("content", [None, {"type": "text", "text": "x"}]))
    code, out, err = _run(["context", str(path)], capsys)
    assert code == 0 and "None" not in out
    code, out, err = _run(["replay", str(path), *REPLAY], capsys)
    assert code == 2 and "Cannot read properties of null (reading 'type')" in err and str(path) in err


def test_usage_of_1e308_is_a_warning_and_reads_as_unknown(tmp_path, capsys):
    path = _session(tmp_path, lambda L: L[4]["message"]["usage"].__setitem__("input", 1e308))
    s = load_session(path)
    assert any("1e+308, beyond any token count" in w.reason and w.line == 5 for w in s.warnings)
    assert s.usage_df()["input"].isna().tolist() == [False, True, False, False, False, False]
    assert len(s.entries_df()) == len(s.entries)
    code, out, err = _run(["replay", str(path), *REPLAY], capsys)
    assert code == 0, err


def test_a_provider_that_is_a_list_replays(tmp_path, capsys):
    path = _session(tmp_path, lambda L: L[4]["message"].__setitem__("provider", ["a", "b"]))
    code, out, err = _run(["replay", str(path), *REPLAY], capsys)
    assert code == 0, err


@pytest.mark.parametrize("where", ["message", "entry"])
def test_a_timestamp_of_1e20(tmp_path, capsys, where):
    from pimem.sessions.discover import discover_sessions

    def mutate(lines):
        target = lines[4]["message"] if where == "message" else lines[4]
        target["timestamp"] = 1e20

    path = _session(tmp_path, mutate)
    df = discover_sessions(path)
    assert df["error"].isna().all()
    assert _run(["ls", str(tmp_path)], capsys)[0] == 0
    s = load_session(path)
    s.messages_df(), s.entries_df()
    assert _run(["replay", str(path), *REPLAY], capsys)[0] == 0


def test_a_deeply_nested_settings_file(tmp_path):
    from pimem.core.settings_manager import load_settings

    deep = '{"compaction": {"reserveTokens": 1000}, "x": ' + '{"a":' * 5000 + "1" + "}" * 5000 + "}"
    (tmp_path / "settings.json").write_text(deep)
    settings = load_settings(tmp_path, tmp_path)
    assert settings.errors == [] and settings.data["compaction"]["reserveTokens"] == 1000
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "settings.json").write_text(deep)  # both nest the same keys: the merge would recurse
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = load_settings(tmp_path, tmp_path)
    assert "nested too deeply" in str(settings.errors[0]) and caught
    assert settings.data["compaction"]["reserveTokens"] == 1000


_REFERENCE = re.compile(r"\n*<(read-files|modified-files)>\n?.*?</\1>[ \t]*", re.S)  # the earlier, quadratic one


@pytest.mark.parametrize("text", [
    "\n" * 50 + "x", "a\n\n\n<read-files>\nf\n</read-files>", "\n\n<read-files>\nf\n</read-files>\n\n\n",
    "t\n\n<modified-files>\nm\n</modified-files>  \n\n<read-files>\nr\n</read-files>\nafter",
    "\n\n<read-files>\nunclosed\n\n\n", "<read-files></modified-files>\n\n<read-files>x</read-files>"])
def test_file_blocks_are_removed_as_before_in_linear_time(text):
    from pimem.text.sections import _ANY_FILE_BLOCK, summarizer_text

    assert _ANY_FILE_BLOCK.sub("", text) == _REFERENCE.sub("", text)
    flood = "# Goal\nship\n" + "\n" * 400_000 + "<read-files>\na.py\n</read-files>"
    assert summarizer_text(flood) == "# Goal\nship"  # quadratic before: minutes; linear now

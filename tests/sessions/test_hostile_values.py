"""Values Pi tolerates or rejects clearly: pimem answers with a warning or a clear error, never a crash.

``"message": null`` or a string, a null block in a content list, usage of 1e308, a provider that is
a list, a timestamp of 1e20, a deeply nested settings.json, a summary flooded with blank lines.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import pytest

from pimem import CompactionSettings, build_session_context, load_session, replay
from pimem.cli.main import main
from pimem.core.compaction.compaction import calculate_context_tokens, estimate_context_tokens, estimate_tokens
from pimem.core.pi_ai import content_text, get_current_system_message, get_current_tools, is_context_overflow
from pimem.drift import drift_report
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


# -- type confusion in Pi sessions: Pi goes on (usage, an edit's target) or throws (a null tool) -------------

_SETTINGS = CompactionSettings(reserve_tokens=500, keep_recent_tokens=500)
_COMPACTING = ["--window", "2000", "--reserve", "500", "--keep", "500", "-q"]  # compacts from the fourth answer


def _every_view(tmp_path: Path, path: Path, capsys) -> None:
    """The Python calls and the commands that read a session, each without an error."""
    s = load_session(path)
    build_session_context(s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = replay(s, _SETTINGS, context_window=2000, progress=False)
    assert result.compactions, "the replay compacts, so the hostile value is met again after a compaction"
    drift_report(result)
    for argv in (["show", str(path)], ["context", str(path)], ["replay", str(path), *_COMPACTING],
                 ["replay", str(path), *_COMPACTING, "--token-source", "estimate"],
                 ["drift", str(path), "-o", str(tmp_path / "d.html")]):
        code, out, err = _run(argv, capsys)
        assert code == 0 and "Traceback" not in err, (argv, err)


@pytest.mark.parametrize("usage, kind", [("lots", "string"), (True, "boolean")])
def test_an_assistant_usage_that_is_not_an_object_is_no_usage_as_in_pi(tmp_path, capsys, usage, kind):
    # the last answer's usage: Pi's getAssistantUsage finds NaN tokens there and reads the one before
    path = _session(tmp_path, lambda L: L[-1]["message"].__setitem__("usage", usage))
    s = load_session(path)
    assert [(w.line, w.entry_id) for w in s.warnings if f"usage has type {kind}, not object" in w.reason] == [
        (13, "a0005")]
    messages = build_session_context(s).messages
    estimate = estimate_context_tokens(messages)
    assert estimate.last_usage_index == len(messages) - 3  # a0004's usage (the golden: Pi's own answer)
    assert math.isnan(calculate_context_tokens(usage))
    assert not is_context_overflow({**messages[-1], "stopReason": "stop"}, 10)
    _every_view(tmp_path, path, capsys)


def test_a_usage_field_that_is_a_string_is_unknown_and_never_crashes_the_replay(tmp_path, capsys):
    # totalTokens is read first, as Pi does; the overflow check adds input and cacheRead, where the
    # string makes the usage unknown (the loader's warning), not JavaScript's "2400" + "7"
    path = _session(tmp_path, lambda L: L[-3]["message"]["usage"].__setitem__("cacheRead", "7"))
    s = load_session(path)
    assert [(w.line, w.entry_id) for w in s.warnings if "'cacheRead' has type string" in w.reason] == [
        (11, "a0004")]
    answer = s.get_entry("a0004")["message"]
    assert calculate_context_tokens(answer["usage"]) == answer["usage"]["totalTokens"]
    assert not is_context_overflow(answer, 10)
    _every_view(tmp_path, path, capsys)


def test_a_context_edit_whose_target_is_an_object_edits_nothing_as_in_pi(tmp_path, capsys):
    def mutate(lines):
        edit = {"type": "context_edit", "id": "ed01", "parentId": "a0002", "timestamp": lines[6]["timestamp"],
                "targetId": {"id": "u0001"}, "replacement": {"content": "edited"}}
        lines.insert(7, edit)
        lines[8]["parentId"] = "ed01"

    path = _session(tmp_path, mutate)
    s = load_session(path)
    (tmp_path / "plain").mkdir()
    plain = build_session_context(load_session(_session(tmp_path / "plain", lambda L: None))).messages
    assert build_session_context(s).messages == plain  # a Map keyed by an object: no entry id finds it
    _every_view(tmp_path, path, capsys)
    for strategy in ("from-scratch", "pi-1.6.0"):  # the summaries of the raw history; 1.6.0's branch walk
        code, out, err = _run(["replay", str(path), *_COMPACTING, "--strategy", strategy], capsys)
        assert code == 0 and "Traceback" not in err, (strategy, err)


def test_a_null_tool_in_a_system_message_throws_as_in_pi(tmp_path, capsys):
    def mutate(lines):
        system = {"type": "message", "id": "sys1", "parentId": "a0000", "timestamp": lines[2]["timestamp"],
                  "message": {"role": "system", "content": "rules", "toolsAdded": [None], "timestamp": 1}}
        lines.insert(3, system)
        lines[4]["parentId"] = "sys1"

    path = _session(tmp_path, mutate)
    s = load_session(path)
    assert [(w.line, w.entry_id, w.reason) for w in s.warnings] == [
        (4, "sys1", "system message toolsAdded holds null, not a tool (Pi's code throws on it)")]
    messages = build_session_context(s).messages  # Pi projects it; its getCurrentTools throws
    with pytest.raises(JavaScriptTypeError, match=re.escape("Cannot read properties of null (reading 'name')")):
        get_current_system_message(messages)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(JavaScriptTypeError, match="reading 'name'"):
            replay(s, _SETTINGS, context_window=2000, progress=False)  # its compaction records the system message
    assert _run(["show", str(path)], capsys)[0] == 0 and _run(["context", str(path)], capsys)[0] == 0
    code, out, err = _run(["replay", str(path), *_COMPACTING], capsys)
    assert code == 2 and str(path) in err and "Cannot read properties of null (reading 'name')" in err
    assert "pimem show" in err and "Traceback" not in err
    code, out, err = _run(["show", str(path)], capsys)
    assert "line 4: system message toolsAdded holds null" in out and "sys1" in out


@pytest.mark.parametrize("tools, error", [([{"name": "a"}, "ab", 7], None), ("ab", None),
                                          (5, "message.toolsAdded is not iterable"),
                                          ({"name": "a"}, "message.toolsAdded is not iterable")])
def test_system_tools_are_walked_as_javascript_walks_them(tools, error):
    messages = [{"role": "system", "content": "", "toolsAdded": tools, "timestamp": 1}]
    if error is None:  # a string or number has no name: one Map key (undefined) for them all, the last wins
        assert get_current_tools(messages) == ([{"name": "a"}, 7] if isinstance(tools, list) else ["b"])
    else:
        with pytest.raises(JavaScriptTypeError, match=error):
            get_current_tools(messages)

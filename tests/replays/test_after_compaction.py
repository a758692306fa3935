"""What Claude Code re-attaches after a compaction, and the size a replay gives its requests after one."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from pimem.core.compaction.compaction import CompactionSettings
from pimem.core.incremental.caches import TokenCache
from pimem.core.incremental.tracker import ContextTracker
from pimem.replays import engine
from pimem.replays.reattach import READ_CHARS_PER_TOKEN, Reattacher, read_chars_per_token, reattachment
from pimem.replays.recording import calibrate_recording, recorded_agent
from pimem.replays.tokens import anchored_model
from pimem.replays.validation import CorpusFile, request_sizes, validate, validation_table
from pimem.sessions.load import load_session

BUNDLED_CLAUDE_CODE = Path(__file__).resolve().parents[2] / "datasets" / "real" / "claude-code"


def _call(call_id: str, name: str, args: dict) -> dict:
    return {"type": "message", "message": {"role": "assistant", "content": [
        {"type": "toolCall", "id": call_id, "name": name, "arguments": args}]}}


def _result(call_id: str, text: str, error: bool = False, details: dict | None = None) -> dict:
    message = {"role": "toolResult", "toolCallId": call_id, "isError": error,
               "content": [{"type": "text", "text": text}]}
    if details is not None:
        message["details"] = details
    return {"type": "message", "message": message}


def _numbered(lines: int, width: int = 30, start: int = 1) -> str:
    return "\n".join(f"{n:>6}→" + "x" * width for n in range(start, start + lines))


def _attached(path: str, chars: float, lines: float, escaped: float) -> float:
    """chars/4 of a file's two messages: the call naming it, and the result as a JSON string (its numbered
    text escaped, the 345 escaped characters of Read's system reminder, the two sentences, the quotes)."""
    call = len(json.dumps({"file_path": path}, separators=(",", ":")))
    return ((chars + 7 * lines) * escaped + 47 + 33 + 2 + 345 + call) / 4


def test_the_files_are_the_last_touched_each_as_claude_code_reads_it_again() -> None:
    shown = _numbered(100, start=51)  # 100 lines of "{n:>6}→" and 30 chars
    path = [
        # 100 of 1,000 lines read: the whole file is ten times what the result shows
        _call("1", "Read", {"file_path": "/p/a.go"}),
        _result("1", shown + "\n\n<system-reminder>\nmalware?\n</system-reminder>\n",
                details={"read": {"startLine": 51, "numLines": 100, "totalLines": 1_000}}),
        _call("2", "Edit", {"file_path": "/p/b.go", "old_string": "x", "new_string": "y"}),
        _result("2", "edited", details={"file": {"chars": 3_000, "lines": 100}}),
        _call("3", "Read", {"file_path": "/p/CLAUDE.md"}), _result("3", _numbered(10)),
        _call("4", "Read", {"file_path": "/p/c.go"}), _result("4", "no such file", error=True),
        _call("5", "Write", {"file_path": "/home/u/.claude/plans/calm-plan.md", "content": "plan\n" * 200}),
        _result("5", "written", details={"file": {"chars": 1_000, "lines": 201}}),
        _call("6", "Edit", {"file_path": "/p/d.go", "old_string": "x", "new_string": "y"}), _result("6", "ok"),
    ]
    attached = reattachment(path)
    # its 99 newlines take two characters each as a JSON string; b.go and d.go, never shown, take a.go's
    escaped = (len(shown) + 99) / len(shown)
    assert [(f.path, f.chars, f.lines, f.exact, f.escaped) for f in attached.files] == [
        ("/p/d.go", 0.0, 0.0, False, escaped), ("/p/b.go", 3_000.0, 100.0, True, escaped),
        ("/p/a.go", 30_990.0, 1_000.0, False, escaped)]
    assert attached.plan == 1_000.0 and attached.todos == attached.skills == 0.0
    # a.go's 30,990 chars (100 lines of 30 and their newlines, ten times) are above 5,000 tokens at 2.62
    # chars a token: a note names it instead
    d, b = _attached("/p/d.go", 0, 0, escaped), _attached("/p/b.go", 3_000, 100, escaped)
    note = (160 + len("/p/a.go")) / 4
    assert attached.file_tokens() == pytest.approx(d + b + note)
    # read as 7 chars a token it is below the cap: its 1,000 numbered lines are attached
    assert attached.file_tokens(chars_per_token=7.0) == pytest.approx(
        d + b + _attached("/p/a.go", 30_990, 1_000, escaped))
    assert attached.tokens() == pytest.approx(attached.file_tokens() + (1_000 + 200) / 4)
    # one walk, asked step by step (and back again), says what each prefix says
    walk = Reattacher(path)
    for step in (*range(len(path) + 1), 3, len(path)):
        assert walk.at(step) == reattachment(path[:step])


def test_the_files_beyond_the_budget_or_the_fifth_are_not_attached() -> None:
    path = []
    for n in range(7):  # 4,000 lines of 40 chars: 2,000 numbered lines of each, below the cap at 20 chars a token
        path += [_call(str(n), "Write", {"file_path": f"/p/{n}.txt", "content": ""}),
                 _result(str(n), "ok", details={"file": {"chars": 80_000, "lines": 4_000}})]
    attached = reattachment(path)
    assert len(attached.files) == 7 and attached.files[0].path == "/p/6.txt"
    assert all(f.escaped == 1.0 for f in attached.files)  # no text shown anywhere: taken as is
    one = _attached("/p/6.txt", 80_000, 2_000, 1.0)
    assert attached.file_tokens(chars_per_token=20.0) == pytest.approx(2 * one)  # 50,000 in all
    assert attached.file_tokens(chars_per_token=1.0) == pytest.approx(5 * (160 + len("/p/6.txt")) / 4)


def test_the_todo_list_and_the_skills_invoked_are_attached_whole() -> None:
    todos = [{"content": "write the parser", "status": "in_progress", "activeForm": "Writing the parser"}]
    skill_text = "Base directory for this skill: /s\n\n# Writing plans\n" + "do this. " * 100
    path = [
        _call("1", "TodoWrite", {"todos": []}), _result("1", "ok"),
        _call("2", "TodoWrite", {"todos": todos}), _result("2", "ok"),
        _call("3", "Skill", {"skill": "writing-plans"}), _result("3", "Launching skill: writing-plans"),
        {"type": "message", "source": {"isMeta": True}, "message": {"role": "user", "content": [
            {"type": "text", "text": skill_text}]}},
        _call("4", "Skill", {"skill": "other"}), _result("4", "Launching skill: other"),
        {"type": "message", "message": {"role": "user", "content": "not the skill's text"}},
    ]
    attached = reattachment(path)
    assert attached.todos == len(json.dumps(todos, separators=(",", ":")))
    assert attached.skills == len(skill_text)
    assert attached.files == ()
    assert attached.tokens() == pytest.approx((attached.todos + 200 + attached.skills + 200) / 4)
    assert reattachment(path[:2]).todos == 0.0  # an empty list attaches nothing


def test_chars_per_token_of_a_read_come_from_the_requests_around_it() -> None:
    def request(total: int, output: int) -> dict:
        return {"type": "message", "message": {"role": "assistant", "content": [
            {"type": "toolCall", "id": f"r{total}", "name": "Read", "arguments": {"file_path": "/p/a"}}],
            "usage": {"input": total, "output": output, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total},
            "stopReason": "toolUse"}}

    text = "x" * 5_000
    path = [request(10_000, 100), {"type": "message", "message": {
        "role": "toolResult", "toolCallId": "r10000", "content": [{"type": "text", "text": text}]}},
        request(12_100, 50),
        # two things added: not measured
        {"type": "message", "message": {"role": "toolResult", "toolCallId": "r12100", "content": text}},
        {"type": "message", "message": {"role": "user", "content": "and this"}},
        request(15_000, 10)]
    assert read_chars_per_token(path) == [5_000 / (12_100 - 10_000 - 100)]


@pytest.fixture(scope="module")
def claude_code_session() -> Any:
    path = BUNDLED_CLAUDE_CODE / "cd_95adddad32_0_full.jsonl.gz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_session(path)


def test_a_replayed_compaction_of_a_claude_code_session_adds_the_files_it_reattaches(claude_code_session: Any) -> None:
    """At a 120k window the replay compacts where the recording did not. Until the recording's own next
    compaction, the requests after are sized ``overhead + rate · (E_rep + files)`` from the recorded
    requests before the compaction and the files the recording touched last, not shifted from the
    recording's uncompacted requests; after it, from the recording's own post-compaction requests."""
    path = claude_code_session.get_branch(None)
    assert recorded_agent(path) == "claude-code"
    recorded = [i for i, e in enumerate(path) if e.get("type") == "compaction"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = engine.replay(claude_code_session, CompactionSettings(), context_window=120_000)
    replayed_at = result.events[result.events["kind"] == "compaction"]["step"].astype(int).tolist()
    sizes = request_sizes(path, tiktoken=False)
    slope = calibrate_recording(path).slope
    checked = with_files = shifted = 0
    for step, until in zip(replayed_at, [*replayed_at[1:], len(path)]):
        before = sizes[sizes["step"] < step]
        overhead, rate = anchored_model(before["estimate"].tolist(), before["recorded"].tolist(), slope)
        files = reattachment(path[:step]).tokens()
        calls = result.calls[(result.calls["step"] > step) & (result.calls["step"] < until) & ~result.calls["refused"]]
        for _, call in calls.head(4).iterrows():
            entry = result.session.get_entry(call["entry_id"])
            tracker = ContextTracker(cache=TokenCache())
            tracker.reset(result.session.get_branch(entry["parentId"]))
            expected = overhead + rate * (tracker.usage_free_estimate() + files)
            if max([r for r in recorded if r < call["step"]], default=-1) < step:
                assert call["context_tokens"] == pytest.approx(expected, rel=1e-9)
                checked += 1
                with_files += files > 1_000
            else:  # the recording compacted since: its own request after that is the one shifted
                assert call["context_tokens"] != pytest.approx(expected, rel=1e-6)
                shifted += 1
    assert checked >= 8 and with_files >= 4 and shifted >= 1


def test_claude_code_requests_after_real_compactions_are_predicted_with_what_it_attaches() -> None:
    """On every real Claude Code compaction of the shared corpus (64 scorable, 52 sessions), out of sample
    (the characters a token of a read file learnt with the session held out): what Claude Code attaches
    removes the anchored source's bias and its error falls below both the anchored and the calibrated
    source's and within the goal (4.4%, p90 14.7%, bias −1.7%, where the files as the transcript showed
    them gave 8.3%, 18.5%, +0.7%); the todo list, plan and skills take a part of it; its 90% and 80%
    intervals cover 90% and 80% of held-out truths; none of the candidates is a point of median error
    better."""
    from tests.support.real_data import SHARED_DIR
    from pimem.replays.validation import corpus_files, interval_coverage

    files = [f for f in corpus_files(SHARED_DIR) if f.agent == "claude-code"]
    if not files:
        pytest.skip(f"no Claude Code transcripts under {SHARED_DIR / 'datasets'}")
    frame = validate(files, tiktoken=False)
    table = validation_table(frame).set_index("source")
    assert table.loc["anchored+files", "compactions"] == 64
    # the replay's characters a token of a file read is what the other sessions' reads measure
    learnt = frame.loc[frame["agent"] == "claude-code", "chars_per_token"]
    assert learnt.notna().all() and (learnt - READ_CHARS_PER_TOKEN).abs().max() < 0.015
    assert table.loc["anchored+files", "median_abs_error"] < 0.05
    assert table.loc["anchored+files", "p90_abs_error"] < 0.15
    assert table.loc["anchored+files", "median_abs_error"] < table.loc["anchored+files-only", "median_abs_error"]
    assert table.loc["anchored+files", "median_abs_error"] < table.loc["anchored", "median_abs_error"]
    assert table.loc["anchored+files", "median_abs_error"] < table.loc["calibrated", "median_abs_error"]
    assert table.loc["anchored+files", "p90_abs_error"] < table.loc["calibrated", "p90_abs_error"]
    assert abs(table.loc["anchored+files", "median_bias"]) < 0.03 < abs(table.loc["anchored", "median_bias"])
    coverage = interval_coverage(frame, source="anchored+files").set_index("agent").loc["claude-code"]
    assert coverage["holds"] and coverage["coverage"] >= 0.9
    coverage = interval_coverage(frame, source="anchored+files", level=0.8).set_index("agent").loc["claude-code"]
    assert coverage["holds"] and coverage["coverage"] >= 0.8
    # no candidate beats it by a point of median error: not cl100k_base counts, not a rate of the
    # summary's own (learnt on the other sessions), not the previous compaction's error, not the files
    # an earlier compaction re-attached netted out of the rate, not the thinking left out
    candidates = [s for s in table.index if s.startswith("anchored") and s != "anchored+files"]
    assert len(candidates) >= 10
    assert (table.loc[candidates, "median_abs_error"] > table.loc["anchored+files", "median_abs_error"] - 0.01).all()


def test_compacting_where_the_recording_compacted_shifts_the_recorded_sizes(claude_code_session: Any) -> None:
    """Replaying the recorded compactions (at their entries): the recording compacted in the same place,
    so each request after is its recorded size shifted by what the replayed context holds more (Pi keeps
    recent messages, Claude Code kept none): one shift for the requests up to the next compaction, where
    the profile's rule would grow them at its own rate instead."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = engine.replay(claude_code_session, CompactionSettings(), context_window=200_000, triggers="recorded")
    steps = result.events[result.events["kind"] == "compaction"]["step"].astype(int).tolist()
    assert len(steps) == 3
    for step, until in zip(steps, [*steps[1:], 10**9]):
        calls = result.calls[(result.calls["step"] > step) & (result.calls["step"] < until)].head(5)
        shift = (calls["context_tokens"] - calls["recorded_tokens"]).to_numpy()
        assert len(shift) == 5 and shift[0] > 0
        assert shift == pytest.approx([shift[0]] * 5, rel=1e-9)


def test_details_of_the_wrong_types_fall_back_to_the_text_shown() -> None:
    text = _numbered(10)
    odd = [{"read": {"numLines": "10", "totalLines": 100}}, {"read": {"numLines": 10, "totalLines": -1}},
           {"read": None}, "details", {"file": {"chars": 1.5, "lines": 2}}]
    for details in odd:
        path = [_call("1", "Read", {"file_path": "/p/a.go"}), _result("1", text, details=details),
                _call("2", "Edit", {"file_path": "/p/b.go"}), _result("2", "ok", details=details),
                _call("3", "ExitPlanMode", {}), _result("3", "ok", details={"plan": {"chars": "many"}})]
        files = reattachment(path).files
        assert [(f.path, f.chars, f.lines, f.exact) for f in files] == [
            ("/p/b.go", 0.0, 0.0, False), ("/p/a.go", 10 * 30 + 9, 10.0, False)], details
        assert reattachment(path).plan == 0.0

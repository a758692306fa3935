"""Rework after compactions (pimem.drift.rework): each signal on constructed sessions, the matched
controls, counting copies once, the tables, and real compactions read by hand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pimem.drift import rework
from pimem.drift.rework import (
    MIN_SPAN,
    path_actions,
    paired,
    rework_corpus,
    rework_correlations,
    rework_points,
    rework_table,
)
from pimem.errors import ConfigurationError
from pimem.sessions.session import Session
from tests.conftest import SHARED_DIR
from tests.support import messages

W = 20  # window and look-back of the constructed tests


class _Build:
    """A linear Pi session, message by message, with increasing timestamps (one second apart)."""

    def __init__(self, session_id: str = "built") -> None:
        self.session_id = session_id
        self.entries: list[dict] = []
        self.calls = 0

    def _add(self, entry: dict) -> str:
        eid = f"{self.session_id[:2]}{len(self.entries):05d}"
        parent = self.entries[-1]["id"] if self.entries else None
        self.entries.append({"id": eid, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", **entry})
        return eid

    def _msg(self, message: dict) -> str:
        message["timestamp"] = 1_767_225_600_000 + 1000 * len(self.entries)
        return self._add({"type": "message", "message": message})

    def user(self, text: str) -> str:
        return self._msg(messages.user(text))

    def say(self, text: str) -> str:
        """An assistant answer without a tool call (a turn's end)."""
        return self._msg(messages.assistant(text, stopReason="stop"))

    def call(self, name: str, result: str = "ok", *, is_error: bool = False, say: str = "", **args: Any) -> str:
        """An assistant message with one tool call, and its result; returns the call's entry id."""
        self.calls += 1
        cid = f"call{self.calls}"
        blocks: list[Any] = [say] if say else []
        eid = self._msg(messages.assistant(*blocks, messages.tool_call(cid, name, **args), stopReason="toolUse"))
        self._msg(messages.tool_result(result, call_id=cid, name=name, is_error=is_error))
        return eid

    def filler(self, calls: int, tag: str = "f") -> None:
        """``calls`` reads of files read nowhere else (two messages each)."""
        for _ in range(calls):
            self.call("read", "content", path=f"src/{tag}{self.calls}.py")

    def compaction(self, summary: str = "## Goal\nWork.", first_kept: str | None = None) -> str:
        eid = f"{self.session_id[:2]}{len(self.entries):05d}"
        return self._add({"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept or eid,
                          "tokensBefore": 1000})

    def session(self, *, source_format: str | None = None) -> Session:
        header = {"type": "session", "version": 3, "id": self.session_id, "timestamp": "2026-01-01T00:00:00.000Z",
                  "cwd": "/w"}
        s = Session(header, [dict(e) for e in self.entries])
        if source_format is not None:
            s.source_format = source_format  # type: ignore[attr-defined]
        return s


def _after(points: Any, k: int = 0) -> dict:
    rows = points[(points["point"] == "after") & (points["compaction"] == k)]
    assert len(rows) == 1
    return rows.iloc[0].to_dict()


def _points(b: _Build, **kw: Any) -> Any:
    return rework_points(b.session(), window=kw.pop("window", W), lookback=kw.pop("lookback", W), **kw)


# --------------------------------------------------------------------------- each signal


def test_a_file_read_before_the_compaction_and_read_again_after_it_is_a_reread_named_by_the_summary() -> None:
    b = _Build()
    b.user("Fix the parser in src/parser.py please")
    b.filler(8)
    b.call("read", "def parse(): ...", path="src/parser.py")
    b.compaction("## Goal\nFix `src/parser.py`.")
    again = b.call("read", "def parse(): ...", path="/repo/src/parser.py")  # another spelling of the same file
    b.call("read", "new", path="src/lexer.py")  # never read before: not a re-read
    b.filler(8, "g")
    row = _after(_points(b))
    assert (row["rereads"], row["reread_files"], row["reuses"], row["reuses_summary"], row["reuses_kept"]) == (
        1, 1, 1, 1, 0)
    events = _points(b).attrs["events"]
    (event,) = events[(events["point"] == "after") & (events["signal"] == "rereads")].itertuples()
    assert (event.entry_id, event.subject, event.named) == (again, "/repo/src/parser.py", "summary")


def test_a_reread_the_summary_did_not_name_is_marked_so_and_other_lines_of_a_file_are_no_reread() -> None:
    b = _Build()
    b.filler(8)
    b.call("read", "top", path="src/big.py", offset=1, limit=100)
    b.call("read", "config", path="conf/app.toml")
    b.compaction("## Goal\nWork on src/big.py.")
    b.call("read", "bottom", path="src/big.py", offset=400, limit=50)  # lines it never saw
    b.call("read", "config", path="conf/app.toml")  # seen, and the summary does not name it
    b.filler(8, "g")
    row = _after(_points(b))
    assert (row["rereads"], row["reuses_summary"], row["reuses_kept"]) == (1, 0, 0)


def test_a_reread_of_a_file_the_kept_tail_still_shows_is_marked_as_such() -> None:
    """Pi keeps recent messages verbatim beside the summary: their files were still in the agent's context."""
    b = _Build()
    b.filler(8)
    kept = b.user("Look at the settings once more")
    b.call("read", "DEBUG = False", path="conf/settings.py")
    b.compaction("## Goal\nTidy the project.", first_kept=kept)
    b.call("read", "DEBUG = False", path="conf/settings.py")
    b.filler(8, "g")
    row = _after(_points(b))
    assert (row["rereads"], row["reuses_summary"], row["reuses_kept"]) == (1, 0, 1)


def test_reading_commands_are_reads_with_their_lines_and_writing_ones_are_not() -> None:
    b = _Build()
    b.filler(8)
    b.call("bash", "x", command="cd /repo && sed -n '10,40p' src/a.py")
    b.call("bash", "", command="cat > notes.md <<'EOF'\nplan\nEOF")  # writes notes.md: not a read
    b.compaction()
    b.call("bash", "x", command="nl -ba src/a.py | sed -n '30,60p'")  # overlaps lines 10-40
    b.call("bash", "x", command="head -n 5 src/a.py")  # lines 1-5: not seen
    b.call("bash", "plan", command="cat notes.md")  # written by a command, never read: no re-read
    b.filler(8, "g")
    row = _after(_points(b))
    assert row["rereads"] == 1
    assert row["reruns"] == 0  # a reading command is a read, not a run


def test_a_command_run_again_with_no_edit_since_is_a_rerun_and_after_an_edit_it_is_not() -> None:
    b = _Build()
    b.filler(8)
    b.call("bash", "3 failed", command="pytest -q tests/", is_error=True)
    b.call("bash", "On branch main", command="git status")
    b.compaction()
    b.call("bash", "3 failed", command="cd /repo && pytest -q tests/", is_error=True)  # the same command: a re-run
    b.call("edit", "ok", path="src/a.py", oldText="x = 1", newText="x = 2")
    b.call("bash", "On branch main", command="git status")  # after an edit: its answer may have changed
    b.filler(8, "g")
    row = _after(_points(b))
    assert row["reruns"] == 1
    assert rework.command_key("cd /repo && pytest -q  tests/") == "pytest -q tests/"
    assert rework.command_key("git commit -m \"$(cat <<'EOF'\none\nEOF\n)\"") != rework.command_key(
        "git commit -m \"$(cat <<'EOF'\ntwo\nEOF\n)\"")  # here-documents tell commits apart


def test_the_user_restating_an_instruction_counts_once_per_message_and_a_pasted_log_does_not() -> None:
    b = _Build()
    b.user("Never touch the migrations folder and keep the database schema exactly as it is. Thanks.")
    b.user("Found metadata.json:\n=== Step 12: Inspect metadata on entire/sessions branch ===")
    b.filler(8)
    b.compaction()
    b.user("Again: never touch the migrations folder, keep the database schema exactly as it is! "
           "Keep the database schema exactly as it is, really.")
    b.user("Found metadata.json:\n=== Step 12: Inspect metadata on entire/sessions branch ===")
    b.filler(8, "g")
    row = _after(_points(b))
    assert row["repeated_instructions"] == 1


def test_the_agent_asking_the_user_again_is_a_repeated_question() -> None:
    b = _Build()
    b.filler(8)
    b.say("Which database should the export use for the nightly reports?")
    b.user("postgres")
    b.compaction()
    b.call("AskUserQuestion", "postgres", questions=[{"question": "Which database should the nightly reports "
                                                                  "export use?", "header": "DB", "options": []}])
    b.say("Should I also delete the old export files now?")  # a new question
    b.filler(8, "g")
    row = _after(_points(b))
    assert row["repeated_questions"] == 1


def test_an_edit_that_changes_back_an_earlier_change_is_a_revert_and_a_further_change_is_not() -> None:
    b = _Build()
    b.filler(8)
    b.call("edit", "ok", path="src/a.py", oldText="def f():\n    return 1", newText="def f():\n    return 2")
    b.call("edit", "ok", path="src/b.py", oldText="A = 'x'", newText="A = 'y'")
    b.compaction()
    b.call("edit", "ok", path="/repo/src/a.py", oldText="def f(): return 2", newText="def f(): return 1")
    b.call("edit", "ok", path="src/b.py", oldText="A = 'y'", newText="A = 'z'")  # changed further: no revert
    b.call("bash", "", command="git checkout -- src/c.py")
    b.call("bash", "", command="git checkout -b feature")  # a branch, not a revert
    b.filler(8, "g")
    row = _after(_points(b))
    assert row["reverts"] == 2


def test_codex_patches_are_edits_a_revert_can_undo() -> None:
    b = _Build()
    b.filler(8)
    b.call("apply_patch", "Success", input="*** Begin Patch\n*** Update File: src/a.py\n@@\n-limit = 10\n+limit = 20\n"
                                           "*** End Patch")
    b.compaction()
    b.call("apply_patch", "Success", input="*** Begin Patch\n*** Update File: src/a.py\n@@\n-limit = 20\n+limit = 10\n"
                                           "*** End Patch")
    b.filler(8, "g")
    assert _after(_points(b))["reverts"] == 1


def test_going_back_to_a_task_the_user_had_moved_on_from_is_a_return() -> None:
    def build(first_statement: str) -> _Build:
        b = _Build()
        b.user("Add pagination to the users endpoint with limit and offset parameters")
        b.call("edit", "ok", path="api/users.py", oldText="a", newText="b")
        b.say("Pagination is in.")
        b.user("Now write the changelog entry for the release notes of version two")
        b.filler(8)
        b.compaction()
        b.say(first_statement)
        b.filler(8, "g")
        return b

    back = _after(_points(build("Let me continue adding pagination with limit and offset parameters to the users "
                                "endpoint."), lookback=40))
    on = _after(_points(build("Writing the changelog entry for the release notes of version two now."), lookback=40))
    assert (back["returned_to_earlier_task"], on["returned_to_earlier_task"]) == (1, 0)


def test_the_way_to_new_progress_counts_the_calls_before_a_new_edit_or_a_new_passing_command() -> None:
    b = _Build()
    b.filler(8)
    b.call("edit", "ok", path="src/a.py", oldText="x = 1", newText="x = 2")
    b.call("bash", "1 failed", command="pytest -q", is_error=True)
    b.compaction()
    b.call("read", "x = 2", path="src/a.py")  # 1: a read
    b.call("edit", "ok", path="src/a.py", oldText="x = 1", newText="x = 2")  # 2: the same text again: no progress
    b.call("bash", "a.py", command="ls src")  # 3: an inspection
    b.call("bash", "1 failed", command="pytest -q", is_error=True)  # 4: fails
    passing = b.call("bash", "1 passed", command="pytest -q")  # 5: passes, and did not before: progress
    b.filler(8, "g")
    row = _after(_points(b))
    assert row["progress"] and row["steps_to_progress"] == 4
    assert row["seconds_to_progress"] == 8.0  # two messages a call, a second apart
    assert row["tokens_to_progress"] > 0
    assert row["progress_entry_id"] == passing


def test_a_window_without_progress_counts_all_its_calls_and_says_so() -> None:
    b = _Build()
    b.filler(8)
    b.compaction()
    b.filler(8, "g")  # reads only
    row = _after(_points(b, window=16))
    assert not row["progress"] and row["steps_to_progress"] == 8


def test_restored_messages_after_a_compaction_are_context_not_work() -> None:
    """Codex resumes with its ``replacement_history``: those entries follow the compaction but were not
    written after it, so the window starts after them."""
    b = _Build("codex-like")
    b.user("Never touch the migrations folder and keep the database schema exactly as it is.")
    b.filler(8)
    b.compaction("")
    restored = b.user("Never touch the migrations folder and keep the database schema exactly as it is.")
    b.entries[-1]["source"] = {"format": "codex", "line": 9, "replacementHistory": 0}
    first = b.call("read", "x", path="src/new.py")
    b.filler(8, "g")
    points = rework_points(b.session(source_format="codex"), window=W, lookback=W)
    row = _after(points)
    assert row["agent"] == "codex" and row["repeated_instructions"] == 0
    assert row["entry_id"] == first != restored


# --------------------------------------------------------------------------- points, controls, copies


def _long_session(session_id: str = "long", before: int = 40, after: int = 40) -> _Build:
    b = _Build(session_id)
    b.user("Refactor the storage layer of the service")
    b.filler(before)
    b.call("read", "x", path="src/keep.py")
    b.compaction("## Goal\nRefactor storage.")
    b.call("read", "x", path="src/keep.py")
    b.filler(after, "g")
    return b


def test_controls_have_the_compactions_lookback_and_window_and_no_compaction_inside() -> None:
    b = _long_session()
    points = _points(b, controls=3)
    after = _after(points)
    controls = points[points["point"] == "control"]
    assert after["n_controls"] == len(controls) == 3
    assert set(controls["lookback"]) == {after["lookback"]} and set(controls["window"]) == {after["window"]}
    cut = after["position"]
    for q in controls["position"]:
        assert not (q - W < cut <= q + W - 1) or q == cut  # no compaction inside [q - L, q + W)
        assert q - W >= 0
    gaps = np.diff(sorted(controls["position"]))
    assert (gaps >= W // 2).all()
    # the nearest eligible points: the closest is right before the compaction's look-back, or right after it
    assert min(abs(q - cut) for q in controls["position"]) <= W + 1


def test_a_compaction_with_too_little_history_is_not_measured_and_bad_arguments_are_refused() -> None:
    b = _Build()
    b.call("read", "x", path="a.py")
    b.compaction()
    b.filler(20)
    row = _after(_points(b))
    assert not row["measured"] and row["n_controls"] == 0 and row["lookback"] < MIN_SPAN
    with pytest.raises(ConfigurationError, match="window"):
        rework_points(b.session(), window=3)
    with pytest.raises(ConfigurationError, match="controls"):
        rework_points(b.session(), controls=-1)


def test_a_session_without_compactions_has_no_points() -> None:
    b = _Build()
    b.filler(20)
    points = _points(b)
    assert len(points) == 0 and list(points.columns) == rework.POINT_COLUMNS


def test_copies_of_one_session_count_each_compaction_once_from_the_copy_with_most_after_it() -> None:
    longer = _long_session("same", after=40).session()
    shorter = Session(dict(longer.header), [dict(e) for e in longer.entries[:-30]])
    longer.path, shorter.path = "/data/long.jsonl", "/data/short.jsonl"
    other = _long_session("other").session()
    other.path = "/data/other.jsonl"
    points = rework_corpus([shorter, longer, other], window=W, lookback=W)
    after = points[points["point"] == "after"]
    assert sorted(after["session"]) == ["other", "same"]
    assert after.set_index("session").loc["same", "file"] == "/data/long.jsonl"
    assert points.attrs["copies"] == 1
    assert set(points.attrs["events"]["file"]) <= {"/data/long.jsonl", "/data/other.jsonl"}


def test_the_table_pairs_each_compaction_with_the_mean_of_its_controls() -> None:
    points = rework_corpus([_long_session("s1").session(), _long_session("s2").session()], window=W, lookback=W)
    table = paired(points, ["rereads"])
    for _, row in table.iterrows():
        controls = points[(points["point"] == "control") & (points["compaction_id"] == row["compaction_id"])
                          & (points["session"] == row["session"])]
        assert row["rereads_control"] == pytest.approx(controls["rereads"].mean())
        assert row["rereads_excess"] == pytest.approx(row["rereads"] - controls["rereads"].mean())
    summary = rework_table(points, signals=["rereads"])
    (row,) = summary.itertuples()
    assert (row.agent, row.n_compactions, row.n_sessions) == ("pi", 2, 2)
    assert row.after == 1.0 and row.excess == pytest.approx(1.0 - row.control)
    assert math.isnan(row.after_low) and "no 95% interval" in row.note  # two sessions: no interval


def test_session_clustered_intervals_appear_where_their_coverage_is_supported() -> None:
    rng = np.random.default_rng(0)
    sessions = [f"s{i}" for i in range(40) for _ in range(2)]
    values = rng.poisson(2.0, len(sessions)).astype(float)
    est, low, high, note = rework._interval(values, sessions, rework._mean, level=0.95)
    assert est == pytest.approx(values.mean()) and low < est < high and "bootstrap" in note
    x = rng.normal(size=len(sessions))
    rho, low, high, _ = rework.rank_correlation(x, -x + 0.1 * rng.normal(size=len(x)), sessions, level=0.95)
    assert rho < -0.9 and low < rho <= high < -0.8


def test_correlations_join_measures_to_rework_by_compaction() -> None:
    points = rework_corpus([_long_session(f"s{i}", after=40 + 2 * i).session() for i in range(4)], window=W,
                           lookback=W)
    after = points[points["point"] == "after"]
    measures = after[["compaction_key"]].copy()
    measures["score"] = -after["rework"].to_numpy(dtype=float) + np.arange(len(after)) * 0.01
    table = rework_correlations(points, measures, measure_names=["score"], outcomes=["rework"])
    row = table[(table["agent"] == "all")].iloc[0]
    assert row["n_compactions"] == 4 and row["n_sessions"] == 4
    assert math.isnan(row["rho"]) or row["rho"] <= 0


def test_user_text_leaves_out_what_an_agent_adds() -> None:
    assert rework.user_text(messages.user("<command-name>/compact</command-name>")) == ""
    assert rework.user_text(messages.user("Base directory for this skill: /x")) == ""
    assert rework.user_text(messages.user("<system-reminder>x</system-reminder> fix the bug")) == "fix the bug"
    actions = path_actions([("u", messages.user("Please keep the public API of the module as it is"))])
    assert [a.kind for a in actions] == ["prompt", "instruct"]


# --------------------------------------------------------------------------- in the drift report


def test_the_drift_report_carries_the_rework_of_its_path_and_a_replay_none() -> None:
    from pimem.core.compaction.compaction import CompactionSettings
    from pimem.drift import drift_report
    from pimem.replays.engine import replay

    session = _long_session().session()
    report = drift_report(session)
    rework_rows = report.attrs["rework"]
    expected = rework_points(session, leaf_id=session.leaf_id)
    assert rework_rows[["point", "position", "rereads"]].equals(expected[["point", "position", "rereads"]])
    assert _after(rework_rows)["rereads"] == 1
    replayed = replay(session, CompactionSettings(reserve_tokens=200, keep_recent_tokens=200), context_window=2000,
                      token_source="estimate")
    assert len(drift_report(replayed).attrs["rework"]) == 0


# --------------------------------------------------------------------------- real compactions, read by hand
# Each case below was read in the transcript around the compaction; the comment says what the agent did and
# why it is (or is not) rework. docs/rework.md lists more.

CLAUDE_CODE = SHARED_DIR / "datasets" / "claude-code" / "entireio-cli"


def _real(path: Any) -> Any:
    if not path.exists():
        pytest.skip(f"real sessions not available ({path})")
    import warnings

    from pimem.sessions.load import load_session

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_session(path)


def _events_after(points: Any, compaction_id: str) -> Any:
    events = points.attrs["events"]
    return events[(events["point"] == "after") & (events["compaction_id"] == compaction_id)]


def test_claude_code_rereads_the_file_its_summary_contradicted_itself_about() -> None:
    """Session eb4bcc15, compaction c150e3c0 (auto, 155k tokens). Two calls before it the agent added the
    ``encoding/json`` import to transcript_test.go; the summary lists "Fix the missing encoding/json import" as
    pending and also says "I had just added the import". Its first move after the compaction (11e3cfba) is to
    read transcript_test.go again, where it finds the import present: rework the summary caused."""
    points = rework_points(_real(CLAUDE_CODE / "13_340918e71b_0_full.jsonl"))
    events = _events_after(points, "c150e3c0-1f35-4449-b091-ead400c50118")
    first = events[events["signal"] == "rereads"].iloc[0]
    assert first["entry_id"] == "11e3cfba-fd6a-4a71-ad57-d198fa005060"
    assert first["subject"].endswith("cmd/entire/cli/transcript_test.go") and first["named"] == "summary"
    row = _after(points)
    assert row["rereads"] > row["rework"] - row["rereads"]  # re-reads are most of what follows
    controls = points[points["point"] == "control"]
    assert len(controls) == 3 and (controls["lookback"] == row["lookback"]).all()


def test_claude_code_reads_its_debugging_files_again_after_a_manual_compact() -> None:
    """Session 0cf3db51, compaction b21f8236 (a manual ``/compact``). The user asks "can we continue the
    debug?"; the agent reads manual_commit_hooks.go again (76e295c7), which it had read just before: the
    summary named the file but could not hold its lines."""
    points = rework_points(_real(CLAUDE_CODE / "gz" / "44_785715c3f5_2_full.jsonl.gz"))
    events = _events_after(points, "b21f8236-f8d5-4a5d-819b-7ef183b60d95")
    rereads = events[events["signal"] == "rereads"]
    first = rereads.iloc[0]
    assert first["entry_id"] == "76e295c7-0b81-41e5-a699-0853ad8dd895"
    assert first["subject"].endswith("strategy/manual_commit_hooks.go") and first["named"] == "summary"
    # then two session-state files it had read (their names are not in the summary)
    assert [s.rsplit("/", 1)[-1][:10] for s in rereads["subject"][1:]] == ["2026-01-21", "2026-01-19"]
    assert list(rereads["named"][1:]) == ["", ""]


def test_pi_rereads_the_plan_the_user_asks_it_to_refresh_itself_with() -> None:
    """before-compaction.jsonl, first compaction. The user: "ok, i hope i haven't lobotomized you by
    compacting", then "also remember the @packages/coding-agent/docs/refactor.md file btw. could read it now
    to refresh your mind"; the agent reads the plan it had written and kept editing (363510ed). The summary
    named the file: naming it did not carry its content."""
    from pimem.sessions.samples import real_dir

    session = _real(real_dir() / "pi" / "before-compaction.jsonl.gz")  # bundled: always there
    points = rework_points(session)
    first_id = next(e["id"] for e in session.entries if e["type"] == "compaction")
    events = _events_after(points, first_id)
    (reread,) = events[events["signal"] == "rereads"].itertuples()
    assert reread.entry_id == "363510ed" and reread.subject.endswith("docs/refactor.md")
    assert reread.earlier_kind == "edit"  # it had edited the plan in the look-back, not read it


def test_codex_windows_start_after_the_restored_history() -> None:
    """Codex resumes a remote compaction with its ``replacement_history`` (earlier user messages, restored):
    the window starts at the first entry written after them, so they are not repeated instructions."""
    session = _real(SHARED_DIR / "datasets" / "codex" / "entityprocess-agentv" / "33_5841c2d678_0_full.jsonl")
    points = rework_points(session)
    row = _after(points)
    restored = {e["id"] for e in session.entries if "replacementHistory" in (e.get("source") or {})}
    assert restored and row["entry_id"] not in restored
    assert row["repeated_instructions"] == 0 and row["agent"] == "codex"


def test_odd_messages_are_read_without_failing() -> None:
    """Tool calls without arguments or names, edits with odd fields, results of unknown calls, empty content:
    nothing to count, no error."""
    odd = [
        ("a", {"role": "assistant", "content": [{"type": "toolCall", "id": "x", "name": None, "arguments": None},
                                                {"type": "toolCall", "name": "edit", "arguments": {"path": 3}},
                                                {"type": "toolCall", "id": "y", "name": "MultiEdit", "arguments": {
                                                    "file_path": "a.py", "edits": [None, {"old_string": 1}]}},
                                                {"type": "toolCall", "id": "z", "name": "Read",
                                                 "arguments": {"file_path": "b.py", "offset": "ten", "limit": -5}},
                                                {"type": "toolCall", "id": "w", "name": "bash",
                                                 "arguments": {"command": ["bash", "-lc", "cat 'unclosed"]}},
                                                "not a block"]}),
        ("r", {"role": "toolResult", "toolCallId": None, "content": None}),
        ("u", {"role": "user", "content": None}),
        ("s", {"role": "assistant", "content": "plain text?"}),
    ]
    actions = path_actions(odd)
    kinds = [a.kind for a in actions]
    assert kinds.count("edit") == 1 and "read" in kinds  # the MultiEdit pair with an old_string
    read = next(a for a in actions if a.kind == "read" and a.subject == "b.py")
    assert read.lines == (1, math.inf)


def test_the_rework_tables_are_their_declarations() -> None:
    from pimem.experiments.tables import TABLES

    sessions = [_long_session(f"s{i}", after=40 + 2 * i).session() for i in range(3)]
    points = rework_corpus(sessions, window=W, lookback=W)
    assert list(points.columns) == TABLES["rework_points"].names
    assert list(points.attrs["events"].columns) == TABLES["rework_events"].names
    assert list(rework_table(points).columns) == TABLES["rework_table"].names
    measures = rework.compaction_measures(sessions[0], baselines=False)
    assert list(measures.columns[:6]) == [c.name for c in rework._IDENTITY]
    assert list(rework_correlations(points, measures).columns) == TABLES["rework_correlations"].names
    facts = rework.fact_reacquisition(sessions[0], window=W, lookback=W)
    assert list(facts.columns) == TABLES["rework_facts"].names
    assert list(rework.reacquisition_table(facts).columns) == TABLES["rework_reacquisition"].names
    assert list(rework.signal_docs().columns) == TABLES["rework_signals"].names
    assert list(rework.rework_vs_orphans(sessions[0]).columns) == TABLES["rework_orphans"].names
    assert list(rework.rework_examples(points).columns) == TABLES["rework_examples"].names
    assert list(rework_corpus([]).columns) == TABLES["rework_points"].names

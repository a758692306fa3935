"""Differential check of ``pimem.navigate`` against Pi 0.87.1's own ``/tree`` navigation.

The oracle builds a real ``AgentSession`` (``createAgentSession`` over an in-memory
``SessionManager`` holding the session file) whose stream function is the recording one with
the canned answer, optionally with an inline extension answering ``session_before_tree``, and
calls ``navigateTree``. pimem navigates a copy of the same session with the
``OracleSummarizer`` (the same answer) and the equivalent hooks. Compared: the entries appended
(byte for byte through ``JSON.stringify``, new ids and timestamps aside), the leaf, the labels,
the editor text, cancel flags, the summary request (prompt, system prompt, max tokens,
reasoning), what the hook saw, and errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pimem.base.js import js_stringify
from pimem.replays.navigate import navigate
from pimem.core.agent_session import Hooks, TreeHookResult
from pimem.core.compaction.compaction import ModelInfo
from tests.oracle.client import Failure
from tests.support.summarizers import OracleSummarizer
from tests.oracle.plugin import COUNTS

pytestmark = pytest.mark.oracle


def _is_user(entry: dict) -> bool:
    return entry.get("type") == "message" and entry["message"].get("role") == "user"


def _is_role(entry: dict, role: str) -> bool:
    return entry.get("type") == "message" and entry["message"].get("role") == role


def _cases(session: Any, *, full: bool) -> list[dict[str, Any]]:
    """(old leaf, target) pairs and options covering navigateTree's paths, chosen from the tree."""
    branch = session.get_branch()
    n = len(branch)
    users = [e for e in branch if _is_user(e)]
    assistants = [e for e in branch if _is_role(e, "assistant")]
    mid_user = users[len(users) // 2]
    early_assistant = assistants[len(assistants) // 3]
    cases: list[dict[str, Any]] = [
        {"targetId": mid_user["id"], "summarize": True, "label": "checkpoint"},
        {"targetId": early_assistant["id"], "summarize": True, "customInstructions": "Focus on the tests."},
        {"targetId": session.entries[0]["id"], "summarize": True},
        {"targetId": users[0]["id"], "summarize": False},
        # a small window: the collected messages are cut to the token budget; maxTokens < 4096
        {"targetId": users[1]["id"], "summarize": True, "reserveTokens": 16384,
         "model": {"contextWindow": 20000, "maxTokens": 2000}},
        # hooks: supply the summary (fromHook) and override the label; cancel
        {"targetId": early_assistant["id"], "summarize": True, "label": "mine",
         "hook": {"summary": {"summary": "From the extension.", "details": {"note": 1}}, "label": "ext-label"}},
        {"targetId": mid_user["id"], "summarize": True, "hook": {"cancel": True}},
    ]
    if not full:
        return cases
    tool_result = next((i for i, e in enumerate(branch) if _is_role(e, "toolResult") and i > n // 2), None)
    cases += [
        {"targetId": mid_user["id"], "summarize": True, "customInstructions": "Only the decisions.",
         "replaceInstructions": True},
        {"targetId": early_assistant["id"], "summarize": False, "label": "here"},
        # a handler that only overrides instructions and label, and one that returns nothing
        {"targetId": users[-1]["id"], "summarize": True, "customInstructions": "ignored",
         "hook": {"customInstructions": "Hook focus.", "replaceInstructions": False, "label": "hooked"}},
        {"targetId": users[-1]["id"], "summarize": True, "hook": None},
        # a hook summary while the user does not want one: Pi ignores it
        {"targetId": early_assistant["id"], "summarize": False, "hook": {"summary": {"summary": "unused"}}},
        # the summarizer fails: Pi throws its message
        {"targetId": mid_user["id"], "summarize": True, "fail": Failure(stop_reason="error", error_message="boom").to_json()},
        # from an older leaf on the same path to an earlier entry
        {"oldLeafId": branch[(3 * n) // 5]["id"], "targetId": branch[n // 5]["id"], "summarize": True},
        # the target is the old leaf: nothing happens
        {"targetId": branch[-1]["id"], "summarize": True},
    ]
    if tool_result is not None:
        # only a tool result between the old leaf and the target: "No content to summarize"
        cases.append({"oldLeafId": branch[tool_result]["id"], "targetId": branch[tool_result - 1]["id"],
                      "summarize": True})
    tips = [leaf["id"] for leaf in session.leaves() if leaf["id"] != branch[-1]["id"]]
    for tip in tips[:2]:
        # across branches, both ways
        cases.append({"oldLeafId": tip, "targetId": branch[-1]["id"], "summarize": True})
        other = session.get_branch(tip)
        cases.append({"targetId": other[-2]["id"], "summarize": True, "label": "other"})
    return cases


def _hooks_for(spec: Any, seen: list[dict]) -> Hooks:
    def handler(event):
        seen.append({
            "targetId": event.target_id,
            "oldLeafId": event.old_leaf_id,
            "commonAncestorId": event.common_ancestor_id,
            "entryIds": [e["id"] for e in event.entries_to_summarize],
            "userWantsSummary": event.user_wants_summary,
            "customInstructions": event.custom_instructions,
            "replaceInstructions": event.replace_instructions,
            "label": event.label,
        })
        if spec is None:
            return None
        supplied = spec.get("summary") or {}
        return TreeHookResult(
            summary=supplied.get("summary"), details=supplied.get("details"), usage=supplied.get("usage"),
            custom_instructions=spec.get("customInstructions"), replace_instructions=spec.get("replaceInstructions"),
            label=spec.get("label"), cancel=bool(spec.get("cancel")),
        )

    return Hooks(before_tree=[handler])


def _mask(entries: list[dict], id_map: dict[str, str]) -> str:
    out = []
    for e in entries:
        e = {k: v for k, v in e.items() if k not in ("id", "timestamp")}
        for key in ("parentId", "targetId", "fromId"):
            if e.get(key) in id_map:
                e[key] = id_map[e[key]]
        out.append(e)
    return js_stringify(out)


def _run_pimem(path: Path, case: dict, theirs: dict) -> dict[str, Any]:
    from pimem.core.session_manager import load_session

    session = load_session(path)
    if case.get("oldLeafId"):
        session.leaf_id = case["oldLeafId"]
    for entry in theirs["setupEntries"]:  # what Pi appended while opening the session
        session.append_entry(dict(entry))
    assert session.leaf_id == theirs["oldLeafId"]
    m = case.get("model") or {}
    model = ModelInfo(context_window=m.get("contextWindow", 200000), max_tokens=m.get("maxTokens", 32000),
                      reasoning=False, provider="oracle", id="oracle-model")
    fail = case.get("fail")
    summarizer = OracleSummarizer(fail=Failure(kind=fail.get("kind"), stop_reason=fail.get("stopReason"),
                                               error_message=fail.get("errorMessage")) if fail else None)
    seen: list[dict] = []
    hooks = _hooks_for(case["hook"], seen) if "hook" in case else None
    before = js_stringify(session.entries)
    count = len(session.entries)
    error = outcome = new = None
    try:
        new, outcome = navigate(
            session, case["targetId"], summarize=case.get("summarize", False), summarizer=summarizer, hooks=hooks,
            model=model, reserve_tokens=case.get("reserveTokens", 16384),
            custom_instructions=case.get("customInstructions"), replace_instructions=case.get("replaceInstructions"),
            label=case.get("label"), with_outcome=True,
        )
    except RuntimeError as exc:
        error = str(exc)
    assert js_stringify(session.entries) == before  # the source is never modified
    return {"new": new, "outcome": outcome, "error": error, "count": count, "requests": summarizer.requests,
            "seen": seen}


def _compare(path: Path, case: dict, theirs: dict) -> None:
    ours = _run_pimem(path, case, theirs)
    where = f"{path.name} {case}"
    assert ours["error"] == theirs["error"], where
    assert ours["seen"] == theirs["hookEvents"], where
    assert len(ours["requests"]) == len(theirs["requests"]), where
    for mine, pi in zip(ours["requests"], theirs["requests"]):
        assert mine.kind == pi["kind"] == "branch"
        assert mine.system_prompt == pi["systemPrompt"], where
        assert mine.prompt == pi["prompt"], where
        assert mine.max_tokens == pi["maxTokens"], where
        assert mine.reasoning == pi["reasoning"], where
    if theirs["error"] is not None:
        return
    outcome, new = ours["outcome"], ours["new"]
    result = theirs["result"]
    assert bool(outcome.cancelled) == bool(result["cancelled"]), where
    assert bool(outcome.aborted) == bool(result["aborted"]), where
    assert outcome.editor_text == result["editorText"], where
    added = new.entries[ours["count"]:]
    pi_added = theirs["newEntries"]
    assert [e["type"] for e in added] == [e["type"] for e in pi_added], where
    id_map = {pi["id"]: mine["id"] for pi, mine in zip(pi_added, added)}
    assert _mask(pi_added, id_map) == _mask(added, {}), where
    assert len(new.entries) == theirs["entryCount"], where
    assert new.leaf_id == id_map.get(theirs["leafId"], theirs["leafId"]), where
    if result["summaryEntryId"] is not None:
        assert outcome.summary_entry["id"] == id_map[result["summaryEntryId"]]
    else:
        assert outcome.summary_entry is None
    for target, label in theirs["labels"].items():
        assert new.get_label(id_map.get(target, target)) == label, where
    COUNTS["tree navigations"] += 1


def _check_session(oracle, path: Path, *, full: bool) -> list[dict]:
    from pimem.core.session_manager import load_session

    cases = _cases(load_session(path), full=full)
    results = oracle.navigate_tree(path, cases)
    for case, theirs in zip(cases, results):
        _compare(path, case, theirs)
    return results


def test_navigate_matches_pi_on_the_samples(oracle, sample_paths):
    results = []
    for path in sample_paths:
        results += _check_session(oracle, path, full=True)
    # the cases reached every branch of navigateTree
    assert any(r["result"] and r["result"]["editorText"] for r in results)
    assert any(r["newEntries"] and r["newEntries"][0].get("fromHook") is True for r in results)
    assert any(r["result"] and r["result"]["cancelled"] for r in results)
    assert any(r["error"] for r in results)
    assert any(e["type"] == "label" for r in results for e in r["newEntries"])
    assert any(e.get("summary") == "No content to summarize" for r in results for e in r["newEntries"])
    assert any(len(r["requests"]) == 1 and r["requests"][0]["maxTokens"] == 2000 for r in results)


@pytest.mark.slow
def test_navigate_matches_pi_on_the_real_sessions(oracle, real_v3_paths):
    results = []
    for path in real_v3_paths:
        results += _check_session(oracle, path, full=False)
    # before-compaction.jsonl starts with a user message: the summary goes to the root (parentId null)
    assert any(e["type"] == "branch_summary" and e["parentId"] is None for r in results for e in r["newEntries"])


def test_navigate_hook_with_an_empty_summary_matches_pi(oracle, sample_paths):
    from pimem.core.session_manager import load_session

    path = sample_paths[0]
    branch = load_session(path).get_branch()
    case = {"targetId": branch[len(branch) // 3]["id"], "summarize": True, "hook": {"summary": {"summary": ""}}}
    (theirs,) = oracle.navigate_tree(path, [case])
    assert theirs["newEntries"] == [] and theirs["requests"] == []
    _compare(path, case, theirs)

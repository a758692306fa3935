"""Cut points, preparation, summary requests, the incremental tracker; random trees against Pi."""

from __future__ import annotations

import json
import random

import pytest

from pimem.base.js import js_stringify
from pimem.core.compaction.compaction import (
    CompactionSettings,
    ModelInfo,
    SummarizationError,
    compact,
    find_cut_point,
    prepare_compaction,
)
from pimem.core.compaction.utils import (
    FileOperations,
    compute_file_lists,
    serialize_conversation,
)
from pimem.core.incremental.tracker import ContextTracker
from pimem.core.session_manager import build_session_path
from tests.core.test_context import run_node
from tests.support.messages import message_entry
from tests.support.summarizers import FixedSummarizer

TS = "2025-01-01T00:00:00.000Z"


def tool_turn(prefix, parent, n_tools=2, size=400):
    """user -> (assistant toolCall -> toolResult) * n -> assistant text."""
    out = [message_entry(f"{prefix}u", parent, {"role": "user", "content": "u" * size})]
    last = f"{prefix}u"
    for i in range(n_tools):
        out.append(message_entry(f"{prefix}a{i}", last, {"role": "assistant", "content": [
            {"type": "toolCall", "id": f"t{i}", "name": "read", "arguments": {"path": f"/f{prefix}{i}"}}]}))
        out.append(message_entry(f"{prefix}r{i}", f"{prefix}a{i}", {"role": "toolResult", "toolCallId": f"t{i}",
                                                             "toolName": "read", "content": [{"type": "text", "text": "r" * size}]}))
        last = f"{prefix}r{i}"
    out.append(message_entry(f"{prefix}z", last,
                             {"role": "assistant", "content": [{"type": "text", "text": "z" * size}]}))
    return out


def test_cut_never_lands_on_a_tool_result():
    entries = tool_turn("A", None) + tool_turn("B", "Az")
    cut = find_cut_point(entries, 0, len(entries), 150)
    # the last entry alone exceeds 150 tokens; the cut is the assistant text, which splits turn B
    assert entries[cut.first_kept_entry_index]["id"] == "Bz"
    assert cut.is_split_turn and entries[cut.turn_start_index]["id"] == "Bu"
    cut = find_cut_point(entries, 0, len(entries), 250)  # reached at Br0 (a tool result) -> next cut point
    assert entries[cut.first_kept_entry_index]["id"] == "Ba1"
    for keep in (0, 1):
        cut = find_cut_point(entries, 0, len(entries), keep)
        assert entries[cut.first_kept_entry_index]["id"] == "Bz"


def test_prepare_split_turn_and_file_ops():
    entries = tool_turn("A", None) + tool_turn("B", "Az")
    prep = prepare_compaction(entries, CompactionSettings(keep_recent_tokens=150))
    assert prep.is_split_turn and prep.first_kept_entry_id == "Bz"
    assert len(prep.messages_to_summarize) == 6 and len(prep.turn_prefix_messages) == 5
    assert prep.file_ops.read == {"/fA0", "/fA1", "/fB0", "/fB1"}
    assert prep.previous_summary is None and prep.tokens_before == 820  # 2 x (4 x 100 + 2 x 5)


def test_prepare_after_compaction_uses_kept_range_and_details():
    entries = tool_turn("A", None) + [
        {"type": "compaction", "id": "K", "parentId": "Az", "timestamp": TS, "summary": "PREV",
         "firstKeptEntryId": "Aa1", "tokensBefore": 5, "details": {"readFiles": ["/old"], "modifiedFiles": ["/m"]}},
    ] + tool_turn("B", "K")
    prep = prepare_compaction(entries, CompactionSettings(keep_recent_tokens=1))
    assert prep.previous_summary == "PREV"
    # summarized span starts at the kept entry Aa1, not at the compaction
    assert prep.messages_to_summarize[0]["content"][0]["arguments"] == {"path": "/fA1"}
    assert "/old" in prep.file_ops.read and "/m" in prep.file_ops.edited
    hooked = [dict(e, fromHook=True) if e["id"] == "K" else e for e in entries]
    assert "/old" not in prepare_compaction(hooked, CompactionSettings(keep_recent_tokens=1)).file_ops.read
    assert prepare_compaction(entries[: len(tool_turn("A", None)) + 1]) is None  # ends in a compaction


def test_compact_requests_and_split_join():
    entries = tool_turn("A", None) + tool_turn("B", "Az")
    prep = prepare_compaction(entries, CompactionSettings(reserve_tokens=1000, keep_recent_tokens=150))
    s = FixedSummarizer(usage={"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
                               "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
    res = compact(prep, s, model=ModelInfo(200000, 300, True, "p", "m"), thinking_level="high",
                  custom_instructions="focus")
    kinds = [r.kind for r in s.requests]
    assert kinds == ["history", "turn_prefix"]
    assert [r.max_tokens for r in s.requests] == [300, 300]  # min(800, 300), min(500, 300)
    assert all(r.reasoning == "high" and r.cache_retention == "none" for r in s.requests)
    assert s.requests[0].session_id != s.requests[1].session_id
    assert s.requests[0].prompt.endswith("Additional focus: focus")
    assert s.requests[1].prompt.startswith("# Conversation\n[User]: ")
    assert res.summary.startswith("SUMMARY\n\n---\n\n**Turn Context (split turn):**\n\nSUMMARY\n\n<read-files>\n")
    assert res.usage["totalTokens"] == 6 and res.details["modifiedFiles"] == []
    s2 = FixedSummarizer()
    compact(prep, s2, model=ModelInfo(0, 0, False))
    assert s2.requests[0].max_tokens == 800 and s2.requests[0].reasoning is None


@pytest.mark.parametrize("kw,message", [
    ({"stop_reason": "error", "error_message": "boom"}, "Summarization failed: boom"),
    ({"stop_reason": "error"}, "Summarization failed: Unknown error"),
    ({"stop_reason": "length"}, "Summarization failed: generation hit the token cap and the summary is incomplete"),
    ({"called_tool": True}, "Summarization attempted to call a tool"),
])
def test_summarization_failures(kw, message):
    prep = prepare_compaction(tool_turn("A", None) + tool_turn("B", "Az"), CompactionSettings(keep_recent_tokens=410))
    assert not prep.is_split_turn
    with pytest.raises(SummarizationError) as err:
        compact(prep, FixedSummarizer(**kw), model=ModelInfo(1000, 100, False))
    assert str(err.value) == message


def test_file_lists_sort_by_utf16_code_units_and_serialization_truncates_utf16():
    ops = FileOperations(read={"\uff61", "😀", "a", "b"}, edited={"b"})
    read, modified = compute_file_lists(ops)
    assert read == ["a", "😀", "\uff61"]  # surrogate D83D sorts before FF61
    assert modified == ["b"]
    text = "😀" * 1001  # 2002 code units; the cut falls between... exactly on a pair boundary
    out = serialize_conversation([{"role": "toolResult", "content": [{"type": "text", "text": text + "x"}]}])
    assert out.endswith("\n\n[... 3 more characters truncated]")
    odd = serialize_conversation([{"role": "toolResult", "content": "x" + text}])
    assert "\ud83d\n\n[... " in odd  # a lone high surrogate, as String.slice leaves it


def random_tree(rng: random.Random, n: int) -> list[dict]:
    entries: list[dict] = []
    ids: list[str] = []

    def text(k):
        alphabet = "abc xyz\n😀é\U0001f600"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, k)))

    for i in range(n):
        eid = f"{i:08x}"
        parent = ids[-1] if ids and rng.random() < 0.85 else (rng.choice(ids) if ids else None)
        r = rng.random()
        base = {"id": eid, "parentId": parent, "timestamp": TS}
        if r < 0.25:
            e = {"type": "message", **base, "message": {"role": "user", "content": text(300) if rng.random() < .5
                                                        else [{"type": "text", "text": text(200)}], "timestamp": i}}
        elif r < 0.5:
            blocks = []
            for _ in range(rng.randint(0, 3)):
                kind = rng.choice(["text", "thinking", "toolCall", "toolCall"])
                if kind == "text":
                    blocks.append({"type": "text", "text": text(300)})
                elif kind == "thinking":
                    blocks.append({"type": "thinking", "thinking": text(200)})
                else:
                    blocks.append({"type": "toolCall", "id": "t", "name": rng.choice(["read", "edit", "write", "bash"]),
                                   "arguments": {"path": rng.choice(["/a", "/b", "/é", "/😀", "/z"]), "n": rng.random()}})
            msg = {"role": "assistant", "content": blocks, "timestamp": i, "stopReason": rng.choice(["stop", "toolUse", "error"]),
                   "provider": "p", "model": "m"}
            if rng.random() < 0.5:
                t = rng.randint(0, 3000)
                msg["usage"] = {"input": t, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": t + 1}
            e = {"type": "message", **base, "message": msg}
        elif r < 0.68:
            e = {"type": "message", **base, "message": {"role": "toolResult", "toolCallId": "t", "toolName": "read",
                                                        "content": [{"type": "text", "text": text(3000)}] + (
                                                            [{"type": "image", "data": "x", "mimeType": "image/png"}]
                                                            if rng.random() < .1 else []), "isError": False, "timestamp": i}}
        elif r < 0.73:
            e = {"type": "message", **base, "message": {"role": "bashExecution", "command": text(20), "output": text(100),
                                                        "exitCode": rng.choice([0, 1, None]), "cancelled": rng.random() < .2,
                                                        "truncated": False, "excludeFromContext": rng.random() < .3,
                                                        "timestamp": i}}
        elif r < 0.78 and ids:
            path_ids = [x["id"] for x in build_session_path(entries, parent)] if parent else []
            e = {"type": "compaction", **base, "summary": text(100) or "s",
                 "firstKeptEntryId": rng.choice(path_ids) if path_ids else eid, "tokensBefore": 5,
                 "details": {"readFiles": ["/r"], "modifiedFiles": ["/w"]}, "fromHook": rng.random() < .3}
        elif r < 0.82:
            e = {"type": "custom_message", **base, "customType": "x", "content": text(100), "display": True}
        elif r < 0.85:
            e = {"type": "branch_summary", **base, "fromId": "root", "summary": text(50),
                 "details": {"readFiles": ["/q"], "modifiedFiles": []}}
        elif r < 0.89 and ids:
            e = {"type": "context_edit", **base, "targetId": rng.choice(ids),
                 "replacement": None if rng.random() < .5 else {"content": text(30)}}
        elif r < 0.93:
            e = {"type": "message", **base, "message": {"role": "system", "content": text(40),
                                                        "sections": {"s": text(10) or None}, "timestamp": i}}
        else:
            e = {"type": rng.choice(["model_change", "thinking_level_change", "label", "custom"]), **base,
                 "thinkingLevel": "high", "provider": "p", "modelId": "m2"}
        entries.append(e)
        ids.append(eid)
    return entries


NODE_PREPARE = r"""
const sm = await import(process.env.DIST + "/core/session-manager.js");
const cp = await import(process.env.DIST + "/core/compaction/compaction.js");
process.stdin.setEncoding("utf8"); let data = ""; for await (const c of process.stdin) data += c;
const { cases } = JSON.parse(data);
const out = [];
for (const { entries, leaf, keep, reserve } of cases) {
  const byId = new Map(entries.map((e) => [e.id, e]));
  const path = [];
  for (let cur = byId.get(leaf); cur; cur = cur.parentId ? byId.get(cur.parentId) : undefined) path.push(cur);
  path.reverse();
  const settings = { enabled: true, reserveTokens: reserve, keepRecentTokens: keep };
  const prep = cp.prepareCompaction(path, settings);
  if (!prep) { out.push(null); continue; }
  const requests = [];
  const streamFn = async (model, context, options) => ({ result: async () => {
    requests.push({ system: context.messages[0].content, prompt: context.messages[1].content[0].text,
      maxTokens: options.maxTokens === Infinity ? null : options.maxTokens, reasoning: options.reasoning ?? null,
      cacheRetention: options.cacheRetention });
    return { role: "assistant", content: [{ type: "text", text: "S" }], stopReason: "stop",
      usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2,
               cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } } };
  } });
  const model = { id: "m", provider: "p", contextWindow: 100000, maxTokens: 1000, reasoning: true };
  const result = await cp.compact(prep, model, undefined, undefined, undefined, undefined, "low", streamFn);
  out.push({ firstKeptEntryId: prep.firstKeptEntryId, isSplitTurn: prep.isSplitTurn, tokensBefore: prep.tokensBefore,
    previousSummary: prep.previousSummary ?? null, messagesToSummarize: prep.messagesToSummarize,
    turnPrefixMessages: prep.turnPrefixMessages,
    fileOps: { read: [...prep.fileOps.read].sort(), written: [...prep.fileOps.written].sort(), edited: [...prep.fileOps.edited].sort() },
    requests, summary: result.summary, details: result.details });
}
console.log(JSON.stringify(out));
"""


def _mine(entries, leaf, keep, reserve):
    path = build_session_path(entries, leaf)
    prep = prepare_compaction(path, CompactionSettings(True, reserve, keep))
    if prep is None:
        return None
    s = FixedSummarizer(text="S")
    res = compact(prep, s, model=ModelInfo(100000, 1000, True, "p", "m"), thinking_level="low")
    return {
        "firstKeptEntryId": prep.first_kept_entry_id, "isSplitTurn": prep.is_split_turn,
        "tokensBefore": prep.tokens_before, "previousSummary": prep.previous_summary,
        "messagesToSummarize": prep.messages_to_summarize, "turnPrefixMessages": prep.turn_prefix_messages,
        "fileOps": {k: sorted(getattr(prep.file_ops, k)) for k in ("read", "written", "edited")},
        "requests": [{"system": r.system_prompt, "prompt": r.prompt, "maxTokens": r.max_tokens,
                      "reasoning": r.reasoning, "cacheRetention": r.cache_retention} for r in s.requests],
        "summary": res.summary, "details": res.details,
    }


def test_random_trees_match_pi():
    rng = random.Random(20250101)
    cases = []
    for _ in range(60):
        entries = random_tree(rng, rng.randint(1, 60))
        for leaf in rng.sample([e["id"] for e in entries], min(3, len(entries))):
            cases.append({"entries": entries, "leaf": leaf, "keep": rng.choice([0, 1, 50, 300, 2000, 20000]),
                          "reserve": rng.choice([0, 1000, 16384])})
    expected = run_node(NODE_PREPARE, {"cases": cases})
    prepared = 0
    for case, exp in zip(cases, expected):
        got = _mine(case["entries"], case["leaf"], case["keep"], case["reserve"])
        got_json = json.loads(js_stringify(got)) if got is not None else None
        if got_json is not None:
            for key in ("read", "written", "edited"):  # compare as JavaScript sorts
                got_json["fileOps"][key] = sorted(got_json["fileOps"][key], key=lambda s: s.encode("utf-16-be", "surrogatepass"))
                exp["fileOps"][key] = sorted(exp["fileOps"][key], key=lambda s: s.encode("utf-16-be", "surrogatepass"))
        assert got_json == exp, (case["leaf"], case["keep"])
        prepared += exp is not None
    assert prepared > 40


def test_tracker_equals_pure_functions_along_random_paths():
    rng = random.Random(7)
    for _ in range(40):
        entries = random_tree(rng, 50)
        path = build_session_path(entries)
        tracker = ContextTracker()
        for i, e in enumerate(path):
            tracker.append(e)
            prefix = path[: i + 1]
            for keep in (0, 100, 2000):
                settings = CompactionSettings(keep_recent_tokens=keep)
                a, b = tracker.prepare(settings), prepare_compaction(prefix, settings)
                assert (a is None) == (b is None)
                if a is not None:
                    assert js_stringify(a.messages_to_summarize) == js_stringify(b.messages_to_summarize)
                    assert (a.first_kept_entry_id, a.tokens_before, a.turn_prefix_messages) == (
                        b.first_kept_entry_id, b.tokens_before, b.turn_prefix_messages)
    with pytest.raises(ValueError, match="not a child"):
        ContextTracker(path[:2]).append({"type": "message", "id": "q", "parentId": "nope", "message": {}})


NODE_CUT_RANGES = r"""
import { pathToFileURL } from "node:url";
import { join } from "node:path";
const cp = await import(pathToFileURL(join(process.env.DIST, "core/compaction/compaction.js")).href);
const req = JSON.parse(require("fs").readFileSync(0, "utf8"));
""".replace('require("fs")', '(await import("node:fs"))')


NODE_CUTS = NODE_CUT_RANGES + """
const out = req.cases.map(([p, s, e, k]) => { try { return cp.findCutPoint(p, s, e, k); }
  catch (x) { return String(x).split(":")[0]; } });
console.log(JSON.stringify(out));
"""


def cuts_of_pi_and_pimem(cases: list) -> list[tuple[object, object]]:
    """(Pi's findCutPoint, pimem's find_cut_point) of each ``(path, start, end, keep)``: the result as Pi's
    object, or the name of the error thrown."""
    expected = run_node(NODE_CUTS, {"cases": cases})
    out = []
    for (path, s, e, k), want in zip(cases, expected):
        try:
            cut = find_cut_point(path, s, e, k)
            got: object = {"firstKeptEntryIndex": cut.first_kept_entry_index, "turnStartIndex": cut.turn_start_index,
                           "isSplitTurn": cut.is_split_turn}
        except TypeError:
            got = "TypeError"
        out.append((want, got))
    return out


def test_cut_point_ranges_outside_the_entries_are_read_as_pi_reads_them():
    """A start before the first entry (Pi reads ``entries[-1].type`` of undefined) throws where the range holds
    an entry, and an empty range answers at once, as in Pi."""
    entries = random_tree(random.Random(3), 12)
    path = build_session_path(entries)
    cases = [(path, s, e, k) for s in (-3, -1, 0, 2) for e in (-2, 0, 1, len(path)) for k in (0, 50)]
    for case, (want, got) in zip(cases, cuts_of_pi_and_pimem(cases)):
        assert got == want, case[1:]


def test_cut_point_estimate_that_throws_is_pi_s_only_where_the_range_has_a_cut_point():
    """The walk back from the end comes first here: where it meets a message whose estimate throws, a range
    without a cut point still answers as Pi's (which returns before estimating) and one with a cut point throws."""
    bad = message_entry("r", "a", {"role": "toolResult", "toolCallId": "t", "content": 5})
    user = message_entry("u", None, {"role": "user", "content": "hello"})
    tool_only = [message_entry("a", None, {"role": "toolResult", "toolCallId": "t", "content": []}), bad]
    with_user = [user, {**tool_only[0], "parentId": "u"}, bad]
    cases = [(tool_only, 0, 2, 1), (tool_only, 1, 2, 0), (with_user, 0, 3, 1), (with_user, 1, 3, 1),
             (with_user, 0, 2, 10**6)]
    answers = cuts_of_pi_and_pimem(cases)
    assert answers[0][0] == {"firstKeptEntryIndex": 0, "turnStartIndex": -1, "isSplitTurn": False}
    assert answers[2][0] == "TypeError"
    for case, (want, got) in zip(cases, answers):
        assert got == want, case[1:]

"""Context projection: leaf rules, compaction, context edits, system messages, convert_to_llm."""

from __future__ import annotations

import functools
import json
import os
import subprocess

import pytest

from pimem.base.js import js_stringify
from pimem.core.messages import bash_execution_to_text, convert_to_llm
from pimem.core.pi_ai import get_current_system_message
from pimem.core.session_manager import (
    NULL_LEAF,
    build_session_context,
    build_session_projection,
    session_entry_to_context_messages,
)
from tests.oracle.install import node_path, pi_dist
from tests.support import messages

TS = "2025-01-01T00:00:00.000Z"
NODE = node_path()
DIST = pi_dist()


msg = functools.partial(messages.message_entry, timestamp=TS)
user = messages.user
assistant = functools.partial(messages.assistant, timestamp=2)


def chain():
    return [
        msg("a", None, user("one")),
        msg("b", "a", assistant("two")),
        msg("c", "b", user("three")),
        msg("d", "c", assistant("four")),
    ]


def run_node(script: str, payload: object) -> object:
    if not (NODE.exists() and DIST.exists()):
        if os.environ.get("PIMEM_REQUIRE_ORACLE") == "1":
            pytest.fail("Node and the Pi release are required")
        pytest.skip("Node and the Pi release are not installed")
    proc = subprocess.run(
        [str(NODE), "--input-type=module", "-e", script],
        input=js_stringify(payload), capture_output=True, text=True, env={**os.environ, "DIST": str(DIST)},
        check=True,
    )
    return json.loads(proc.stdout)


def test_leaf_rules_default_null_and_unknown():
    entries = chain()
    assert [m["content"] for m in build_session_context(entries).messages][0] == "one"
    assert len(build_session_context(entries).messages) == 4
    assert build_session_context(entries, NULL_LEAF).messages == []
    assert len(build_session_context(entries, "b").messages) == 2
    # an unknown id falls back to the last entry, as Pi does
    assert len(build_session_context(entries, "zz").messages) == 4


def test_compaction_projects_summary_kept_and_after():
    entries = chain() + [
        {"type": "compaction", "id": "e", "parentId": "d", "timestamp": TS, "summary": "SUM",
         "firstKeptEntryId": "c", "tokensBefore": 10},
        msg("f", "e", user("five")),
    ]
    messages = build_session_context(entries).messages
    assert [m["role"] for m in messages] == ["compactionSummary", "user", "assistant", "user"]
    assert messages[0]["summary"] == "SUM" and messages[0]["timestamp"] == 1735689600000
    assert [m.get("content") for m in messages[1:]][0] == "three"


def test_older_compaction_inside_kept_range_contributes_nothing():
    entries = chain()[:2] + [
        {"type": "compaction", "id": "k1", "parentId": "b", "timestamp": TS, "summary": "OLD",
         "firstKeptEntryId": "b", "tokensBefore": 1},
        msg("c", "k1", user("three")),
        {"type": "compaction", "id": "k2", "parentId": "c", "timestamp": TS, "summary": "NEW",
         "firstKeptEntryId": "b", "tokensBefore": 2},
    ]
    proj = build_session_projection(entries)
    assert [e.source_entry["id"] for e in proj.entries] == ["k2", "b", "k1", "c"]
    assert [len(e.messages) for e in proj.entries] == [1, 1, 0, 1]
    assert proj.messages[0]["summary"] == "NEW"


def test_context_edit_replaces_and_removes():
    entries = chain() + [
        {"type": "context_edit", "id": "x", "parentId": "d", "timestamp": TS, "targetId": "b",
         "replacement": {"content": "short"}},
        {"type": "context_edit", "id": "y", "parentId": "x", "timestamp": TS, "targetId": "c",
         "replacement": None},
    ]
    proj = build_session_projection(entries)
    contents = [m["content"] for m in proj.messages]
    assert contents == ["one", [{"type": "text", "text": "short"}], [{"type": "text", "text": "four"}]]
    # the source entries are untouched
    assert entries[1]["message"]["content"] == [{"type": "text", "text": "two"}]


def test_system_messages_and_compaction_system_message():
    sys1 = {"role": "system", "content": "base", "sections": {"b": "B", "a": "A"}, "timestamp": 5}
    sys2 = {"role": "system", "content": None, "sections": {"a": None},
            "toolsAdded": [{"name": "read"}], "timestamp": 6}
    entries = [msg("s1", None, sys1), msg("s2", "s1", sys2), msg("u", "s2", user("hi"))]
    messages = build_session_context(entries).messages
    assert messages[1]["content"] == ""  # null system content becomes ""
    current = get_current_system_message(messages)
    assert current == {"role": "system", "content": "base", "sections": {"b": "B"},
                       "toolsAdded": [{"name": "read"}], "timestamp": 5}
    comp = {"type": "compaction", "id": "k", "parentId": "u", "timestamp": TS, "summary": "S",
            "firstKeptEntryId": "s1", "tokensBefore": 3, "systemMessage": current}
    proj = build_session_projection(entries + [comp])
    # kept system messages are dropped, the compaction's system message leads
    assert [m["role"] for m in proj.messages] == ["system", "compactionSummary", "user"]


def test_null_content_and_custom_messages():
    e = msg("a", None, {"role": "assistant", "content": None})
    assert session_entry_to_context_messages(e)[0]["content"] == []
    cm = {"type": "custom_message", "id": "c", "parentId": None, "timestamp": "garbage",
          "customType": "ext", "content": None, "display": True}
    out = session_entry_to_context_messages(cm)[0]
    assert out == {"role": "custom", "customType": "ext", "content": [], "display": True, "timestamp": None}
    assert js_stringify(out).endswith('"timestamp":null}')
    assert session_entry_to_context_messages(
        {"type": "branch_summary", "id": "b", "parentId": None, "timestamp": TS, "summary": ""}) == []


def test_convert_to_llm_roles():
    bash = {"role": "bashExecution", "command": "ls", "output": "x", "exitCode": 2, "truncated": True,
            "fullOutputPath": "/tmp/o", "timestamp": 3}
    excluded = dict(bash, excludeFromContext=True)
    custom = {"role": "custom", "content": "hello", "timestamp": 4}
    odd = {"role": "hookMessage", "content": "dropped"}
    out = convert_to_llm([bash, excluded, custom, odd, {"role": "branchSummary", "summary": "B", "timestamp": 1}])
    assert len(out) == 3
    assert out[0]["content"][0]["text"] == (
        "Ran `ls`\n```\nx\n```\n\nCommand exited with code 2\n\n[Output truncated. Full output: /tmp/o]")
    assert out[1] == {"role": "user", "content": [{"type": "text", "text": "hello"}], "timestamp": 4}
    assert out[2]["content"][0]["text"].endswith("<summary>\nB</summary>")
    assert bash_execution_to_text({"command": "c", "output": "", "cancelled": True, "exitCode": 1}) == (
        "Ran `c`\n(no output)\n\n(command cancelled)")
    assert "exited" not in bash_execution_to_text({"command": "c", "output": "", "exitCode": 0})


NODE_CONTEXT = r"""
const sm = await import(process.env.DIST + "/core/session-manager.js");
const ms = await import(process.env.DIST + "/core/messages.js");
process.stdin.setEncoding("utf8"); let data = ""; for await (const c of process.stdin) data += c;
const { entries, leaves } = JSON.parse(data);
const out = leaves.map((leaf) => {
  const ctx = sm.buildSessionContext(entries, leaf === "__undefined__" ? undefined : leaf);
  return [ctx, ms.convertToLlm(ctx.messages)];
});
console.log(JSON.stringify(out));
"""


def test_matches_pi_on_a_branched_tree():
    entries = chain() + [
        msg("b2", "a", {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}],
                        "provider": "p", "model": "m", "timestamp": 9}),
        {"type": "thinking_level_change", "id": "t", "parentId": "b2", "timestamp": TS, "thinkingLevel": "high"},
        {"type": "custom_message", "id": "cm", "parentId": "t", "timestamp": TS, "customType": "x",
         "content": "note 😀", "display": False},
        {"type": "compaction", "id": "k", "parentId": "cm", "timestamp": TS, "summary": "S",
         "firstKeptEntryId": "b2", "tokensBefore": 7},
        msg("z", "k", {"role": "bashExecution", "command": "pwd", "output": "/", "exitCode": 0,
                       "cancelled": False, "truncated": False, "timestamp": 11}),
        {"type": "context_edit", "id": "ce", "parentId": "z", "timestamp": TS, "targetId": "cm",
         "replacement": {"content": [{"type": "text", "text": "edited"}]}},
    ]
    leaves = ["__undefined__", "d", "b2", "k", "z", "ce", "a"]
    expected = run_node(NODE_CONTEXT, {"entries": entries, "leaves": leaves})
    for leaf, (ctx, llm) in zip(leaves, expected):
        mine = build_session_context(entries, None if leaf == "__undefined__" else leaf)
        got = {"messages": mine.messages, "thinkingLevel": mine.thinking_level, "model": mine.model}
        if mine.model is None:
            got["model"] = None
        assert json.loads(js_stringify(got)) == ctx, leaf
        assert json.loads(js_stringify(convert_to_llm(mine.messages))) == llm, leaf

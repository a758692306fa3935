"""Hypothesis strategies: random valid Pi session trees (v3) for differential testing.

A tree is built by a random program of steps appended after a moving leaf: messages of
every role (user, assistant with text/thinking/tool calls and usage, tool results — some
huge, some with images —, bash executions incl. ``excludeFromContext``, custom, system),
custom messages, branch summaries, compactions whose ``firstKeptEntryId`` lies on the path
(inside the kept range) or is absent, model/thinking changes, context edits, labels,
session names, plain custom entries, and jumps of the leaf to earlier entries (branches).
Strings mix ASCII with emoji and other astral characters, lone surrogates, U+2028 and
quotes; tool arguments carry floats, big numbers and nested values.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

PIECES = ["😀", "𝔘", "👩‍💻", "\ud800", "\udfff", "\udbff", "\u2028", "\u2029", "é", "ß", "中文", "\x00", "\x1f",
          '"', "\\", "\n", "\t", "</summary>", "`", "```", " ", "\r\n"]
WORDS = ["fix", "the", "bug", "in", "src/app.py", "test", "ok", "error:", "line", "42", "README.md", "{", "}"]
PATHS = ["src/app.py", "src/ünï.py", "README.md", "docs/😀.md", "a/b/c.ts", "Z.txt", "lib/x.js", "b.py"]
TOOLS = ["read", "write", "edit", "bash", "grep", "ls", "find"]
PROVIDERS = [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-5"), ("google", "gemini-2.5-pro")]
LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh"]
STOPS = ["stop", "stop", "stop", "toolUse", "length", "aborted", "error"]

texts = st.lists(st.one_of(st.sampled_from(PIECES), st.sampled_from(WORDS), st.text("abcxyz .,", max_size=12)),
                 max_size=10).map("".join)
short_texts = st.lists(st.sampled_from(WORDS + PIECES[:6]), max_size=4).map(" ".join)


@st.composite
def huge_texts(draw: Any) -> str:
    """Text longer than the 2000-unit tool-result cap, with astral characters near the cut."""
    n = draw(st.sampled_from([1998, 1999, 2000, 2001, 2500, 4100]))
    tail = draw(st.sampled_from(["😀", "𝔘x", "\ud800", "abc", "é" * 3]))
    return "x" * n + tail + draw(texts)


any_texts = st.one_of(texts, texts, texts, huge_texts(), st.just(""))

json_numbers = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.0, -0.0, 0.5, 1e21, 1e-7, 123456789.125, 2**53 + 2, 5e-324, 1.7976931348623157e308]),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), json_numbers, texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "1", "x y", "😀"]), inner, max_size=3)),
    max_leaves=6,
)

images = st.builds(lambda d: {"type": "image", "data": d, "mimeType": "image/png"}, st.sampled_from(["iVBORw0KGgo=", ""]))
text_blocks = st.builds(lambda t: {"type": "text", "text": t}, any_texts)
user_content = st.one_of(any_texts, st.lists(st.one_of(text_blocks, text_blocks, images), max_size=3))


def usage(inp: int, out: int, cache_read: int, total_mode: int) -> dict[str, Any]:
    total = inp + out + cache_read if total_mode == 0 else 0
    return {
        "input": inp, "output": out, "cacheRead": cache_read, "cacheWrite": 0, "totalTokens": total,
        "cost": {"input": 0.001, "output": 0.002, "cacheRead": 0, "cacheWrite": 0, "total": 0.003},
    }


@st.composite
def tool_call(draw: Any, idx: int) -> dict[str, Any]:
    name = draw(st.sampled_from(TOOLS))
    args: dict[str, Any] = {}
    if name in ("read", "write", "edit") and draw(st.integers(0, 5)) > 0:
        args["path"] = draw(st.sampled_from(PATHS))
    for k in draw(st.lists(st.sampled_from(["command", "limit", "offset", "content", "flags", "2", "opts"]), max_size=3, unique=True)):
        args[k] = draw(json_values)
    return {"type": "toolCall", "id": f"call_{idx}", "name": name, "arguments": args}


@st.composite
def assistant_message(draw: Any, ts: int, idx: int) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for kind in draw(st.lists(st.sampled_from(["text", "thinking", "tool", "tool"]), max_size=4)):
        if kind == "text":
            blocks.append({"type": "text", "text": draw(any_texts)})
        elif kind == "thinking":
            blocks.append({"type": "thinking", "thinking": draw(texts), "thinkingSignature": "sig"})
        else:
            blocks.append(draw(tool_call(idx * 10 + len(blocks))))
    provider, model = draw(st.sampled_from(PROVIDERS))
    msg: dict[str, Any] = {
        "role": "assistant", "content": blocks, "api": "anthropic-messages", "provider": provider, "model": model,
        "usage": usage(draw(st.integers(0, 200000)), draw(st.integers(0, 5000)), draw(st.integers(0, 1000)),
                       draw(st.integers(0, 3))),
        "stopReason": draw(st.sampled_from(STOPS)), "timestamp": ts,
    }
    if msg["stopReason"] == "error":
        msg["errorMessage"] = draw(short_texts)
    if draw(st.integers(0, 15)) == 0:
        msg["content"] = None
    return msg


@st.composite
def session_trees(draw: Any, max_steps: int = 28) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, entries) of a random valid v3 session tree."""
    counter = draw(st.integers(0, 2**20))
    base_ms = 1_760_000_000_000 + counter * 1000
    header = {"type": "session", "version": 3, "id": f"0199{counter:08x}-0000-7000-8000-000000000000",
              "timestamp": "2025-10-09T08:53:20.000Z", "cwd": "/work/próject"}
    entries: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    leaf: str | None = None
    pending_calls: list[dict[str, Any]] = []

    def path_ids() -> list[str]:
        ids, cur = [], leaf
        while cur is not None:
            ids.append(cur)
            cur = by_id[cur]["parentId"]
        return ids[::-1]

    def add(entry_type: str, **fields: Any) -> dict[str, Any]:
        nonlocal leaf
        n = len(entries)
        ts_ms = base_ms + n * 1500
        stamp = draw(st.sampled_from(["z", "z", "z", "offset", "nofrac"]))
        from datetime import datetime, timezone

        dt = datetime.fromtimestamp(ts_ms / 1000, tz=timezone.utc)
        if stamp == "z":
            ts = dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts_ms % 1000:03d}Z"
        elif stamp == "offset":
            ts = dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts_ms % 1000:03d}+00:00"
        else:
            ts = dt.strftime("%Y-%m-%dT%H:%M:%SZ")
        entry = {"type": entry_type, "id": f"{(counter * 7919 + n * 104729) % 16**8:08x}", "parentId": leaf,
                 "timestamp": ts, **fields}
        while entry["id"] in by_id:
            entry["id"] = f"{(int(entry['id'], 16) + 1) % 16**8:08x}"
        entries.append(entry)
        by_id[entry["id"]] = entry
        leaf = entry["id"]
        return entry

    steps = draw(st.lists(st.sampled_from(
        ["user", "user", "assistant", "assistant", "assistant", "tools", "bash", "custom_message", "custom",
         "branch_summary", "compaction", "compaction", "model", "thinking", "label", "name", "context_edit",
         "system", "jump", "jump"]), min_size=1, max_size=max_steps))
    for step in steps:
        ts = base_ms + len(entries) * 1500 + 7
        if step == "user":
            content = draw(user_content)
            msg = {"role": "user", "content": content, "timestamp": ts}
            if draw(st.integers(0, 20)) == 0:
                msg["content"] = None
            add("message", message=msg)
        elif step == "assistant":
            msg = draw(assistant_message(ts, len(entries)))
            add("message", message=msg)
            pending_calls = [b for b in (msg["content"] or []) if b.get("type") == "toolCall"]
        elif step == "tools":
            calls = pending_calls or [{"id": "call_x", "name": "bash"}]
            for call in calls:
                content = draw(st.lists(st.one_of(text_blocks, text_blocks, images), max_size=3))
                msg = {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"], "content": content,
                       "isError": draw(st.booleans()), "timestamp": ts}
                if draw(st.integers(0, 20)) == 0:
                    msg["content"] = None
                add("message", message=msg)
            pending_calls = []
        elif step == "bash":
            msg = {"role": "bashExecution", "command": draw(texts), "output": draw(any_texts),
                   "exitCode": draw(st.sampled_from([0, 0, 1, 127, None])), "cancelled": draw(st.booleans()),
                   "truncated": draw(st.booleans()), "timestamp": ts}
            if draw(st.booleans()):
                msg["fullOutputPath"] = "/tmp/out-😀.log"
            if draw(st.integers(0, 3)) == 0:
                msg["excludeFromContext"] = True
            add("message", message=msg)
        elif step == "custom_message":
            fields: dict[str, Any] = {"customType": "ext", "content": draw(user_content), "display": draw(st.booleans())}
            if draw(st.booleans()):
                fields["details"] = draw(json_values)
            if draw(st.integers(0, 10)) == 0:
                del fields["content"]
            add("custom_message", **fields)
        elif step == "custom":
            add("custom", customType="state", data=draw(json_values))
        elif step == "branch_summary":
            from_id = draw(st.sampled_from(path_ids())) if leaf else "root"
            fields = {"fromId": from_id, "summary": draw(st.one_of(texts, st.just("")))}
            if draw(st.booleans()):
                fields["details"] = {"readFiles": draw(st.lists(st.sampled_from(PATHS), max_size=3)),
                                     "modifiedFiles": draw(st.lists(st.sampled_from(PATHS), max_size=2))}
            if draw(st.integers(0, 3)) == 0:
                fields["fromHook"] = True
            add("branch_summary", **fields)
        elif step == "compaction":
            ids = path_ids()
            choice = draw(st.integers(0, 5))
            if ids and choice > 0:
                first_kept = draw(st.sampled_from(ids[len(ids) // 2:] if choice > 2 else ids))
            else:
                first_kept = "deadbeef"  # absent from the session
            fields = {"summary": draw(texts), "firstKeptEntryId": first_kept,
                      "tokensBefore": draw(st.integers(0, 300000))}
            if draw(st.booleans()):
                fields["details"] = {"readFiles": draw(st.lists(st.sampled_from(PATHS), max_size=3)),
                                     "modifiedFiles": draw(st.lists(st.sampled_from(PATHS), max_size=2))}
            if draw(st.integers(0, 3)) == 0:
                fields["fromHook"] = True
            if draw(st.integers(0, 4)) == 0:
                fields["systemMessage"] = {"role": "system", "content": draw(texts), "timestamp": ts}
            add("compaction", **fields)
        elif step == "model":
            provider, model = draw(st.sampled_from(PROVIDERS))
            add("model_change", provider=provider, modelId=model)
        elif step == "thinking":
            add("thinking_level_change", thinkingLevel=draw(st.sampled_from(LEVELS)))
        elif step == "label" and leaf:
            add("label", targetId=draw(st.sampled_from(path_ids())), label=draw(st.one_of(short_texts, st.none())))
        elif step == "name":
            add("session_info", name=draw(short_texts))
        elif step == "context_edit" and leaf:
            editable = [i for i in path_ids() if by_id[i]["type"] == "custom_message" or (
                by_id[i]["type"] == "message" and by_id[i]["message"]["role"] in ("user", "assistant", "toolResult"))]
            if editable:
                target = draw(st.sampled_from(editable))
                replacement = draw(st.one_of(st.none(), st.builds(lambda c: {"content": c}, user_content)))
                add("context_edit", targetId=target, replacement=replacement)
        elif step == "system":
            msg = {"role": "system", "content": draw(st.one_of(texts, st.lists(text_blocks, max_size=2))),
                   "timestamp": ts}
            if draw(st.booleans()):
                msg["sections"] = {"tools": draw(texts), "gone": None}
            add("message", message=msg)
        elif step == "jump" and entries:
            leaf = draw(st.sampled_from([e["id"] for e in entries]))
    if not entries:
        add("message", message={"role": "user", "content": "hi", "timestamp": base_ms})
    return header, entries


def tree_to_jsonl(header: dict[str, Any], entries: list[dict[str, Any]]) -> str:
    """The session file text, one ``JSON.stringify`` line per entry."""
    from pimem.base.js import js_stringify

    return "".join(js_stringify(x) + "\n" for x in [header, *entries])

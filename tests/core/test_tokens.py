"""Token estimates: UTF-16 lengths, images, tool arguments, system messages, usage rules."""

from __future__ import annotations

from pimem.core.compaction.compaction import (
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
)
from pimem.core.incremental.caches import TokenCache
from pimem.core.session_manager import build_session_projection

TS = "2025-01-01T00:00:00.000Z"


def test_utf16_lengths_and_images():
    assert estimate_tokens({"role": "user", "content": "😀😀"}) == 1  # 4 code units
    assert estimate_tokens({"role": "user", "content": "😀😀a"}) == 2  # 5 code units
    img = {"role": "toolResult", "content": [{"type": "image", "data": "x"}, {"type": "text", "text": "abc"}]}
    assert estimate_tokens(img) == -(-(4800 + 3) // 4)
    assert estimate_tokens({"role": "custom", "content": [{"type": "text", "text": ""}]}) == 0


def test_assistant_tool_call_arguments_are_json_stringify_lengths():
    m = {"role": "assistant", "content": [
        {"type": "toolCall", "name": "edit", "arguments": {"x": 1.0, "y": "é"}},
        {"type": "thinking", "thinking": "abcd"},
    ]}
    # JSON.stringify -> {"x":1,"y":"é"} is 15 units; name 4; thinking 4 -> 23 -> 6
    assert estimate_tokens(m) == 6
    assert estimate_tokens({"role": "assistant", "content": "plain string"}) == 0


def test_system_sections_and_empty_tools_list():
    m = {"role": "system", "content": "abcd", "sections": {"a": "xyz1", "b": None, "c": ""}, "toolsAdded": []}
    # 4 + 4 + len("[]") = 10 -> 3
    assert estimate_tokens(m) == 3
    assert estimate_tokens({"role": "bashExecution", "command": "ls", "output": "ab"}) == 1
    assert estimate_tokens({"role": "compactionSummary", "summary": "x" * 9}) == 3
    assert estimate_tokens({"role": "unknown"}) == 0


def test_calculate_context_tokens_fallback():
    assert calculate_context_tokens({"totalTokens": 0, "input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4}) == 10
    assert calculate_context_tokens({"totalTokens": 7, "input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4}) == 7


def usage(total):
    return {"input": total, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total}


def test_estimate_context_uses_last_valid_usage():
    msgs = [
        {"role": "user", "content": "x" * 40},
        {"role": "assistant", "content": [], "usage": usage(100), "stopReason": "stop"},
        {"role": "assistant", "content": [], "usage": usage(500), "stopReason": "error"},
        {"role": "user", "content": "y" * 8},
    ]
    est = estimate_context_tokens(msgs)
    assert (est.tokens, est.usage_tokens, est.trailing_tokens, est.last_usage_index) == (102, 100, 2, 1)
    none = estimate_context_tokens(msgs[:1])
    assert none.last_usage_index is None and none.tokens == 10


def test_projected_estimate_distrusts_usage_before_an_edit():
    entries = [
        {"type": "message", "id": "a", "parentId": None, "timestamp": TS,
         "message": {"role": "user", "content": "x" * 400}},
        {"type": "message", "id": "b", "parentId": "a", "timestamp": TS,
         "message": {"role": "assistant", "content": [], "usage": usage(9999), "stopReason": "stop"}},
    ]
    proj = build_session_projection(entries)
    assert estimate_projected_context_tokens(proj, entries).tokens == 9999
    edited = entries + [{"type": "context_edit", "id": "e", "parentId": "b", "timestamp": TS,
                         "targetId": "a", "replacement": {"content": "x" * 40}}]
    proj2 = build_session_projection(edited)
    est = estimate_projected_context_tokens(proj2, edited)
    assert est.tokens == 10 and est.last_usage_index is None


def test_token_cache_reuses_estimates_by_identity():
    cache = TokenCache()
    m = {"role": "user", "content": "abcdefgh"}
    assert cache.estimate(m) == 2 and cache.estimate(m) == 2
    assert cache.misses == 0 or len(cache) == 1
    assert cache.estimate({"role": "user", "content": "abcdefgh"}) == 2
    assert len(cache) == 2


def test_token_cache_remembers_two_generations_of_its_latest_messages(monkeypatch):
    import pimem.core.incremental.caches as caches

    computed: list[int] = []

    def counting(message):
        computed.append(id(message))
        return estimate_tokens(message)

    monkeypatch.setattr(caches, "estimate_tokens", counting)
    cache = TokenCache(limit=4)
    messages = [{"role": "user", "content": "x" * (4 * i + 1)} for i in range(20)]
    assert [cache.estimate(m) for m in messages] == [estimate_tokens(m) for m in messages]
    assert len(computed) == 20 and len(cache) <= 8  # at most two generations of 4
    again = [cache.estimate(m) for m in messages[-4:]] + [cache.estimate(messages[-6])]  # the latest two generations
    assert again == [estimate_tokens(m) for m in messages[-4:] + [messages[-6]]] and len(computed) == 20
    assert cache.estimate(messages[0]) == estimate_tokens(messages[0]) and len(computed) == 21  # forgotten
    cache.clear()
    assert len(cache) == 0 and cache.estimate(messages[-1]) == estimate_tokens(messages[-1]) and len(computed) == 22

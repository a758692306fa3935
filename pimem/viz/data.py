"""Tables behind the figures and widgets: pure functions of a session (no plotting).

* :func:`projection_table` — every entry on the path to a leaf with its part in the context
  (summarized, kept, after compaction, not in context) and its estimated tokens.
* :func:`cut_points_table` — Pi's cut point at a leaf for several ``keepRecentTokens`` values.
* :func:`estimate_vs_usage_table` — Pi's chars/4 estimate of the context against the usage
  recorded for each assistant message.
* :func:`tree_layout` — lanes and depths for drawing a session tree.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Iterable, Sequence

import pandas as pd

from pimem.core.compaction.compaction import (
    CompactionSettings,
    calculate_context_tokens,
    estimate_tokens,
    get_assistant_usage,
)
from pimem.core.incremental.caches import TokenCache
from pimem.core.incremental.tracker import ContextTracker
from pimem.core.session_manager import (
    build_session_path,
    build_session_projection,
    session_entry_to_context_messages,
)
from pimem.base.tables import frame
from pimem.text.messages import message_preview

__all__ = [
    "STATUSES",
    "projection_table",
    "cut_points_table",
    "estimate_vs_usage_table",
    "tree_layout",
    "compaction_effects",
    "entry_kind",
    "entry_preview",
]

# Part an entry of the path plays in the context at the leaf.
STATUSES = ("summarized", "summary", "kept", "after compaction", "in context", "not in context")


def entry_kind(entry: dict) -> str:
    """A short kind for an entry: the message role for messages, else the entry type."""
    if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
        return str(entry["message"].get("role") or "message")
    return str(entry.get("type") or "?")


def entry_preview(entry: dict, width: int = 80) -> str:
    """One line describing an entry (its message text, summary, label or name)."""
    etype = entry.get("type")
    if etype == "message" and isinstance(entry.get("message"), dict):
        return message_preview(entry["message"], width)
    if etype in ("compaction", "branch_summary"):
        text = " ".join(str(entry.get("summary") or "").split())
    elif etype == "label":
        text = f"label {entry.get('label')!r} → {entry.get('targetId')}"
    elif etype == "session_info":
        text = f"name {entry.get('name')!r}"
    elif etype == "model_change":
        text = f"model {entry.get('provider')}/{entry.get('modelId')}"
    elif etype == "thinking_level_change":
        text = f"thinking {entry.get('thinkingLevel')}"
    elif etype == "custom_message":
        content = entry.get("content")
        text = content if isinstance(content, str) else message_preview({"role": "user", "content": content}, 0)
        text = " ".join(str(text).split())
    else:
        text = str(etype)
    if width and len(text) > width:
        text = text[: max(width - 1, 0)] + "…"
    return text


def _safe_messages(entry: dict) -> list[dict]:
    try:
        return session_entry_to_context_messages(entry)
    except (KeyError, TypeError, AttributeError):
        return []


def _tokens(messages: Iterable[dict], cache: TokenCache | None = None) -> int:
    est = cache.estimate if cache is not None else estimate_tokens
    total = 0
    for m in messages:
        try:
            total += est(m)
        except (TypeError, ValueError, AttributeError):
            pass
    return total


def projection_table(session: Any, leaf_id: str | None = None, *, preview_width: int = 80) -> pd.DataFrame:
    """Every entry on the path to ``leaf_id`` and its part in the context the model sees there.

    Columns: ``position`` (0-based on the path), ``entry_id``, ``type``, ``kind`` (role or
    type), ``status`` (one of :data:`STATUSES`), ``in_context`` (bool), ``messages`` (context
    messages it contributes), ``tokens`` (Pi's chars/4 estimate: of the projected messages for
    entries in context, of the entry's own messages for summarized ones), ``preview``.

    ``summarized``: before the latest compaction's ``firstKeptEntryId``; ``summary``: that
    compaction (its summary is the first message); ``kept``: from the first kept entry up to the
    compaction; ``after compaction``: after it; ``in context``: no compaction on the path;
    ``not in context``: contributes no message (labels, settings, custom state, edits, an older
    compaction inside the kept range).
    """
    path = build_session_path(session, leaf_id)
    projection = build_session_projection(session, leaf_id)
    projected: dict[int, list[dict]] = {id(p.source_entry): p.messages for p in projection.entries}
    latest = None
    for i, e in enumerate(path):
        if e.get("type") == "compaction":
            latest = i
    first_kept_pos = None
    if latest is not None:
        first_kept = path[latest].get("firstKeptEntryId")
        for i in range(latest):
            if path[i].get("id") == first_kept:
                first_kept_pos = i
                break
        if first_kept_pos is None:
            first_kept_pos = latest
    cache = TokenCache()
    rows = []
    for i, e in enumerate(path):
        msgs = projected.get(id(e))
        in_ctx = bool(msgs)
        if latest is None:
            status = "in context" if in_ctx else "not in context"
        elif i == latest:
            status = "summary"
        elif i < first_kept_pos:  # type: ignore[operator]
            own = _safe_messages(e)
            status = "summarized" if own else "not in context"
            msgs = own
        elif i < latest:
            status = "kept" if in_ctx else "not in context"
        else:
            status = "after compaction" if in_ctx else "not in context"
        rows.append({
            "position": i,
            "entry_id": e.get("id"),
            "type": e.get("type"),
            "kind": entry_kind(e),
            "status": status,
            "in_context": in_ctx,
            "messages": len(msgs or []) if in_ctx else 0,
            "tokens": _tokens(msgs or [], cache),
            "preview": entry_preview(e, preview_width),
        })
    df = frame(rows, columns=["position", "entry_id", "type", "kind", "status", "in_context", "messages",
                                     "tokens", "preview"])
    df["status"] = pd.Categorical(df["status"], categories=list(STATUSES))
    return df


def cut_points_table(session: Any, keep_values: Sequence[int], leaf_id: str | None = None,
                     *, reserve_tokens: int = 16384) -> pd.DataFrame:
    """Pi's cut point (``prepareCompaction``) at the leaf for each ``keepRecentTokens`` value.

    Columns: ``keep_recent_tokens``, ``first_kept_entry_id``, ``first_kept_index`` (position
    on the path; when nothing would be summarized, the start of the summarizable span, i.e.
    everything after the latest summary is kept), ``tokens_kept`` (estimated tokens of the
    context from the first kept entry on, the summary excluded), ``tokens_summarized`` (of the messages
    to summarize and the turn prefix), ``split_turn``, ``messages_summarized``,
    ``path_length``.
    """
    path = build_session_path(session, leaf_id)
    position = {e.get("id"): i for i, e in enumerate(path)}
    projection = build_session_projection(session, leaf_id)
    cache = TokenCache()
    # estimated tokens of the context from each context entry on (suffix sums)
    entry_tokens = [(p.source_entry.get("id"), _tokens(p.messages, cache)) for p in projection.entries]
    suffix: dict[Any, int] = {}
    running = 0
    for eid, tok in reversed(entry_tokens):
        running += tok
        suffix[eid] = running
    # where the summarizable span starts: right after the latest compaction's summary
    span_entries = [p for p in projection.entries if p.source_entry.get("type") != "compaction" and p.messages]
    span_start_id = span_entries[0].source_entry.get("id") if span_entries else None
    rows = []
    tracker = ContextTracker(path, cache=cache)  # prepare_compaction(path, settings) for each keep
    for keep in keep_values:
        prep = tracker.prepare(CompactionSettings(reserve_tokens=reserve_tokens, keep_recent_tokens=keep))
        if prep is None:
            rows.append({"keep_recent_tokens": keep, "first_kept_entry_id": span_start_id,
                         "first_kept_index": position.get(span_start_id, len(path)),
                         "tokens_kept": suffix.get(span_start_id, 0), "tokens_summarized": 0, "split_turn": False,
                         "messages_summarized": 0, "path_length": len(path)})
            continue
        fk = prep.first_kept_entry_id
        rows.append({
            "keep_recent_tokens": keep,
            "first_kept_entry_id": fk,
            "first_kept_index": position.get(fk, len(path)),
            "tokens_kept": suffix.get(fk, 0),
            "tokens_summarized": _tokens(prep.messages_to_summarize, cache) + _tokens(prep.turn_prefix_messages, cache),
            "split_turn": bool(prep.is_split_turn),
            "messages_summarized": len(prep.messages_to_summarize) + len(prep.turn_prefix_messages),
            "path_length": len(path),
        })
    return frame(rows, columns=["keep_recent_tokens", "first_kept_entry_id", "first_kept_index", "tokens_kept",
                                       "tokens_summarized", "split_turn", "messages_summarized", "path_length"])


def estimate_vs_usage_table(session: Any, leaf_id: str | None = None) -> pd.DataFrame:
    """Pi's chars/4 estimate of the context against the recorded usage, per assistant message.

    For each assistant message on the path with valid usage (Pi's ``getAssistantUsage``), the
    estimate is ``estimateTokens`` summed over the projected context up to and including that
    message (what Pi's ``calculateContextTokens(usage)`` stands for), without using any usage.
    Columns: ``position``, ``entry_id``, ``timestamp``, ``model``, ``estimated_tokens``,
    ``recorded_tokens``, ``ratio`` (recorded ÷ estimated).
    """
    path = build_session_path(session, leaf_id)
    cache = TokenCache()
    rows = []
    # The context of path[:i + 1] grows by entry i's own messages, except where an entry
    # reshapes what came before (a compaction, a context edit, or the target of an earlier
    # edit): only there is the prefix projected again. Linear in the path for most sessions.
    estimated = 0
    edit_targets: set[Any] = set()
    for i, e in enumerate(path):
        etype = e.get("type")
        if etype == "context_edit":
            try:
                edit_targets.add(e.get("targetId"))
            except TypeError:  # an unhashable target matches no entry
                pass
        reshapes = etype in ("compaction", "context_edit")
        if not reshapes and edit_targets:
            try:
                reshapes = e.get("id") in edit_targets
            except TypeError:
                pass
        if reshapes:
            estimated = _tokens(build_session_projection(path[: i + 1]).messages, cache)
        else:
            estimated += _tokens(session_entry_to_context_messages(e), cache)
        if etype != "message":
            continue
        m = e.get("message")
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        try:
            usage = get_assistant_usage(m)
        except (TypeError, ValueError):
            usage = None
        if usage is None:
            continue
        recorded = calculate_context_tokens(usage)
        rows.append({
            "position": i,
            "entry_id": e.get("id"),
            "timestamp": e.get("timestamp"),
            "model": m.get("model"),
            "estimated_tokens": estimated,
            "recorded_tokens": recorded,
            "ratio": recorded / estimated if estimated else float("nan"),
        })
    return frame(rows, columns=["position", "entry_id", "timestamp", "model", "estimated_tokens",
                                       "recorded_tokens", "ratio"])


def tree_layout(session: Any) -> pd.DataFrame:
    """A compact lane layout of the session tree, one row per entry.

    The tree is cut into chains (a chain follows one child at every fork: the child on the
    active path, else the latest); ``x`` is the depth, ``lane`` is 0 for the chain of the
    active path and the lowest lane free over a chain's depth range otherwise (interval
    partitioning), so the figure needs as many lanes as branches overlap. Columns:
    ``entry_id``, ``parent_id`` (None for roots), ``x``, ``lane``, ``kind``, ``type``,
    ``active``, ``chain``, ``label``, ``order`` (file order).
    """
    entries = list(session.entries)
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}  # Pi's index: the last wins
    order = {id(e): i for i, e in enumerate(entries)}
    children: dict[Any, list[dict]] = {}
    roots: list[dict] = []
    for e in entries:
        parent = e.get("parentId")
        if not isinstance(parent, str) or parent == e.get("id") or parent not in by_id:
            roots.append(e)
        else:
            children.setdefault(parent, []).append(e)
    active = {id(e) for e in session.get_branch()}
    labels = {target: str(label) for target, label in session.labels.items()}

    def primary_first(nodes: list[dict]) -> list[dict]:
        return sorted(nodes, key=lambda n: (id(n) not in active, -order[id(n)]))

    # chains: (start node, depth); walk iteratively so deep sessions need no recursion
    x: dict[int, int] = {}
    chain_of: dict[int, int] = {}
    chains: list[tuple[int, int, bool]] = []  # (start depth, end depth, active)
    stack: list[tuple[dict, int]] = [(r, 0) for r in reversed(primary_first(roots))]
    unplaced = iter(entries)  # entries on a parent cycle hang from no root: each cycle starts a chain
    while True:
        if not stack:
            start = next((e for e in unplaced if id(e) not in x), None)
            if start is None:
                break
            stack.append((start, 0))
        start, depth = stack.pop()
        if id(start) in x:
            continue
        cid = len(chains)
        node: dict | None = start
        d = depth
        is_active = id(start) in active
        while node is not None:
            x[id(node)] = d
            chain_of[id(node)] = cid
            eid = node.get("id")
            below = children.get(eid, []) if eid.__class__ is str else []
            kids = primary_first([k for k in below if id(k) not in x])
            for k in reversed(kids[1:]):
                stack.append((k, d + 1))
            node = kids[0] if kids else None
            d += 1
        chains.append((depth, d - 1, is_active))
    # lanes: active chain (and the first root chain) on 0, the others packed greedily, each on the
    # lowest lane free over its depth range (heaps: n log n for thousands of branches)
    lane_of_chain: dict[int, int] = {}
    main = next((c for c, ch in enumerate(chains) if ch[2]), 0 if chains else None)
    if main is not None:
        lane_of_chain[main] = 0
    busy: list[tuple[int, int]] = []  # (end depth, lane) of the lanes in use
    free: list[int] = []
    new_lane = 1
    for cid in sorted(range(len(chains)), key=lambda c: (chains[c][0], c)):
        if cid == main:
            continue
        first_depth, end, _ = chains[cid]
        lo = first_depth - 1  # the connector from the parent occupies the column before
        while busy and busy[0][0] < lo:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, new_lane = new_lane, new_lane + 1
        lane_of_chain[cid] = lane
        heapq.heappush(busy, (end, lane))
    rows = []
    for e in entries:
        key = id(e)
        parent = e.get("parentId")
        rows.append({
            "entry_id": e.get("id") if isinstance(e.get("id"), str) else None,  # others are in no tree
            "parent_id": parent if isinstance(parent, str) and parent in by_id and parent != e.get("id") else None,
            "x": x[key],
            "lane": lane_of_chain[chain_of[key]],
            "kind": entry_kind(e),
            "type": e.get("type"),
            "active": key in active,
            "chain": chain_of[key],
            "label": labels.get(e.get("id")) if isinstance(e.get("id"), str) else None,
            "order": order[key],
        })
    return frame(rows, columns=["entry_id", "parent_id", "x", "lane", "kind", "type", "active", "chain",
                                       "label", "order"])


def compaction_effects(result: Any) -> pd.DataFrame:
    """What each compaction of a replay freed, in consistent units.

    For every ``compaction`` event: ``step``, ``compaction_id``, ``reason``, ``est_before`` /
    ``est_after`` (Pi's chars/4 over the projected context just before the compaction entry and
    with it, no usage), ``freed`` (their difference), ``trigger_tokens`` (the context the
    firing check read from the replay's token source; ``est_before`` when no check fired it,
    e.g. an overflow before a call), ``summary_tokens``.
    """
    events = result.events
    cols = ["step", "compaction_id", "reason", "est_before", "est_after", "freed", "trigger_tokens", "summary_tokens"]
    if not len(events):
        return frame(columns=cols)
    session = result.session
    cache = TokenCache()
    rows = []
    last_fired: dict[int, float] = {}
    for _, ev in events.iterrows():
        if ev["kind"] == "check" and bool(ev.get("fired")):
            last_fired[int(ev["step"])] = float(ev["context_tokens"])
        if ev["kind"] != "compaction" or not ev.get("compaction_id"):
            continue
        entry = session.get_entry(ev["compaction_id"])
        if entry is None:
            continue
        before = _tokens(build_session_projection(session, entry.get("parentId")).messages, cache) \
            if entry.get("parentId") else 0
        after = _tokens(build_session_projection(session, entry["id"]).messages, cache)
        step = int(ev["step"])
        trigger = last_fired.pop(step, None)
        rows.append({
            "step": step, "compaction_id": ev["compaction_id"], "reason": ev.get("reason"),
            "est_before": before, "est_after": after, "freed": before - after,
            "trigger_tokens": trigger if trigger is not None and math.isfinite(trigger) else float(before),
            "summary_tokens": ev.get("summary_tokens"),
        })
    return frame(rows, columns=cols)

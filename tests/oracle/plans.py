"""Which oracle requests to run on a session: every op, every leaf, many settings.

All requests are in hash mode (digests of ``JSON.stringify`` text) so results stay small and
can be stored as goldens. ``sample`` plans are exhaustive (every entry as a leaf for every
op); ``real`` plans keep the cheap ops exhaustive and stride the costly summary requests.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

KEEPS = [0, 1, 2, 3, 5, 10, 25, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 10**9]
PREP_KEEPS = [0, 1, 50, 500, 2000, 5000, 20000]
REAL_PREP_KEEPS = [1, 20000]


def settings(keep: int, reserve: int = 16384) -> dict[str, Any]:
    return {"enabled": True, "reserveTokens": reserve, "keepRecentTokens": keep}


# Model / thinking / instruction / failure variants for compact() and branch summaries.
COMPACT_VARIANTS: list[dict[str, Any]] = [
    {"settings": settings(20000)},
    {"settings": settings(2000, 30000), "model": {"reasoning": True, "maxTokens": 8000}, "thinkingLevel": "high"},
    {"settings": settings(1), "model": {"reasoning": False, "maxTokens": 0}, "thinkingLevel": "medium",
     "customInstructions": "Focus on the tests ✓ and 𝔘nicode"},
    {"settings": settings(500, 100), "model": {"reasoning": True}, "thinkingLevel": "off"},
    {"settings": settings(50), "fail": {"kind": "history", "stopReason": "error", "errorMessage": "boom"}},
    {"settings": settings(50), "fail": {"kind": "turn_prefix", "stopReason": "length"}},
    {"settings": settings(50), "fail": {"kind": None, "toolCall": True}},
    {"settings": settings(50), "fail": {"kind": None, "stopReason": "error"}},
]

BRANCH_VARIANTS: list[dict[str, Any]] = [
    {"budgets": [0, 1, 50, 500, 5000], "model": {"contextWindow": 200000, "maxTokens": 32000}},
    {"budgets": [100], "model": {"contextWindow": 0, "maxTokens": 2000}, "reserveTokens": 127500,
     "customInstructions": "Only the 𝔣iles"},
    {"budgets": [10], "model": {"contextWindow": 20000}, "reserveTokens": 19000,
     "customInstructions": "Replace everything", "replaceInstructions": True},
    {"budgets": [0], "fail": {"kind": None, "stopReason": "aborted"}},
    {"budgets": [0], "fail": {"kind": None, "stopReason": "error", "errorMessage": "overloaded"}},
    {"budgets": [0], "fail": {"kind": None, "toolCall": True}},
]


# Pi 1.6.0 sends the session's thinking level with branch summaries on reasoning models.
THINKING_BRANCH_VARIANTS: list[dict[str, Any]] = [
    {"budgets": [0], "model": {"reasoning": True}, "thinkingLevel": "high"},
    {"budgets": [0], "model": {"reasoning": True}, "thinkingLevel": "off"},
    {"budgets": [0], "model": {"reasoning": False}, "thinkingLevel": "low"},
]


def _branch_pairs(info: dict[str, Any], entry_ids: list[str], stride: int) -> list[list[str]]:
    tips = info["tips"]
    pairs: list[list[str]] = []
    for a in tips:
        for b in tips:
            if a != b:
                pairs.append([a, b])
    for a in tips:
        for target in entry_ids[::stride]:
            pairs.append([a, target])
    return pairs


def requests_for(
    path: Path | str, info: dict[str, Any], entry_ids: list[str], kind: str, release: str | None = None
) -> list[dict[str, Any]]:
    """All requests for one session. ``info`` is the oracle's/pimem's ``info`` result; ``release``
    adds the cases only another Pi release distinguishes."""
    p = str(path)
    n = len(entry_ids)
    if kind == "sample":
        summary_leaves: Any = "all" if n <= 400 else sorted(set(entry_ids[:: max(1, n // 150)]) | set(info["tips"]))
        reqs: list[dict[str, Any]] = [
            {"op": "entry_messages", "path": p, "hash": True},
            {"op": "project", "path": p, "leaves": "all", "hash": True},
            {"op": "estimate", "path": p, "leaves": "all"},
            {"op": "cut_points", "path": p, "leaves": "all", "keeps": KEEPS, "turnStarts": True},
            {"op": "prepare", "path": p, "leaves": "all", "hash": True, "serialize": True,
             "settings": [settings(k) for k in PREP_KEEPS]},
        ]
        compact_leaves = summary_leaves
        branch_stride = max(1, n // 40)
    else:
        reqs = [
            {"op": "entry_messages", "path": p, "hash": True},
            {"op": "project", "path": p, "leaves": "all", "hash": True},
            {"op": "estimate", "path": p, "leaves": "all"},
            {"op": "cut_points", "path": p, "leaves": "all", "keeps": [0, 1, 1000, 20000, 50000], "turnStarts": False},
            {"op": "prepare", "path": p, "leaves": "all", "hash": True, "serialize": True,
             "settings": [settings(k) for k in REAL_PREP_KEEPS]},
        ]
        compact_leaves = sorted(set(entry_ids[::50]) | set(info["tips"]))
        branch_stride = max(1, n // 12)
    for v in COMPACT_VARIANTS:
        reqs.append({"op": "compact", "path": p, "leaves": compact_leaves, "hash": True, **v})
    pairs = _branch_pairs(info, entry_ids, branch_stride)
    for v in BRANCH_VARIANTS:
        reqs.append({"op": "branch", "path": p, "pairs": pairs, "hash": True, **v})
    if release == "1.6.0":
        for v in THINKING_BRANCH_VARIANTS:
            reqs.append({"op": "branch", "path": p, "pairs": pairs, "hash": True, **v})
    return reqs


def request_key(req: dict[str, Any]) -> str:
    """A stable key for a request: session file name + everything but the path."""
    rest = {k: v for k, v in req.items() if k != "path"}
    body = json.dumps(rest, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return f"{Path(req['path']).name}|{req['op']}|{hashlib.sha256(body.encode()).hexdigest()[:16]}"


def canonical_digest(value: Any) -> str:
    """Order-independent digest of a JSON result (keys sorted)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def file_digest(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def first_difference(a: Any, b: Any, where: str = "$") -> str | None:
    """Where two JSON values first differ (for readable failures)."""
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return f"{where}: {a!r:.300} != {b!r:.300}"
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{where}.{k}: present only on one side ({'pimem' if k in a else 'pi'})"
            d = first_difference(a[k], b[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{where}: length {len(a)} != {len(b)}"
        return None
    return None if a == b else f"{where}: {a!r:.300} != {b!r:.300}"

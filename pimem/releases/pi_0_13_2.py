"""Pi 0.13.2's compaction (``dist/compaction.js``, ``dist/session-manager.js``) as pure functions.

The release that wrote the compactions of the real ``before-compaction`` session: its
``find_cut_point`` and ``get_last_assistant_usage`` reproduce both recorded compactions
(``firstKeptEntryIndex`` 293 and 551, ``tokensBefore`` 175004 and 185014 with the default
``keepRecentTokens`` 20000). What differs from Pi 0.87.1:

- sessions are v1 files: a header, then entries without ids; a compaction entry names the first
  kept entry by its index in the file (header included) and carries no file lists;
- sizes are recorded usage only (``calculateContextTokens`` of the last assistant message that was
  not aborted), no estimates; compaction runs after an assistant message whose usage exceeds
  ``contextWindow − reserveTokens``;
- the cut is always at a turn boundary (a user message): walking the assistant usages from the
  newest, at the first one at least ``keepRecentTokens`` below the newest, the kept part starts at
  the last user message at or before the assistant after it; no split turns;
- the summary request is the conversation itself (the raw messages after the previous compaction
  entry up to the cut, after a ``Previous session summary:`` user message) followed by the old
  "CONTEXT CHECKPOINT COMPACTION" instructions; no system prompt, ``maxTokens`` = 0.8 × reserve;
- the context after a compaction is one user message wrapping the summary in ``<summary>`` tags,
  then the kept messages.

Entries here are what 0.13.2's ``loadEntries`` gives: the parsed lines of a file, header first
(:func:`load_entries`); :func:`entries_from_path` turns a pimem branch into that shape.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, Sequence

from pimem.base.js import UNDEFINED, iso_now, js_string, js_truthy, loads_line
from pimem.core.compaction.compaction import CompactionSettings, calculate_context_tokens
from pimem.core.llm import Summarizer, SummaryRequest, SummaryResponse
from pimem.errors import SummarizationError

PI_VERSION = "0.13.2"

__all__ = [
    "PI_VERSION",
    "DEFAULT_COMPACTION_SETTINGS",
    "SUMMARIZATION_PROMPT",
    "SUMMARY_PREFIX",
    "SUMMARY_SUFFIX",
    "MessagesSummaryRequest",
    "load_entries",
    "entries_from_path",
    "calculate_context_tokens",
    "get_assistant_usage",
    "get_last_assistant_usage",
    "should_compact",
    "find_turn_boundaries",
    "find_cut_point",
    "Preparation",
    "prepare_compaction",
    "summarization_messages",
    "summary_request",
    "compact",
    "create_summary_message",
    "load_session_from_entries",
]


@lru_cache(maxsize=None)
def _prompt(name: str) -> str:
    return resources.files("pimem.releases").joinpath("prompts", name).read_bytes().decode("utf-8")


SUMMARIZATION_PROMPT = _prompt("pi_0_13_2_summarization.md")
SUMMARY_PREFIX = _prompt("pi_0_13_2_summary_prefix.md")
SUMMARY_SUFFIX = _prompt("pi_0_13_2_summary_suffix.md")
DEFAULT_COMPACTION_SETTINGS = CompactionSettings(enabled=True, reserve_tokens=16384, keep_recent_tokens=20000)


@dataclass(frozen=True)
class MessagesSummaryRequest(SummaryRequest):
    """A summary request made of a conversation: ``messages`` (Pi's message JSON) are all that is
    sent, ending with the user message whose text is ``prompt`` (the instructions);
    ``system_prompt`` is empty (Pi 0.13.2 sent none)."""

    messages: tuple = ()


# ------------------------------------------------------------------------------------------
# Entries
# ------------------------------------------------------------------------------------------


def load_entries(path: str | os.PathLike[str]) -> list[dict]:
    """``parseSessionEntries(readFileSync(path))``: every line that parses, malformed ones skipped."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    entries = []
    for line in text.strip().split("\n"):
        if not line.strip():
            continue
        try:
            entries.append(loads_line(line))
        except ValueError:
            continue
    return entries


def entries_from_path(header: dict, path: Sequence[dict]) -> tuple[list[dict], dict[Any, int]]:
    """A pimem branch (root first) as Pi 0.13.2's entry list: ``[header, *path]``, plus each entry
    id's index in it; ``firstKeptEntryId`` of compactions becomes ``firstKeptEntryIndex``."""
    index = {e.get("id"): i + 1 for i, e in enumerate(path)}
    entries: list[dict] = [header]
    for e in path:
        if e.get("type") == "compaction" and "firstKeptEntryIndex" not in e:
            e = {**e, "firstKeptEntryIndex": index.get(e.get("firstKeptEntryId"), UNDEFINED)}
        entries.append(e)
    return entries, index


# ------------------------------------------------------------------------------------------
# Tokens and cut points
# ------------------------------------------------------------------------------------------


def _is_message(entry: Any, role: str | None = None) -> bool:
    if not isinstance(entry, dict) or entry.get("type") != "message":
        return False
    return role is None or (isinstance(entry.get("message"), dict) and entry["message"].get("role") == role)


def get_assistant_usage(message: Any) -> dict | None:
    """``getAssistantUsage``: the usage of an assistant message that was not aborted."""
    if isinstance(message, dict) and message.get("role") == "assistant" and "usage" in message:
        if message.get("stopReason") != "aborted" and js_truthy(message.get("usage")):
            return message["usage"]
    return None


def get_last_assistant_usage(entries: Sequence[dict]) -> dict | None:
    """``getLastAssistantUsage``: the usage of the newest such message in ``entries``."""
    for entry in reversed(entries):
        if _is_message(entry):
            usage = get_assistant_usage(entry.get("message"))
            if usage is not None:
                return usage
    return None


def should_compact(context_tokens: float, context_window: float, settings: CompactionSettings) -> bool:
    """``shouldCompact``: ``contextTokens > contextWindow − reserveTokens`` when enabled."""
    if not settings.enabled:
        return False
    return context_tokens > context_window - settings.reserve_tokens


def find_turn_boundaries(entries: Sequence[dict], start_index: int, end_index: int) -> list[int]:
    """``findTurnBoundaries``: indices of user message entries in ``[start, end)``."""
    return [i for i in range(start_index, end_index) if _is_message(entries[i], "user")]


def find_cut_point(entries: Sequence[dict], start_index: int, end_index: int, keep_recent_tokens: float,
                   sizes: Mapping[int, float] | None = None) -> int:
    """``findCutPoint``: the index of the first kept entry (a user message, or ``start_index``).

    ``sizes`` (not Pi's) replaces the recorded usage: the context size at each assistant message
    entry by index (entries it lacks count as messages without usage)."""
    boundaries = find_turn_boundaries(entries, start_index, end_index)
    if not boundaries:
        return start_index
    usages: list[tuple[int, Any]] = []
    for i in range(end_index - 1, start_index - 1, -1):
        if sizes is not None:
            if i in sizes:
                usages.append((i, sizes[i]))
        elif _is_message(entries[i]):
            usage = get_assistant_usage(entries[i].get("message"))
            if usage is not None:
                usages.append((i, calculate_context_tokens(usage)))
    if not usages:
        return boundaries[-1]
    newest = usages[0][1]
    for k in range(1, len(usages)):
        if newest - usages[k][1] >= keep_recent_tokens:
            last_kept = usages[k - 1][0]
            for b in reversed(boundaries):
                if b <= last_kept:
                    return b
            return start_index
    return start_index


# ------------------------------------------------------------------------------------------
# Compaction
# ------------------------------------------------------------------------------------------


@dataclass
class Preparation:
    """What ``compact`` computes before its summary request."""

    previous_compaction_index: int
    first_kept_entry_index: int
    tokens_before: Any
    messages_to_summarize: list[dict]
    previous_summary: Any
    settings: CompactionSettings


def prepare_compaction(entries: Sequence[dict], settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
                       sizes: Mapping[int, float] | None = None) -> Preparation:
    """``compact`` up to its summary request; raises SummarizationError("Already compacted").

    ``sizes``: see :func:`find_cut_point` (``tokensBefore`` stays the recorded usage)."""
    if entries and isinstance(entries[-1], dict) and entries[-1].get("type") == "compaction":
        raise SummarizationError("Already compacted")
    prev = -1
    for i in range(len(entries) - 1, -1, -1):
        if isinstance(entries[i], dict) and entries[i].get("type") == "compaction":
            prev = i
            break
    start = prev + 1
    usage = get_last_assistant_usage(entries)
    tokens_before = calculate_context_tokens(usage) if usage is not None else 0
    cut = find_cut_point(entries, start, len(entries), settings.keep_recent_tokens, sizes)
    messages: list[Any] = [entries[i].get("message") for i in range(start, cut) if _is_message(entries[i])]
    previous = entries[prev].get("summary", UNDEFINED) if prev >= 0 else None
    return Preparation(prev, cut, tokens_before, messages, previous, settings)


def summarization_messages(prep: Preparation, custom_instructions: str | None = None, timestamp: float = 0) -> list[dict]:
    """The messages ``generateSummary`` sends: previous summary, conversation, instructions.

    ``timestamp`` stands for ``Date.now()`` in the two messages Pi makes up."""
    messages = list(prep.messages_to_summarize)
    if prep.previous_compaction_index >= 0:
        summary = js_string(prep.previous_summary)  # a template literal: null → "null", undefined → "undefined"
        messages.insert(0, {"role": "user", "content": f"Previous session summary:\n{summary}", "timestamp": timestamp})
    prompt = SUMMARIZATION_PROMPT
    if js_truthy(custom_instructions):
        prompt = f"{SUMMARIZATION_PROMPT}\n\nAdditional focus: {custom_instructions}"
    messages.append({"role": "user", "content": prompt, "timestamp": timestamp})
    return messages


def summary_request(prep: Preparation, custom_instructions: str | None = None, *, model: str = "",
                    timestamp: float = 0) -> MessagesSummaryRequest:
    """The request for a summarizer: the conversation as ``messages``, the instructions as ``prompt``,
    ``max_tokens`` = ``Math.floor(0.8 * reserveTokens)``."""
    messages = summarization_messages(prep, custom_instructions, timestamp)
    return MessagesSummaryRequest(
        kind="history",
        system_prompt="",
        prompt=messages[-1]["content"],
        max_tokens=math.floor(0.8 * prep.settings.reserve_tokens),
        model=model,
        messages=tuple(messages),
    )


def compact(
    entries: Sequence[dict],
    summarizer: Summarizer,
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
    custom_instructions: str | None = None,
    *,
    model: str = "",
    timestamp: str | None = None,
) -> dict:
    """``compact``: the CompactionEntry Pi 0.13.2 appends (``summary``, ``firstKeptEntryIndex``,
    ``tokensBefore``). The summary is the text blocks of the answer joined by newlines; Pi 0.13.2
    did not look at the stop reason."""
    prep = prepare_compaction(entries, settings)
    response: SummaryResponse = summarizer.complete(summary_request(prep, custom_instructions, model=model))
    return {
        "type": "compaction",
        "timestamp": timestamp or iso_now(),
        "summary": response.text,
        "firstKeptEntryIndex": prep.first_kept_entry_index,
        "tokensBefore": prep.tokens_before,
    }


# ------------------------------------------------------------------------------------------
# Context
# ------------------------------------------------------------------------------------------


def create_summary_message(summary: Any, timestamp: float = 0) -> dict:
    """``createSummaryMessage``: the user message standing for the compacted history."""
    text = summary if summary.__class__ is str else js_string(summary)  # JS +: null → "null", 5 → "5"
    return {"role": "user", "content": SUMMARY_PREFIX + text + SUMMARY_SUFFIX, "timestamp": timestamp}


def load_session_from_entries(entries: Sequence[dict], timestamp: float = 0) -> dict:
    """``loadSessionFromEntries``: the model's messages, thinking level and model.

    After a compaction: the summary message, then the messages from ``firstKeptEntryIndex`` on."""
    thinking: Any = "off"
    model: Any = None
    for e in entries:
        etype = e.get("type") if isinstance(e, dict) else None
        if etype == "session":
            thinking = e.get("thinkingLevel", UNDEFINED)
            model = {"provider": e.get("provider", UNDEFINED), "modelId": e.get("modelId", UNDEFINED)}
        elif etype == "thinking_level_change":
            thinking = e.get("thinkingLevel", UNDEFINED)
        elif etype == "model_change":
            model = {"provider": e.get("provider", UNDEFINED), "modelId": e.get("modelId", UNDEFINED)}
    latest = -1
    for i in range(len(entries) - 1, -1, -1):
        if isinstance(entries[i], dict) and entries[i].get("type") == "compaction":
            latest = i
            break
    if latest < 0:
        messages = [e["message"] for e in entries if _is_message(e)]
    else:
        first = entries[latest].get("firstKeptEntryIndex", UNDEFINED)
        start = int(first) if isinstance(first, (int, float)) and not isinstance(first, bool) else len(entries)
        kept = [entries[i]["message"] for i in range(max(start, 0), len(entries)) if _is_message(entries[i])]
        messages = [create_summary_message(entries[latest].get("summary", UNDEFINED), timestamp), *kept]
    return {"messages": messages, "thinkingLevel": thinking, "model": model}

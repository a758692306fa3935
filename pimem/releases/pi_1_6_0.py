"""Pi 1.6.0's compaction and branch summaries, as pure functions beside Pi 0.87.1's (``pimem.core``).

Pi 1.6.0 keeps 0.87.1's projection, token estimates, cut rules (``find_cut_point``, split turns),
``prepare_compaction``'s cut and every prompt text. What changed (each checked against the real
1.6.0 release in Node by ``tests/test_differential_versions.py``):

- the conversation text sent to the summarizer omits thinking, and a tool result cut at 2000 UTF-16
  units never splits a surrogate pair (``sliceHead``);
- file operations also come from the calls a tool made itself (``toolResult.nestedCalls``, e.g. from
  codemode scripts);
- summary requests carry no ``maxTokens`` (the model's own output limit), the turn-prefix request gets
  the custom instructions too, and branch summaries use the session's thinking level on reasoning models;
- branch summaries honour ``context_edit`` entries (the latest edit per target hides or replaces an
  entry's message).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pimem.base.js import UNDEFINED, js_slice, js_string, js_truthy, utf16_len
from pimem.core.compaction import branch_summarization as _branch
from pimem.core.compaction import compaction as _compaction
from pimem.core.compaction.branch_summarization import BranchPreparation, BranchSummaryResult
from pimem.core.compaction.compaction import (
    DEFAULT_COMPACTION_SETTINGS,
    CompactionPreparation,
    CompactionResult,
    CompactionSettings,
    PI_PROMPTS,
    ModelInfo,
    PromptTemplates,
    estimate_tokens,
    find_cut_point,
    find_turn_start_index,
    get_summarization_failure,
    should_compact,
    summarization_reasoning,
)
from pimem.core.compaction.utils import (
    TOOL_RESULT_MAX_CHARS,
    FileOperations,
    compute_file_lists,
    extract_file_ops_from_message,
    format_file_operations,
    set_member,
)
from pimem.core.compaction.utils import serialize_message as _serialize_message_0_87_1
from pimem.core.llm import Summarizer, SummaryRequest
from pimem.core.messages import convert_to_llm
from pimem.core.pi_ai import content_text
from pimem.core.prompts import BRANCH_SUMMARY_PREAMBLE, BRANCH_SUMMARY_PROMPT, SUMMARIZATION_SYSTEM_PROMPT
from pimem.core.session_manager import edit_target, project_context_entry
from pimem.errors import JavaScriptTypeError

PI_VERSION = "1.6.0"

__all__ = [
    "PI_VERSION",
    "DEFAULT_COMPACTION_SETTINGS",
    "CompactionSettings",
    "ModelInfo",
    "estimate_tokens",
    "find_cut_point",
    "find_turn_start_index",
    "should_compact",
    "slice_head",
    "truncate_for_summary",
    "serialize_message",
    "serialize_conversation",
    "add_nested_file_ops",
    "prepare_compaction",
    "combine_usage",
    "build_history_prompt",
    "build_turn_prefix_prompt",
    "compact",
    "collect_entries_for_branch_summary",
    "prepare_branch_entries",
    "build_branch_prompt",
    "generate_branch_summary",
]

collect_entries_for_branch_summary = _branch.collect_entries_for_branch_summary


# ---------------------------------------------------------------------------
# utils.js
# ---------------------------------------------------------------------------


def slice_head(text: str, max_units: int) -> str:
    """``sliceHead``: at most the first ``max_units`` UTF-16 units, never half a surrogate pair."""
    end = max(0, max_units)
    if not text.isascii():
        units = text.encode("utf-16-le", "surrogatepass")
        if 2 * end + 2 <= len(units) and end >= 1:
            before = int.from_bytes(units[2 * end - 2 : 2 * end], "little")
            after = int.from_bytes(units[2 * end : 2 * end + 2], "little")
            if 0xD800 <= before <= 0xDBFF and 0xDC00 <= after <= 0xDFFF:
                end -= 1
    return js_slice(text, 0, end)


def truncate_for_summary(text: str, max_chars: int) -> str:
    """``truncateForSummary``: the head (whole characters) and a marker with the units left out."""
    length = utf16_len(text)
    if length <= max_chars:
        return text
    return f"{slice_head(text, max_chars)}\n\n[... {length - max_chars} more characters truncated]"


def serialize_message(message: Mapping[str, Any]) -> str:
    """The text :func:`serialize_conversation` makes of one LLM message ("" for none)."""
    role = message.get("role")
    if role == "toolResult":
        content = content_text(message.get("content"), "")
        if content:
            return "[Tool result]: " + truncate_for_summary(content, TOOL_RESULT_MAX_CHARS)
        return ""
    if role == "assistant":
        blocks = message.get("content")
        if isinstance(blocks, list):
            # 0.87.1's text without its "[Assistant thinking]" part: drop thinking blocks first.
            kept = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "thinking")]
            return _serialize_message_0_87_1({**message, "content": kept})
    return _serialize_message_0_87_1(message)


def serialize_conversation(messages: Sequence[Mapping[str, Any]]) -> str:
    """``serializeConversation``: ``[User]: …`` / ``[Assistant]: …`` text, without thinking."""
    return "\n\n".join([t for t in map(serialize_message, messages) if t])


def _add_file_op(name: Any, args: Any, file_ops: FileOperations) -> None:
    """``addFileOp``: a read / write / edit call with a string ``path``."""
    path = args.get("path") if isinstance(args, dict) else None
    if not isinstance(path, str) or not path:
        return
    if name == "read":
        file_ops.read.add(path)
    elif name == "write":
        file_ops.written.add(path)
    elif name == "edit":
        file_ops.edited.add(path)


def add_nested_file_ops(messages: Sequence[dict], file_ops: FileOperations) -> None:
    """The 1.6.0 part of ``extractFileOpsFromMessage``: calls recorded on tool results.

    ``message.nestedCalls?.calls ?? []`` is iterated as JavaScript would: a string yields its
    characters (no call), a non-iterable value or a null call throws a TypeError.
    """
    for message in messages:
        if message.get("role") != "toolResult":
            continue
        nested = message.get("nestedCalls")
        calls = nested.get("calls") if isinstance(nested, dict) else None
        if calls is None or isinstance(calls, str):
            continue
        if not isinstance(calls, list):  # V8's words: "number 5 is not iterable (...)", "object is not ..."
            what = "object" if isinstance(calls, dict) else (
                f"boolean {js_string(calls)}" if isinstance(calls, bool) else f"number {js_string(calls)}")
            raise JavaScriptTypeError(f"{what} is not iterable (cannot read property Symbol(Symbol.iterator))")
        for call in calls:
            if call is None:
                raise JavaScriptTypeError("Cannot read properties of null (reading 'name')")
            if isinstance(call, dict):
                _add_file_op(call.get("name", UNDEFINED), call.get("arguments"), file_ops)


# ---------------------------------------------------------------------------
# compaction.js
# ---------------------------------------------------------------------------


def combine_usage(first: dict | None, second: dict | None) -> dict | None:
    """``combineUsage`` (now in usage-totals.js): 0.87.1's sum plus ``cost.totalFromProvider``,
    true only when both parts were billed costs reported by the provider."""
    out = _compaction.combine_usage(first, second)
    if first is not None and second is not None and out is not None:
        fc, sc = first.get("cost") or {}, second.get("cost") or {}
        out["cost"]["totalFromProvider"] = fc.get("totalFromProvider") is True and sc.get("totalFromProvider") is True
    return out



def prepare_compaction(
    path_entries: Sequence[dict],
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS,
) -> CompactionPreparation | None:
    """``prepareCompaction``: 0.87.1's cut and messages, file operations with nested calls."""
    prep = _compaction.prepare_compaction(path_entries, settings)
    if prep is not None:
        add_nested_file_ops(prep.messages_to_summarize, prep.file_ops)
        if prep.is_split_turn:
            add_nested_file_ops(prep.turn_prefix_messages, prep.file_ops)
    return prep


def build_history_prompt(
    messages: Sequence[dict], custom_instructions: str | None = None, previous_summary: str | None = None,
    prompts: PromptTemplates = PI_PROMPTS,
) -> str:
    """The user-message text of a history summary request (``generateSummaryWithUsage``).

    ``prompts``: the instruction texts; Pi 1.6.0's are Pi 0.87.1's (:data:`PI_PROMPTS`)."""
    base = prompts.update if js_truthy(previous_summary) else prompts.initial
    if js_truthy(custom_instructions):
        base = f"{base}\n\nAdditional focus: {custom_instructions}"
    prompt = f"<conversation>\n{serialize_conversation(convert_to_llm(messages))}\n</conversation>\n\n"
    if js_truthy(previous_summary):
        prompt += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    return prompt + base


def build_turn_prefix_prompt(
    messages: Sequence[dict], custom_instructions: str | None = None, prompts: PromptTemplates = PI_PROMPTS
) -> str:
    """The user-message text of a turn-prefix request, with the custom instructions (new in 1.6.0)."""
    conversation = serialize_conversation(convert_to_llm(messages))
    prompt = f"# Conversation\n{conversation}\n\n# Instructions\n{prompts.turn_prefix}"
    if js_truthy(custom_instructions):
        prompt = f"{prompt}\n\nAdditional focus: {custom_instructions}"
    return prompt


def _request(kind: str, prompt: str, reasoning: str | None, model: ModelInfo, session_id: str | None,
             system_prompt: str = SUMMARIZATION_SYSTEM_PROMPT) -> SummaryRequest:
    """0.87.1's summary request without ``maxTokens`` (1.6.0 no longer sets it)."""
    return _compaction.summary_request(kind, prompt, None, reasoning, model, session_id, system_prompt)


def compact(
    preparation: CompactionPreparation,
    summarizer: Summarizer,
    *,
    model: ModelInfo,
    custom_instructions: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    prompts: PromptTemplates = PI_PROMPTS,
) -> CompactionResult:
    """``compact``: summarize a preparation (two requests for a split turn) and add file lists."""
    p = preparation
    reasoning = summarization_reasoning(model, thinking_level)

    def history() -> tuple[str, dict | None]:
        prompt = build_history_prompt(p.messages_to_summarize, custom_instructions, p.previous_summary, prompts)
        request = _request("history", prompt, reasoning, model, session_id, prompts.system)
        return _compaction.complete_checked(summarizer, request, "Summarization")

    if p.is_split_turn and p.turn_prefix_messages:
        history_text = p.previous_summary if p.previous_summary is not None else "No prior history."
        history_usage = None
        if p.messages_to_summarize:
            history_text, history_usage = history()
        prefix_prompt = build_turn_prefix_prompt(p.turn_prefix_messages, custom_instructions, prompts)
        prefix_text, prefix_usage = _compaction.complete_checked(
            summarizer, _request("turn_prefix", prefix_prompt, reasoning, model, session_id, prompts.system),
            "Turn prefix summarization",
        )
        summary = f"{history_text}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix_text}"
        usage = combine_usage(history_usage, prefix_usage) if history_usage else prefix_usage
    else:
        summary, usage = history()
    read_files, modified_files = compute_file_lists(p.file_ops)
    summary += format_file_operations(read_files, modified_files)
    if not js_truthy(p.first_kept_entry_id):
        raise _compaction.SummarizationError("First kept entry has no UUID - session may need migration")
    return CompactionResult(
        summary=summary,
        first_kept_entry_id=p.first_kept_entry_id,
        tokens_before=p.tokens_before,
        usage=usage,
        details={"readFiles": read_files, "modifiedFiles": modified_files},
    )


# ---------------------------------------------------------------------------
# branch-summarization.js
# ---------------------------------------------------------------------------


def _message_from_entry(entry: dict, edit: dict | None) -> dict | None:
    """``getMessageFromEntry(entry, edit)``: tool results skipped, then the entry's latest edit applied."""
    if edit is not None and entry.get("type") in ("message", "custom_message"):
        if entry.get("type") == "message" and entry["message"].get("role") == "toolResult":
            return None
        messages = project_context_entry(entry, edit)
        return messages[0] if messages else None
    return _branch.get_message_from_entry(entry)


def prepare_branch_entries(entries: Sequence[dict], token_budget: float = 0) -> BranchPreparation:
    """``prepareBranchEntries``: 0.87.1's walk with ``context_edit`` entries applied to their targets."""
    edits: dict[Any, dict] = {}
    for entry in entries:
        if entry.get("type") == "context_edit":
            edits[edit_target(entry)] = entry
    if not edits:
        return _branch.prepare_branch_entries(entries, token_budget)
    file_ops = FileOperations()
    for entry in entries:
        if entry.get("type") == "branch_summary" and not js_truthy(entry.get("fromHook")):
            details = entry.get("details")
            if js_truthy(details) and isinstance(details, dict):
                if isinstance(details.get("readFiles"), list):
                    file_ops.read.update(set_member(f) for f in details["readFiles"])
                if isinstance(details.get("modifiedFiles"), list):
                    file_ops.edited.update(set_member(f) for f in details["modifiedFiles"])
    reversed_messages: list[dict] = []
    total = 0
    for entry in reversed(entries):
        message = _message_from_entry(entry, edits.get(entry.get("id", UNDEFINED)))
        if message is None:
            continue
        extract_file_ops_from_message(message, file_ops)
        tokens = estimate_tokens(message)
        if token_budget > 0 and total + tokens > token_budget:
            if entry.get("type") in ("compaction", "branch_summary") and total < token_budget * 0.9:
                reversed_messages.append(message)
                total += tokens
            break
        reversed_messages.append(message)
        total += tokens
    reversed_messages.reverse()
    return BranchPreparation(reversed_messages, file_ops, total)


def build_branch_prompt(
    messages: Sequence[dict], custom_instructions: str | None = None, replace_instructions: bool = False
) -> str:
    """The user-message text of a branch summary request."""
    conversation = serialize_conversation(convert_to_llm(messages))
    if js_truthy(replace_instructions) and js_truthy(custom_instructions):
        instructions = custom_instructions
    elif js_truthy(custom_instructions):
        instructions = f"{BRANCH_SUMMARY_PROMPT}\n\nAdditional focus: {custom_instructions}"
    else:
        instructions = BRANCH_SUMMARY_PROMPT
    return f"<conversation>\n{conversation}\n</conversation>\n\n{instructions}"


def generate_branch_summary(
    entries: Sequence[dict],
    summarizer: Summarizer,
    *,
    model: ModelInfo,
    reserve_tokens: float = 16384,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    thinking_level: str | None = None,
    session_id: str | None = None,
) -> BranchSummaryResult:
    """``generateBranchSummary``: errors and aborts are returned, not raised, as in Pi."""
    context_window = model.context_window if js_truthy(model.context_window) else 128000
    prep = prepare_branch_entries(entries, context_window - reserve_tokens)
    if not prep.messages:
        return BranchSummaryResult(summary="No content to summarize")
    request = _request(
        "branch",
        build_branch_prompt(prep.messages, custom_instructions, replace_instructions),
        summarization_reasoning(model, thinking_level),
        model,
        session_id,
    )
    response = summarizer.complete(request)
    if response.stop_reason == "aborted":
        return BranchSummaryResult(aborted=True)
    failure = get_summarization_failure(response, "Branch summarization")
    if failure:
        return BranchSummaryResult(error=failure)
    if response.called_tool:
        return BranchSummaryResult(error="Branch summarization attempted to call a tool")
    summary = BRANCH_SUMMARY_PREAMBLE + response.text
    read_files, modified_files = compute_file_lists(prep.file_ops)
    summary += format_file_operations(read_files, modified_files)
    return BranchSummaryResult(
        summary=summary or "No summary generated",
        usage=response.usage,
        read_files=read_files,
        modified_files=modified_files,
    )

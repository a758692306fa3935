"""Pi 0.87.1's ``core/compaction/branch-summarization.js``: branch summaries for ``/tree`` navigation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from pimem.base.js import UNDEFINED, js_truthy
from pimem.core.compaction.compaction import (
    ModelInfo,
    estimate_tokens,
    get_summarization_failure,
    uuid7,
)
from pimem.core.compaction.utils import (
    FileOperations,
    compute_file_lists,
    extract_file_ops_from_message,
    format_file_operations,
    serialize_conversation,
    set_member,
)
from pimem.core.llm import Summarizer, SummaryRequest
from pimem.core.messages import (
    convert_to_llm,
    create_branch_summary_message,
    create_compaction_summary_message,
    create_custom_message,
)
from pimem.core.porting import port
from pimem.core.session_manager import walk_to_root
from pimem.core.prompts import (
    BRANCH_SUMMARY_PREAMBLE,
    BRANCH_SUMMARY_PROMPT,
    SUMMARIZATION_SYSTEM_PROMPT,
)

__all__ = [
    "BranchPreparation",
    "BranchSummaryResult",
    "collect_entries_for_branch_summary",
    "prepare_branch_entries",
    "get_message_from_entry",
    "build_branch_prompt",
    "branch_summary_max_tokens",
    "generate_branch_summary",
]


@dataclass
class BranchPreparation:
    """What :func:`prepare_branch_entries` returns.

    Args:
        messages: the messages within the budget, oldest first.
        file_ops: the files read and changed in all the entries (not only those within the budget).
        total_tokens: the estimated tokens of ``messages``.
    """

    messages: list[dict]
    file_ops: FileOperations
    total_tokens: int


@dataclass
class BranchSummaryResult:
    """What :func:`generate_branch_summary` returns: a summary, or an error, or aborted.

    Args:
        summary: the summary text (preamble and file lists included), or None.
        usage: the request's usage, if reported.
        read_files: the files read and not changed.
        modified_files: the files written or edited.
        error: why the summary failed, or None.
        aborted: whether the request was aborted.
        details: ``{"readFiles": ..., "modifiedFiles": ...}`` (built from the file lists when not given).
    """

    summary: str | None = None
    usage: dict | None = None
    read_files: list | None = None
    modified_files: list | None = None
    error: str | None = None
    aborted: bool = False
    details: dict | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.details is None and (self.read_files is not None or self.modified_files is not None):
            self.details = {"readFiles": self.read_files or [], "modifiedFiles": self.modified_files or []}


@port("compaction/branch-summarization.js", "collectEntriesForBranchSummary")
def collect_entries_for_branch_summary(session: Any, old_leaf_id: str | None, target_id: str) -> tuple[list[dict], str | None]:
    """``collectEntriesForBranchSummary``: entries from the old leaf back to the common ancestor.

    Args:
        session: the session.
        old_leaf_id: the leaf being left (None: none).
        target_id: the entry being navigated to.
    """
    if not js_truthy(old_leaf_id):
        return [], None
    old_path = {e.get("id") for e in session.get_branch(old_leaf_id)}
    target_path = session.get_branch(target_id)
    common: str | None = None
    for e in reversed(target_path):
        if e.get("id") in old_path:
            common = e.get("id")
            break
    # from the old leaf up to the common ancestor (the session's walk; a parentId cycle, where Pi would loop
    # forever, ends it)
    entries: list[dict] = []
    leaf = session.get_entry(old_leaf_id) if old_leaf_id != common else None
    if leaf is not None:
        limit = len(getattr(session, "entries", ()))  # a bound of the walk only (beyond it, cycles are looked for)
        entries = walk_to_root(leaf, session.get_entry, limit, lambda e: e is not leaf and e.get("id") == common)
        if entries[-1] is not leaf and entries[-1].get("id") == common:
            entries.pop()  # the common ancestor itself stays
    entries.reverse()
    return entries, common


@port("compaction/branch-summarization.js", "getMessageFromEntry")
def get_message_from_entry(entry: dict) -> dict | None:
    """``getMessageFromEntry``: the message a branch entry contributes to a branch summary, if any."""
    etype = entry.get("type")
    if etype == "message":
        message = entry["message"]
        if message.get("role") == "toolResult":
            return None
        return message
    if etype == "custom_message":
        return create_custom_message(
            entry.get("customType", UNDEFINED), entry.get("content", UNDEFINED), entry.get("display", UNDEFINED),
            entry.get("details", UNDEFINED), entry.get("timestamp", UNDEFINED),
        )
    if etype == "branch_summary":
        return create_branch_summary_message(
            entry.get("summary", UNDEFINED), entry.get("fromId", UNDEFINED), entry.get("timestamp", UNDEFINED)
        )
    if etype == "compaction":
        return create_compaction_summary_message(
            entry.get("summary", UNDEFINED), entry.get("tokensBefore", UNDEFINED), entry.get("timestamp", UNDEFINED)
        )
    return None


@port("compaction/branch-summarization.js", "prepareBranchEntries")
def prepare_branch_entries(entries: Sequence[dict], token_budget: float = 0) -> BranchPreparation:
    """``prepareBranchEntries``: newest-first messages within the budget, file ops from all.

    Args:
        entries: the abandoned branch's entries, oldest first.
        token_budget: the tokens the messages may take (0: no limit).
    """
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
        message = get_message_from_entry(entry)
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


@port("compaction/branch-summarization.js", "generateBranchSummary", part=True)
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


@port("compaction/branch-summarization.js", "generateBranchSummary", part=True)
def branch_summary_max_tokens(model: ModelInfo) -> int:
    """``Math.min(4096, model.maxTokens > 0 ? model.maxTokens : Infinity)``."""
    if model.max_tokens is not None and model.max_tokens > 0:
        return int(min(4096, model.max_tokens))
    return 4096


@port("compaction/branch-summarization.js", "generateBranchSummary")
def generate_branch_summary(
    entries: Sequence[dict],
    summarizer: Summarizer,
    *,
    model: ModelInfo,
    reserve_tokens: float = 16384,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    session_id: str | None = None,
) -> BranchSummaryResult:
    """``generateBranchSummary``: errors and aborts are returned, not raised, as in Pi.

    Args:
        entries: the abandoned branch's entries, oldest first.
        summarizer: the model that writes the summary.
        model: the model's limits (the messages' budget and the summary's tokens).
        reserve_tokens: tokens left out of the window for the budget.
        custom_instructions: instructions added to (or replacing) the prompt's.
        replace_instructions: ``custom_instructions`` replace the prompt's instead of being added.
        session_id: the request's session id (default: a new one).
    """
    context_window = model.context_window if js_truthy(model.context_window) else 128000
    prep = prepare_branch_entries(entries, context_window - reserve_tokens)
    if not prep.messages:
        return BranchSummaryResult(summary="No content to summarize")
    request = SummaryRequest(
        kind="branch",
        system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
        prompt=build_branch_prompt(prep.messages, custom_instructions, replace_instructions),
        max_tokens=branch_summary_max_tokens(model),
        reasoning=None,
        cache_retention="none",
        session_id=session_id if session_id is not None else uuid7(),
        model=model.id or "",
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

"""Pi 0.87.1's ``core/messages.js``: custom message types and ``convertToLlm``.

``bashExecutionToText``, the summary-message constructors and ``convertToLlm``, which turns
agent messages (bash executions, extension messages, branch and compaction summaries) into the
roles a model accepts. Messages are Pi-shaped dicts; a JavaScript ``undefined`` field is an
absent key, so ``js_stringify`` of a result prints what ``JSON.stringify`` prints in Pi.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, cast

from pimem.base.js import UNDEFINED, date_ms, js_string, js_truthy
from pimem.base.types import Message
from pimem.core.porting import port

__all__ = [
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "bash_execution_to_text",
    "create_custom_message",
    "create_branch_summary_message",
    "create_compaction_summary_message",
    "convert_to_llm",
]


COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"


@port("messages.js", "bashExecutionToText")
def bash_execution_to_text(msg: Mapping[str, Any]) -> str:
    """``bashExecutionToText``: a bash execution rendered as user text."""
    text = f"Ran `{js_string(msg.get('command', UNDEFINED))}`\n"
    output = msg.get("output", UNDEFINED)
    if js_truthy(output):
        text += f"```\n{js_string(output)}\n```"
    else:
        text += "(no output)"
    exit_code = msg.get("exitCode", UNDEFINED)
    if js_truthy(msg.get("cancelled")):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code is not UNDEFINED and not _is_js_zero(exit_code):
        text += f"\n\nCommand exited with code {js_string(exit_code)}"
    if js_truthy(msg.get("truncated")) and js_truthy(msg.get("fullOutputPath")):
        text += f"\n\n[Output truncated. Full output: {js_string(msg.get('fullOutputPath'))}]"
    return text


def _is_js_zero(value: Any) -> bool:
    return type(value) in (int, float) and value == 0


@port("messages.js", "createBranchSummaryMessage")
def create_branch_summary_message(summary: Any, from_id: Any, timestamp: Any) -> dict:
    """``createBranchSummaryMessage`` (missing arguments are passed as ``UNDEFINED``)."""
    msg: dict[str, Any] = {"role": "branchSummary"}
    if summary is not UNDEFINED:
        msg["summary"] = summary
    if from_id is not UNDEFINED:
        msg["fromId"] = from_id
    msg["timestamp"] = date_ms(timestamp)
    return msg


@port("messages.js", "createCompactionSummaryMessage")
def create_compaction_summary_message(summary: Any, tokens_before: Any, timestamp: Any) -> dict:
    """``createCompactionSummaryMessage``."""
    msg: dict[str, Any] = {"role": "compactionSummary"}
    if summary is not UNDEFINED:
        msg["summary"] = summary
    if tokens_before is not UNDEFINED:
        msg["tokensBefore"] = tokens_before
    msg["timestamp"] = date_ms(timestamp)
    return msg


@port("messages.js", "createCustomMessage")
def create_custom_message(
    custom_type: Any, content: Any, display: Any, details: Any, timestamp: Any
) -> dict:
    """``createCustomMessage``: a ``custom_message`` entry as a role ``custom`` message."""
    msg: dict[str, Any] = {"role": "custom"}
    for key, value in (
        ("customType", custom_type),
        ("content", content),
        ("display", display),
        ("details", details),
    ):
        if value is not UNDEFINED:
            msg[key] = value
    msg["timestamp"] = date_ms(timestamp)
    return msg


def _with_timestamp(msg: Mapping[str, Any], out: dict) -> dict:
    ts = msg.get("timestamp", UNDEFINED)
    if ts is not UNDEFINED:
        out["timestamp"] = ts
    return out


@port("messages.js", "convertToLlm")
def convert_to_llm(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """``convertToLlm``: agent messages to the LLM roles (system/user/assistant/toolResult).

    Args:
        messages: agent messages, in order.
    """
    out: list[Mapping[str, Any]] = []
    append = out.append
    for m in messages:
        role = m.get("role")
        if role in ("user", "assistant", "toolResult", "system"):
            append(m)
        elif role == "bashExecution":
            if js_truthy(m.get("excludeFromContext")):
                continue
            append(
                _with_timestamp(
                    m, {"role": "user", "content": [{"type": "text", "text": bash_execution_to_text(m)}]}
                )
            )
        elif role == "custom":
            content = m.get("content", UNDEFINED)
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            msg: dict[str, Any] = {"role": "user"}
            if content is not UNDEFINED:
                msg["content"] = content
            append(_with_timestamp(m, msg))
        elif role == "branchSummary":
            text = BRANCH_SUMMARY_PREFIX + js_string(m.get("summary", UNDEFINED)) + BRANCH_SUMMARY_SUFFIX
            append(_with_timestamp(m, {"role": "user", "content": [{"type": "text", "text": text}]}))
        elif role == "compactionSummary":
            text = (
                COMPACTION_SUMMARY_PREFIX
                + js_string(m.get("summary", UNDEFINED))
                + COMPACTION_SUMMARY_SUFFIX
            )
            append(_with_timestamp(m, {"role": "user", "content": [{"type": "text", "text": text}]}))
        # any other role is dropped, as in Pi
    return cast("list[Message]", out)


# ---------------------------------------------------------------------------
# pi-ai utils/text.js and utils/transcript.js
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# core/session-manager.js
# ---------------------------------------------------------------------------


# Builds ProjectedEntry objects from (source, messages) pairs without a Python-level call.



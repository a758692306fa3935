"""Pi's LLM messages (:func:`pimem.core.messages.convert_to_llm`) as OpenAI chat-completion messages."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from pimem.text.messages import message_text

__all__ = ["chat_messages"]


def _text(content: Any) -> str:
    return message_text({"content": content}, separator="\n", thinking=None, tool_calls=None)


def chat_messages(messages: Sequence[Mapping[str, Any]], system_text: str) -> list[dict]:
    """Pi's LLM messages as OpenAI chat messages (tool calls and results paired by id)."""
    out: list[dict] = [{"role": "system", "content": system_text}]
    open_calls: set[str] = set()
    for m in messages:
        role = m.get("role")
        if role == "user":
            out.append({"role": "user", "content": _text(m.get("content")) or "(empty)"})
        elif role == "assistant":
            calls = []
            for block in m.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    call_id = str(block.get("id"))
                    calls.append({"id": call_id, "type": "function",
                                  "function": {"name": block.get("name"),
                                               "arguments": json.dumps(block.get("arguments") or {})}})
                    open_calls.add(call_id)
            message: dict[str, Any] = {"role": "assistant", "content": _text(m.get("content")) or None}
            if calls:
                message["tool_calls"] = calls
            elif message["content"] is None:
                continue  # nothing the model could read (an aborted or empty response)
            out.append(message)
        elif role == "toolResult":
            call_id = str(m.get("toolCallId"))
            text = _text(m.get("content")) or "(no output)"
            if call_id in open_calls:
                out.append({"role": "tool", "tool_call_id": call_id, "content": text})
                open_calls.discard(call_id)
            else:  # its call was summarized away: shown as text
                out.append({"role": "user", "content": f"[result of {m.get('toolName')}]\n{text}"})
    return out

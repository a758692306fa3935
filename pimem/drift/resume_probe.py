"""The resume probe: given the replayed context, would a model do what the recorded agent did next?

A replay is open-loop (:mod:`pimem.replays.orphans`): after a replayed compaction the recorded turns
go on as recorded. The probe checks that assumption with a real chat model. At each replayed
compaction it takes the context the next recorded response was requested with *in the replay*
(the summary, the kept tail and any message since, converted as Pi sends them) and the session's
tools, asks the model once, and compares its first action with the recorded one:

* ``tool_match``: same tool name (a text answer matches a recorded text answer);
* ``argument_match``: same main argument — ``path`` for file tools, ``command`` for ``bash``,
  ``pattern`` for search tools, else the first string argument — after normalizing (paths as
  :func:`pimem.text.facts.normalize_path`, whitespace and case folded for the rest).

Tools come from the session's system messages (Pi 0.87.1 records them); a session without them
(older formats) gets one declaration per tool name its recorded calls use, with those calls'
argument names. The recorded system prompt is sent when the session has one, else a short one
naming the working directory.

What it measures and how it can be gamed: the share of compactions after which a model continues
as the recording did. It rewards summaries that state what was about to happen ("Next Steps") and
contexts that keep the last exchange; a model that always re-reads the last file it saw scores
well after compactions that happened to precede a read. The recorded next action is one choice
among several reasonable ones, so a mismatch is not an error — compare summaries or settings by
their rates, over many compactions, never one answer. One answer per compaction is one draw;
``temperature`` > 0 with several runs gives a spread.

Needs a model: ``model`` (with ``base_url`` / ``api_key``), or ``PIMEM_MODEL`` with
``PIMEM_BASE_URL`` or ``OPENAI_API_KEY`` in the environment. Without one the probe is skipped: an
empty frame whose ``attrs["skipped"]`` says why, and a :class:`~pimem.errors.PimemWarning`.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Mapping

import pandas as pd

from pimem.errors import ConfigurationError, PimemWarning
from pimem.base.tables import Column, Table
from pimem.core.messages import convert_to_llm
from pimem.core.pi_ai import get_current_system_message
from pimem.core.session_manager import build_session_projection
from pimem.summarizers.options import DEFAULT_MODEL
from pimem.summarizers.chat_format import chat_messages
from pimem.text.facts import fold, normalize_path

__all__ = ["resume_probe", "main_argument", "RESUME_PROBE", "PROBE_COLUMNS"]

RESUME_PROBE = Table("resume_probe", [
    Column("compaction", description="the replayed compaction's position (0 first)"),
    Column("compaction_id", description="the compaction entry"),
    Column("entry_id", description="the recorded assistant response after it"),
    Column("recorded_tool", description="the tool the recorded response called first (None: a text answer)"),
    Column("recorded_argument", description="that call's main argument, normalized"),
    Column("predicted_tool", description="the tool the model called first"),
    Column("predicted_argument", description="that call's main argument, normalized"),
    Column("tool_match", description="the tools are the same"),
    Column("argument_match", description="the tools and the main arguments are the same"),
    Column("answer", description="the model's text (first 500 characters)"),
    Column("error", description="why the row has no prediction"),
], "One row per replayed compaction: the recorded next action and the model's.")
PROBE_COLUMNS = RESUME_PROBE.names

_MAIN_ARGUMENT = {"read": "path", "edit": "path", "write": "path", "ls": "path", "bash": "command",
                  "grep": "pattern", "find": "pattern", "glob": "pattern"}
_DEFAULT_SYSTEM = ("You are an expert coding assistant working in {cwd}. You help the user by reading files, "
                   "executing commands, editing code and writing new files, using the tools you are given.")


def main_argument(name: str | None, arguments: Any) -> str | None:
    """The argument that says what a tool call is about, normalized (module docs)."""
    if not isinstance(arguments, dict):
        return None
    key = _MAIN_ARGUMENT.get(name or "")
    value = arguments.get(key) if key else None
    if not isinstance(value, str):
        key = next((k for k, v in arguments.items() if isinstance(v, str)), None)
        value = arguments.get(key) if key else None
    if not isinstance(value, str):
        return None
    if key == "path":
        return normalize_path(value) or value.strip()
    return fold(value)


def _first_action(message: dict) -> tuple[str | None, str | None]:
    """(tool name, main argument) of a recorded assistant message; (None, None) for a text answer."""
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "toolCall":
            return block.get("name"), main_argument(block.get("name"), block.get("arguments"))
    return None, None


def _declared_tools(system: Mapping[str, Any] | None, path: list[dict]) -> list[dict]:
    """OpenAI tool declarations: the session's own, else inferred from its recorded calls."""
    declared = (system or {}).get("toolsAdded") or []
    if declared:
        return [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""),
                                                  "parameters": t.get("parameters") or {"type": "object"}}}
                for t in declared if t.get("name")]
    seen: dict[str, set[str]] = {}
    for entry in path:
        message = entry.get("message") if entry.get("type") == "message" else None
        if not message or message.get("role") != "assistant":
            continue
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "toolCall" and block.get("name"):
                args = block.get("arguments")
                seen.setdefault(block["name"], set()).update(args if isinstance(args, dict) else {})
    return [{"type": "function", "function": {
        "name": name, "description": f"The session's {name} tool.",
        "parameters": {"type": "object", "properties": {k: {} for k in sorted(keys)}}}}
        for name, keys in sorted(seen.items())]


def _system_text(system: Mapping[str, Any] | None, cwd: str) -> str:
    if system is None:
        return _DEFAULT_SYSTEM.format(cwd=cwd or "the project folder")
    parts = [str(system.get("content") or "")]
    for value in (system.get("sections") or {}).values():
        if isinstance(value, str):
            parts.append(value)
    return "\n\n".join(p for p in parts if p) or _DEFAULT_SYSTEM.format(cwd=cwd or "the project folder")


def _model_from_env() -> tuple[str | None, str | None, str | None]:
    base_url = os.environ.get("PIMEM_BASE_URL") or None
    key = os.environ.get("PIMEM_API_KEY") or os.environ.get("OPENAI_API_KEY") or None
    if not (base_url or os.environ.get("OPENAI_API_KEY")):
        return None, None, None

    return os.environ.get("PIMEM_MODEL") or DEFAULT_MODEL, base_url, key


def resume_probe(result: Any, *, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 max_compactions: int | None = None, max_tokens: int = 1024, temperature: float | None = 0.0,
                 timeout: float = 120.0) -> pd.DataFrame:
    """One row per replayed compaction of ``result`` (a :class:`~pimem.replays.engine.ReplayResult`):
    the recorded next action, the model's, and whether they match (module docs).

    ``max_compactions``: probe only the first ones. Errors of a request are recorded in the
    ``error`` column (the other rows go on). ``attrs["tool_match_rate"]`` and
    ``attrs["argument_match_rate"]`` hold the rates over the rows without an error.

    Args:
        result: the replay.
        model: the model (default: ``$PIMEM_MODEL``).
        base_url: the server (default: ``$PIMEM_BASE_URL``).
        api_key: the key (default: ``$PIMEM_API_KEY`` or ``$OPENAI_API_KEY``).
        max_compactions: probe only the first ones (None: all).
        max_tokens: the answer's token limit.
        temperature: the sampling temperature (None: the server's).
        timeout: seconds per request.
    """
    import openai


    if not (hasattr(result, "session") and hasattr(result, "compactions")):
        raise ConfigurationError("resume_probe needs a replay result (pimem.replay(...))")
    if model is None:
        model, env_url, env_key = _model_from_env()
        base_url = base_url or env_url
        api_key = api_key or env_key
    if model is None:
        reason = ("resume probe skipped: no chat model configured (pass model=..., or set PIMEM_MODEL with "
                  "PIMEM_BASE_URL or OPENAI_API_KEY)")
        warnings.warn(reason, PimemWarning, stacklevel=2)
        table = RESUME_PROBE.frame([])
        table.attrs["skipped"] = reason
        return table
    client = openai.OpenAI(api_key=api_key or "pimem-no-key", base_url=base_url, timeout=timeout, max_retries=2)
    session = result.session
    path = session.get_branch()
    position = {e.get("id"): i for i, e in enumerate(path)}
    compactions = result.compactions[:max_compactions] if max_compactions is not None else result.compactions
    rows = []
    for k, compaction in enumerate(compactions):
        start = position.get(compaction.get("id"))
        nxt = None if start is None else next(
            (e for e in path[start + 1:] if e.get("type") == "message" and e["message"].get("role") == "assistant"),
            None)
        row: dict[str, Any] = {c: None for c in PROBE_COLUMNS}
        row.update(compaction=k, compaction_id=compaction.get("id"))
        if nxt is None:
            row["error"] = "no recorded response after this compaction"
            rows.append(row)
            continue
        row["entry_id"] = nxt.get("id")
        row["recorded_tool"], row["recorded_argument"] = _first_action(nxt["message"])
        projected = build_session_projection(session, nxt.get("parentId")).messages
        system = get_current_system_message(projected)
        llm = [m for m in convert_to_llm(projected) if m.get("role") != "system"]
        params: dict[str, Any] = {"model": model, "messages": chat_messages(llm, _system_text(
            system, (session.header or {}).get("cwd", ""))), "max_tokens": max_tokens}
        tools = _declared_tools(system, path)
        if tools:
            params["tools"] = tools
        if temperature is not None:
            params["temperature"] = temperature
        try:
            completion = client.chat.completions.create(**params)
            message = completion.choices[0].message
        except Exception as exc:  # noqa: BLE001 - one failed request must not stop the probe
            row["error"] = f"{type(exc).__name__}: {exc}"
            rows.append(row)
            continue
        calls = getattr(message, "tool_calls", None) or []
        row["answer"] = (message.content or "")[:500]
        if calls:
            call = calls[0].function
            try:
                arguments = json.loads(call.arguments or "{}")
            except json.JSONDecodeError:
                arguments = {}
            row["predicted_tool"] = call.name
            row["predicted_argument"] = main_argument(call.name, arguments)
        row["tool_match"] = row["predicted_tool"] == row["recorded_tool"]
        row["argument_match"] = bool(row["tool_match"] and row["predicted_argument"] == row["recorded_argument"])
        rows.append(row)
    table = RESUME_PROBE.frame(rows)
    answered = table[table["error"].isna()]
    table.attrs["tool_match_rate"] = float(answered["tool_match"].mean()) if len(answered) else float("nan")
    table.attrs["argument_match_rate"] = float(answered["argument_match"].mean()) if len(answered) else float("nan")
    return table


RESUME_PROBE.document(resume_probe)

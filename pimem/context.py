"""Context projection: what the model sees at a leaf of a session (Pi 0.87.1).

Ports ``buildSessionPath``, ``getSessionContextSettings``, ``sessionEntryToContextMessages``,
``buildContextEntries``, ``projectContextEntry``, ``buildSessionProjection`` and
``buildSessionContext`` (core/session-manager.js), ``convertToLlm`` and the message
constructors (core/messages.js), and pi-ai's ``contentText``, ``getCurrentTools``,
``getCurrentSystemMessage`` and ``normalizeContext``.

Entries and messages are Pi-shaped dicts. A JavaScript ``undefined`` field is represented by
an absent key, so ``js_stringify`` of a result prints what ``JSON.stringify`` prints in Pi.

Leaf selection mirrors Pi exactly: ``leaf_id=None`` means Pi's ``undefined`` (the default
leaf: the last entry of a list, or the session's current leaf), :data:`NULL_LEAF` means Pi's
``null`` (an empty path, as after ``resetLeaf()``), and an id that is not found falls back to
the last entry, as Pi does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from pimem.jsonio import js_stringify, parse_iso_ms

if TYPE_CHECKING:  # pragma: no cover
    from pimem.session import Session

__all__ = [
    "NULL_LEAF",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "SessionContext",
    "SessionProjection",
    "ProjectedEntry",
    "build_session_path",
    "get_session_context_settings",
    "session_entry_to_context_messages",
    "build_context_entries",
    "project_context_entry",
    "build_session_projection",
    "build_session_context",
    "bash_execution_to_text",
    "create_custom_message",
    "create_branch_summary_message",
    "create_compaction_summary_message",
    "convert_to_llm",
    "content_text",
    "get_current_tools",
    "get_current_system_message",
    "get_system_message_text",
    "normalize_context",
    "date_ms",
]


class _NullLeaf:
    """Pi's ``leafId === null``: the empty path (a session whose leaf was reset)."""

    _instance: "_NullLeaf | None" = None

    def __new__(cls) -> "_NullLeaf":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL_LEAF"

    def __reduce__(self) -> str:
        return "NULL_LEAF"


NULL_LEAF: Any = _NullLeaf()
"""Pass as ``leaf_id`` for Pi's ``null`` leaf (empty path); ``None`` is Pi's ``undefined``."""

_MISSING: Any = object()

COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"


# ---------------------------------------------------------------------------
# Small JavaScript semantics helpers (shared by the pipeline modules)
# ---------------------------------------------------------------------------


def js_truthy(value: Any) -> bool:
    """JavaScript truthiness: ``[]`` and ``{}`` are true, ``0``, ``""``, NaN, null are false."""
    if value is None or value is False or value is _MISSING:
        return False
    if value is True:
        return True
    if isinstance(value, str):
        return value != ""
    if isinstance(value, (int, float)):
        return value == value and value != 0
    return True


def js_string(value: Any) -> str:
    """``String(value)`` for JSON-shaped values (``_MISSING`` prints ``undefined``)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is _MISSING:
        return "undefined"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float):
            if math.isnan(value):
                return "NaN"
            if math.isinf(value):
                return "Infinity" if value > 0 else "-Infinity"
        return js_stringify(value)
    if isinstance(value, (list, tuple)):
        return ",".join("" if v is None else js_string(v) for v in value)
    return "[object Object]"


def _is_array_index(key: str) -> bool:
    if not key or not key.isdigit() or not key.isascii():
        return False
    if len(key) > 1 and key[0] == "0":
        return False
    return int(key) < 4294967295


def js_keys(obj: dict) -> list:
    """``Object.keys`` order: array-index keys ascending first, then insertion order."""
    keys = list(obj)
    if any(_is_array_index(k) for k in keys if isinstance(k, str)):
        index_keys = sorted((k for k in keys if _is_array_index(k)), key=int)
        return index_keys + [k for k in keys if not _is_array_index(k)]
    return keys


def js_entries(value: Any) -> list[tuple[str, Any]]:
    """``Object.entries(value)`` for JSON-shaped values (raises TypeError for null)."""
    if isinstance(value, dict):
        return [(k, value[k]) for k in js_keys(value)]
    if isinstance(value, list):
        return [(str(i), v) for i, v in enumerate(value)]
    if isinstance(value, str):
        # Object.entries iterates UTF-16 code units of a string.
        units = value.encode("utf-16-le", "surrogatepass")
        return [
            (str(i), units[2 * i : 2 * i + 2].decode("utf-16-le", "surrogatepass"))
            for i in range(len(units) // 2)
        ]
    if value is None or value is _MISSING:
        raise TypeError("Cannot convert undefined or null to object")
    return []


def date_ms(value: Any = _MISSING) -> Any:
    """``new Date(value).getTime()``: epoch milliseconds; NaN is returned as ``None``.

    ``None`` (JSON null) gives 0 and a missing value gives NaN, as in JavaScript.
    """
    if value is _MISSING:
        return None
    if value is None or value is False:
        return 0
    if value is True:
        return 1
    if isinstance(value, (int, float)):
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return None
        if abs(value) > 8.64e15:
            return None
        t = int(value)  # TimeClip truncates toward zero
        return t
    if isinstance(value, str):
        ms = parse_iso_ms(value)
        if ms is None:
            return None
        if isinstance(ms, float) and ms.is_integer():
            return int(ms)
        return ms
    return None


# ---------------------------------------------------------------------------
# core/messages.js
# ---------------------------------------------------------------------------


def bash_execution_to_text(msg: dict) -> str:
    """``bashExecutionToText``: a bash execution rendered as user text."""
    text = f"Ran `{js_string(msg.get('command', _MISSING))}`\n"
    output = msg.get("output", _MISSING)
    if js_truthy(output):
        text += f"```\n{js_string(output)}\n```"
    else:
        text += "(no output)"
    exit_code = msg.get("exitCode", _MISSING)
    if js_truthy(msg.get("cancelled")):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code is not _MISSING and not _is_js_zero(exit_code):
        text += f"\n\nCommand exited with code {js_string(exit_code)}"
    if js_truthy(msg.get("truncated")) and js_truthy(msg.get("fullOutputPath")):
        text += f"\n\n[Output truncated. Full output: {js_string(msg.get('fullOutputPath'))}]"
    return text


def _is_js_zero(value: Any) -> bool:
    return type(value) in (int, float) and value == 0


def create_branch_summary_message(summary: Any, from_id: Any, timestamp: Any) -> dict:
    """``createBranchSummaryMessage`` (missing arguments are passed as ``_MISSING``)."""
    msg: dict[str, Any] = {"role": "branchSummary"}
    if summary is not _MISSING:
        msg["summary"] = summary
    if from_id is not _MISSING:
        msg["fromId"] = from_id
    msg["timestamp"] = date_ms(timestamp)
    return msg


def create_compaction_summary_message(summary: Any, tokens_before: Any, timestamp: Any) -> dict:
    """``createCompactionSummaryMessage``."""
    msg: dict[str, Any] = {"role": "compactionSummary"}
    if summary is not _MISSING:
        msg["summary"] = summary
    if tokens_before is not _MISSING:
        msg["tokensBefore"] = tokens_before
    msg["timestamp"] = date_ms(timestamp)
    return msg


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
        if value is not _MISSING:
            msg[key] = value
    msg["timestamp"] = date_ms(timestamp)
    return msg


def _with_timestamp(msg: dict, out: dict) -> dict:
    ts = msg.get("timestamp", _MISSING)
    if ts is not _MISSING:
        out["timestamp"] = ts
    return out


def convert_to_llm(messages: Iterable[dict]) -> list[dict]:
    """``convertToLlm``: agent messages to the LLM roles (system/user/assistant/toolResult)."""
    out: list[dict] = []
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
            content = m.get("content", _MISSING)
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            msg: dict[str, Any] = {"role": "user"}
            if content is not _MISSING:
                msg["content"] = content
            append(_with_timestamp(m, msg))
        elif role == "branchSummary":
            text = BRANCH_SUMMARY_PREFIX + js_string(m.get("summary", _MISSING)) + BRANCH_SUMMARY_SUFFIX
            append(_with_timestamp(m, {"role": "user", "content": [{"type": "text", "text": text}]}))
        elif role == "compactionSummary":
            text = (
                COMPACTION_SUMMARY_PREFIX
                + js_string(m.get("summary", _MISSING))
                + COMPACTION_SUMMARY_SUFFIX
            )
            append(_with_timestamp(m, {"role": "user", "content": [{"type": "text", "text": text}]}))
        # any other role is dropped, as in Pi
    return out


# ---------------------------------------------------------------------------
# pi-ai utils/text.js and utils/transcript.js
# ---------------------------------------------------------------------------


def content_text(content: Any, separator: str = "\n") -> str:
    """pi-ai ``contentText``: a string as is, else the text blocks joined by ``separator``."""
    if isinstance(content, str):
        return content
    if content is None or content is _MISSING:
        raise TypeError("Cannot read properties of null (reading 'filter')")
    parts = []
    for block in content:
        if block.get("type") == "text":
            text = block.get("text")
            parts.append("" if text is None else js_string(text))
    return separator.join(parts)


def get_system_message_text(message: dict) -> str:
    """pi-ai ``getSystemMessageText``: content then sections, non-empty parts joined."""
    parts = [content_text(message.get("content"))]
    sections = message.get("sections") or {}
    for _, text in js_entries(sections) if isinstance(sections, dict) else []:
        if text is not None:
            parts.append(text)
    return "\n\n".join(p for p in parts if len(p) > 0)


def get_current_tools(messages: Iterable[dict]) -> list[dict]:
    """pi-ai ``getCurrentTools``: tools after applying every system message's deltas."""
    tools: dict[Any, dict] = {}
    for message in messages:
        if message.get("role") != "system":
            continue
        for tool in message.get("toolsRemoved") or []:
            tools.pop(tool.get("name"), None)
        for tool in message.get("toolsAdded") or []:
            tools[tool.get("name")] = tool  # Map.set keeps an existing key's position
    return list(tools.values())


def get_current_system_message(messages: Sequence[dict]) -> dict | None:
    """pi-ai ``getCurrentSystemMessage``: every system message replayed into one."""
    content: list[str] = []
    sections: dict[str, Any] = {}
    timestamp: Any = _MISSING
    any_system = False
    for message in messages:
        if message.get("role") != "system":
            continue
        any_system = True
        if timestamp is _MISSING or timestamp is None:  # ??=
            timestamp = message.get("timestamp", _MISSING)
        text = content_text(message.get("content"))
        if len(text) > 0:
            content.append(text)
        raw_sections = message.get("sections")
        if raw_sections is not None and raw_sections is not _MISSING:
            for name, value in js_entries(raw_sections):
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
    tools = get_current_tools(messages) if any_system else []
    if timestamp is _MISSING and not tools:
        return None
    out: dict[str, Any] = {"role": "system", "content": "\n\n".join(content)}
    if sections:
        out["sections"] = sections
    if tools:
        out["toolsAdded"] = tools
    out["timestamp"] = 0 if (timestamp is _MISSING or timestamp is None) else timestamp
    return out


def normalize_context(
    system_prompt: str | None, messages: list[dict], tools: list[dict] | None = None
) -> list[dict]:
    """pi-ai ``normalizeContext``: a leading system message from the prompt and tools."""
    has_prompt = system_prompt is not None and len(system_prompt) > 0
    has_tools = tools is not None and len(tools) > 0
    if not has_prompt and not has_tools:
        return list(messages)
    initial: dict[str, Any] = {"role": "system", "content": system_prompt or ""}
    if has_tools:
        initial["toolsAdded"] = tools
    initial["timestamp"] = 0
    return [initial, *messages]


# ---------------------------------------------------------------------------
# core/session-manager.js
# ---------------------------------------------------------------------------


@dataclass
class SessionContext:
    """``buildSessionContext``'s result: the messages plus thinking level and model."""

    messages: list[dict]
    thinking_level: Any = "off"
    model: dict | None = None


class ProjectedEntry(tuple):
    """One context entry and the messages it contributes (Pi's projected entry).

    An immutable pair ``(source_entry, messages)`` (a tuple underneath, so that a
    projection of a long path is cheap to build).
    """

    __slots__ = ()

    def __new__(cls, source_entry: dict, messages: list[dict]) -> "ProjectedEntry":
        return tuple.__new__(cls, (source_entry, messages))

    source_entry = property(itemgetter(0), doc="The session entry.")
    messages = property(itemgetter(1), doc="The context messages it contributes.")

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    def __repr__(self) -> str:
        return (
            f"ProjectedEntry(id={self.source_entry.get('id')!r}, "
            f"type={self.source_entry.get('type')!r}, messages={len(self.messages)})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProjectedEntry) and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


# Builds ProjectedEntry objects from (source, messages) pairs without a Python-level call.
_projected_entry = partial(tuple.__new__, ProjectedEntry)


@dataclass
class SessionProjection:
    """``buildSessionProjection``'s result: entries with their messages, settings, model."""

    entries: list[ProjectedEntry]
    messages: list[dict]
    thinking_level: Any = "off"
    model: dict | None = None

    def to_context(self) -> SessionContext:
        return SessionContext(self.messages, self.thinking_level, self.model)


def _entries_and_index(source: Any) -> tuple[Sequence[dict], Any, Any]:
    """(entries, lookup(id) -> entry | None, the default leaf id) for a Session or a list."""
    entries = getattr(source, "entries", None)
    if entries is not None and hasattr(source, "get_entry"):
        leaf = getattr(source, "leaf_id", None)
        return entries, source.get_entry, (NULL_LEAF if leaf is None else leaf)
    entries = source
    index = {e.get("id"): e for e in entries}  # the last entry with an id wins, as in Pi's Map
    return entries, index.get, None


def build_session_path(source: Any, leaf_id: Any = None) -> list[dict]:
    """``buildSessionPath``: the root-first path to the leaf (see module docs for leaf rules)."""
    entries, lookup, default_leaf = _entries_and_index(source)
    if leaf_id is None:
        leaf_id = default_leaf
    return _build_path(entries, lookup, leaf_id)


def _build_path(entries: Sequence[dict], lookup: Any, leaf_id: Any) -> list[dict]:
    if leaf_id is NULL_LEAF:
        return []
    leaf = None
    if js_truthy(leaf_id):
        leaf = lookup(leaf_id)
    if leaf is None:
        if not entries:
            return []
        leaf = entries[-1]
    path = [leaf]
    append = path.append
    current = leaf
    steps_left = len(entries)  # a longer walk can only be a parentId cycle
    while True:
        parent = current.get("parentId")
        if parent.__class__ is str:
            if not parent:
                break
        elif not js_truthy(parent):
            break
        current = lookup(parent)
        if current is None:
            break
        steps_left -= 1
        if steps_left < 0:
            return _build_path_stopping_at_cycle(leaf, lookup)
        append(current)
    path.reverse()
    return path


def _build_path_stopping_at_cycle(leaf: dict, lookup: Any) -> list[dict]:
    """The walk for a tree with a parentId cycle, where Pi would loop forever: stop at the first
    entry seen twice (as ``Session.get_branch`` does, which records the cycle as a warning)."""
    path = [leaf]
    seen = {id(leaf)}
    current = leaf
    while True:
        parent = current.get("parentId")
        if not js_truthy(parent):
            break
        current = lookup(parent)
        if current is None or id(current) in seen:
            break
        seen.add(id(current))
        path.append(current)
    path.reverse()
    return path


def get_session_context_settings(path: Iterable[dict]) -> tuple[Any, dict | None]:
    """``getSessionContextSettings``: (thinking level, model) from the path."""
    thinking_level: Any = "off"
    model_source: dict | None = None  # the entry or assistant message the model comes from
    from_entry = False
    for entry in path:
        etype = entry.get("type")
        if etype == "message":
            message = entry["message"]
            if message.get("role") == "assistant":
                model_source, from_entry = message, False
        elif etype == "thinking_level_change":
            thinking_level = entry.get("thinkingLevel")
        elif etype == "model_change":
            model_source, from_entry = entry, True
    if model_source is None:
        return thinking_level, None
    model: dict = {}
    if "provider" in model_source:
        model["provider"] = model_source["provider"]
    key = "modelId" if from_entry else "model"
    if key in model_source:
        model["modelId"] = model_source[key]
    return thinking_level, model


def session_entry_to_context_messages(entry: dict) -> list[dict]:
    """``sessionEntryToContextMessages``: the context messages one entry contributes."""
    etype = entry.get("type")
    if etype == "message":
        message = entry["message"]
        if message.get("content") is None:
            role = message.get("role")
            if role == "system":
                return [{**message, "content": ""}]
            if role in ("user", "assistant", "toolResult"):
                return [{**message, "content": []}]
        return [message]
    if etype == "custom_message":
        content = entry.get("content")
        return [
            create_custom_message(
                entry.get("customType", _MISSING),
                [] if content is None else content,
                entry.get("display", _MISSING),
                entry.get("details", _MISSING),
                entry.get("timestamp", _MISSING),
            )
        ]
    if etype == "branch_summary":
        if js_truthy(entry.get("summary")):
            return [
                create_branch_summary_message(
                    entry["summary"], entry.get("fromId", _MISSING), entry.get("timestamp", _MISSING)
                )
            ]
        return []
    if etype == "compaction":
        summary = create_compaction_summary_message(
            entry.get("summary", _MISSING),
            entry.get("tokensBefore", _MISSING),
            entry.get("timestamp", _MISSING),
        )
        system_message = entry.get("systemMessage")
        return [system_message, summary] if js_truthy(system_message) else [summary]
    return []


def _context_entries_from_path(path: list[dict], walked: bool = False) -> list[dict]:
    """``buildContextEntries`` on a path; ``walked`` says the path came from following
    parent links, so that its entries with truthy ids have distinct ids."""
    return _context_entries_and_types(path, walked)[0]


def _context_entries_and_types(
    path: list[dict], walked: bool = False, path_types: list | None = None
) -> tuple[list[dict], list]:
    """(``buildContextEntries`` on a path, the entries' types); ``path_types`` are the path's."""
    types = [e.get("type") for e in path] if path_types is None else path_types
    if "compaction" not in types:
        return path, types
    compaction_idx = len(types) - 1 - types[::-1].index("compaction")
    compaction = path[compaction_idx]
    if not walked:
        # Pi looks the compaction up by id: the first entry carrying that id.
        cid = compaction.get("id")
        for i in range(compaction_idx + 1):
            if path[i].get("id") == cid:
                compaction_idx = i
                break
    context_entries = [compaction]
    first_kept = compaction.get("firstKeptEntryId", _MISSING)
    start = compaction_idx
    for i in range(compaction_idx):
        if path[i].get("id", _MISSING) == first_kept:
            start = i
            break
    for i in range(start, compaction_idx):
        entry = path[i]
        if not (entry.get("type") == "message" and entry["message"].get("role") == "system"):
            context_entries.append(entry)
    context_entries.extend(path[compaction_idx + 1 :])
    return context_entries, [e.get("type") for e in context_entries]


def build_context_entries(source: Any, leaf_id: Any = None) -> list[dict]:
    """``buildContextEntries``: latest compaction, its kept entries, then everything after."""
    return _context_entries_from_path(build_session_path(source, leaf_id), True)


def project_context_entry(entry: dict, edit: dict | None) -> list[dict]:
    """``projectContextEntry``: an entry's messages with a ``context_edit`` applied."""
    messages = session_entry_to_context_messages(entry)
    if edit is None:
        return messages
    replacement = edit.get("replacement", _MISSING)
    if replacement is None:
        return []
    if replacement is _MISSING:
        raise TypeError(f"context_edit {edit.get('id')!r} has no replacement")
    rcontent = replacement.get("content", _MISSING) if isinstance(replacement, dict) else _MISSING
    out = []
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant", "toolResult", "custom"):
            out.append(message)
            continue
        if role in ("assistant", "toolResult") and isinstance(rcontent, str):
            content: Any = [{"type": "text", "text": rcontent}]
        else:
            content = rcontent
        new = dict(message)
        if content is _MISSING:
            new.pop("content", None)  # JavaScript undefined: JSON.stringify omits it
        else:
            new["content"] = content
        out.append(new)
    return out


def _project_parts(
    context_entries: list[dict], types: list | None = None
) -> tuple[list, list[list[dict]], list[dict]]:
    """The projection as parallel lists: entry types, messages per entry, all messages."""
    if types is None:
        types = [e.get("type") for e in context_entries]
    per_entry: list[list[dict]] = []
    messages: list[dict] = []
    add_entry = per_entry.append
    add = messages.append
    if "context_edit" in types:
        edits: dict[Any, dict] = {}
        for entry, etype in zip(context_entries, types):
            if etype == "context_edit":
                edits[entry.get("targetId", _MISSING)] = entry
        for index, source in enumerate(context_entries):
            if index > 0 and types[index] == "compaction":
                msgs: list[dict] = []
            else:
                msgs = project_context_entry(source, edits.get(source.get("id", _MISSING)))
            add_entry(msgs)
            messages.extend(msgs)
        return types, per_entry, messages
    to_msgs = session_entry_to_context_messages
    index = 0
    for source, etype in zip(context_entries, types):
        if etype == "message":
            message = source["message"]
            if message.get("content") is not None:  # nearly all: the message itself
                add_entry([message])
                add(message)
                index += 1
                continue
            msgs = to_msgs(source)
        elif etype == "compaction" and index > 0:
            msgs = []
        else:
            msgs = to_msgs(source)
        add_entry(msgs)
        messages.extend(msgs)
        index += 1
    return types, per_entry, messages


def _project_path(path: list[dict], walked: bool = False) -> SessionProjection:
    thinking_level, model = get_session_context_settings(path)
    context_entries, types = _context_entries_and_types(path, walked)
    _, per_entry, messages = _project_parts(context_entries, types)
    projected = list(map(_projected_entry, zip(context_entries, per_entry)))
    return SessionProjection(projected, messages, thinking_level, model)


def build_session_projection(source: "Session | Sequence[dict]", leaf_id: Any = None) -> SessionProjection:
    """``buildSessionProjection``: projected entries (each keeps its source entry) + messages.

    ``source`` is a :class:`~pimem.session.Session` or a list of entries (without the header).
    """
    return _project_path(build_session_path(source, leaf_id), True)


def build_session_context(source: "Session | Sequence[dict]", leaf_id: Any = None) -> SessionContext:
    """``buildSessionContext``: the messages the model sees at the leaf, thinking level, model.

    ``leaf_id=None`` is Pi's default leaf (the last entry of a list, or the session's
    current leaf); :data:`NULL_LEAF` is Pi's ``null`` leaf and gives an empty context.
    """
    return build_session_projection(source, leaf_id).to_context()

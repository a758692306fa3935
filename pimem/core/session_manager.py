"""Pi 0.87.1's ``core/session-manager.js``: load (with Pi's parsing and v1→v3 migration), walk the tree,
append, write, and project a path into the model's context.

Entries stay plain dicts in Pi's JSON shape. Loading follows Pi 0.87.1's
``loadEntriesFromFile`` + ``migrateToCurrentVersion``; what Pi silently skips or would trip
over is recorded in :attr:`Session.warnings`; what makes a file unusable raises
:class:`SessionFormatError` naming the file and line. A :class:`Session` keeps what Pi's
``SessionManager`` keeps (the entries, the id index, the labels, the leaf) and nothing between calls: the
paths, contexts and projections are computed from it each time (:mod:`pimem.core.incremental.paths` takes
a session's paths from an index kept beside it).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import os
import random
import re
import sys
import time
import weakref
from array import array
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Iterator, Sequence, cast

import orjson

from pimem.base import files as io
from pimem.base.files import atomic_write_bytes
from pimem.base.js import (
    UNDEFINED,
    iso_now,
    js_stringify,
    js_trim,
    js_to_number,
    js_truthy,
    loads_line,
    parse_iso_ms,
    to_iso,
)
from pimem.base.types import (
    AgentMessage,
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    SessionEntry,
    SessionHeader,
    SessionMessageEntry,
)
from pimem.core.messages import (
    create_branch_summary_message,
    create_compaction_summary_message,
    create_custom_message,
)
from pimem.core.pi_ai import get_current_system_message
from pimem.core.porting import not_ported, port
from pimem.errors import (
    EntryNotFoundError,
    InvalidEntryError,
    JavaScriptTypeError,
    SessionFormatError,
    SourceOverwriteError,
)

__all__ = [
    "Session",
    "SessionWarning",
    "SessionFormatError",
    "load_session",
    "migrate_to_current_version",
    "CURRENT_SESSION_VERSION",
    "KNOWN_ENTRY_TYPES",
]

CURRENT_SESSION_VERSION = 3
KNOWN_ENTRY_TYPES = frozenset(
    {
        "message",
        "model_change",
        "thinking_level_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "context_edit",
        "usage",
    }
)
_ROLES_WITH_CONTENT = frozenset({"user", "assistant", "toolResult", "custom", "system"})
_MAX_WARNINGS_PER_REASON = 50
_USAGE_FIELDS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")


_UNHASHABLE = (dict, list)
_ID, _PARENT_ID = itemgetter("id"), itemgetter("parentId")
_LINE_BREAKS = re.compile(r"[\r\n]+")
_SESSION_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_MAX_USAGE = 2**63  # no token count reaches it; beyond, a usage field is damage (1e308, inf)


def not_a_header(entry: Any) -> str | None:
    """Why a session file's first entry is not a session header, in the words every command uses
    (``"not a Pi session: the first entry is …, not a session header"``); None when it is one."""
    if isinstance(entry, dict):
        kind = entry.get("type", UNDEFINED)
        if kind == "session":
            if isinstance(entry.get("id"), str):
                return None
            what = "a session header without a string id"
            return f"not a Pi session: the first entry is {what}"
        if kind is UNDEFINED:
            what = 'an object without a "type" field'
        elif isinstance(kind, str):
            what = f'a "{kind}" entry'
        else:
            what = f'an object whose "type" is {"null" if kind is None else "a " + _json_type(kind)}'
    else:
        what = f"a JSON {_json_type(entry)}"
    return f"not a Pi session: the first entry is {what}, not a session header"


def _json_type(value: Any) -> str:
    """How JSON names a value's type (``null``, a string, a number, an object, ...)."""
    if value is None:
        return "null"
    if value is UNDEFINED:
        return "missing"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"


class _ComputeSystemMessage:
    """Type of :data:`COMPUTE_SYSTEM_MESSAGE`."""

    def __repr__(self) -> str:
        return "COMPUTE_SYSTEM_MESSAGE"


COMPUTE_SYSTEM_MESSAGE: Any = _ComputeSystemMessage()
"""``append_compaction(system_message=...)`` default: project the branch to find it."""


@dataclass
class SessionWarning:
    """Something Pi would skip or mishandle, recorded while the session still loads.

    Args:
        line: the line of the file (1-based), or None when no line applies.
        reason: what is wrong and what was done about it.
        entry_id: the id of the entry concerned, if any.
        file: the file's path, if read from one.
    """

    line: int | None
    reason: str
    entry_id: str | None = None
    file: str | None = None

    def __str__(self) -> str:
        where = f"{self.file or '<session>'}:{self.line if self.line is not None else '-'}"
        entry = f" [entry {self.entry_id}]" if self.entry_id else ""
        return f"{where}: {self.reason}{entry}"


def _system_tools_problem(message: dict) -> str | None:
    """What in a system message's ``toolsAdded`` / ``toolsRemoved`` Pi's ``getCurrentTools`` throws on."""
    for field in ("toolsAdded", "toolsRemoved"):
        tools = message.get(field)
        if tools is None or tools.__class__ is str:
            continue
        if tools.__class__ is not list:
            return f"system message {field} has type {_json_type(tools)}, not array (Pi's code throws on it)"
        if None in tools:
            return f"system message {field} holds null, not a tool (Pi's code throws on it)"
    return None


class _WarningSink:
    """Collects warnings, keeping at most a few per reason kind."""

    def __init__(self, file: str | None, out: list[SessionWarning]) -> None:
        self.file = file
        self.out = out
        self.counts: dict[str, int] = {}

    def add(self, kind: str, line: int | None, reason: str, entry_id: Any = None) -> None:
        n = self.counts.get(kind, 0) + 1
        self.counts[kind] = n
        if n <= _MAX_WARNINGS_PER_REASON:
            eid = entry_id if isinstance(entry_id, str) else None
            self.out.append(SessionWarning(line, reason, eid, self.file))

    def finish(self) -> None:
        for kind, n in self.counts.items():
            if n > _MAX_WARNINGS_PER_REASON:
                more = n - _MAX_WARNINGS_PER_REASON
                self.out.append(
                    SessionWarning(None, f"{more} more warnings of kind {kind!r} not listed", None, self.file)
                )


# ------------------------------------------------------------------------------------------
# Ids and migration (Pi's migrateToCurrentVersion)
# ------------------------------------------------------------------------------------------


@port("session-manager.js", "generateId")
def _random_id(rng: random.Random, taken: Any, reserved: Any = ()) -> str:
    """Pi's ``generateId``: 8 lowercase hex digits not already taken (nor reserved)."""
    for _ in range(100):
        candidate = "%08x" % rng.getrandbits(32)
        if candidate not in taken and candidate not in reserved:
            return candidate
    return _uuid_from(rng, 4)


def _uuid_from(rng: random.Random, version: int, ms: int | None = None) -> str:
    bits = rng.getrandbits(128)
    if version == 7:
        ms = int(time.time() * 1000) if ms is None else ms
        bits = (ms & ((1 << 48) - 1)) << 80 | (bits & ((1 << 80) - 1))
    bits &= ~(0xF << 76)
    bits |= version << 76
    bits &= ~(0x3 << 62)
    bits |= 0x2 << 62
    h = "%032x" % bits
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@port("session-manager.js", "migrateToCurrentVersion")
def migrate_to_current_version(file_entries: list[dict], rng: random.Random | None = None) -> bool:
    """Pi's ``migrateToCurrentVersion`` on [header, *entries]; mutates in place.

    Returns True when a migration was applied. v1 entries get fresh 8-hex ids (from
    ``rng``) chained in file order; ``firstKeptEntryIndex`` (an index into the full list,
    header included) becomes ``firstKeptEntryId``; v2's ``hookMessage`` role becomes ``custom``.
    """
    header = next((e for e in file_entries if e.get("type") == "session"), None)
    if not _needs_migration(header):
        return False
    version = _version(header)
    if version < 2:
        _migrate_v1_to_v2(file_entries, rng or random.Random())
    if version < 3:
        _migrate_v2_to_v3(file_entries)
    return True


def _version(header: dict | None) -> float:
    """``header?.version ?? 1`` as a number (what Pi's ``<``/``>=`` compare)."""
    raw_version = None if header is None else header.get("version")
    return 1.0 if raw_version is None else js_to_number(raw_version)


def _needs_migration(header: dict | None) -> bool:
    """Pi's ``version >= 3`` test, negated (a NaN version "migrates" through no step)."""
    return not _version(header) >= CURRENT_SESSION_VERSION


@port("session-manager.js", "migrateV1ToV2")
def _migrate_v1_to_v2(entries: list[dict], rng: random.Random) -> None:
    """``migrateV1ToV2``: ids chained in file order, ``firstKeptEntryIndex`` to ``firstKeptEntryId``."""
    ids: set[str] = set()
    prev_id = None
    for entry in entries:
        if entry.get("type") == "session":
            entry["version"] = 2
            continue
        entry["id"] = _random_id(rng, ids)
        ids.add(entry["id"])
        entry["parentId"] = prev_id
        prev_id = entry["id"]
        if entry.get("type") == "compaction":
            index = entry.get("firstKeptEntryIndex", UNDEFINED)
            if isinstance(index, (int, float)) and not isinstance(index, bool):
                target = None
                if float(index).is_integer() and 0 <= index < len(entries):
                    target = entries[int(index)]
                if target is not None and target.get("type") != "session":
                    if "id" in target:  # a later entry has no id yet: JS assigns undefined
                        entry["firstKeptEntryId"] = target["id"]
                del entry["firstKeptEntryIndex"]


@port("session-manager.js", "migrateV2ToV3")
def _migrate_v2_to_v3(entries: list[dict]) -> None:
    """``migrateV2ToV3``: the ``hookMessage`` role becomes ``custom``."""
    for entry in entries:
        if entry.get("type") == "session":
            entry["version"] = 3
            continue
        if entry.get("type") == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                message["role"] = "custom"


# ------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------

_BOM = b"\xef\xbb\xbf"


def _parse_bad_line(raw: bytes) -> tuple[Any, bool]:
    """Parse a line orjson refused: (value or UNDEFINED, had invalid UTF-8)."""
    try:
        text = raw.decode("utf-8")
        bad_utf8 = False
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")  # Node's StringDecoder does the same
        bad_utf8 = True
    try:
        return loads_line(text), bad_utf8
    except (ValueError, RecursionError):
        return UNDEFINED, bad_utf8


# the start of a file that says what it is when no entry can be read (a JSON array, binary data)
_SAMPLE_BYTES = 16 << 20


# String values that repeat from entry to entry (the entry's and the content blocks' types, the role, the
# model and its provider, the stop reason, tool names): each parsed line would hold its own copy
_SHARED_MESSAGE_FIELDS = ("role", "api", "provider", "model", "stopReason", "toolName")
_SHARED_BLOCK_FIELDS = ("type", "name")


def _share_strings(entry: dict, previous_id: Any, intern: Callable[[str], str] = sys.intern) -> None:
    """Hold the repeated string values of a parsed ``entry`` once (interned), and its ``parentId`` as the
    string of the entry before when it names that entry: the same values, about a quarter less memory
    for a session of short entries."""
    value = entry.get("type")
    if value.__class__ is str:
        entry["type"] = intern(value)
    value = entry.get("parentId")
    if value.__class__ is str and value == previous_id:
        entry["parentId"] = previous_id
    message = entry.get("message")
    if message.__class__ is not dict:
        return
    for key in _SHARED_MESSAGE_FIELDS:
        value = message.get(key)
        if value.__class__ is str:
            message[key] = intern(value)
    content = message.get("content")
    if content.__class__ is list:
        for block in content:
            if block.__class__ is dict:
                for key in _SHARED_BLOCK_FIELDS:
                    value = block.get(key)
                    if value.__class__ is str:
                        block[key] = intern(value)


def _read_lines(file: str) -> Iterator[tuple[int, bytes, bool]]:
    """:func:`pimem.base.files.read_lines` of the file (of its content when it is gzip'd)."""
    with io.open_session_bytes(file, buffering=0) as f:
        yield from io.read_lines(f, file)


def _is_blank(raw: bytes) -> bool:
    if not raw.strip():
        return True
    try:
        return not raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return False


@port("session-manager.js", "loadEntriesFromFile")
def load_session(
    path: str | os.PathLike[str],
    *,
    rng: random.Random | None = None,
    seed: int | str | None = None,
    session_type: type[Session] | None = None,
) -> Session:
    """Load a Pi session file (any version) into a :class:`Session` (Pi's ``loadEntriesFromFile``, then its
    migration and index); the file is never written.

    v1 entries have no ids; they get 8-hex ids as Pi gives them, drawn from ``rng`` / ``seed``
    when given, else derived from the file's bytes, so the same file gets the same ids on
    every load. ``rng`` / ``seed`` also make :meth:`Session.new_id` reproducible.
    ``session_type``: the class to build (a subclass of :class:`Session`, e.g. the one of
    :mod:`pimem.sessions.session` with its tree rendering and DataFrame views).
    """
    file = os.fspath(path)
    migration_rng = rng
    if rng is None:
        rng = random.Random(seed) if seed is not None else random.Random()
        migration_rng = rng if seed is not None else None
    warnings: list[SessionWarning] = []
    sink = _WarningSink(file, warnings)
    parsed: list[Any] = []
    line_numbers: list[int] = []
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    malformed = 0
    non_objects = 0
    previous_id: Any = None
    for lineno, raw, terminated in _read_lines(file):
        try:
            value = loads(raw)
        except decode_error:
            if lineno == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
                sink.add("bom", 1, "UTF-8 byte order mark removed (Pi's JSON.parse would reject this line)")
            if _is_blank(raw):
                continue
            value, bad_utf8 = _parse_bad_line(raw)
            if bad_utf8:
                sink.add("utf8", lineno, "invalid UTF-8 bytes replaced with U+FFFD (as Pi's decoder does)")
            if value is UNDEFINED:
                malformed += 1
                if not terminated:
                    sink.add("truncated", lineno, "truncated last line (no newline, not valid JSON): skipped")
                else:
                    sink.add("malformed", lineno, "malformed JSON line skipped (as Pi does)")
                continue
        if type(value) is dict:
            _share_strings(value, previous_id)
            previous_id = value.get("id")
            parsed.append(value)
            line_numbers.append(lineno)
        elif not parsed and js_truthy(value):
            hint = " (the file is a JSON array, not JSON Lines)" if isinstance(value, list) else ""
            raise SessionFormatError(f"{file}:{lineno}: {not_a_header(value)}{hint}")
        else:
            non_objects += 1
            sink.add("non_object", lineno, f"line holds a JSON {type(value).__name__}, not an object: skipped")

    if not parsed:
        if malformed == 0 and non_objects == 0:
            raise SessionFormatError(f"{file}:1: empty file, not a Pi session")
        with io.open_session_bytes(file) as f:
            raise SessionFormatError(_no_entries_message(file, f.read(_SAMPLE_BYTES), malformed))
    header = parsed[0]
    problem = not_a_header(header)
    if problem is not None:
        raise SessionFormatError(f"{file}:{line_numbers[0]}: {problem}")

    if migration_rng is None and _needs_migration(header):
        with io.open_session_bytes(file) as f:  # of the content: a gzip'd copy gets the same ids
            migration_rng = random.Random(hashlib.file_digest(cast(Any, f), "sha256").digest())
    migrate_to_current_version(parsed, migration_rng or rng)

    entries: list[dict] = []
    entry_lines: list[int | None] = []
    for entry, lineno in zip(parsed[1:], line_numbers[1:]):
        if entry.get("type") == "session":
            sink.add("extra_header", lineno, "extra session header ignored (Pi skips it too)", entry.get("id"))
            continue
        entries.append(entry)
        entry_lines.append(lineno)
    session = (session_type or Session)(header, entries, path=file, warnings=warnings, rng=rng,
                                        _lines=entry_lines)
    session._validate(sink)
    sink.finish()
    return session


class _LineNumbers:
    """The file line number of each entry of a session, or None for an entry appended (read from no line):
    8 bytes an entry (a list of ints took 36), the entries appended after the last one read only counted."""

    __slots__ = ("_numbers", "_appended")

    def __init__(self, lines: Iterable[int | None]) -> None:
        self._numbers = array("Q", [0 if line is None else line for line in lines])
        self._appended = 0  # entries without a line after those in _numbers

    def append(self, line: int | None) -> None:
        if line is None:
            self._appended += 1
            return
        self._numbers.extend(itertools.repeat(0, self._appended))
        self._appended = 0
        self._numbers.append(line)

    def __len__(self) -> int:
        return len(self._numbers) + self._appended

    def __iter__(self) -> Iterator[int | None]:
        return itertools.chain((line or None for line in self._numbers), itertools.repeat(None, self._appended))


def _no_entries_message(file: str, data: bytes, malformed: int) -> str:
    head = data.lstrip()[:1]
    if head in (b"[", b"{"):
        try:
            whole = loads_line(data.decode("utf-8", "replace"))
        except ValueError:
            whole = UNDEFINED
        if isinstance(whole, list):
            return f"{file}:1: the file is one JSON array, not JSON Lines (one entry object per line)"
        if isinstance(whole, dict):
            return f"{file}:1: the file is a pretty-printed JSON object, not JSON Lines (one entry per line)"
    sample = data[:64]
    binary = b"\x00" in sample or sum(b < 9 or 13 < b < 32 for b in sample) > 4
    kind = "binary data" if binary else "no valid JSON line"
    return f"{file}:1: not a Pi session: {kind} ({malformed} malformed lines)"


# ------------------------------------------------------------------------------------------
# Session
# ------------------------------------------------------------------------------------------


@port("session-manager.js", "SessionManager")
class Session:
    """A Pi session in memory (Pi's ``SessionManager``): the header, the entries (Pi's JSON dicts) and a
    movable leaf."""

    def __init__(
        self,
        header: SessionHeader | dict[str, Any],
        entries: Iterable[dict],
        path: str | os.PathLike[str] | None = None,
        warnings: list[SessionWarning] | None = None,
        *,
        rng: random.Random | None = None,
        _lines: list[int | None] | None = None,
    ) -> None:
        self.header: SessionHeader = cast(SessionHeader, header)
        self.entries: list[dict] = list(entries)
        self.path: str | None = os.fspath(path) if path is not None else None
        # the source as an absolute path, so that write() still recognises it after os.chdir
        self._source: tuple[str, str] | None = (self.path, os.path.abspath(self.path)) if self.path else None
        self.warnings: list[SessionWarning] = warnings if warnings is not None else []
        self.rng: random.Random = rng if rng is not None else random.Random()
        self._lines = _LineNumbers(_lines if _lines is not None else [None] * len(self.entries))
        self._by_id: dict[str, dict] = {}
        # ids new_id() avoids besides the session's own: those of entries still to be appended (a replay's)
        self.reserved_ids: Container[str] = ()
        self._labels: dict[Any, Any] = {}
        self._leaf_id: str | None = None
        self._warned_cycles: set[Any] = set()
        self._indexed = 0  # how many of the entries went through _index (the first ones)
        for entry in self.entries:
            self._index(entry)

    # -- construction ------------------------------------------------------------------------

    @classmethod
    @port("session-manager.js", "SessionManager.newSession")
    def new(
        cls,
        cwd: str,
        *,
        session_id: str | None = None,
        timestamp: str | None = None,
        parent_session: str | None = None,
        rng: random.Random | None = None,
    ) -> Session:
        """A fresh v3 session with only a header (Pi's ``newSession``; ids are UUIDv7)."""
        rng = rng if rng is not None else random.Random()
        timestamp = timestamp or iso_now()
        if session_id is None:
            session_id = _uuid_from(rng, 7, parse_iso_ms(timestamp))
        header: dict[str, Any] = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": session_id,
            "timestamp": timestamp,
            "cwd": cwd,
        }
        if parent_session is not None:
            header["parentSession"] = parent_session
        return cls(header, [], rng=rng)

    @port("session-manager.js", "SessionManager._buildIndex")
    def _index(self, entry: dict) -> None:
        """Pi's ``_buildIndex`` step for one entry (Map.set: the last entry with an id wins; pimem indexes
        string ids only, which are the ones a parentId can name)."""
        eid = entry.get("id")
        if isinstance(eid, str):
            self._by_id[eid] = entry
        self._leaf_id = eid if isinstance(eid, str) else None
        self._indexed += 1
        if entry.get("type") == "label":
            target = entry.get("targetId")
            try:
                if js_truthy(entry.get("label")):
                    self._labels[target] = entry.get("label")
                else:
                    self._labels.pop(target, None)
            except TypeError:  # unhashable target id
                pass

    def _validate(self, sink: _WarningSink) -> None:
        """Record what Pi would skip or trip over; entries are kept as they are."""
        by_id = self._by_id
        seen: set[str] = set()
        forward = False
        duplicates = False
        known = KNOWN_ENTRY_TYPES
        with_content = _ROLES_WITH_CONTENT
        for entry, line in zip(self.entries, self._lines):
            get = entry.get
            eid = get("id")
            etype = get("type")
            parent = get("parentId", UNDEFINED)
            if eid.__class__ is not str:
                sink.add("no_id", line, "entry has no string id (not reachable in the tree)")
            elif eid in seen:
                duplicates = True
                sink.add("duplicate_id", line, f"duplicate id {eid!r}: the later entry wins in Pi's index", eid)
            else:
                seen.add(eid)
            if parent is None or (parent.__class__ is str and parent in seen and parent != eid):
                pass  # a root, or a parent earlier in the file (the usual case)
            elif parent is UNDEFINED:
                sink.add("no_parent", line, "entry has no parentId field (treated as a root)", eid)
            elif parent.__class__ is str and parent in by_id:
                forward = True  # parent later in the file (or itself): a cycle is possible
            elif parent != "" and parent is not False:
                sink.add("dangling_parent", line, f"parentId {parent!r} not found: the branch stops here", eid)
            if etype == "message":
                message = get("message")
                if message.__class__ is not dict:
                    sink.add("no_message", line, "message entry without a message object", eid)
                else:
                    content = message.get("content")
                    role = message.get("role")
                    if content.__class__ is not str and content.__class__ is not list and (
                        role.__class__ is str and role in with_content
                    ):
                        if content is None:
                            sink.add("no_content", line, f"{role} message with null or missing content", eid)
                        else:
                            sink.add("content_type", line, f"{role} message content has type {_json_type(content)}, "
                                     "not string or list (Pi's code throws on it)", eid)
                    usage = message.get("usage")
                    if role == "system":
                        problem = _system_tools_problem(message)
                        if problem is not None:
                            sink.add("system_tools", line, problem, eid)
                    elif role == "assistant" and usage is not None and usage.__class__ is not dict:
                        sink.add("usage_type", line, f"assistant usage has type {_json_type(usage)}, not object "
                                 "(Pi and pimem read it as no usage)", eid)
                    if usage.__class__ is dict:
                        for key in _USAGE_FIELDS:
                            value = usage.get(key)
                            if value is not None and (value.__class__ is bool or not isinstance(value, (int, float))):
                                sink.add("usage_type", line, f"usage field {key!r} has type {_json_type(value)}, not "
                                         "number (pimem reads this usage as unknown)", eid)
                                break
                            if value.__class__ in (int, float) and not -_MAX_USAGE < value < _MAX_USAGE:
                                sink.add("usage_range", line, f"usage field {key!r} is {value!r}, beyond any token "
                                         "count (pimem reads this usage as unknown)", eid)
                                break
            elif etype == "compaction" or etype == "branch_summary":
                if get("summary").__class__ is not str:
                    sink.add("summary_type", line, f"{etype} summary has type {_json_type(get('summary'))}, not "
                             "string (Pi's code throws on it)", eid)
            if etype == "compaction":
                kept = get("firstKeptEntryId")
                if not (kept.__class__ is str and kept in by_id):
                    sink.add(
                        "kept_missing", line,
                        f"compaction's firstKeptEntryId {kept!r} is not in the file", eid,
                    )
            elif etype != "branch_summary" and (etype.__class__ is not str or etype not in known):
                sink.add("unknown_type", line, f"unknown entry type {etype!r} (kept as is)", eid)
        # Every parent earlier in the file and no repeated id: parent links only go back, no cycle.
        cycles = self._find_cycles() if (forward or duplicates) else []
        line_of = {id(e): line for e, line in zip(self.entries, self._lines)} if cycles else {}
        for cycle in cycles:
            ids = " -> ".join(cycle)
            first = cycle[0]
            self._warned_cycles.update(cycle)
            sink.add("cycle", line_of.get(id(by_id[first])), f"parentId cycle: {ids} -> {first}", first)

    def _find_cycles(self) -> list[list[str]]:
        """Every parent cycle among indexed entries, each once (linear time)."""
        state: dict[str, int] = {}
        cycles = []
        by_id = self._by_id
        for start in by_id:
            if start in state:
                continue
            stack: list[str] = []
            current: str | None = start
            while current is not None and current not in state:
                state[current] = 1
                stack.append(current)
                parent = by_id[current].get("parentId")
                current = parent if isinstance(parent, str) and parent in by_id else None
            if current is not None and state[current] == 1:
                cycles.append(stack[stack.index(current) :])
            for node in stack:
                state[node] = 2
        return cycles

    # -- tree ---------------------------------------------------------------------------------

    @property
    @port("session-manager.js", "SessionManager.getLeafId")
    def leaf_id(self) -> str | None:
        """Where the session stands (Pi's ``getLeafId``; default: the last entry's id); set to move it."""
        return self._leaf_id

    @leaf_id.setter
    def leaf_id(self, value: str | None) -> None:
        if value is not None and value not in self._by_id:
            raise EntryNotFoundError(f"Entry {value} not found")
        self._leaf_id = value

    @property
    @port("session-manager.js", "SessionManager.getSessionId")
    def id(self) -> str:
        """The session id from the header (Pi's ``getSessionId``)."""
        return self.header.get("id", "")

    @port("session-manager.js", "SessionManager.getEntry")
    def get_entry(self, entry_id: Any) -> dict | None:
        """The entry with this id (Pi's ``getEntry``: the last one if the id repeats), or None."""
        try:
            return self._by_id.get(entry_id)
        except TypeError:
            return None

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.entries)

    @port("session-manager.js", "SessionManager.getChildren")
    def get_children(self, entry_id: str | None) -> list[dict]:
        """Direct children (Pi's ``getChildren``); ``None`` gives the roots (parentId null)."""
        return [e for e in self._by_id.values()
                if (parent := e.get("parentId", UNDEFINED)).__class__ not in _UNHASHABLE and parent == entry_id]

    def leaves(self) -> list[dict]:
        """Entries without children, in index order (every branch's tip)."""
        parents = set()
        for entry in self._by_id.values():
            parent = entry.get("parentId")
            if parent.__class__ is str:
                parents.add(parent)
        return [e for eid, e in self._by_id.items() if eid not in parents]

    @port("session-manager.js", "SessionManager.getBranch")
    def get_branch(self, leaf_id: str | None = None) -> list[dict]:
        """Pi's ``getBranch``: root-first entries from the root to ``leaf_id`` (default: the leaf).

        Unlike Pi, a parent cycle stops the walk (and is recorded once as a warning).
        """
        start = leaf_id if leaf_id is not None else self._leaf_id
        leaf = self.get_entry(start) if start else None
        if leaf is None:
            return []
        lookup = self._by_id.get
        path = walk_to_root(leaf, lookup, len(self._by_id) + 1)
        stop = _parent_entry(path[-1], lookup)
        if stop is not None:  # the walk stopped at an entry met twice: a parentId cycle
            eid = stop.get("id")
            if eid not in self._warned_cycles:
                self._warned_cycles.add(eid)
                self.warnings.append(SessionWarning(None, "parentId cycle: branch walk stopped", eid, self.path))
        path.reverse()
        _remember_branch_root(self, path[0])
        return path

    def _on_branch(self, entry_id: Any) -> bool:
        """Whether an entry of the active branch has this id: the walk from the leaf up stops where it is
        found (an edit's target is normally recent); where it is not, ``get_branch`` (which records a cycle)."""
        leaf = self.get_entry(self._leaf_id) if self._leaf_id else None
        if leaf is not None:
            last = walk_to_root(leaf, self._by_id.get, len(self._by_id) + 1, lambda e: e.get("id") == entry_id)[-1]
            if last.get("id") == entry_id:
                return True
        return any(e.get("id") == entry_id for e in self.get_branch())

    def common_ancestor(self, a: str | None, b: str | None) -> str | None:
        """The deepest entry id on both the path to ``a`` and the path to ``b`` (None if none).

        ``None`` for either stands for the position before the root (Pi's null leaf).
        """
        on_a = {e.get("id") for e in self.get_branch(a)} if a else set()
        if not on_a:
            return None
        for entry in reversed(self.get_branch(b) if b else []):
            if entry.get("id") in on_a:
                return entry.get("id")
        return None

    @port("session-manager.js", "SessionManager.getLabel")
    def get_label(self, entry_id: Any) -> str | None:
        """The entry's current label (Pi's ``getLabel``: the latest label entry; an empty label clears it)."""
        try:
            return self._labels.get(entry_id)
        except TypeError:
            return None

    @property
    def labels(self) -> dict[str, str]:
        """All current labels, target id -> label."""
        return dict(self._labels)

    @property
    @port("session-manager.js", "SessionManager.getSessionName")
    def name(self) -> str | None:
        """Pi's ``getSessionName``: the latest ``session_info`` name, trimmed; empty clears."""
        for entry in reversed(self.entries):
            if entry.get("type") == "session_info":
                name = entry.get("name")
                if isinstance(name, str):
                    return js_trim(name) or None
                return None
        return None

    @port("session-manager.js", "SessionManager.branch")
    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry (Pi's ``branch``)."""
        if entry_id not in self._by_id:
            raise EntryNotFoundError(f"Entry {entry_id} not found")
        self._leaf_id = entry_id

    @port("session-manager.js", "SessionManager.resetLeaf")
    def reset_leaf(self) -> None:
        """Leaf before any entry: the next append makes a new root (Pi's ``resetLeaf``)."""
        self._leaf_id = None

    # -- appending ----------------------------------------------------------------------------

    @port("session-manager.js", "generateId", part=True)
    def new_id(self) -> str:
        """A fresh 8-hex entry id from this session's rng (Pi's ``generateId``), of no entry of the session and
        not in :attr:`reserved_ids`."""
        return _random_id(self.rng, self._by_id, self.reserved_ids)

    @port("session-manager.js", "SessionManager._appendEntry")
    def append_entry(self, entry: SessionEntry | dict[str, Any]) -> dict:
        """Append a complete entry dict, index it and move the leaf to it (Pi's ``_appendEntry``)."""
        row = cast(dict, entry)  # stored as given: the session's entries are plain dicts
        eid = row.get("id") if isinstance(row, dict) else None
        if not isinstance(eid, str):
            raise InvalidEntryError("entry needs a string id")
        if eid in self._by_id:
            raise InvalidEntryError(f"duplicate entry id {eid!r}")
        self.entries.append(row)
        self._lines.append(None)
        self._index(row)
        return row

    def _timestamp(self, timestamp: str | int | float | None) -> str:
        if timestamp is None:
            return iso_now()
        if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
            return to_iso(timestamp)
        return str(timestamp)

    @port("session-manager.js", "SessionManager.appendMessage")
    def append_message(self, message: dict, timestamp: str | int | float | None = None) -> SessionMessageEntry:
        """Append a ``message`` entry after the leaf (Pi's ``appendMessage``)."""
        entry = {
            "type": "message",
            "id": self.new_id(),
            "parentId": self._leaf_id,
            "timestamp": self._timestamp(timestamp),
            "message": message,
        }
        return cast(SessionMessageEntry, self.append_entry(entry))

    @port("session-manager.js", "SessionManager.appendThinkingLevelChange")
    def append_thinking_level_change(self, thinking_level: Any, timestamp: str | int | float | None = None) -> dict:
        """Append a ``thinking_level_change`` entry after the leaf (Pi's ``appendThinkingLevelChange``)."""
        return self.append_entry({"type": "thinking_level_change", "id": self.new_id(), "parentId": self._leaf_id,
                                  "timestamp": self._timestamp(timestamp), "thinkingLevel": thinking_level})

    @port("session-manager.js", "SessionManager.appendModelChange")
    def append_model_change(self, provider: Any, model_id: Any, timestamp: str | int | float | None = None) -> dict:
        """Append a ``model_change`` entry after the leaf (Pi's ``appendModelChange``)."""
        return self.append_entry({"type": "model_change", "id": self.new_id(), "parentId": self._leaf_id,
                                  "timestamp": self._timestamp(timestamp), "provider": provider, "modelId": model_id})

    @port("session-manager.js", "SessionManager.appendUsage")
    def append_usage(self, kind: Any, provider: Any, model: Any, usage: Any, note: Any = None,
                     timestamp: str | int | float | None = None) -> dict:
        """Append a ``usage`` entry after the leaf (Pi's ``appendUsage``: usage outside the model's context)."""
        entry = {"type": "usage", "id": self.new_id(), "parentId": self._leaf_id,
                 "timestamp": self._timestamp(timestamp), "kind": kind, "provider": provider, "model": model,
                 "usage": usage}
        if js_truthy(note):
            entry["note"] = note
        return self.append_entry(entry)

    @port("session-manager.js", "SessionManager.appendCustomEntry")
    def append_custom_entry(self, custom_type: Any, data: Any = UNDEFINED,
                            timestamp: str | int | float | None = None) -> dict:
        """Append a ``custom`` entry (extension state, outside the context) after the leaf (Pi's
        ``appendCustomEntry``; ``data`` left out stays undefined)."""
        entry = {"type": "custom", "customType": custom_type, "data": data, "id": self.new_id(),
                 "parentId": self._leaf_id, "timestamp": self._timestamp(timestamp)}
        if data is UNDEFINED:
            del entry["data"]
        return self.append_entry(entry)

    @port("session-manager.js", "SessionManager.appendSessionInfo")
    def append_session_info(self, name: str, timestamp: str | int | float | None = None) -> dict:
        """Append a ``session_info`` entry naming the session (Pi's ``appendSessionInfo``: line breaks become
        spaces, the name is trimmed)."""
        sanitized = js_trim(_LINE_BREAKS.sub(" ", name))
        return self.append_entry({"type": "session_info", "id": self.new_id(), "parentId": self._leaf_id,
                                  "timestamp": self._timestamp(timestamp), "name": sanitized})

    @port("session-manager.js", "SessionManager.appendCustomMessageEntry")
    def append_custom_message_entry(self, custom_type: Any, content: Any, display: Any, details: Any = UNDEFINED,
                                    timestamp: str | int | float | None = None) -> dict:
        """Append a ``custom_message`` entry (an extension's message in the context) after the leaf (Pi's
        ``appendCustomMessageEntry``; ``details`` left out stays undefined)."""
        entry = {"type": "custom_message", "customType": custom_type, "content": content, "display": display,
                 "details": details, "id": self.new_id(), "parentId": self._leaf_id,
                 "timestamp": self._timestamp(timestamp)}
        if details is UNDEFINED:
            del entry["details"]
        return self.append_entry(entry)

    @port("session-manager.js", "SessionManager.appendLabelChange")
    def append_label_change(self, target_id: str, label: Any = UNDEFINED,
                            timestamp: str | int | float | None = None) -> dict:
        """Set or clear (``label`` empty or left out) the label of an entry with a ``label`` entry after the
        leaf (Pi's ``appendLabelChange``)."""
        if target_id not in self._by_id:
            raise EntryNotFoundError(f"Entry {target_id} not found")
        entry = {"type": "label", "id": self.new_id(), "parentId": self._leaf_id,
                 "timestamp": self._timestamp(timestamp), "targetId": target_id, "label": label}
        if label is UNDEFINED:
            del entry["label"]
        return self.append_entry(entry)

    @port("session-manager.js", "SessionManager.appendContextEdit")
    def append_context_edit(
        self, target_id: str, replacement: dict | None, timestamp: str | int | float | None = None
    ) -> ContextEditEntry:
        """Append a ``context_edit`` entry after the leaf, as Pi's ``appendContextEdit`` does.

        ``replacement`` is ``None`` (omit the target from the context) or ``{"content": str |
        list}``; a string for an assistant or tool-result target is stored as one text block.
        The target must be on the active branch and contribute editable model content (a
        ``user``/``assistant``/``toolResult`` message or a ``custom_message``).
        """
        if replacement is not None and not (
            isinstance(replacement, dict) and isinstance(replacement.get("content", UNDEFINED), (str, list))
        ):
            raise InvalidEntryError("Context edit replacement must be null or contain string/array content")
        target = self.get_entry(target_id)
        if target is None:
            raise EntryNotFoundError(f"Entry {target_id} not found")
        if not self._on_branch(target_id):
            raise InvalidEntryError(f"Entry {target_id} is not on the active branch")
        role = target.get("message", {}).get("role") if target.get("type") == "message" else None
        if not (target.get("type") == "custom_message" or role in ("user", "assistant", "toolResult")):
            raise InvalidEntryError(f"Entry {target_id} does not contribute editable model content")
        if replacement is not None and role in ("assistant", "toolResult") and isinstance(replacement["content"], str):
            replacement = {"content": [{"type": "text", "text": replacement["content"]}]}
        entry = {
            "type": "context_edit",
            "id": self.new_id(),
            "parentId": self._leaf_id,
            "timestamp": self._timestamp(timestamp),
            "targetId": target_id,
            "replacement": replacement,
        }
        return cast(ContextEditEntry, self.append_entry(entry))

    @port("session-manager.js", "SessionManager.appendCompaction")
    def append_compaction(
        self,
        result: Any,
        from_hook: bool | None = False,
        timestamp: str | int | float | None = None,
        system_message: dict | None | Any = COMPUTE_SYSTEM_MESSAGE,
    ) -> CompactionEntry:
        """Append a compaction entry exactly as Pi's ``appendCompaction`` builds it.

        ``result`` is a ``CompactionResult`` (attributes) or a Pi-shaped dict. ``None`` for
        details, usage or from_hook stands for JavaScript's undefined: the key is omitted.
        ``system_message``: the current system message of the branch (``None``: there is
        none), when the caller knows it; by default it is found by projecting the branch.
        """
        summary = _field(result, "summary", "summary")
        first_kept = _field(result, "first_kept_entry_id", "firstKeptEntryId")
        tokens_before = _field(result, "tokens_before", "tokensBefore")
        details = _field(result, "details", "details")
        usage = _field(result, "usage", "usage")
        ts = self._timestamp(timestamp)
        if system_message is COMPUTE_SYSTEM_MESSAGE:
            system_message = get_current_system_message(build_session_projection(self).messages)
        eid = self.new_id()
        entry: dict[str, Any] = {
            "type": "compaction",
            "id": eid,
            "parentId": self._leaf_id,
            "timestamp": ts,
            "summary": summary,
            "firstKeptEntryId": first_kept if first_kept is not None else eid,
            "tokensBefore": tokens_before,
        }
        if details is not None:
            entry["details"] = details
        if usage is not None:
            entry["usage"] = usage
        if from_hook is not None:
            entry["fromHook"] = from_hook
        if system_message:
            stamped = dict(system_message)
            stamped["timestamp"] = parse_iso_ms(ts)
            entry["systemMessage"] = stamped
        _drop_undefined(entry, ("summary", "tokensBefore"))
        return cast(CompactionEntry, self.append_entry(entry))

    @port("session-manager.js", "SessionManager.branchWithSummary")
    def branch_with_summary(
        self,
        target_id: str | None,
        result: Any,
        timestamp: str | int | float | None = None,
        *,
        from_hook: bool | None = False,
    ) -> BranchSummaryEntry:
        """Move the leaf to ``target_id`` and append a branch summary there (Pi's ``branchWithSummary``).

        ``result`` is a ``BranchSummaryResult`` (details become ``{readFiles, modifiedFiles}``
        as Pi's ``/tree`` navigation builds them) or a Pi-shaped dict with ``summary``,
        ``details`` and ``usage``.
        """
        if target_id is not None and target_id not in self._by_id:
            raise EntryNotFoundError(f"Entry {target_id} not found")
        summary = _field(result, "summary", "summary")
        usage = _field(result, "usage", "usage")
        if isinstance(result, dict):
            details = result.get("details")
        else:
            details = {
                "readFiles": list(getattr(result, "read_files", None) or []),
                "modifiedFiles": list(getattr(result, "modified_files", None) or []),
            }
        from_id = self._leaf_id if self._leaf_id is not None else "root"
        self._leaf_id = target_id
        entry: dict[str, Any] = {
            "type": "branch_summary",
            "id": self.new_id(),
            "parentId": target_id,
            "timestamp": self._timestamp(timestamp),
            "fromId": from_id,
            "summary": summary,
        }
        if details is not None:
            entry["details"] = details
        if usage is not None:
            entry["usage"] = usage
        if from_hook is not None:
            entry["fromHook"] = from_hook
        _drop_undefined(entry, ("summary",))
        return cast(BranchSummaryEntry, self.append_entry(entry))

    # -- writing ------------------------------------------------------------------------------

    def to_jsonl(self) -> str:
        """The v3 file text: header then entries, one ``JSON.stringify`` line each."""
        parts = [js_stringify(self.header)]
        parts.extend(js_stringify(e) for e in self.entries)
        return "\n".join(parts) + "\n"

    def copy(self) -> "Session":
        """An independent deep copy (entries, tree, leaf, warnings, source path)."""
        return copy.deepcopy(self)

    def write(self, path: str | os.PathLike[str], *, overwrite_source: bool = False) -> Path:
        """Write the session as a v3 file atomically (temp file + rename); returns the path.

        Refuses to replace the file the session was loaded from unless ``overwrite_source``.
        """
        target = Path(path)
        source = self.path
        known = getattr(self, "_source", None)
        if source is not None and known is not None and known[0] == source:
            source = known[1]  # relative paths resolved where the session was made
        if (
            source is not None
            and not overwrite_source
            and target.exists()
            and os.path.exists(source)
            and os.path.samefile(target, source)
        ):
            raise SourceOverwriteError(f"{target}: refusing to overwrite the session's source file")
        data = self.to_jsonl().encode("utf-8", "surrogatepass")

        atomic_write_bytes(target, data)
        return target

    # -- display ------------------------------------------------------------------------------

    def __repr__(self) -> str:
        where = f" {self.path!r}" if self.path else ""
        return (
            f"<Session{where} id={self.id!r} entries={len(self.entries)} "
            f"leaf={self._leaf_id!r} warnings={len(self.warnings)}>"
        )


# id of the first entry of a path ``get_branch`` returned -> its session: the session's index
# (``pimem.core.incremental.paths.walked_path``) recognises the list by it when it is passed on. An id is
# only a hint, checked against the session's entries; a session's ids are dropped when it is gone.
BRANCH_ROOTS: dict[int, weakref.ref[Session]] = {}
_ROOTS_OF: weakref.WeakKeyDictionary[Session, tuple[weakref.ref[Session], set[int]]] = weakref.WeakKeyDictionary()


def _forget_branch_roots(roots: set[int], owner: weakref.ref[Session]) -> None:
    for key in roots:
        if BRANCH_ROOTS.get(key) is owner:
            del BRANCH_ROOTS[key]


def _remember_branch_root(session: Session, root: dict) -> None:
    mine = _ROOTS_OF.get(session)
    if mine is None:
        roots: set[int] = set()
        mine = _ROOTS_OF[session] = (weakref.ref(session, partial(_forget_branch_roots, roots)), roots)
    BRANCH_ROOTS[id(root)] = mine[0]
    mine[1].add(id(root))


def _field(result: Any, attr: str, key: str) -> Any:
    if isinstance(result, dict):
        return result.get(key)
    return getattr(result, attr, None)


def _drop_undefined(entry: dict, keys: Sequence[str]) -> None:
    """Pi leaves these undefined when absent; JSON.stringify drops such keys."""
    for key in keys:
        if entry.get(key, UNDEFINED) is None:
            del entry[key]


# ------------------------------------------------------------------------------------------
# Context projection: buildSessionPath ... buildSessionContext
# ------------------------------------------------------------------------------------------


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


@dataclass
class SessionContext:
    """What ``buildSessionContext`` returns: the messages plus thinking level and model.

    Args:
        messages: the context's messages, in order.
        thinking_level: the last thinking-level change's level (``"off"`` without one).
        model: ``{"provider", "modelId"}`` of the last assistant message or model change, or None.
    """

    messages: list[AgentMessage]
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


projected_entry = partial(tuple.__new__, ProjectedEntry)
"""``ProjectedEntry((source_entry, messages))`` without a Python-level call."""


@dataclass
class SessionProjection:
    """What ``buildSessionProjection`` returns: entries with their messages, settings, model."""

    entries: list[ProjectedEntry]
    messages: list[dict]
    thinking_level: Any = "off"
    model: dict | None = None

    def to_context(self) -> SessionContext:
        return SessionContext(cast("list[AgentMessage]", self.messages), self.thinking_level, self.model)


# -- the path to a leaf ----------------------------------------------------------------------


def _lookup_any(lookup: Any, key: Any) -> dict | None:
    """``lookup(key)`` for a key that is not a string: an object or array finds nothing."""
    try:
        return lookup(key)
    except TypeError:
        return None


def _parent_entry(entry: dict, lookup: Any) -> dict | None:
    """The entry ``entry.parentId`` leads to as Pi's walk looks it up (``parentId ? index.get(parentId) :
    undefined``), or None."""
    parent = entry.get("parentId")
    if parent.__class__ is str:
        return lookup(parent) if parent else None
    return _lookup_any(lookup, parent) if js_truthy(parent) else None


@port("session-manager.js", "buildSessionPath", part=True)
def walk_to_root(leaf: dict, lookup: Callable[[Any], dict | None], limit: int,
                 until: Callable[[dict], bool] | None = None) -> list[dict]:
    """The entries from ``leaf`` up to its root, leaf first: each next one is what the entry's truthy
    ``parentId`` finds with ``lookup`` (Pi's ``index.get``), until it finds nothing.

    Where Pi would loop forever on a parentId cycle the walk stops before the first entry met twice;
    ``limit`` is the most entries a walk without a cycle can meet (the entries indexed). ``until``: stop
    after the first entry for which it holds. Every walk from a leaf to the root in pimem is this one.
    """
    path = [leaf]
    if until is not None and until(leaf):
        return path
    append = path.append
    current: Any = leaf
    for _ in range(limit):
        parent = current.get("parentId")
        if parent.__class__ is str:
            if not parent:
                return path
            current = lookup(parent)
        elif not js_truthy(parent):
            return path
        else:
            current = _lookup_any(lookup, parent)
        if current is None:
            return path
        append(current)
        if until is not None and until(current):
            return path
    # more entries than the index holds: a parentId cycle
    path = [leaf]
    seen = {id(leaf)}
    current = leaf
    while True:
        found = _parent_entry(current, lookup)
        if found is None or id(found) in seen:
            return path
        seen.add(id(found))
        path.append(found)
        if until is not None and until(found):
            return path
        current = found


@port("session-manager.js", "buildEntryIndex")
def build_entry_index(entries: Iterable[dict]) -> dict[Any, dict]:
    """``buildEntryIndex``: each entry under its id, the last one of a repeated id winning (as Pi's ``Map``;
    an object or array id, which no parsed key can find, is left out).

    Args:
        entries: the entries.
    """
    index: dict[Any, dict] = {}
    for entry in entries:
        eid = entry.get("id")
        if eid.__class__ is not dict and eid.__class__ is not list:
            index[eid] = entry
    return index


def _source_index(source: Any) -> tuple[Sequence[dict], Any, Any]:
    """(entries, lookup(id) -> entry | None, the default leaf id) for a session or a list of entries."""
    if isinstance(source, Session):
        # dict.get raises TypeError only for an unhashable key: walk_to_root looks those up with _lookup_any.
        leaf = source._leaf_id
        return source.entries, source._by_id.get, (NULL_LEAF if leaf is None else leaf)
    entries = getattr(source, "entries", None)
    if entries is not None and hasattr(source, "get_entry"):
        leaf = getattr(source, "leaf_id", None)
        return entries, source.get_entry, (NULL_LEAF if leaf is None else leaf)
    return source, build_entry_index(source).get, None


def is_walked_path(path: Sequence[dict]) -> bool:
    """Whether ``path`` is already the walk to its last entry, and so is every prefix of it: distinct
    non-empty string ids, each entry the child of the one before, the first one's parent not on it.

    :func:`build_session_path` of such a list (no leaf given) is the list itself."""
    try:
        ids = list(map(_ID, path))
        "".join(ids)  # raises unless every id is a string
    except (KeyError, TypeError):  # no id, or an id of another type
        return False
    try:
        parents = list(map(_PARENT_ID, path))
    except KeyError:  # an entry without a parentId (as a root, it names none)
        parents = [e.get("parentId") for e in path]
    if parents[1:] != ids[:-1]:
        return False
    id_set = set(ids)
    return not (len(id_set) != len(ids) or "" in id_set or (path and parents[0].__class__ is str
                                                             and parents[0] in id_set))


@port("session-manager.js", "buildSessionPath")
def build_session_path(source: Any, leaf_id: Any = None) -> list[dict]:
    """``buildSessionPath``: the entries from the root to the leaf, root first.

    Args:
        source: a :class:`Session` (its index and current leaf) or a list of entries (indexed here as
            Pi's ``buildEntryIndex`` does; the default leaf is the last entry).
        leaf_id: the leaf; ``None`` is Pi's ``undefined`` (the default leaf), :data:`NULL_LEAF` Pi's
            ``null`` (the empty path); an id not found falls back to the last entry, as in Pi.
    """
    return session_path_of(source, leaf_id)[0]


@port("session-manager.js", "buildSessionPath", part=True)
def session_path_of(source: Any, leaf_id: Any = None) -> tuple[list[dict], bool]:
    """(:func:`build_session_path`'s path, whether ``source`` is a list that was that path already, so that
    its truthy ids are distinct): a list for which :func:`is_walked_path` holds is taken as it is."""
    if leaf_id is None and not hasattr(source, "entries") and is_walked_path(source):
        return list(source), True  # the walk from the last entry meets every entry, in order
    entries, lookup, default_leaf = _source_index(source)
    if leaf_id is None:
        leaf_id = default_leaf
    if leaf_id is NULL_LEAF:
        return [], False
    leaf = None
    if js_truthy(leaf_id):
        leaf = lookup(leaf_id) if leaf_id.__class__ is str else _lookup_any(lookup, leaf_id)
    if leaf is None:
        if not entries:
            return [], False
        leaf = entries[-1]
    path = walk_to_root(leaf, lookup, len(entries))
    path.reverse()
    return path, False


# -- settings, context entries, projection -----------------------------------------------------


def lacks_message_object(entry: dict) -> bool:
    """Whether ``entry`` is a message entry without a message object (where Pi's ``entry.message.role``
    throws, or pimem refuses the entry: :func:`message_object`)."""
    return entry.get("type") == "message" and entry.get("message").__class__ is not dict


def message_object(entry: dict) -> dict:
    """The ``message`` of a message entry; a clear error where it is not an object.

    Pi reads ``entry.message.role`` first: a null or missing message throws there (the same
    JavaScriptTypeError here); a message that is a string, number, list or boolean is refused with
    a :class:`SessionFormatError` naming the entry (the loader warned about it, line and id).
    """
    message = entry.get("message", UNDEFINED)
    if message.__class__ is dict:
        return message
    if message is None or message is UNDEFINED:
        kind = "null" if message is None else "undefined"
        raise JavaScriptTypeError(f"Cannot read properties of {kind} (reading 'role') "
                                  f"(message entry {entry.get('id')!r} has no message object)")
    raise SessionFormatError(f"message entry {entry.get('id')!r}: the message is a {_json_type(message)}, not an "
                             "object; pimem does not project such entries (`pimem show` lists them)")


def require_message_objects(path: Sequence[dict]) -> None:
    """Raise :func:`message_object`'s error for the first message entry of ``path`` without a message object
    (where Pi, reading every entry's messages, throws; one pass that runs in C where every entry has a type
    and every message entry a message)."""
    try:
        if {e["message"].__class__ for e in path if e["type"] == "message"} <= _ONLY_DICT:
            return
    except (KeyError, TypeError):  # an entry without a type or a message: the entries are read one by one
        pass
    for entry in path:
        if lacks_message_object(entry):
            message_object(entry)


_ONLY_DICT = frozenset((dict,))


@port("session-manager.js", "getSessionContextSettings")
def get_session_context_settings(
    path: Sequence[dict], types: Sequence[Any] | None = None, *, checked: bool = False
) -> tuple[Any, dict | None]:
    """``getSessionContextSettings``: (thinking level, model) of a path: the last thinking-level change's
    level (``"off"`` without one), and the provider and model of the last model change or assistant message.

    Pi reads every entry from the first (and throws at the first message entry without a message object);
    the same answer and the same error come from the end of the path.

    Args:
        path: the path, root first.
        types: the entries' types, if known.
        checked: every message entry of the path is known to hold a message object.
    """
    if types is None:
        types = [e.get("type") for e in path]
    if not checked and "message" in types:
        require_message_objects(path)
    thinking_level: Any = "off"
    if "thinking_level_change" in types:
        last = len(types) - 1 - types[::-1].index("thinking_level_change")
        thinking_level = path[last].get("thinkingLevel")
    for i in range(len(types) - 1, -1, -1):
        etype = types[i]
        if etype == "message":
            message = path[i]["message"]
            if message.get("role") == "assistant":
                model_source, key = message, "model"
                break
        elif etype == "model_change":
            model_source, key = path[i], "modelId"
            break
    else:
        return thinking_level, None
    model: dict = {}
    if "provider" in model_source:
        model["provider"] = model_source["provider"]
    if key in model_source:
        model["modelId"] = model_source[key]
    return thinking_level, model


class EntryMessages(tuple):
    """The context messages of consecutive entries (``sessionEntryToContextMessages`` of each), kept as Pi's
    answers come: ``own`` holds, in order, the message of every entry that brings exactly its own message
    (nearly every message entry), ``other`` the messages of each other entry by its position. A pair
    ``(own, other)`` underneath.
    """

    __slots__ = ()

    own = property(itemgetter(0), doc="The entries' own messages, in order.")
    other = property(itemgetter(1), doc="Position → messages, for every entry bringing other than its own message.")
    def flat(self) -> list[dict]:
        """Every message, in the entries' order (Pi's ``flatMap``)."""
        own, other = self
        out: list[dict] = []
        taken = 0
        # the k-th other entry, at position p, comes after p - k own messages; most bring none
        for k, position, messages in [(k, p, m) for k, (p, m) in enumerate(other.items()) if m]:
            upto = position - k
            out += own[taken:upto]
            out += messages
            taken = upto
        if not taken and not out:
            return own
        out += own[taken:]
        return out

    def per_entry(self, as_tuples: bool = False) -> list:
        """Each entry's messages (``as_tuples``: an entry's own message as a 1-tuple, which is cheaper to make
        than a list, for callers that only read them)."""
        own, other = self
        lists: list = list(zip(own)) if as_tuples else [[m] for m in own]
        if not other:
            return lists
        out: list[list[dict]] = []
        taken = 0
        for k, (position, messages) in enumerate(other.items()):
            upto = position - k
            out += lists[taken:upto]
            out.append(messages)
            taken = upto
        out += lists[taken:]
        return out


_entry_messages = partial(tuple.__new__, EntryMessages)


@port("session-manager.js", "sessionEntryToContextMessages")
def session_entry_to_context_messages_of(entries: Sequence[dict], types: Sequence[Any] | None = None) -> EntryMessages:
    """``sessionEntryToContextMessages`` of each entry, in one loop: the context messages it contributes.

    A message entry brings its message (with empty content where a user, assistant, tool-result or
    system message has none); a ``custom_message`` a ``custom`` message; a branch summary with a
    summary its summary message; a compaction its system message (if any) and its summary message;
    every other entry nothing. A message entry without a message object raises
    (:func:`message_object`).

    Args:
        entries: session entries.
        types: their types, if known.
    """
    own: list[dict] = []
    add = own.append
    other: dict[int, list[dict]] = {}
    for entry, etype in zip(entries, [e.get("type") for e in entries] if types is None else types):
        # every entry goes to ``own`` or to ``other``: this one's position is how many went before
        if etype == "message":
            try:
                message = entry["message"]
                if message["content"] is not None and message.__class__ is dict:
                    add(message)  # its own message, as it is (nearly every message entry)
                    continue
            except (KeyError, TypeError):  # no message object, or a message without content
                pass
            message = entry.get("message")
            if message.__class__ is not dict:
                message = message_object(entry)
            role = message.get("role")
            if message.get("content") is not None:
                add(message)
            elif role == "system":
                other[len(own) + len(other)] = [{**message, "content": ""}]
            elif role in ("user", "assistant", "toolResult"):
                other[len(own) + len(other)] = [{**message, "content": []}]
            else:
                add(message)
            continue
        position = len(own) + len(other)
        if etype == "custom_message":
            content = entry.get("content")
            other[position] = [create_custom_message(
                entry.get("customType", UNDEFINED),
                [] if content is None else content,
                entry.get("display", UNDEFINED),
                entry.get("details", UNDEFINED),
                entry.get("timestamp", UNDEFINED),
            )]
        elif etype == "branch_summary":
            if js_truthy(entry.get("summary")):
                other[position] = [create_branch_summary_message(
                    entry["summary"], entry.get("fromId", UNDEFINED), entry.get("timestamp", UNDEFINED)
                )]
            else:
                other[position] = []
        elif etype == "compaction":
            summary = create_compaction_summary_message(
                entry.get("summary", UNDEFINED),
                entry.get("tokensBefore", UNDEFINED),
                entry.get("timestamp", UNDEFINED),
            )
            system_message: Any = entry.get("systemMessage")
            other[position] = [system_message, summary] if js_truthy(system_message) else [summary]
        else:
            other[position] = []
    return _entry_messages((own, other))


@port("session-manager.js", "sessionEntryToContextMessages", part=True)
def session_entry_to_context_messages(entry: dict) -> list[dict]:
    """``sessionEntryToContextMessages`` of one entry (:func:`session_entry_to_context_messages_of`).

    Args:
        entry: one session entry.
    """
    own, other = session_entry_to_context_messages_of((entry,), (entry.get("type"),))
    return own or other[0]


@port("session-manager.js", "buildContextEntries", part=True)
def select_context_entries(path: list[dict], types: list | None = None,
                           position_of: Callable[[str], int | None] | None = None) -> tuple[list[dict], list]:
    """``buildContextEntries`` on the path to the leaf (:func:`build_session_path`'s), with the entries'
    types: the latest compaction, the entries from its ``firstKeptEntryId`` on but system messages, then
    every entry after it. Without a compaction, the path itself.

    Args:
        path: the walked path, root first (its entries with truthy ids have distinct ids).
        types: the path's entry types, if known.
        position_of: where on the path the entry with a given string id is (None: not on it), if known.
    """
    if types is None:
        types = [e.get("type") for e in path]
    if "compaction" not in types:
        return path, types
    compaction_idx = len(types) - 1 - types[::-1].index("compaction")
    compaction = path[compaction_idx]
    first_kept = compaction.get("firstKeptEntryId", UNDEFINED)
    start = compaction_idx
    if first_kept.__class__ is str and first_kept and position_of is not None:
        found = position_of(first_kept)
        if found is not None and found < compaction_idx:
            start = found
    elif first_kept.__class__ is str and first_kept:
        # The walked path holds at most one entry with this id: search back from the compaction
        # (the kept entries are the ones just before it).
        for i in range(compaction_idx - 1, -1, -1):
            if path[i].get("id") == first_kept:
                start = i
                break
    else:
        for i in range(compaction_idx):
            if path[i].get("id", UNDEFINED) == first_kept:
                start = i
                break
    kept = path[start:compaction_idx]
    kept_types = types[start:compaction_idx]
    if "message" in kept_types:
        keep = [t != "message" or e["message"].get("role") != "system" for e, t in zip(kept, kept_types)]
        if not all(keep):
            kept = [e for e, k in zip(kept, keep) if k]
            kept_types = [t for t, k in zip(kept_types, keep) if k]
    return ([compaction, *kept, *path[compaction_idx + 1 :]],
            [types[compaction_idx], *kept_types, *types[compaction_idx + 1 :]])


@port("session-manager.js", "buildContextEntries")
def build_context_entries(source: Any, leaf_id: Any = None) -> list[dict]:
    """``buildContextEntries``: the latest compaction, its kept entries, then everything after it.

    Args:
        source: a session or a list of entries (as :func:`build_session_path` takes them).
        leaf_id: the leaf (as :func:`build_session_path` takes it).
    """
    return select_context_entries(build_session_path(source, leaf_id))[0]


@port("session-manager.js", "projectContextEntry", part=True)
def apply_context_edit(messages: list[dict], edit: dict) -> list[dict]:
    """``projectContextEntry``'s edit of an entry's messages: none for a null replacement, else each user,
    assistant, tool-result or custom message with the replacement's content (a string as one text block
    for an assistant or tool result)."""
    replacement = edit.get("replacement", UNDEFINED)
    if replacement is None:
        return []
    if replacement is UNDEFINED:
        # Pi reads ``replacement.content`` only for a message it edits: an entry with no message of
        # those roles (a model change, a label, a summary) is left as it is, without a throw.
        if any(m.get("role") in ("user", "assistant", "toolResult", "custom") for m in messages):
            raise JavaScriptTypeError("Cannot read properties of undefined (reading 'content')")
        return messages
    rcontent = replacement.get("content", UNDEFINED) if isinstance(replacement, dict) else UNDEFINED
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
        if content is UNDEFINED:
            new.pop("content", None)  # JavaScript undefined: JSON.stringify omits it
        else:
            new["content"] = content
        out.append(new)
    return out


@port("session-manager.js", "projectContextEntry")
def project_context_entry(entry: dict, edit: dict | None) -> list[dict]:
    """``projectContextEntry``: an entry's messages with a ``context_edit`` applied.

    Args:
        entry: one session entry.
        edit: the ``context_edit`` entry targeting it, or None.
    """
    messages = session_entry_to_context_messages(entry)
    return messages if edit is None else apply_context_edit(messages, edit)


def edit_target(edit: dict) -> Any:
    """A ``context_edit``'s key in Pi's ``Map`` of edits: its ``targetId``, or, for an object or array (a
    ``Map`` holds those by identity, so no entry's id finds them), a key of its own that nothing finds."""
    target = edit.get("targetId", UNDEFINED)
    return object() if target.__class__ in _UNHASHABLE else target


@port("session-manager.js", "buildSessionProjection", part=True)
def project_context_entries(context_entries: list[dict], types: list | None = None) -> EntryMessages:
    """The messages of each context entry, as ``buildSessionProjection`` projects them: the entry's messages
    with the latest ``context_edit`` targeting it applied (:func:`project_context_entry`); none for a
    compaction after the first entry (only the newest compaction, first, brings its summary).

    Args:
        context_entries: :func:`build_context_entries`'s entries.
        types: their types, if known.
    """
    if types is None:
        types = [e.get("type") for e in context_entries]
    later_compactions = "compaction" in types[1:]
    if "context_edit" not in types and not later_compactions:
        return session_entry_to_context_messages_of(context_entries, types)
    edits: dict[Any, dict] = {}
    for entry, etype in zip(context_entries, types):
        if etype == "context_edit":
            edits[edit_target(entry)] = entry
    projected = [i for i, t in enumerate(types) if i == 0 or t != "compaction"]
    per_entry: list[list[dict]] = [[] for _ in context_entries]
    brought = session_entry_to_context_messages_of([context_entries[i] for i in projected],
                                                   [types[i] for i in projected])
    for i, messages in zip(projected, brought.per_entry()):
        per_entry[i] = messages
    if edits:
        get_edit = edits.get
        for i in projected:
            edit = _lookup_any(get_edit, context_entries[i].get("id", UNDEFINED))
            if edit is not None:
                per_entry[i] = apply_context_edit(per_entry[i], edit)
    return _entry_messages(([], dict(enumerate(per_entry))))


def _projection(path: list[dict], types: list | None, checked: bool, position_of: Any
                ) -> tuple[Any, Any, list[dict], EntryMessages]:
    """(thinking level, model, context entries, their messages) of a walked path."""
    if types is None:
        types = [e.get("type") for e in path]
    if not checked and "compaction" not in types and "context_edit" not in types:
        # The context entries are the path, projected as they are: reading their messages, in order, raises
        # the settings' error for the first message entry without a message object (Pi's settings read first).
        brought = session_entry_to_context_messages_of(path, types)
        return (*get_session_context_settings(path, types, checked=True), path, brought)
    thinking_level, model = get_session_context_settings(path, types, checked=checked)
    context_entries, context_types = select_context_entries(path, types, position_of)
    return thinking_level, model, context_entries, project_context_entries(context_entries, context_types)


@port("session-manager.js", "buildSessionProjection", part=True)
def project_session_path(path: list[dict], types: list | None = None, *, checked: bool = False,
                         pairs: bool = False, position_of: Callable[[str], int | None] | None = None
                         ) -> SessionProjection:
    """``buildSessionProjection`` of the path to the leaf (:func:`build_session_path`'s).

    Args:
        path: the walked path, root first.
        types: its entry types, if known.
        checked: every message entry of the path is known to hold a message object.
        pairs: the entries as plain ``(source entry, messages)`` tuples, not :class:`ProjectedEntry`, an
            entry's own message as a 1-tuple (for callers that only read them, as the preparation does).
        position_of: where on the path the entry with a given string id is, if known.
    """
    thinking_level, model, context_entries, brought = _projection(path, types, checked, position_of)
    per_entry = brought.per_entry(as_tuples=pairs)
    entries: list = list(zip(context_entries, per_entry)) if pairs else list(
        map(projected_entry, zip(context_entries, per_entry)))
    return SessionProjection(entries, brought.flat(), thinking_level, model)


@port("session-manager.js", "buildSessionProjection")
def build_session_projection(source: Any, leaf_id: Any = None) -> SessionProjection:
    """``buildSessionProjection``: projected entries (each keeps its source entry) + messages.

    Args:
        source: a session, or a list of entries (its last entry is the default leaf).
        leaf_id: the leaf (as :func:`build_session_path` takes it).
    """
    return project_session_path(build_session_path(source, leaf_id))


@port("session-manager.js", "buildSessionContext", part=True)
def session_path_context(path: list[dict], types: list | None = None, *, checked: bool = False,
                         position_of: Callable[[str], int | None] | None = None) -> SessionContext:
    """``buildSessionContext`` of the path to the leaf: the projection's messages and settings.

    Args:
        path: the walked path, root first.
        types: its entry types, if known.
        checked: every message entry of the path is known to hold a message object.
        position_of: where on the path the entry with a given string id is, if known.
    """
    thinking_level, model, _, brought = _projection(path, types, checked, position_of)
    return SessionContext(cast("list[AgentMessage]", brought.flat()), thinking_level, model)


@port("session-manager.js", "buildSessionContext")
def build_session_context(source: Any, leaf_id: Any = None) -> SessionContext:
    """``buildSessionContext``: the messages the model sees at the leaf, thinking level, model.

    Args:
        source: a session, or a list of entries (its last entry is the default leaf).
        leaf_id: the leaf; ``None`` is Pi's default leaf (the last entry of a list, or the session's
            current leaf), :data:`NULL_LEAF` Pi's ``null`` leaf (an empty context).
    """
    return session_path_context(build_session_path(source, leaf_id))


@port("session-manager.js", "getLatestCompactionEntry")
def get_latest_compaction_entry(entries: Sequence[dict]) -> dict | None:
    """``getLatestCompactionEntry``: the last compaction entry of ``entries``, or None.

    Args:
        entries: session entries.
    """
    for entry in reversed(entries):
        if entry.get("type") == "compaction":
            return entry
    return None


@port("session-manager.js", "migrateSessionEntries")
def migrate_session_entries(entries: list[dict], rng: random.Random | None = None) -> None:
    """``migrateSessionEntries``: :func:`migrate_to_current_version` without its answer.

    Args:
        entries: the file's entries, header included (changed in place).
        rng: draws the ids of v1 entries.
    """
    migrate_to_current_version(entries, rng)


@port("session-manager.js", "parseSessionEntries")
def parse_session_entries(content: str) -> list[Any]:
    """``parseSessionEntries``: the JSON value of every line of ``content`` (trimmed), skipping blank and
    malformed lines (no header check, no migration).

    Args:
        content: a session file's text.
    """
    entries = []
    for line in js_trim(content).split("\n"):
        if not js_trim(line):
            continue
        try:
            entries.append(loads_line(line))
        except (ValueError, RecursionError):
            continue
    return entries


@port("session-manager.js", "assertValidSessionId")
def assert_valid_session_id(session_id: str) -> None:
    """``assertValidSessionId``: raise unless ``session_id`` is letters, digits, ``.``, ``_`` and ``-``,
    starting and ending with a letter or digit.

    Args:
        session_id: a session id.
    """
    if not isinstance(session_id, str) or _SESSION_ID.fullmatch(session_id) is None:
        raise InvalidEntryError("Session id must be non-empty, contain only alphanumeric characters, '-', '_', and "
                                "'.', and start and end with an alphanumeric character")


_FILES = ("pimem reads the session files it is given (load_session) and writes copies atomically (Session.write); "
          "it never keeps, lists or rewrites Pi's own session folder")
for _name in ("getDefaultSessionDir", "findMostRecentSession", "SessionManager.setSessionFile",
              "SessionManager.isPersisted", "SessionManager.getSessionDir", "SessionManager.usesDefaultSessionDir",
              "SessionManager.getSessionFile", "SessionManager._persist", "SessionManager._rewriteFile",
              "SessionManager._setSessionFile", "SessionManager.createBranchedSession", "SessionManager.create",
              "SessionManager.open", "SessionManager.continueRecent", "SessionManager.inMemory",
              "SessionManager.forkFrom", "SessionManager.findById", "SessionManager.list", "SessionManager.listAll"):
    not_ported("session-manager.js", _name, _FILES)
not_ported("session-manager.js", "SessionManager.getCwd", "the header's ``cwd`` (Session.header)")
not_ported("session-manager.js", "SessionManager.getHeader", "Session.header")
not_ported("session-manager.js", "SessionManager.getEntries", "Session.entries (without the header, as Pi's)")
not_ported("session-manager.js", "SessionManager.getLeafEntry", "Session.get_entry(Session.leaf_id)")
not_ported("session-manager.js", "SessionManager._loadEntries", "load_session and the Session constructor")
not_ported("session-manager.js", "SessionManager.getTree",
           "the tree is read from parent ids where it is drawn (pimem.Session.render_tree, the frames)")
for _name in ("buildContextEntries", "buildSessionProjection", "buildSessionContext"):
    not_ported("session-manager.js", f"SessionManager.{_name}",
               f"the module function takes the session: {_name} (session, leaf) in snake_case")

"""Reading another agent's JSON Lines transcript: plain or gzip'd, with the defects real files have.

The file is read as Pi's loader reads a session (:func:`pimem.base.files.read_lines`: a stream,
one line at most 512 MiB, a byte order mark removed). A line may hold two JSON objects back to back (a write artefact seen in real transcripts); the
last line may be cut short; a line may not be JSON at all. Every record comes out with its line
number; every defect becomes a :class:`~pimem.core.session_manager.SessionWarning`.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence, TypeVar

import orjson

from pimem.base.files import open_session_bytes, read_lines
from pimem.base.js import JS_DECODER, js_number, js_stringify, loads_line, parse_iso_ms, to_iso
from pimem.core.session_manager import SessionWarning
from pimem.errors import SessionFormatError
from pimem.sessions.session import Session

__all__ = ["Record", "ImportReport", "Notes", "line_list", "token_count", "read_records", "as_object", "as_str", "file_time_iso",
           "first_record_time", "imported_session"]

_T = TypeVar("_T")


def file_time_iso(path: str | os.PathLike[str]) -> str:
    """The file's modification time as an ISO timestamp (for a transcript without any time)."""
    return to_iso(os.stat(path).st_mtime * 1000)


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_str(value: Any, default: _T) -> str | _T:
    """``value`` when it is a string, else ``default``."""
    return value if isinstance(value, str) else default


# Token counts: whole numbers of at most 2**53 (beyond, no double holds a count exactly; no usage
# comes near it)
_MAX_TOKENS = 2**53


def _shown(value: Any) -> str:
    """A JSON value in a warning: a number or a short text as it reads, else its type."""
    if isinstance(value, bool) or value is None:
        return js_stringify(value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # (1e400 reads as inf, as in JavaScript)
    if isinstance(value, int) and abs(value) >= 10**21:
        return f"(an integer of {len(str(abs(value)))} digits)"
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        return js_stringify(value[:20] + ("…" if len(value) > 20 else ""))
    return "(an object)" if isinstance(value, dict) else "(an array)"


def token_count(value: Any) -> int | None:
    """``value`` as a token count (a whole number from 0 to 2**53), or None when it is none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= _MAX_TOKENS else None
    if isinstance(value, float) and 0 <= value <= _MAX_TOKENS and value.is_integer():
        return int(value)
    return None


class Notes:
    """Problems an import met, each reported once (one warning) with the lines it was met on; and the
    readings of values of another JSON type than the format's, which record such problems."""

    def __init__(self) -> None:
        self.lines: dict[str, list[int]] = {}

    def add(self, reason: str, line: int) -> None:
        self.lines.setdefault(reason, []).append(line)

    def text(self, value: Any, what: str, line: int) -> str:
        """``value`` when it is a string; none (null) is ``""``; anything else is kept as its JSON
        text, with a warning."""
        if isinstance(value, str):
            return value
        if value is None:
            return ""
        self.add(f"{what} is not a string: kept as its JSON text", line)
        return js_stringify(value)

    def tokens(self, value: Any, what: str, line: int) -> int:
        """``value`` as a token count; none (null) is 0; what is no count (negative, not whole, past
        2**53, infinite, not a number) is 0, with a warning giving it."""
        if value is None:
            return 0
        count = token_count(value)
        if count is not None:
            return count
        self.add(f"{what} {_shown(value)} is not a token count: read as 0", line)
        return 0

    def warnings(self, file: str) -> list[SessionWarning]:
        """One warning per reason, at its first line, counting and listing the lines."""
        return [SessionWarning(lines[0], f"{reason} ({len(lines)}×, lines {line_list(lines)})", None, file)
                for reason, lines in self.lines.items()]


def line_list(lines: list[int], limit: int = 8) -> str:
    """The first ``limit`` line numbers, comma-separated (``…`` for the rest)."""
    shown = ", ".join(str(n) for n in lines[:limit])
    return shown + (", …" if len(lines) > limit else "")


_BOM = b"\xef\xbb\xbf"


@dataclass
class Record:
    """One JSON object of a transcript and where it was (1-based line; ``part`` > 0 for the
    second object on a line)."""

    line: int
    data: dict[str, Any]
    part: int = 0


@dataclass
class ImportReport:
    """What an importer read and what it made of it.

    Args:
        source_format: the source's format (``"claude-code"``, ``"codex"``).
        path: the source file.
        records_in: source records per kind.
        entries_out: Pi entries written per kind.
        skipped: source records not imported, per reason, each with the line numbers.
        imported: source records imported, per kind.
    """

    source_format: str
    path: str
    records_in: dict[str, int] = field(default_factory=dict)
    entries_out: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, list[int]] = field(default_factory=dict)
    imported: dict[str, int] = field(default_factory=dict)

    def count_in(self, kind: str) -> None:
        self.records_in[kind] = self.records_in.get(kind, 0) + 1

    def count_imported(self, kind: str) -> None:
        self.imported[kind] = self.imported.get(kind, 0) + 1

    def skip(self, reason: str, line: int) -> None:
        self.skipped.setdefault(reason, []).append(line)

    @property
    def n_records(self) -> int:
        return sum(self.records_in.values())

    @property
    def n_skipped(self) -> int:
        return sum(len(v) for v in self.skipped.values())

    @property
    def n_imported(self) -> int:
        return sum(self.imported.values())


def split_objects(text: str) -> list[Any] | None:
    """Every JSON value on a line written back to back, or None when the line is not JSON."""
    values = []
    pos = 0
    end = len(text)
    try:
        while pos < end:
            value, pos = JS_DECODER.raw_decode(text, pos)
            values.append(value)
            while pos < end and text[pos].isspace():
                pos += 1
    except (ValueError, RecursionError):
        return None
    return values


def read_records(path: str | os.PathLike[str], warnings: list[SessionWarning]) -> Iterator[Record]:
    """Every JSON object of the transcript in file order; defects recorded in ``warnings``.

    The file (gzip'd or not) is read as a stream of lines with the limits of Pi's loader
    (:func:`pimem.base.files.read_lines`); a UTF-8 byte order mark before the first line is removed
    with a warning, as Pi's loader does; a line nested deeper than ``orjson`` reads is read as
    JavaScript reads it. A damaged archive or a line too long is a :class:`SessionFormatError`
    naming the file.
    """
    file = os.fspath(path)
    try:
        handle = open_session_bytes(file, buffering=0)
    except OSError as exc:
        raise SessionFormatError(f"{file}: cannot read: {exc}") from exc
    with handle as f:
        yield from _records(read_lines(f, file), file, warnings)


def _records(lines: Iterator[tuple[int, bytes, bool]], file: str, warnings: list[SessionWarning]) -> Iterator[Record]:
    for lineno, raw, terminated in lines:
        if lineno == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
            warnings.append(SessionWarning(1, "UTF-8 byte order mark removed", None, file))
        try:
            values = [orjson.loads(raw)]
        except orjson.JSONDecodeError:
            text = raw.decode("utf-8", "replace")
            if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
                warnings.append(SessionWarning(lineno, "invalid UTF-8 bytes replaced with U+FFFD", None, file))
            parsed = _parse_line(text.strip())
            if parsed is None:
                why = ("truncated last line (no newline, not valid JSON): skipped" if not terminated
                       else "malformed JSON line skipped")
                warnings.append(SessionWarning(lineno, why, None, file))
                continue
            values = parsed
            if len(values) > 1:
                warnings.append(
                    SessionWarning(lineno, f"{len(values)} JSON objects on one line: each read as a record", None, file)
                )
        for part, value in enumerate(values):
            if isinstance(value, dict):
                yield Record(lineno, value, part)
            else:
                warnings.append(
                    SessionWarning(lineno, f"line holds a JSON {type(value).__name__}, not an object: skipped", None, file)
                )


def _parse_line(text: str) -> list[Any] | None:
    """The JSON values of a line ``orjson`` refused: one value nested deeper than it reads (as
    JavaScript reads it), or several written back to back; None when the line is not JSON."""
    try:
        return [loads_line(text)]
    except (ValueError, RecursionError):
        return split_objects(text)


def timestamp_ms(timestamp: Any) -> int | None:
    """Epoch milliseconds of an ISO time string as V8 parses it; None for anything else."""
    if isinstance(timestamp, str):
        try:
            ms = parse_iso_ms(timestamp)
        except (ValueError, TypeError):
            return None
        return None if ms is None else int(ms)
    return None


def first_record_time(records: Sequence[Record], file: str) -> str:
    """The first record's ``timestamp`` string, else the file's modification time."""
    found = next((r.data["timestamp"] for r in records if isinstance(r.data.get("timestamp"), str)), None)
    return found or file_time_iso(file)


def imported_session(file: str, header: dict[str, Any], entries: list[dict[str, Any]], *, first_time: str,
                     warnings: list[SessionWarning], report: ImportReport, source_format: str,
                     seed: int | str | None) -> Session:
    """The :class:`Session` an importer made: entries without a time get ``first_time``; the ids it
    makes later are seeded with ``seed`` (default: the header's id)."""
    for entry in entries:
        if entry.get("timestamp") is None:
            entry["timestamp"] = first_time
    rng = random.Random(seed if seed is not None else header["id"])
    session = Session(header, entries, path=file, warnings=warnings, rng=rng)
    session.source_format = source_format  # type: ignore[attr-defined]
    session.import_report = report  # type: ignore[attr-defined]
    return session

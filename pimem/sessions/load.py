"""One loader for every session file pimem reads: Pi's own, Claude Code's and Codex's.

``load_session(path)`` recognises the format from the first records (``format="auto"``) and
returns a :class:`~pimem.sessions.session.Session` of Pi v3 entries whose
``source_format`` says where it came from. Pi files go through Pi's own loader unchanged.
:func:`as_session` takes anything that names a session (a session, a replay result, a path).
"""

from __future__ import annotations

import os
import random
import zlib
from typing import Literal, Protocol, Sequence, Union, cast, runtime_checkable

from pimem.core.session_manager import Session as CoreSession
from pimem.core.session_manager import load_session as load_pi_session
from pimem.errors import ArgumentTypeError, ConfigurationError, SessionFormatError
from pimem.sessions.importers.claude_code import import_claude_code, looks_like_claude_code
from pimem.sessions.importers.codex import import_codex, looks_like_codex
from pimem.sessions.importers.records import open_transcript
from pimem.sessions.importers.records import split_objects
from pimem.sessions.session import Session

__all__ = ["load_session", "detect_format", "SessionFormat", "SESSION_FORMATS", "SessionLike", "HasSession",
           "as_session", "session_or_entries"]

SessionFormat = Literal["auto", "pi", "claude-code", "codex"]
SESSION_FORMATS = ("pi", "claude-code", "codex")
_PROBE_BYTES = 1 << 20
_PROBE_RECORDS = 20


def detect_format(path: str | os.PathLike[str]) -> str:
    """``"pi"``, ``"claude-code"`` or ``"codex"`` from the file's first records (gzip'd or not).

    Raises :class:`SessionFormatError` naming the file when no record has a known shape.

    Args:
        path: the session file.
    """
    found = sniff_format(path)
    if found is None:
        raise SessionFormatError(
            f"{os.fspath(path)}:1: not a Pi session, Claude Code transcript or Codex rollout (no record of a "
            f"known shape in the first {_PROBE_RECORDS} lines)"
        )
    return found


def sniff_format(path: str | os.PathLike[str]) -> str | None:
    """The format the first records show, or None."""
    file = os.fspath(path)
    try:
        with open_transcript(file) as f:
            head = f.read(_PROBE_BYTES)
    except (OSError, EOFError, zlib.error) as exc:  # EOFError, zlib.error: a gzip'd file cut short or damaged
        raise SessionFormatError(f"{file}: cannot read: {exc}") from exc
    lines = head.split(b"\n")
    if len(head) == _PROBE_BYTES and len(lines) > 1:
        lines.pop()  # cut short by the probe
    seen = 0
    for lineno, raw in enumerate(lines, 1):
        text = raw.decode("utf-8", "replace").strip().lstrip("\ufeff")
        if not text:
            continue
        values = split_objects(text) or []
        for value in values:
            if not isinstance(value, dict):
                continue
            if value.get("type") == "session" and seen == 0:
                return "pi"
            if looks_like_codex(value):
                return "codex"
            if looks_like_claude_code(value):
                return "claude-code"
            seen += 1
        if lineno >= _PROBE_RECORDS:
            break
    return None


def load_session(
    path: str | os.PathLike[str],
    *,
    format: SessionFormat = "auto",
    rng: random.Random | None = None,
    seed: int | str | None = None,
) -> Session:
    """Load a session file as a :class:`~pimem.sessions.session.Session` of Pi v3 entries; the file is never written.

    Pi files load exactly as Pi loads them; Claude Code transcripts and Codex rollouts are imported (see
    :mod:`pimem.sessions.importers`), and their ``import_report`` counts what was read and skipped.

    Args:
        path: the session file (``.jsonl``, or ``.jsonl.gz`` for the imported formats).
        format: ``"auto"`` (recognised from the content; what is none of the three goes to Pi's loader,
            whose error names the problem), ``"pi"``, ``"claude-code"`` or ``"codex"``.
        rng: draws the ids of v1 entries and of entries appended later
            (:func:`pimem.core.session_manager.load_session`).
        seed: a seed for those ids instead, so that the same file gets the same ids on every load.
    """
    if format not in ("auto",) + SESSION_FORMATS:
        raise ConfigurationError(f"format must be one of 'auto', 'pi', 'claude-code', 'codex', not {format!r}")
    fmt: str = format
    if format == "auto":
        try:
            fmt = sniff_format(path) or "pi"  # unknown content: Pi's loader says precisely what is wrong
        except (SessionFormatError, OSError):
            fmt = "pi"
    if fmt == "pi":
        session = cast(Session, load_pi_session(path, rng=rng, seed=seed, session_type=Session))
        session.source_format = "pi"  # type: ignore[attr-defined]
        return session
    if fmt == "claude-code":
        session = import_claude_code(path, seed=seed)
    else:
        session = import_codex(path, seed=seed)
    if rng is not None:
        session.rng = rng
    return session


@runtime_checkable
class HasSession(Protocol):
    """Anything that holds a session in ``.session`` (a replay result)."""

    @property
    def session(self) -> CoreSession: ...


SessionLike = Union[CoreSession, HasSession, str, "os.PathLike[str]"]
"""A session, anything holding one in ``.session`` (a :class:`~pimem.replays.engine.ReplayResult`), or
the path of a session file."""


def as_session(source: SessionLike) -> CoreSession:
    """The session ``source`` names: the one way every public function that takes a session reads
    its argument.

    Args:
        source: a session (returned as it is), anything holding one in ``.session`` (a replay result:
            its replayed session), or the path of a session file (loaded with :func:`load_session`).

    Raises :class:`~pimem.errors.ArgumentTypeError` (a ``TypeError``) naming the type of anything else.
    """
    if isinstance(source, CoreSession):
        return source
    held = getattr(source, "session", None)
    if isinstance(held, CoreSession):
        return held
    if isinstance(source, (str, os.PathLike)):
        return load_session(source)
    raise ArgumentTypeError(
        f"expected a pimem Session, a replay result with .session, or the path of a session file; "
        f"got {type(source).__name__}"
    )


def session_or_entries(source: SessionLike | Sequence[dict]) -> CoreSession | list[dict]:
    """What the path functions of :mod:`pimem.core.session_manager` take: a list of entries as it
    is (the last entry is its leaf), also when a result holds it in ``.session``; anything else
    through :func:`as_session`."""
    held = getattr(source, "session", None)
    if isinstance(held, list):
        return held
    return source if isinstance(source, list) else as_session(source)  # type: ignore[arg-type]

"""Each compaction on a session's active path with the messages it summarized.

A compaction ``C`` summarized what Pi's projection held before it, from the entries the previous
compaction kept (or the root) up to ``C``'s ``firstKeptEntryId``; :func:`compaction_spans` finds
those messages and the file lists Pi computed for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from pimem.base.js import UNDEFINED
from pimem.core.compaction.utils import FileOperations, compute_file_lists, extract_file_ops_from_message
from pimem.core.incremental.paths import build_session_path, build_session_projection
from pimem.core.session_manager import (
    SessionProjection,
    get_session_context_settings,
    is_walked_path,
    project_session_path,
)
from pimem.sessions.load import SessionLike, session_or_entries
from pimem.sessions.spans import first_kept_index

__all__ = ["CompactionSpan", "compaction_spans", "messages_after_compaction", "prefix_projection", "projection_after"]


def _kept_start(path: list[dict], compaction_index: int) -> int:
    """Where ``buildContextEntries`` starts the kept entries of the compaction at ``compaction_index``
    of a walked path (the entry named ``firstKeptEntryId``, searched back; else the compaction)."""
    first_kept = path[compaction_index].get("firstKeptEntryId", UNDEFINED)
    if first_kept.__class__ is str and first_kept:
        for i in range(compaction_index - 1, -1, -1):
            if path[i].get("id") == first_kept:
                return i
    return compaction_index


def _prefix_entries(path: list[dict], end: int, previous_compaction: int, bad_message: int) -> list:
    """``prefix_projection(path, end, True).entries`` from the latest compaction before ``end`` (at
    ``previous_compaction``, -1 for none) on: the entries before its kept ones do not change the
    projected entries. ``bad_message``: the first message entry without a message object, where the
    whole prefix is projected (and raises as it does)."""
    start = _kept_start(path, previous_compaction) if previous_compaction >= 0 else 0
    if bad_message < end:
        start = 0
    return project_session_path(path[start:end]).entries


def prefix_projection(path: list[dict], end: int, walked: bool) -> SessionProjection:
    """``build_session_projection(path[:end])``; ``walked``: :func:`is_walked_path` holds for ``path``,
    so the prefix is its own walk and is projected without walking it again."""
    return project_session_path(path[:end]) if walked else build_session_projection(path[:end])


def messages_after_compaction(path: list[dict], end: int, compaction: int) -> list[dict]:
    """``prefix_projection(path, end, True).messages`` for a walked path whose latest compaction
    before ``end`` is at ``compaction``, every message entry before ``end`` holding a message
    object: projected from the compaction's kept entries on (the entries before them change
    neither the context entries nor their messages)."""
    return project_session_path(path[_kept_start(path, compaction):end]).messages


@dataclass
class CompactionSpan:
    """One compaction on the path with the messages it summarized."""

    index: int
    entry: dict
    messages: list[tuple[str | None, dict]]
    entry_ids: list[str]
    previous: dict | None
    read_files: list[str]
    modified_files: list[str]
    notes: list[str] = field(default_factory=list)
    after: SessionProjection | None = field(default=None, repr=False, compare=False)
    # on a walked path whose message entries before the compaction hold message objects: the entries
    # deciding the context settings there (the last thinking-level change, the last assistant message
    # or model change, in path order); None where unknown
    settings_entries: list[dict] | None = field(default=None, repr=False, compare=False)

    @property
    def summary(self) -> str:
        return str(self.entry.get("summary", ""))


def projection_after(span: CompactionSpan, path: list[dict], position: int, walked: bool) -> SessionProjection:
    """The projection right after the span's compaction (``path[position]``), as
    ``prefix_projection(path, position + 1, walked)``; kept on the span, since it depends only on the
    compaction and the entries before it (the measures of one replay read it several times)."""
    if span.after is None:
        deciding = span.settings_entries
        if walked and deciding is not None and path[position] is span.entry:
            # the prefix is the walk to the compaction: from its kept entries on, the projection is
            # the same, and the settings are those of the entries that decide them
            projection = project_session_path(path[_kept_start(path, position):position + 1])
            projection.thinking_level, projection.model = get_session_context_settings(
                deciding, [e.get("type") for e in deciding], checked=True)
            span.after = projection
        else:
            span.after = prefix_projection(path, position + 1, walked)
    return span.after


def compaction_spans(result_or_session: SessionLike | Sequence[dict], *, leaf_id: str | None = None) -> list[CompactionSpan]:
    """The compactions on the active path, each with the messages it summarized (Pi's projection
    before it, from the previous compaction's kept entries to its ``firstKeptEntryId``)."""
    source = session_or_entries(result_or_session)
    path = build_session_path(source, leaf_id)
    spans: list[CompactionSpan] = []
    walked = is_walked_path(path)
    bad_message = next((i for i, e in enumerate(path)
                        if e.get("type") == "message" and e.get("message").__class__ is not dict), len(path))
    latest = -1  # the latest compaction before ``pos``
    thinking = model = -1  # the latest thinking-level change and model source before ``pos``
    for pos, entry in enumerate(path):
        etype = entry.get("type")
        if etype != "compaction":
            if etype == "message":
                if pos < bad_message and entry["message"].get("role") == "assistant":
                    model = pos
            elif etype == "model_change":
                model = pos
            elif etype == "thinking_level_change":
                thinking = pos
            continue
        notes: list[str] = []
        if not pos:
            projected = []
        elif walked:
            projected = _prefix_entries(path, pos, latest, bad_message)
        else:
            projected = prefix_projection(path, pos, walked).entries
        latest = pos
        prev_index = next(
            (i for i, pe in enumerate(projected) if pe.source_entry.get("type") == "compaction" and pe.messages),
            -1,
        )
        previous = projected[prev_index].source_entry if prev_index >= 0 else None
        start = prev_index + 1
        first_kept = entry.get("firstKeptEntryId")
        end = first_kept_index([pe.source_entry for pe in projected], start, first_kept, entry.get("id"))
        if end is None:
            notes.append(f"firstKeptEntryId {first_kept!r} not found after the previous compaction; "
                         "span runs to the compaction")
            end = len(projected)
        messages: list[tuple[str | None, dict]] = []
        entry_ids: list[str] = []
        for pe in projected[start:end]:
            src = pe.source_entry
            if src.get("type") == "compaction":
                continue
            entry_ids.append(src.get("id"))
            for m in pe.messages:
                if m.get("role") != "system":
                    messages.append((src.get("id"), m))
        ops = FileOperations()
        if previous is not None and not previous.get("fromHook") and isinstance(previous.get("details"), dict):
            details = previous["details"]
            if isinstance(details.get("readFiles"), list):
                ops.read.update(details["readFiles"])
            if isinstance(details.get("modifiedFiles"), list):
                ops.edited.update(details["modifiedFiles"])
        for _, m in messages:
            extract_file_ops_from_message(m, ops)
        read_files, modified_files = compute_file_lists(ops)
        span = CompactionSpan(len(spans), entry, messages, entry_ids, previous, list(read_files), list(modified_files),
                              notes)
        if walked and pos < bad_message:
            span.settings_entries = [path[i] for i in sorted({thinking, model}) if i >= 0]
        spans.append(span)
    return spans

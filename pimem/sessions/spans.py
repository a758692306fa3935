"""What a compaction summarized: the one rule for where its recorded cut falls among the context
entries Pi projected before it. :func:`pimem.sessions.compactions.compaction_spans` (the messages),
``compactions_df`` (:mod:`pimem.sessions.frames`: the counts, with a linear walk of the whole tree
as its fast twin) and :func:`pimem.drift.records.resummarize` (the preparation at a recorded cut)
read it from here."""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["first_kept_index"]


def first_kept_index(entries: Sequence[dict], start: int, first_kept_id: Any, compaction_id: Any = None) -> int | None:
    """Where a compaction cut the context entries Pi projected before it: it summarized
    ``entries[start:index]`` and kept ``entries[index:]``.

    Args:
        entries: the context entries before the compaction, in order (a previous compaction's
            summary first).
        start: the first entry after the previous compaction's summary (0 without one).
        first_kept_id: the compaction's ``firstKeptEntryId``.
        compaction_id: the compaction's own id.

    Returns the index of ``first_kept_id`` at or after ``start``; ``len(entries)`` when it is the
    compaction's own (string) id, a compaction that kept nothing (imported Claude Code and Codex
    compactions are such); None when that entry is not there.
    """
    index = next((i for i in range(start, len(entries)) if entries[i].get("id") == first_kept_id), None)
    if index is None and isinstance(compaction_id, str) and first_kept_id == compaction_id:
        return len(entries)
    return index

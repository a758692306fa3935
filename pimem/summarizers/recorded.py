"""Answer summary requests with the summaries a recorded session already holds.

Real sessions that contain Pi-written compactions (and branch summaries) carry real model output;
replaying them with this summarizer reuses that output instead of asking a model.

What is recorded, per entry:

* a ``compaction`` entry's summary is ``history + file blocks`` or, for a split turn,
  ``history + "\\n\\n---\\n\\n**Turn Context (split turn):**\\n\\n" + turn prefix + file blocks``.
  The trailing ``<read-files>``/``<modified-files>`` blocks are removed (``compact()`` appends them
  again from the replay's own file operations) and a split summary is cut into its two answers (at
  the last separator). Whether Pi split the turn is read from the cut point, as ``findCutPoint`` decides
  it; a compaction that was not split keeps its text whole even when it holds the separator (a model
  that copied its previous summary's turn block).
* a ``branch_summary`` entry's summary loses Pi's fixed preamble and its file blocks the same way.

How a request is matched (``match="auto"``, the default):

1. **history** — by content first: the compaction whose *previous* compaction (the latest one on its
   own path) has the same summary as the request's ``<previous-summary>`` (file blocks ignored on
   both sides); a request without a previous summary matches a compaction with none before it.
   When several match, the first not yet used; when none match, the next unused compaction in file
   order.
2. **turn_prefix** — the turn part of the compaction that answered the last history request, if it
   was split and its turn part is unused; else the next unused split compaction in file order.
3. **branch** — the branch summaries in file order.

``match="order"`` skips the content step; ``match="content"`` never falls back to order. A request
that cannot be answered raises :class:`NoRecordingError` naming the session and the request kind.

``provenance`` (optional) says who wrote the recorded summaries (model, weights digest, request
parameters, as in ``datasets/model-summaries/manifest.json``); it is kept as ``.provenance`` and is
part of ``identity()``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Literal

from pimem.core.compaction.compaction import is_turn_start_entry
from pimem.core.session_manager import walk_to_root
from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.core.prompts import BRANCH_SUMMARY_PREAMBLE
from pimem.errors import ConfigurationError, NoRecordingError
from pimem.sessions.load import as_session

__all__ = ["RecordedSummarizer", "NoRecordingError", "RecordedSummary", "strip_file_blocks", "split_turn_summary"]

SPLIT_TURN_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"
# one path per line, never another block's tag: a summary that itself quotes file blocks (a model copying
# its previous summary) keeps them; only the blocks compact() appended at the very end go
_BLOCK_LINES = r"(?:(?!</?(?:read|modified)-files>)[^\n]*\n)+"
_FILE_BLOCKS = re.compile(rf"(?:\n\n<read-files>\n{_BLOCK_LINES}</read-files>)?"
                          rf"(?:\n\n<modified-files>\n{_BLOCK_LINES}</modified-files>)?\Z")
_PREVIOUS = re.compile(r"\n</conversation>\n\n<previous-summary>\n(.*)\n</previous-summary>\n\n", re.DOTALL)


def strip_file_blocks(summary: str) -> str:
    """The summary without the ``<read-files>``/``<modified-files>`` blocks Pi appends at the end."""
    return _FILE_BLOCKS.sub("", summary, count=1)


def split_turn_summary(summary: str) -> tuple[str, str | None]:
    """(history part, turn-prefix part or None) of a compaction summary without file blocks."""
    body = strip_file_blocks(summary)
    if SPLIT_TURN_SEPARATOR in body:
        history, turn = body.rsplit(SPLIT_TURN_SEPARATOR, 1)
        return history, turn
    return body, None


@dataclass
class RecordedSummary:
    """One recorded answer source (a compaction or a branch summary entry)."""

    entry_id: str
    kind: Literal["compaction", "branch"]
    history: str
    turn_prefix: str | None
    previous_key: str | None  # normalized summary of the previous compaction on its path
    usage: dict[str, Any] | None
    history_used: bool = False
    turn_used: bool = False


def _ancestors(session: Any, entry: dict) -> list[dict]:
    """The entries above ``entry`` up to the root, nearest first (the session's walk)."""
    return walk_to_root(entry, session.get_entry, len(session.entries))[1:]


def _was_split(entry: dict, session: Any) -> bool | None:
    """Whether Pi split the turn at this compaction's cut (``findCutPoint``: the first kept entry does not
    start a turn and a turn start precedes it after the previous compaction); None when the kept entry
    is not in the file."""
    kept = session.get_entry(entry.get("firstKeptEntryId"))
    if kept is None:
        return None
    if is_turn_start_entry(kept):
        return False
    for node in _ancestors(session, kept):
        if node.get("type") == "compaction":
            return False
        if is_turn_start_entry(node):
            return True
    return False


def _norm(summary: str | None) -> str | None:
    if summary is None:
        return None
    return strip_file_blocks(summary).strip()


class RecordedSummarizer:
    """Answers with a recorded session's own summaries (rules in the module docstring).

    Args:
        session: the recorded session (anything :func:`pimem.as_session` takes).
        match: ``"auto"`` (by content, then in file order), ``"content"`` or ``"order"``.
        provenance: who wrote the recorded summaries (model, weights, parameters); part of ``identity()``.
    """

    def __init__(self, session: Any, *, match: Literal["auto", "content", "order"] = "auto",
                 provenance: dict[str, Any] | None = None) -> None:
        session = as_session(session)
        if match not in ("auto", "content", "order"):
            raise ConfigurationError(f"match must be 'auto', 'content' or 'order', not {match!r}")
        self.match = match
        self.provenance = dict(provenance) if provenance else None
        self.source = str(getattr(session, "path", None) or getattr(session, "id", "") or "session")
        self.records: list[RecordedSummary] = []
        self.branch_records: list[RecordedSummary] = []
        self._last_history: RecordedSummary | None = None
        self._load(session)
        self.model = "recorded"

    def _load(self, session: Any) -> None:
        for entry in session.entries:
            kind = entry.get("type")
            if kind == "compaction":
                summary = entry.get("summary") or ""
                if _was_split(entry, session) is False:
                    # not a split turn, whatever the text holds (a model may copy a previous summary's
                    # turn-context block)
                    history, turn = strip_file_blocks(summary), None
                else:
                    history, turn = split_turn_summary(summary)
                previous = next((_norm(node.get("summary") or "") for node in _ancestors(session, entry)
                                 if node.get("type") == "compaction"), None)
                self.records.append(RecordedSummary(str(entry.get("id")), "compaction", history, turn, previous,
                                                    entry.get("usage")))
            elif kind == "branch_summary" and entry.get("summary"):
                text = entry["summary"]
                if text.startswith(BRANCH_SUMMARY_PREAMBLE):
                    text = text[len(BRANCH_SUMMARY_PREAMBLE) :]
                self.branch_records.append(RecordedSummary(str(entry.get("id")), "branch", strip_file_blocks(text),
                                                           None, None, entry.get("usage")))

    def __repr__(self) -> str:
        return (f"RecordedSummarizer({self.source!r}, compactions={len(self.records)}, "
                f"branch_summaries={len(self.branch_records)})")

    def identity(self) -> dict[str, Any]:
        """What determines the answers: the recorded texts themselves."""
        h = hashlib.sha256()
        for r in self.records + self.branch_records:
            h.update(f"{r.entry_id}\x00{r.history}\x00{r.turn_prefix}\x00{r.previous_key}\x00".encode("utf-8", "surrogatepass"))
        identity: dict[str, Any] = {"class": "RecordedSummarizer", "model": "recorded", "match": self.match, "recordings": h.hexdigest()}
        if self.provenance:
            identity["provenance"] = self.provenance
        return identity

    def reset(self) -> None:
        """Forget which recordings were used (start a new replay)."""
        for r in self.records + self.branch_records:
            r.history_used = r.turn_used = False
        self._last_history = None

    # -- matching ---------------------------------------------------------------------------------

    def _missing(self, request: SummaryRequest, why: str) -> NoRecordingError:
        return NoRecordingError(f"{self.source}: no recorded {request.kind} summary for this request ({why}); "
                                f"the session holds {len(self.records)} compaction(s) and "
                                f"{len(self.branch_records)} branch summary(ies)")

    def _history(self, request: SummaryRequest) -> RecordedSummary:
        if self.match != "order":
            m = _PREVIOUS.search(request.prompt)
            previous = _norm(m.group(1)) if m else None
            candidates = [r for r in self.records if r.previous_key == previous]
            for r in candidates:
                if not r.history_used:
                    return r
            if self.match == "content":
                raise self._missing(request, "no compaction follows this previous summary"
                                    if previous is not None else "no compaction without a previous summary is left")
        for r in self.records:
            if not r.history_used:
                return r
        raise self._missing(request, "every recorded compaction was used")

    def _turn(self, request: SummaryRequest) -> RecordedSummary:
        last = self._last_history
        if last is not None and last.turn_prefix is not None and not last.turn_used:
            return last
        for r in self.records:
            if r.turn_prefix is not None and not r.turn_used and not (self.match == "content" and r.history_used):
                return r
        raise self._missing(request, "no unused split-turn compaction")

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        if request.kind == "history":
            record = self._history(request)
            record.history_used = True
            self._last_history = record
            text = record.history
        elif request.kind == "turn_prefix":
            record = self._turn(request)
            record.turn_used = True
            record.history_used = True
            text = record.turn_prefix or ""
        elif request.kind == "branch":
            unused = next((r for r in self.branch_records if not r.history_used), None)
            if unused is None:
                raise self._missing(request, "every recorded branch summary was used")
            record = unused
            record.history_used = True
            text = record.history
        else:
            raise self._missing(request, f"unknown request kind {request.kind!r}")
        return SummaryResponse(text=text, usage=record.usage, stop_reason="stop", latency_s=0.0,
                               extra={"recorded_entry_id": record.entry_id, "summarizer": "recorded"})

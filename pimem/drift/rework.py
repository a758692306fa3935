"""What agents did after real compactions: rework signals, matched controls, and the measures held against them.

A recording shows what an agent did right after a real compaction, and that is the most direct evidence of
what the summary failed to carry: an agent that lost a file's content reads it again, one that lost a
result runs the command again, one that lost the user's constraint makes the user say it again.

Points and windows
------------------
A *point* is a place between two messages of a session's path. A compaction's point is where the
messages after the compaction entry begin. Every signal compares two windows around a point ``p``:

* the **look-back** ``[p - L, p)``: at most ``lookback`` messages, never reaching back over an earlier
  compaction (what the agent had in front of it, in full, before ``p``);
* the **window** ``[p, p + W)``: at most ``window`` messages, ending before the next compaction.

A **control** of a compaction is a point of the same path where nothing was compacted, with the same
look-back length ``L`` and window length ``W`` as the compaction's (the same history to forget and the
same time to show it), no compaction inside ``[q - L, q + W)``, and a user or assistant message at ``q``
(a tool call is never cut from its result). The ``controls`` eligible points nearest to the compaction
are taken (closest first, at least ``W // 2`` messages apart), so a control stands about as far from
the session's start as the compaction. A compaction with fewer than :data:`MIN_SPAN` messages of
look-back or window is left out (``measured`` False), one without an eligible control has NaN
controls.

Signals (:data:`SIGNALS`; each defined once, in the function named beside it)
----------------------------------------------------------------------------
============================== ============================================================================
``rereads``                    reads in the window of a file the agent worked on in the look-back: lines of it
                               it read there, or any part of a file it wrote or edited there (:func:`_rereads`);
                               reading tools (``read``, ``Read``, with their offset and limit) and reading
                               commands (``cat``, ``head``, ``tail``, ``sed -n 'a,bp'``, ``nl``, …) alike.
                               ``attrs["events"]`` names what each one repeats (``earlier_kind``), so the
                               stricter count — lines read before — is the events whose earlier kind is ``read``
``reruns``                     commands in the window already run in the look-back with no edit or write by
                               the agent since that run (its result could not have changed by the agent's
                               doing; :func:`_reruns`); reading commands count as reads, not here
``repeated_instructions``      user messages in the window with a sentence (4+ content words, prose, not a
                               paste) that restates one of the look-back (content-word Jaccard ≥ 0.6;
                               :func:`_repeats`)
``repeated_questions``         questions the agent puts to the user in the window (a ``?`` sentence ending
                               its turn, or an ``AskUserQuestion`` call) that restate one of the look-back
``reverts``                    edits in the window that undo an edit of the look-back or of the window
                               (what it changed is changed back, the text around it aside), and ``git checkout --``
                               / ``git restore`` / ``git reset --hard`` / ``git revert`` (:func:`_reverts`)
``returned_to_earlier_task``   1 when the first user prompt or assistant statement of the window matches an
                               earlier user prompt of the look-back that the agent had answered and the user
                               had moved on from, better than the current one (content-word overlap ≥ 0.5
                               with 4+ shared words; :func:`_returned`)
``rework``                     the sum of the five counts above
``steps_to_progress``          model calls before the first new progress — an edit whose text the look-back
                               did not write (not a revert, not refused), or a passing command (not an
                               inspection like ``ls`` or ``git status``) that did not pass in the look-back;
                               the window's calls when there is none (``progress`` False; :func:`_progress`)
``seconds_to_progress``        seconds from the window's first message to that progress (or to the window's
                               last message); the compaction's own time is not in it
``tokens_to_progress``         what the agent wrote up to and including that progress (text, thinking,
                               tool-call arguments), in characters ÷ 4
============================== ============================================================================

For a compaction, each re-read and re-run (``reuses``) is also marked with whether the stored summary
named its file or command (``reuses_summary``) or, if not, the kept tail (or Codex's restored messages) did
(``reuses_kept``): a re-read of a file the summary named is rework that naming the file did not prevent,
one of a file the kept tail showed had its content still in context.

What this can and cannot say
----------------------------
The signals are read from tool calls and text, with rules rather than understanding: a re-read may be a
check the agent would have made anyway (the control says how often that happens without a compaction),
a restated instruction may be a new request in the same words. Counts depend on the agent's habits, so
agents are compared each with its own controls. A recording shows one trajectory: what the agent did,
not what it would have done with another summary. This is why the measures of a summary are *held
against* rework (:func:`rework_correlations`, :func:`fact_reacquisition`) rather than validated by it.

In replays
----------
A replay is open-loop (:mod:`pimem.replays.orphans`): after a replayed compaction the recorded turns go on
unchanged, so rework measured there is the recording's behaviour at that point, never caused by the
replayed summary. Use the two for different things: **rework** (recordings only) is what a real agent
did after a real compaction — evidence of what a summary lost, with a control; **orphan references**
(:meth:`pimem.replays.result.ReplayResult.orphan_references`) is how much of the recorded agent's later
behaviour a replayed context could not have supported — a bound on how far a replay's later turns can
be trusted, not a judgement of the summary. :func:`rework_vs_orphans` sets them side by side on the
same recorded compactions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pimem.base.js import utf16_len
from pimem.base.tables import Column, Table, frame
from pimem.drift.intervals import interval_supported
from pimem.drift.measures import compare_sources, summary_measures
from pimem.drift.needed import needed_later_facts
from pimem.drift.records import CompactionRecord, compaction_records, source_text
from pimem.errors import ConfigurationError
from pimem.replays.orphans import ORPHANS, orphan_references
from pimem.sessions.load import SessionLike, as_session
from pimem.summarizers.baselines import baseline_summarizers
from pimem.text.facts import content_words, fact_present, fold, index_of, normalize_path
from pimem.text.messages import message_text, text_blocks
from pimem.text.sections import summarizer_text

__all__ = ["SIGNALS", "COUNT_SIGNALS", "PROGRESS_SIGNALS", "DEFAULT_WINDOW", "DEFAULT_LOOKBACK", "DEFAULT_CONTROLS",
           "MIN_SPAN", "POINT_COLUMNS", "EVENT_COLUMNS", "TABLE_COLUMNS", "CORRELATION_COLUMNS", "FACT_COLUMNS",
           "Action", "path_actions", "user_text", "command_key", "same_file", "rework_points", "rework_corpus",
           "paired", "rework_table", "rank_correlation", "rework_correlations", "compaction_measures",
           "fact_reacquisition", "reacquisition_table", "rework_vs_orphans", "rework_examples", "agent_of",
           "signal_docs"]

DEFAULT_WINDOW = 60
DEFAULT_LOOKBACK = 60
DEFAULT_CONTROLS = 3
MIN_SPAN = 10  # a compaction with less look-back or window than this is not measured

# name -> (what it counts, how to read it)
SIGNALS: dict[str, tuple[str, str]] = {
    "rereads": ("reads in the window of lines of a file read in the look-back, or of a file written or edited there",
                "the agent fetching content it had seen; checks after edits happen anyway (see the control)"),
    "reruns": ("commands in the window already run in the look-back, with no edit or write by the agent since",
               "the agent re-establishing a result it had; a test re-run after a fix is not one"),
    "repeated_instructions": ("user sentences in the window restating one of the look-back",
                              "the user having to say a constraint again"),
    "repeated_questions": ("questions to the user in the window restating one of the look-back",
                           "the agent asking what it had been told"),
    "reverts": ("edits in the window undoing an earlier edit; git checkout --, restore, reset --hard, revert",
                "work done twice, or lost work restored"),
    "returned_to_earlier_task": ("1 when the window's first goal matches an earlier, finished user request",
                                 "the agent going back to a task the user had moved on from"),
    "rework": ("the sum of the five counts", "all rework actions in the window"),
    "steps_to_progress": ("model calls before the first new edit or new passing command",
                          "how long the agent took to move forward; the window's calls when it did not"),
    "seconds_to_progress": ("seconds from the window's first message to that progress",
                            "wall-clock cost, user pauses included: read the median"),
    "tokens_to_progress": ("tokens the agent wrote up to that progress (text, thinking, tool-call arguments; "
                           "characters ÷ 4)", "generation spent; recorded usage is not used (Claude Code writes "
                           "partial counts, Codex none per call)"),
}
COUNT_SIGNALS: tuple[str, ...] = ("rereads", "reruns", "repeated_instructions", "repeated_questions", "reverts")
PROGRESS_SIGNALS: tuple[str, ...] = ("steps_to_progress", "seconds_to_progress", "tokens_to_progress")


SIGNAL_DOCS = Table("rework_signals", [
    Column("signal", description="the signal's name (a column of :func:`rework_points`)"),
    Column("counts", description="what it counts"),
    Column("reading", description="how to read it"),
], "One row per rework signal (:data:`SIGNALS`).")


def signal_docs() -> pd.DataFrame:
    """:data:`SIGNALS` as a table."""
    return SIGNAL_DOCS.frame([{"signal": k, "counts": what, "reading": how} for k, (what, how) in SIGNALS.items()])


# --------------------------------------------------------------------------- actions read from messages


@dataclass(frozen=True)
class Action:
    """One thing done in a message of the path.

    ``kind``: ``read``, ``write``, ``edit``, ``run`` (a command), ``revert_command``, ``ask`` (a question
    to the user), ``instruct`` (a user sentence), ``prompt`` (a whole user request), ``say`` (an
    assistant statement), ``turn_end`` (an assistant message without a tool call: the agent answered).
    ``subject``: a normalized path, a command, or the text. ``removed`` / ``added``:
    an edit's texts (whitespace collapsed); ``ok``: whether the tool result reported success (None
    when it has none); ``words``: content words of a text; ``inspection``: a command that only looks
    (``ls``, ``git status``, …); ``lines``: the lines a read showed, first to last (all of them by default).
    """

    index: int
    entry_id: str | None
    kind: str
    subject: str
    removed: str = ""
    added: str = ""
    ok: bool | None = None
    words: frozenset[str] = frozenset()
    call_id: str | None = None
    inspection: bool = False
    lines: tuple[float, float] = (1, math.inf)  # the lines a read showed (first, last)


_READ_TOOLS = {"read", "read_file", "notebookread", "view"}
_WRITE_TOOLS = {"write", "write_file", "create_file"}
_EDIT_TOOLS = {"edit", "multiedit", "str_replace", "edit_file", "notebookedit", "apply_patch"}
_RUN_TOOLS = {"bash", "shell", "exec_command", "local_shell", "run_command", "execute_command"}
_ASK_TOOLS = {"askuserquestion"}
_PATH_KEYS = ("path", "file_path", "notebook_path", "filePath", "filename")
_READERS = {"cat", "head", "tail", "sed", "nl", "less", "more", "bat"}
# programs (and git sub-commands) that only look: never progress
_INSPECTION = {"ls", "cat", "head", "tail", "sed", "nl", "less", "more", "bat", "grep", "rg", "ag", "find", "fd",
               "pwd", "echo", "wc", "which", "tree", "file", "stat", "du", "jq", "env", "printenv", "type",
               "whoami", "date", "sleep", "true"}
_GIT_INSPECTION = {"status", "log", "diff", "show", "branch", "remote", "rev-parse", "ls-files", "blame", "fetch"}
_REVERT_COMMAND = re.compile(r"^git\s+(?:checkout\s+(?:\S+\s+)?--\s|restore\s+(?!--staged)|reset\s+--hard|revert\s)")
_EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:?|exited with code)\s*(-?\d+)", re.I)
_SEPARATORS = re.compile(r"&&|\|\||;|\n")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_TAG_BLOCK = re.compile(r"<([a-zA-Z][\w-]*)(?:\s[^>]*)?>.*?</\1>", re.S)
_META_PREFIXES = ("Base directory for this skill:", "Caveat:", "[Request interrupted",
                  "This session is being continued")
_SKILL_EXPANSION = re.compile(r"^Invoke the \S+ skill\b")
_MAX_SENTENCE = 300
_MAX_INSTRUCTION_MESSAGE = 2000  # a longer user message is a paste (a log, a plan, a transcript): no instruction
_PROSE = re.compile(r"^[A-Za-z]")


def _squash(text: Any) -> str:
    return " ".join(str(text or "").split())


def _program_and_args(simple: str) -> tuple[str, list[str]]:
    try:
        words = shlex.split(simple, posix=True)
    except ValueError:
        words = simple.split()
    while words and "=" in words[0] and not words[0].startswith("-"):  # FOO=1 cmd
        words = words[1:]
    if not words:
        return "", []
    return words[0].rsplit("/", 1)[-1], words[1:]


def _simple_commands(command: str, *, bodies: bool = False) -> list[str]:
    """The simple commands of a command line, without ``cd``; a here-document's body is left out
    unless ``bodies`` (it is not a command, but it tells two runs apart)."""
    lines = command.split("\n")
    here = next((k for k, line in enumerate(lines) if "<<" in line), None)
    if here is not None and not bodies:
        command = "\n".join(lines[:here + 1])
    out = []
    for part in _SEPARATORS.split(command):
        stage = _squash(part)
        if not stage or stage.startswith("#") or stage == "cd" or stage.startswith("cd "):
            continue
        out.append(stage)
    return out


_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+|\$))?p$")


def _sed_lines(script: str) -> tuple[float, float] | None:
    """The lines a ``sed -n`` script prints (``5p``, ``5,9p``, ``5,$p``), None for any other script."""
    found = _SED_RANGE.match(script)
    if not found:
        return None
    last = found.group(2) or found.group(1)
    return float(found.group(1)), math.inf if last == "$" else float(last)


def _lines(first: Any, count: Any) -> tuple[float, float]:
    """The lines a read of ``count`` lines from line ``first`` shows (either may be missing)."""
    start = float(first) if isinstance(first, (int, float)) and not isinstance(first, bool) and first > 0 else 1.0
    if isinstance(count, (int, float)) and not isinstance(count, bool) and count > 0:
        return start, start + float(count) - 1
    return start, math.inf


def _files_read(simple: str) -> list[tuple[str, tuple[float, float]]]:
    """Files a reading command shows, each with its lines (``cat f``, ``sed -n '1,9p' f``, ``head -n 20 f``,
    ``nl -ba f | sed -n …``), else []."""
    stages = simple.split("|")
    program, args = _program_and_args(stages[0])
    if program not in _READERS or any(a.startswith((">", "<<")) for a in args):
        return []  # ``cat > f`` writes
    if program == "sed" and not any(a.startswith("-") and not a.startswith("--") and "n" in a for a in args):
        return []  # ``sed -i`` edits
    lines: tuple[float, float] = (1, math.inf)
    files, i, script_needed = [], 0, program == "sed"
    while i < len(args):
        a = args[i]
        i += 1
        if (program in ("head", "tail") and a in ("-n", "-c")) or (program == "sed" and a in ("-e", "-f")):
            if program == "head" and a == "-n" and i < len(args) and args[i].isdigit():
                lines = (1, float(args[i]))
            i += 1  # the option's value
            script_needed = script_needed and program != "sed"
            continue
        if program == "head" and a[1:].isdigit() and a.startswith("-"):
            lines = (1, float(a[1:]))
            continue
        if a.startswith("-"):
            continue
        if script_needed:  # sed's script: its line range
            script_needed = False
            lines = _sed_lines(a) or lines
            continue
        if any(ch in a for ch in "*?$<>{}") or a.isdigit():
            continue
        path = normalize_path(a)
        if path:
            files.append(path)
    if program == "nl" and len(stages) > 1:  # ``nl -ba f | sed -n '5,9p'``
        _, sed_args = _program_and_args(stages[1])
        lines = next((found for found in map(_sed_lines, sed_args) if found), lines)
    return [(f, lines) for f in files]


def _is_inspection(simple: str) -> bool:
    program, args = _program_and_args(simple.split("|", 1)[0])
    if program == "git":
        sub = next((a for a in args if not a.startswith("-")), "")
        return sub in _GIT_INSPECTION
    if program == "sed":
        return bool(_files_read(simple))  # ``sed -n`` shows, ``sed -i`` edits
    return program in _INSPECTION


def command_key(command: str) -> str:
    """A command line as compared between runs: its simple commands without ``cd``, here-document
    bodies included, whitespace collapsed."""
    return " && ".join(_simple_commands(command, bodies=True))


def _patch_edits(patch: str) -> list[tuple[str, str, str]]:
    """(file, removed, added) per hunk of an ``apply_patch`` patch (``*** Update File:`` …, ``@@`` hunks)."""
    out: list[tuple[str, str, str]] = []
    current, removed, added = "", [], []  # type: ignore[var-annotated]

    def flush() -> None:
        if current and (removed or added):
            out.append((current, _squash("\n".join(removed)), _squash("\n".join(added))))
        removed.clear()
        added.clear()

    for line in patch.splitlines():
        if line.startswith(("*** Update File:", "*** Add File:", "*** Delete File:")):
            flush()
            current = normalize_path(line.split(":", 1)[1].strip()) or ""
        elif line.startswith("@@") or line.startswith("*** End"):
            flush()
        elif line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
        elif line.startswith("-") and not line.startswith("---"):
            removed.append(line[1:])
    flush()
    return out


def _arg_path(args: Mapping[str, Any]) -> str:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return normalize_path(value) or ""
    return ""


def _command_of(args: Mapping[str, Any]) -> str:
    for key in ("command", "cmd"):
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            # ["bash", "-lc", "script"] runs the script
            if len(value) >= 3 and value[1] in ("-c", "-lc") and value[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh"):
                return value[2]
            return " ".join(value)
    return ""


def _tool_actions(index: int, eid: str | None, block: Mapping[str, Any]) -> list[Action]:
    name = str(block.get("name") or "").lower()
    args = block.get("arguments")
    args = args if isinstance(args, Mapping) else {}
    call = block.get("id") if isinstance(block.get("id"), str) else None
    if name in _READ_TOOLS:
        path = _arg_path(args)
        lines = _lines(args.get("offset"), args.get("limit"))
        return [Action(index, eid, "read", path, call_id=call, lines=lines)] if path else []
    if name in _WRITE_TOOLS:
        path = _arg_path(args)
        return [Action(index, eid, "write", path, added=_squash(args.get("content")), call_id=call)] if path else []
    if name in _EDIT_TOOLS:
        if name == "apply_patch":
            patch = args.get("input") or args.get("patch") or ""
            return [Action(index, eid, "edit", f, removed=r, added=a, call_id=call)
                    for f, r, a in _patch_edits(str(patch))]
        path = _arg_path(args)
        if not path:
            return []
        edits = args.get("edits")
        pairs: list[Any] = edits if isinstance(edits, list) else [args]
        out = []
        for pair in pairs:
            if not isinstance(pair, Mapping):
                continue
            old = pair.get("old_string", pair.get("oldText", pair.get("old_str", "")))
            new = pair.get("new_string", pair.get("newText", pair.get("new_str", pair.get("new_source", ""))))
            out.append(Action(index, eid, "edit", path, removed=_squash(old), added=_squash(new), call_id=call))
        return out
    if name in _RUN_TOOLS:
        command = _command_of(args)
        simple = _simple_commands(command)
        if not simple:
            return []
        key = command_key(command)
        out = [Action(index, eid, "read", f, call_id=call, lines=lines) for s in simple for f, lines in _files_read(s)]
        if any(_REVERT_COMMAND.match(s) for s in simple):
            out.append(Action(index, eid, "revert_command", key, call_id=call))
        if not all(_files_read(s) for s in simple):  # not a pure read: a run
            out.append(Action(index, eid, "run", key, call_id=call,
                              inspection=all(_is_inspection(s) for s in simple)))
        return out
    if name in _ASK_TOOLS:
        questions = args.get("questions")
        texts = [q.get("question") for q in questions if isinstance(q, Mapping)] if isinstance(questions, list) else []
        return [Action(index, eid, "ask", _squash(t), words=frozenset(content_words(str(t))))
                for t in texts if isinstance(t, str) and t.strip()]
    return []


def user_text(message: Mapping[str, Any]) -> str:
    """What the user wrote in a message: tag blocks an agent adds (``<system-reminder>``, command
    echoes) and its notices (skill texts, interruptions) left out."""
    text = text_blocks(message.get("content"))
    text = _TAG_BLOCK.sub(" ", text).strip()
    if not text or text.startswith("<") or text.startswith(_META_PREFIXES) or _SKILL_EXPANSION.match(text):
        return ""
    return text


def _sentences(text: str) -> list[str]:
    return [s for s in (_squash(p) for p in _SENTENCE.split(text)) if s and len(s) <= _MAX_SENTENCE]


def _prose(sentence: str) -> bool:
    """A sentence a person wrote (starts with a letter, four words or more, nearly all of them words),
    not a line of a pasted log, listing or quote."""
    words = sentence.split()
    return (len(words) >= 4 and bool(_PROSE.match(sentence)) and not sentence.endswith(":")
            and sum(w.strip(".,:;!?'\"()").isalpha() for w in words) >= 0.9 * len(words))


def _result_ok(message: Mapping[str, Any]) -> bool:
    if message.get("isError"):
        return False
    text = text_blocks(message.get("content"))[:400]
    found = _EXIT_CODE.search(text)
    return not (found and found.group(1) != "0")


def path_actions(messages: Sequence[tuple[str | None, Mapping[str, Any]]]) -> list[Action]:
    """The actions of a path's messages (:class:`Action`), in order; each tool call's result decides its ``ok``."""
    actions: list[Action] = []
    pending: dict[str, list[int]] = {}  # tool call id -> its actions' places in ``actions``
    for i, (eid, m) in enumerate(messages):
        role = m.get("role")
        if role == "assistant":
            blocks = m.get("content")
            content: list[Any] = blocks if isinstance(blocks, list) else []
            calls = [b for b in content if isinstance(b, Mapping) and b.get("type") == "toolCall"]
            for b in calls:
                found = _tool_actions(i, eid, b)
                if found and found[0].call_id:
                    pending.setdefault(found[0].call_id, []).extend(range(len(actions), len(actions) + len(found)))
                actions.extend(found)
            said = "\n".join(str(b.get("text") or "") for b in content
                             if isinstance(b, Mapping) and b.get("type") == "text")
            if said.strip():
                words = frozenset(content_words(said))
                actions.append(Action(i, eid, "say", _squash(said)[:2000], words=words))
                if not calls:  # a turn ending in a question asks the user
                    for s in _sentences(said):
                        if s.endswith("?"):
                            actions.append(Action(i, eid, "ask", s, words=frozenset(content_words(s))))
            if not calls:
                actions.append(Action(i, eid, "turn_end", ""))
        elif role == "toolResult":
            for k in pending.pop(str(m.get("toolCallId")), []):
                a = actions[k]
                actions[k] = dataclasses.replace(a, ok=_result_ok(m))
        elif role == "user":
            text = user_text(m)
            if not text:
                continue
            if len(text) > _MAX_INSTRUCTION_MESSAGE:
                continue
            actions.append(Action(i, eid, "prompt", _squash(text), words=frozenset(content_words(text))))
            for s in _sentences(text):
                if _prose(s):
                    actions.append(Action(i, eid, "instruct", s, words=frozenset(content_words(s))))
    return actions


# --------------------------------------------------------------------------- the signals, one function each


def same_file(a: str, b: str) -> bool:
    """Whether two normalized paths name the same file: the shorter is a segment suffix of the longer."""
    sa, sb = a.lstrip("/").split("/"), b.lstrip("/").split("/")
    k = min(len(sa), len(sb))
    return sa[-k:] == sb[-k:]


@dataclass
class _Window:
    before: list[Action]
    after: list[Action]


@dataclass
class _Event:
    signal: str
    action: Action
    earlier: Action | None
    note: str = ""


def _rereads(w: _Window) -> list[_Event]:
    """Reads in the window of a file the agent worked on in the look-back: lines of it that it read
    there, or a file it wrote or edited there (an edit shows only part of a file, but the agent had
    worked on it). The earlier read is named where there is one, else the write or edit."""
    seen = [a for a in w.before if a.kind in ("read", "write", "edit") and a.subject]
    out = []
    for a in w.after:
        if a.kind != "read":
            continue
        same = [e for e in reversed(seen) if same_file(e.subject, a.subject)]
        match = next((e for e in same if e.kind == "read" and e.lines[0] <= a.lines[1] and a.lines[0] <= e.lines[1]),
                     next((e for e in same if e.kind != "read"), None))
        if match is not None:
            out.append(_Event("rereads", a, match))
    return out


def _reruns(w: _Window) -> list[_Event]:
    """Commands in the window already run in the look-back, with no edit or write by the agent since
    that run."""
    last_run: dict[str, tuple[Action, bool]] = {}  # command -> its last run, and whether in the look-back
    out = []
    for a, after in [(a, False) for a in w.before] + [(a, True) for a in w.after]:
        if a.kind in ("edit", "write"):
            last_run.clear()  # every earlier result may have changed
        elif a.kind == "run":
            earlier = last_run.get(a.subject)
            if after and earlier is not None and not earlier[1]:
                out.append(_Event("reruns", a, earlier[0]))
            last_run[a.subject] = (a, after)
    return out


def _similar(a: frozenset[str], b: frozenset[str], threshold: float = 0.6) -> bool:
    if len(a) < 4 or len(b) < 4:
        return False
    return len(a & b) / len(a | b) >= threshold


def _repeats(w: _Window, kind: str, signal: str) -> list[_Event]:
    """Texts of ``kind`` in the window (user sentences, questions to the user) that restate one of
    the look-back (content-word Jaccard ≥ 0.6, 4+ content words each)."""
    earlier = [a for a in w.before if a.kind == kind]
    out: list[_Event] = []
    for a in w.after:
        if a.kind != kind or (out and out[-1].action.index == a.index):
            continue  # a message restates once, however many of its sentences do
        match = next((e for e in reversed(earlier) if _similar(a.words, e.words)), None)
        if match is not None:
            out.append(_Event(signal, a, match))
    return out


def _change(edit: Action) -> tuple[str, str]:
    """What an edit changed: its removed and added texts without their common beginning and end."""
    removed, added = edit.removed, edit.added
    head = 0
    while head < min(len(removed), len(added)) and removed[head] == added[head]:
        head += 1
    tail = 0
    while tail < min(len(removed), len(added)) - head and removed[-1 - tail] == added[-1 - tail]:
        tail += 1
    return removed[head:len(removed) - tail].strip(), added[head:len(added) - tail].strip()


def _undoes(later: Action, earlier: Action) -> bool:
    """Whether ``later`` changes back what ``earlier`` changed, in the same place of the same file: its
    texts are the earlier ones swapped, or its change (the texts without the part they share around
    it) is the earlier change swapped, at least 4 characters long, and made on the text the earlier
    edit left (one edit's text holds the other's)."""
    if not same_file(later.subject, earlier.subject) or earlier.removed == earlier.added:
        return False
    if (later.removed, later.added) == (earlier.added, earlier.removed):
        return True
    removed, added = _change(earlier)
    if len(removed) + len(added) < 4 or _change(later) != (added, removed):
        return False
    left, touched = (earlier.added, later.removed) if earlier.added else (earlier.removed, later.added)
    return bool(touched) and (left in touched or touched in left)


def _reverts(w: _Window) -> list[_Event]:
    """Edits in the window that undo an earlier edit (of the look-back or the window), and reverting
    git commands."""
    out = []
    edits = [a for a in w.before if a.kind == "edit" and a.ok is not False]
    for a in w.after:
        if a.kind == "revert_command":
            out.append(_Event("reverts", a, None, "git"))
        elif a.kind == "edit" and a.ok is not False:
            match = next((e for e in reversed(edits) if _undoes(a, e)), None)
            if match is not None:
                out.append(_Event("reverts", a, match))
            edits.append(a)
    return out


def _overlap(a: frozenset[str], b: frozenset[str]) -> tuple[float, int]:
    shared = len(a & b)
    return (shared / min(len(a), len(b)) if a and b else 0.0), shared


def _returned(w: _Window) -> list[_Event]:
    """The first user prompt and the first assistant statement of the window, when one matches a
    finished earlier prompt of the look-back better than the current one: finished means the agent
    answered it (a turn without a tool call) before the next prompt, and that next work was another
    task (the current prompt does not match it). Matching is the overlap coefficient of content
    words, ≥ 0.5 with 4+ shared words."""
    prompts: list[Action] = []
    finished: list[Action] = []
    answered = False
    for a in w.before:
        if a.kind == "prompt" and len(a.words) >= 4:
            if prompts and answered:
                finished.append(prompts[-1])
            prompts.append(a)
            answered = False
        elif a.kind == "turn_end":
            answered = True
    if not prompts or not finished:
        return []
    current = prompts[-1]
    finished = [t for t in finished if _overlap(current.words, t.words)[0] < 0.5]
    goals = [next((a for a in w.after if a.kind == k and len(a.words) >= 4), None) for k in ("prompt", "say")]
    for g in goals:
        if g is None:
            continue
        now, _ = _overlap(g.words, current.words)
        for t in reversed(finished):
            score, shared = _overlap(g.words, t.words)
            if score >= 0.5 and shared >= 4 and score > now:
                return [_Event("returned_to_earlier_task", g, t)]
    return []


def _new_progress(w: _Window) -> Action | None:
    """The window's first new progress: an edit or write whose text the look-back did not write (not an
    undo, not refused), or a passing command, not an inspection, that did not pass in the look-back."""
    written = {(a.subject, a.added) for a in w.before if a.kind in ("edit", "write")}
    passed = {a.subject for a in w.before if a.kind == "run" and a.ok}
    edits = [a for a in w.before if a.kind == "edit"]
    for a in w.after:
        if a.kind in ("edit", "write") and a.ok is not False and a.added and (a.subject, a.added) not in written:
            if a.kind == "write" or not any(_undoes(a, e) for e in edits):
                return a
        if a.kind == "run" and a.ok and not a.inspection and a.subject not in passed:
            return a
    return None


def _timestamp(message: Mapping[str, Any]) -> float:
    value = message.get("timestamp")
    return float(value) / 1000.0 if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _progress(messages: Sequence[tuple[str | None, Mapping[str, Any]]], start: int, end: int,
              w: _Window) -> dict[str, Any]:
    """Model calls, seconds and output tokens from the point to the first new progress (see module docs)."""
    found = _new_progress(w)
    stop = found.index if found is not None else end - 1
    calls = [messages[i][1] for i in range(start, stop + 1) if messages[i][1].get("role") == "assistant"]
    steps = len(calls) - (1 if found is not None else 0)
    tokens = sum(math.ceil(utf16_len(message_text(m, separator="\n", thinking="", tool_calls="json", images=False)) / 4)
                 for m in calls)
    seconds = _timestamp(messages[stop][1]) - _timestamp(messages[start][1]) if stop >= start else math.nan
    return {"progress": found is not None, "steps_to_progress": float(steps),
            "seconds_to_progress": seconds if seconds >= 0 else math.nan, "tokens_to_progress": float(tokens),
            "progress_entry_id": found.entry_id if found is not None else None}


def _events(w: _Window) -> list[_Event]:
    """Every rework event of a look-back and window, signal by signal."""
    return [*_rereads(w), *_reruns(w), *_repeats(w, "instruct", "repeated_instructions"),
            *_repeats(w, "ask", "repeated_questions"), *_reverts(w), *_returned(w)]


# --------------------------------------------------------------------------- points of one session


@dataclass
class _Path:
    """A path's messages and actions, with where each compaction cuts it: ``cuts[k]`` is (the first
    message after compaction ``k``, the first one the agent did after it). The two differ where the
    agent resumed with restored messages (a Codex ``replacement_history``), which are kept context,
    not things done after the compaction."""

    messages: list[tuple[str | None, dict]]
    actions: list[Action]
    cuts: list[tuple[int, int]]
    records: list[CompactionRecord]
    leaf: str | None = None
    starts: list[int] = field(default_factory=list)  # index into actions of each message's first action

    def __post_init__(self) -> None:
        self.starts = [0] * (len(self.messages) + 1)
        k = 0
        for i in range(len(self.messages) + 1):
            while k < len(self.actions) and self.actions[k].index < i:
                k += 1
            self.starts[i] = k

    def window(self, start: int, stop: int, point: int, end: int) -> _Window:
        """The actions of the look-back ``[start, stop)`` and of the window ``[point, end)``."""
        at = self.starts
        return _Window(self.actions[at[start]:at[stop]], self.actions[at[point]:at[end]])

    def epoch(self, position: int) -> tuple[int, int] | None:
        """The messages the agent worked through between compactions around ``position`` as [start,
        end), None when ``position`` is restored context after a compaction."""
        if any(cut <= position < resume for cut, resume in self.cuts):
            return None
        start = max((resume for _, resume in self.cuts if resume <= position), default=0)
        end = min((cut for cut, _ in self.cuts if cut > position), default=len(self.messages))
        return start, end

    def compaction_windows(self, k: int, lookback: int, window: int) -> tuple[int, int, int, int]:
        """(start, stop, point, end) of compaction ``k``: its look-back ``[start, stop)`` back to at most
        ``lookback`` messages after the previous compaction, its window ``[point, end)`` of at most
        ``window`` messages before the next one."""
        cut, resume = self.cuts[k]
        before = self.epoch(cut - 1) if cut > 0 else None
        start = max(before[0] if before else cut, cut - lookback)
        after = self.epoch(resume) if resume < len(self.messages) else None
        end = min(after[1] if after else resume, resume + window)
        return start, cut, resume, end


def agent_of(session: Any) -> str:
    """``"pi"``, ``"claude-code"`` or ``"codex"``: the agent that wrote a loaded session."""
    fmt = getattr(session, "source_format", None)
    return fmt if isinstance(fmt, str) and fmt else "pi"


def _compaction_key(session_id: str, entry: Mapping[str, Any]) -> str:
    """What identifies one compaction across copies of its session: the session's id and the summary's
    text (a v1 file and its migration give the entries other ids), or the entry's id when it has no
    summary (remote Codex compactions)."""
    summary = str(entry.get("summary") or "")
    if summary.strip():
        return f"{session_id}:" + hashlib.sha256(summary.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return f"{session_id}:{entry.get('id')}"


def _leaves_by_compaction(session: Any) -> dict[str, str | None]:
    """For each compaction entry, the leaf of the longest path through it."""
    best: dict[str, tuple[int, str | None]] = {}
    for leaf in session.leaves():
        branch = session.get_branch(leaf.get("id"))
        for e in branch:
            if e.get("type") == "compaction" and len(branch) > best.get(e["id"], (-1, None))[0]:
                best[e["id"]] = (len(branch), leaf.get("id"))
    return {k: v[1] for k, v in best.items()}


def _session_paths(session: Any, leaf_id: str | None,
                   records: Sequence[CompactionRecord] | None = None) -> list[_Path]:
    """The paths to measure: the one to ``leaf_id`` (whose ``records`` may be given), or for each
    compaction the longest path through it."""
    if leaf_id is not None:
        leaves: list[str | None] = [leaf_id]
    else:
        leaves = list(dict.fromkeys(_leaves_by_compaction(session).values()))
    restored = {e.get("id") for e in session.entries
                if isinstance(e.get("source"), dict) and "replacementHistory" in e["source"]}
    out = []
    for leaf in leaves:
        given = records is not None and leaf_id is not None
        found = list(records) if given and records is not None else compaction_records(session, leaf_id=leaf)
        if not found:
            continue
        messages = list(found[0].path.messages) if found[0].path is not None else []
        cuts = []
        for r in found:
            resume = r.later_start
            while resume < len(messages) and messages[resume][0] in restored:
                resume += 1
            cuts.append((r.later_start, resume))
        out.append(_Path(messages, path_actions(messages), cuts, found, leaf))
    return out


def _compactions(session: Any, leaf_id: str | None, records: Sequence[CompactionRecord] | None = None
                 ) -> Iterator[tuple[_Path, int, CompactionRecord]]:
    """Each compaction of a session once, on the longest path through it (or the path to ``leaf_id``):
    (path, its index on the path, its record)."""
    done: set[Any] = set()
    for path in _session_paths(session, leaf_id, records):
        for k, record in enumerate(path.records):
            if record.entry.get("id") not in done:
                done.add(record.entry.get("id"))
                yield path, k, record


def _identity(session: Any, record: CompactionRecord) -> dict[str, Any]:
    """The columns that name a compaction in every table of this module."""
    sid = str(session.header.get("id", ""))
    return {"session": sid, "agent": agent_of(session), "file": str(getattr(session, "path", "") or ""),
            "compaction": record.index, "compaction_id": record.entry.get("id"),
            "compaction_key": _compaction_key(sid, record.entry)}


def _controls(path: _Path, point: int, lookback: int, window: int, count: int) -> list[int]:
    """The ``count`` eligible control points nearest ``point``, at least ``window // 2`` apart (module docs)."""
    eligible = []
    for q in range(len(path.messages)):
        if path.messages[q][1].get("role") not in ("user", "assistant"):
            continue
        epoch = path.epoch(q)
        if epoch is not None and q - lookback >= epoch[0] and q + window <= epoch[1] and q != epoch[0]:
            eligible.append(q)
    eligible.sort(key=lambda q: (abs(q - point), q))
    chosen: list[int] = []
    for q in eligible:
        if all(abs(q - c) >= max(1, window // 2) for c in chosen):
            chosen.append(q)
        if len(chosen) == count:
            break
    return sorted(chosen)


class _Shown:
    """What the agent had in front of it right after a compaction: the stored summary, and the kept tail
    with any restored messages."""

    def __init__(self, record: CompactionRecord, restored: Sequence[tuple[str | None, dict]] = ()) -> None:
        self.summary = index_of(record.summary)
        self.summary_text = fold(record.summary)
        kept_text = "\n".join(source_text(m) for _, m in [*record.kept, *restored])
        self.kept = index_of(kept_text)
        self.kept_text = fold(kept_text)

    def named_by(self, event: _Event) -> str:
        """``"summary"`` when the summary names a re-read's file or a re-run's command, else ``"kept"``
        when the kept tail (or a restored message) does, else ``""``."""
        subject = event.action.subject
        if event.signal == "rereads":
            return "summary" if self.summary.has_path(subject) else "kept" if self.kept.has_path(subject) else ""
        if event.signal == "reruns":
            key = fold(subject)
            return "summary" if key in self.summary_text else "kept" if key in self.kept_text else ""
        return ""


def _measure(path: _Path, start: int, stop: int, point: int, end: int) -> tuple[dict[str, Any], list[_Event]]:
    """The signals of the look-back ``[start, stop)`` and window ``[point, end)``, and their events."""
    w = path.window(start, stop, point, end)
    events = _events(w)
    row: dict[str, Any] = {s: 0 for s in COUNT_SIGNALS}
    row["returned_to_earlier_task"] = 0
    for ev in events:
        row[ev.signal] += 1
    row["rework"] = sum(row[s] for s in COUNT_SIGNALS)
    row["reread_files"] = len({ev.action.subject for ev in events if ev.signal == "rereads"})
    row.update(_progress(path.messages, point, end, w))
    return row, events


_IDENTITY = [
    Column("session", description="the session's id (copies of one session share it)"),
    Column("agent", description="``pi``, ``claude-code`` or ``codex``"),
    Column("file", description="the session file the compaction was measured in"),
    Column("compaction", description="its position among the compactions of its path (0 first)"),
    Column("compaction_id", description="the compaction entry"),
    Column("compaction_key", description="what names the compaction across copies: session id and summary text"),
]

POINTS = Table("rework_points", [
    *_IDENTITY,
    Column("point", description="``after`` (the compaction) or ``control`` (a matched point of the same path)"),
    Column("position", description="the point: the index of the window's first message on the path"),
    Column("entry_id", description="the entry of that message"),
    Column("lookback", description="messages in the look-back (the same at a compaction and its controls)"),
    Column("window", description="messages in the window (the same at a compaction and its controls)"),
    Column("measured", description="at least 10 messages of look-back and of window (else the signals are NaN)"),
    Column("n_controls", description="the compaction's controls"),
    *(Column(s, description=SIGNALS[s][0]) for s in (*COUNT_SIGNALS, "returned_to_earlier_task", "rework")),
    Column("reread_files", description="distinct files among the re-reads"),
    Column("reuses", description="re-reads and re-runs (after a compaction)"),
    Column("reuses_summary", description="of those, the ones whose file or command the summary names"),
    Column("reuses_kept", description="the others whose file or command the kept tail or restored messages show"),
    Column("progress", description="the window holds a new edit or a new passing command"),
    *(Column(s, description=SIGNALS[s][0]) for s in PROGRESS_SIGNALS),
    Column("progress_entry_id", description="the entry of that progress"),
    Column("summary_chars", description="characters of the stored summary (NaN at a control)"),
    Column("messages_after", description="messages after the compaction before the next one or the end (NaN at a "
           "control)"),
], "One row per compaction and per matched control: what the agent did in the window after it.")
POINT_COLUMNS = POINTS.names

EVENTS = Table("rework_events", [
    Column("session", description="the session's id"),
    Column("file", description="the session file"),
    Column("compaction_id", description="the compaction the point belongs to"),
    Column("point", description="``after`` or ``control``"),
    Column("position", description="the point's position on the path"),
    Column("signal", description="the signal the event counts for"),
    Column("entry_id", description="the entry of the repeating action"),
    Column("subject", description="its file, command or text"),
    Column("earlier_entry_id", description="the entry of what it repeats or undoes (None for a git revert)"),
    Column("earlier_kind", description="what that was: ``read``, ``write``, ``edit``, ``run``, ``instruct``, …"),
    Column("earlier_subject", description="its file, command or text"),
    Column("named", description="after a compaction: ``summary`` or ``kept`` for a re-read or re-run whose file or "
           "command the summary names or the kept tail shows, else empty; None at a control"),
    Column("note", description="``git`` for a reverting git command"),
], "One row per rework event of :func:`rework_points` (``attrs[\"events\"]``).")
EVENT_COLUMNS = EVENTS.names


def rework_points(session: SessionLike, *, window: int = DEFAULT_WINDOW, lookback: int = DEFAULT_LOOKBACK,
                  controls: int = DEFAULT_CONTROLS, leaf_id: str | None = None,
                  records: Sequence[CompactionRecord] | None = None) -> pd.DataFrame:
    """One row per compaction (``point == "after"``) and per matched control (``point == "control"``)
    with the signals of :data:`SIGNALS` (module docs: windows, controls, definitions).

    Each compaction is measured on the longest path through it (or on the path to ``leaf_id``, whose
    :func:`~pimem.drift.records.compaction_records` may be given as ``records``).
    ``attrs["events"]``: one row per rework event (signal, entry, what it repeats, and for a compaction's
    re-reads and re-runs whether the summary or kept tail named the file or command).
    """
    for name, value in (("window", window), ("lookback", lookback)):
        if not isinstance(value, int) or value < MIN_SPAN:
            raise ConfigurationError(f"{name} must be an int of at least {MIN_SPAN} messages, not {value!r}")
    if not isinstance(controls, int) or controls < 0:
        raise ConfigurationError(f"controls must be a non-negative int, not {controls!r}")
    session = as_session(session)
    rows: list[dict[str, Any]] = []
    event_rows: list[dict[str, Any]] = []
    for path, k, record in _compactions(session, leaf_id, records):
        start, stop, point, end = path.compaction_windows(k, lookback, window)
        look, span = stop - start, end - point
        epoch = path.epoch(point) if point < len(path.messages) else None
        base = {**_identity(session, record), "lookback": look, "window": span, "summary_chars": len(record.summary),
                "messages_after": (epoch[1] if epoch is not None else point) - point}
        sid, file, cid = base["session"], base["file"], base["compaction_id"]
        if look < MIN_SPAN or span < MIN_SPAN:
            rows.append({**base, "point": "after", "position": point, "entry_id": None, "measured": False,
                         "n_controls": 0})
            continue
        row, events = _measure(path, start, stop, point, end)
        shown = _Shown(record, path.messages[stop:point])
        named = [shown.named_by(ev) for ev in events]
        picks = _controls(path, point, look, span, controls)
        rows.append({**base, "point": "after", "position": point, "entry_id": path.messages[point][0],
                     "measured": True, "n_controls": len(picks), **row,
                     "reuses": sum(ev.signal in ("rereads", "reruns") for ev in events),
                     "reuses_summary": named.count("summary"), "reuses_kept": named.count("kept")})
        event_rows.extend(_event_row(sid, file, cid, "after", point, ev, how) for ev, how in zip(events, named))
        for q in picks:
            crow, cevents = _measure(path, q - look, q, q, q + span)
            rows.append({**base, "point": "control", "position": q, "entry_id": path.messages[q][0],
                         "measured": True, "n_controls": len(picks), **crow,
                         "summary_chars": math.nan, "messages_after": math.nan})
            event_rows.extend(_event_row(sid, file, cid, "control", q, ev, None) for ev in cevents)
    out = POINTS.frame(rows)
    out.attrs["events"] = EVENTS.frame(event_rows)
    return out


def _event_row(sid: str, file: str, cid: Any, point: str, position: int, ev: _Event, named: str | None) -> dict:
    return {"session": sid, "file": file, "compaction_id": cid, "point": point, "position": position,
            "signal": ev.signal, "entry_id": ev.action.entry_id, "subject": ev.action.subject[:300],
            "earlier_entry_id": ev.earlier.entry_id if ev.earlier is not None else None,
            "earlier_kind": ev.earlier.kind if ev.earlier is not None else None,
            "earlier_subject": ev.earlier.subject[:300] if ev.earlier is not None else None, "named": named,
            "note": ev.note}


# --------------------------------------------------------------------------- many sessions


def rework_corpus(sources: Iterable[SessionLike], *, window: int = DEFAULT_WINDOW, lookback: int = DEFAULT_LOOKBACK,
                  controls: int = DEFAULT_CONTROLS) -> pd.DataFrame:
    """:func:`rework_points` over many sessions (loaded ones or paths, read one at a time), each
    compaction counted once: copies of one session (checkpoint files, a v1 file and its migration) hold
    the same compaction, which is kept from the copy with the most messages after it (then the most
    entries). ``attrs["events"]`` holds the kept points' events, ``attrs["copies"]`` how many compaction
    copies were left out."""
    parts: list[pd.DataFrame] = []
    events: list[pd.DataFrame] = []
    sizes: dict[str, int] = {}
    for source in sources:
        session = as_session(source)
        points = rework_points(session, window=window, lookback=lookback, controls=controls)
        if len(points):
            events.append(points.attrs.pop("events"))
            parts.append(points)
            sizes[str(getattr(session, "path", "") or "")] = len(session.entries)
    if not parts:
        out = POINTS.frame([])
        out.attrs.update(events=EVENTS.frame([]), copies=0)
        return out
    points = pd.concat(parts, ignore_index=True)
    after = points[points["point"] == "after"].copy()
    after["_entries"] = after["file"].map(sizes).fillna(0)
    after = after.sort_values(["compaction_key", "messages_after", "_entries", "file"],
                              ascending=[True, False, False, True], kind="stable")
    chosen = after.drop_duplicates("compaction_key")
    keep = set(zip(chosen["file"], chosen["compaction_id"]))
    mask = [(f, c) in keep for f, c in zip(points["file"], points["compaction_id"])]
    out = points[mask].reset_index(drop=True)
    all_events = pd.concat(events, ignore_index=True)
    ev_mask = [(f, c) in keep for f, c in zip(all_events["file"], all_events["compaction_id"])]
    out.attrs["events"] = all_events[ev_mask].reset_index(drop=True)
    out.attrs["copies"] = int(len(after) - len(chosen))
    return out


def _plain(table: pd.DataFrame) -> pd.DataFrame:
    """The table without its ``attrs`` (frames held there would be compared by every merge)."""
    out = table.copy(deep=False)
    out.attrs = {}
    return out


def paired(points: pd.DataFrame, signals: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per measured compaction with a control: ``<signal>`` after it, ``<signal>_control``
    (the mean of its controls), ``<signal>_excess`` (after − control) and, for counts,
    ``<signal>_control_share`` (the share of its controls with any)."""
    signals = list(signals) if signals is not None else [*COUNT_SIGNALS, "returned_to_earlier_task", "rework",
                                                         *PROGRESS_SIGNALS]
    measured = _plain(points)
    measured = measured[measured["measured"].astype(bool)]
    after = measured[(measured["point"] == "after") & (measured["n_controls"] > 0)]
    at_controls = measured[measured["point"] == "control"]
    controls = (at_controls.groupby(["file", "compaction_id"], sort=False)[signals]
                .mean().add_suffix("_control").reset_index())
    counts = [s for s in signals if s not in PROGRESS_SIGNALS]
    shares = ((at_controls[counts] > 0).astype(float).groupby([at_controls["file"], at_controls["compaction_id"]],
                                                               sort=False).mean().add_suffix("_control_share")
              .reset_index())
    out = after.merge(controls, on=["file", "compaction_id"], how="inner").merge(
        shares, on=["file", "compaction_id"], how="left")
    for s in signals:
        out[f"{s}_excess"] = out[s].astype(float) - out[f"{s}_control"].astype(float)
    return out.reset_index(drop=True)


def _two_stage(values: np.ndarray, groups: Sequence[Any], stat: Any, *, n_boot: int, seed: int) -> np.ndarray:
    """``stat`` of ``n_boot`` two-stage resamples: sessions with replacement, then rows (one per
    compaction) with replacement within each drawn session (as :func:`pimem.drift.intervals.cluster_bootstrap`)."""
    members: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    blocks = [np.array(m) for m in members.values()]
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    for b in range(n_boot):
        drawn = [blocks[i] for i in rng.integers(0, len(blocks), len(blocks))]
        idx = np.concatenate([m[rng.integers(0, len(m), len(m))] for m in drawn])
        out[b] = stat(values[idx])
    return out


def _interval(values: Sequence[float] | np.ndarray, groups: Sequence[Any], stat: Any, *, level: float,
              n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float, str]:
    """(estimate, low, high, note): ``stat`` over the rows, with a two-stage session-clustered percentile
    interval where :func:`pimem.drift.intervals.interval_supported` supports ``level`` for the sessions at
    hand (else NaN and a note)."""
    v = np.asarray(values, dtype=float)
    ok = ~np.isnan(v).any(axis=1) if v.ndim == 2 else ~np.isnan(v)
    v = v[ok]
    g = [x for x, keep in zip(groups, ok) if keep]
    if not len(v):
        return math.nan, math.nan, math.nan, "nothing to measure"
    estimate = float(stat(v))
    n_groups = len(set(g))
    supported, coverage = interval_supported(n_groups, level)
    if not supported:
        return estimate, math.nan, math.nan, (f"no {level:.0%} interval: with {n_groups} session(s) a bootstrap "
                                              f"interval covers about {coverage:.0%} in simulation")
    stats = _two_stage(v, g, stat, n_boot=n_boot, seed=seed)
    low, high = np.nanquantile(stats, [(1 - level) / 2, 1 - (1 - level) / 2])
    return estimate, float(low), float(high), f"{level:.0%} two-stage bootstrap over sessions"


def _median(v: np.ndarray) -> float:
    return float(np.median(v))


def _mean(v: np.ndarray) -> float:
    return float(np.mean(v))


REWORK_TABLE = Table("rework_table", [
    Column("agent", description="the agent (or ``all``)"),
    Column("signal", description="the signal (:data:`SIGNALS`)"),
    Column("statistic", description="``mean``, or ``median`` for seconds and tokens"),
    Column("n_compactions", description="measured compactions with a control"),
    Column("n_sessions", description="their sessions"),
    *(Column(f"{name}{end}", description=f"{what}{how}") for name, what in (
        ("after", "the statistic after compaction"), ("control", "the statistic at the controls (each compaction's "
                                                                 "controls averaged first)"),
        ("excess", "the statistic of after − control, compaction by compaction"))
      for end, how in (("", ""), ("_low", ": low end of its session-clustered interval (NaN where not supported)"),
                       ("_high", ": high end of that interval"))),
    Column("share_after", description="share of compactions with any such event after them (counts only)"),
    Column("share_control", description="share of control points with any (each compaction's controls averaged)"),
    Column("note", description="how the interval of ``after`` was made, or why there is none"),
], "One row per agent and signal: after compaction against matched controls.")
TABLE_COLUMNS = REWORK_TABLE.names


def rework_table(points: pd.DataFrame, *, level: float = 0.95, signals: Sequence[str] | None = None,
                 by_agent: bool = True) -> pd.DataFrame:
    """The signals after compaction against their matched controls, per agent: the mean (the median for
    seconds and tokens) after, at the controls, and of the paired excess, each with a session-clustered
    interval where its coverage is supported, the number of compactions and sessions, and the share of
    compactions with any such event after (``share_after``) and at the controls (``share_control``).
    Only measured compactions with at least one control enter; ``attrs["unmatched"]`` counts the others."""
    signals = list(signals) if signals is not None else [*COUNT_SIGNALS, "returned_to_earlier_task", "rework",
                                                         *PROGRESS_SIGNALS]
    table = paired(points, signals)
    rows = []
    groups = [(a, part) for a, part in table.groupby("agent", sort=True)] if by_agent else [("all", table)]
    for agent, part in groups:
        sessions = part["session"].tolist()
        for s in signals:
            median = s in ("seconds_to_progress", "tokens_to_progress")
            stat = _median if median else _mean
            row: dict[str, Any] = {"agent": agent, "signal": s, "statistic": "median" if median else "mean",
                                   "n_compactions": int(part[s].notna().sum()), "n_sessions": part["session"].nunique()}
            notes = []
            for name, col in (("after", s), ("control", f"{s}_control"), ("excess", f"{s}_excess")):
                est, low, high, note = _interval(part[col].to_numpy(dtype=float), sessions, stat, level=level)
                row.update({name: est, f"{name}_low": low, f"{name}_high": high})
                notes.append(note)
            if s not in PROGRESS_SIGNALS:
                row["share_after"] = float((part[s] > 0).mean()) if len(part) else math.nan
                row["share_control"] = float(part[f"{s}_control_share"].mean()) if len(part) else math.nan
            row["note"] = notes[0]
            rows.append(row)
    out = REWORK_TABLE.frame(rows)
    measured = points[(points["point"] == "after")]
    out.attrs["unmatched"] = int(len(measured) - len(table))
    return out


# --------------------------------------------------------------------------- the measures held against rework


def compaction_measures(session: SessionLike, *, baselines: bool = True, leaf_id: str | None = None) -> pd.DataFrame:
    """The summary measures of every compaction of a session (each on the longest path through it):
    ``score`` and its parts, ``needed_recall`` and its classes (:func:`pimem.drift.measures.summary_measures`);
    with ``baselines`` also each degenerate baseline's ``score`` on the same span at the recorded length
    (``score_<baseline>``) and ``recorded_rank``, the share of the baselines the recorded summary
    out-scores (ties count half). One row per compaction, keyed like :func:`rework_points`."""
    session = as_session(session)
    rows: list[dict[str, Any]] = []
    scores: dict[int, dict[str, list[float]]] = {}  # per path: each baseline's score of each compaction
    for path, k, record in _compactions(session, leaf_id):
        row: dict[str, Any] = {**_identity(session, record), "summary_chars": len(record.summary)}
        rows.append(row)
        if not str(record.summary).strip():
            continue
        row.update({m: v for m, v in summary_measures(record).items()
                    if isinstance(v, (int, float, bool, np.number)) or v is None})
        if not baselines:
            continue
        if id(path) not in scores:
            named = dict(baseline_summarizers(budget=None))
            per = compare_sources(session, named, records=path.records, leaf_id=path.leaf).per_compaction
            scores[id(path)] = {name: (per[per["source"] == name].sort_values("compaction")["score"].astype(float)
                                       .tolist() if "score" in per else []) for name in named}
        beaten = []
        for name, theirs_all in scores[id(path)].items():
            theirs = theirs_all[k] if k < len(theirs_all) else math.nan
            row[f"score_{name.replace(' ', '_')}"] = theirs
            mine = row.get("score", math.nan)
            if not (math.isnan(theirs) or math.isnan(mine)):
                beaten.append(1.0 if mine > theirs else 0.5 if mine == theirs else 0.0)
        row["recorded_rank"] = sum(beaten) / len(beaten) if beaten else math.nan
    return frame(rows)


CORRELATIONS = Table("rework_correlations", [
    Column("agent", description="the agent, or ``all``"),
    Column("measure", description="the summary measure (a column of :func:`compaction_measures`)"),
    Column("outcome", description="the rework signal (``<signal>_excess``: after minus the controls)"),
    Column("rho", description="Spearman's rank correlation over the compactions"),
    Column("rho_low", description="low end of its session-clustered interval (NaN where not supported)"),
    Column("rho_high", description="high end of that interval"),
    Column("n_compactions", description="compactions with both values"),
    Column("n_sessions", description="their sessions"),
    Column("note", description="how the interval was made, or why there is none"),
], "One row per agent, measure and rework outcome.")
CORRELATION_COLUMNS = CORRELATIONS.names
DEFAULT_MEASURES = ("score", "recall_faithful", "faithfulness", "needed_recall", "needed_recall_constraint",
                    "needed_recall_decision", "needed_recall_error", "needed_recall_artifact",
                    "needed_recall_reference", "recorded_rank", "score_empty_template", "score_fact_dump",
                    "score_head_truncation", "score_tail_truncation", "written_tokens", "n_needed")
DEFAULT_OUTCOMES = ("rework", "rework_excess", "rereads", "rereads_excess", "steps_to_progress")


def _spearman(v: np.ndarray) -> float:
    a, b = v[:, 0], v[:, 1]
    if len(a) < 3:
        return math.nan
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    if np.std(ra) == 0 or np.std(rb) == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def rank_correlation(a: Sequence[float], b: Sequence[float], sessions: Sequence[Any], *,
                     level: float = 0.95) -> tuple[float, float, float, str]:
    """Spearman's rank correlation of ``a`` and ``b`` (one pair per compaction; NaN pairs left out) with
    its two-stage session-clustered interval where supported: (rho, low, high, note)."""
    return _interval(np.column_stack([np.asarray(a, dtype=float), np.asarray(b, dtype=float)]), list(sessions),
                     _spearman, level=level)


def rework_correlations(points: pd.DataFrame, measures: pd.DataFrame, *, level: float = 0.95,
                        measure_names: Sequence[str] | None = None, outcomes: Sequence[str] | None = None,
                        by_agent: bool = True) -> pd.DataFrame:
    """Spearman's rank correlation of each summary measure with each rework outcome across compactions
    (``<signal>_excess`` is after minus the matched control), with a session-clustered interval where
    supported. A measure that tracks what the agent lost should correlate *negatively* with rework;
    the baselines' scores (``score_<baseline>``) say how much of a correlation the span alone explains."""
    table = paired(points)
    joined = table.merge(measures.drop(columns=[c for c in ("session", "agent", "compaction", "compaction_id",
                                                            "summary_chars") if c in measures.columns]),
                         on="compaction_key", how="inner")
    names = [m for m in (measure_names or DEFAULT_MEASURES) if m in joined.columns]
    wanted = [o for o in (outcomes or DEFAULT_OUTCOMES) if o in joined.columns]
    rows = []
    groups = [(a, part) for a, part in joined.groupby("agent", sort=True)] if by_agent else []
    groups.append(("all", joined))
    for agent, part in groups:
        for m in names:
            for o in wanted:
                ok = ~np.isnan(part[[m, o]].to_numpy(dtype=float)).any(axis=1)
                est, low, high, note = rank_correlation(part[m], part[o], part["session"], level=level)
                rows.append({"agent": agent, "measure": m, "outcome": o, "rho": est, "rho_low": low, "rho_high": high,
                             "n_compactions": int(ok.sum()), "n_sessions": int(part["session"][ok].nunique()),
                             "note": note})
    return CORRELATIONS.frame(rows)


# --------------------------------------------------------------------------- the per-fact view

FACTS = Table("rework_facts", [
    *_IDENTITY,
    Column("class", description="the fact's class (:data:`pimem.drift.needed.FACT_CLASSES`)"),
    Column("kind", description="the fact's kind"),
    Column("value", description="the normalized value"),
    Column("used_at", description="the entry of its first use after the compaction"),
    Column("used_in_window", description="that use falls in the window"),
    Column("present", description="the summary states it"),
    Column("reacquired", description="a rework event of the window holds it"),
    Column("how", description="the signal of that event"),
], "One row per needed-later fact of each compaction with a summary.")
FACT_COLUMNS = FACTS.names


def fact_reacquisition(session: SessionLike, *, window: int = DEFAULT_WINDOW, lookback: int = DEFAULT_LOOKBACK,
                       leaf_id: str | None = None) -> pd.DataFrame:
    """One row per needed-later fact of every compaction (:func:`pimem.drift.needed.needed_later_facts`):
    whether the summary states it (``present``) and whether the agent got it back in the window after
    the compaction by rework (``reacquired``): a re-read or re-run whose file, command or output holds
    it, or a repeated instruction or question that states it (``how``: the signal). ``used_in_window``:
    its first later use falls in the window (only those facts could have been re-acquired there)."""
    session = as_session(session)
    rows: list[dict[str, Any]] = []
    results: dict[int, dict[Any, str]] = {}  # per path: each tool call's output
    for path, k, record in _compactions(session, leaf_id):
        if not str(record.summary).strip():
            continue
        if id(path) not in results:
            results[id(path)] = {m.get("toolCallId"): text_blocks(m.get("content")) for _, m in path.messages
                                 if m.get("role") == "toolResult"}
        start, stop, point, end = path.compaction_windows(k, lookback, window)
        events = _events(path.window(start, stop, point, end))
        shown = [(ev.signal, index_of(ev.action.subject + "\n" + results[id(path)].get(ev.action.call_id, "")[:20000]))
                 for ev in events]
        window_ids = {path.messages[i][0] for i in range(point, end)}
        written = index_of(summarizer_text(record.summary))
        identity = _identity(session, record)
        for n in needed_later_facts(record):
            how = next((signal for signal, index in shown if fact_present(n.fact, index)), None)
            rows.append({**identity, "class": n.cls, "kind": n.fact.kind, "value": n.fact.value, "used_at": n.used_at,
                         "used_in_window": n.used_at in window_ids, "present": fact_present(n.fact, written),
                         "reacquired": how is not None, "how": how})
    return FACTS.frame(rows)


def _dropped_minus_kept(v: np.ndarray) -> float:
    """Re-acquired share of the dropped facts minus that of the kept ones (columns: reacquired, present)."""
    dropped, kept = v[v[:, 1] == 0, 0], v[v[:, 1] == 1, 0]
    return float(dropped.mean() - kept.mean()) if len(dropped) and len(kept) else math.nan


REACQUISITION = Table("rework_reacquisition", [
    Column("agent", description="the agent"),
    Column("class", description="the fact class, or ``all``"),
    Column("n_facts", description="needed-later facts"),
    Column("n_dropped", description="those the summary does not state"),
    Column("n_sessions", description="their sessions"),
    *(Column(f"{name}{end}", description=f"{what}{how}") for name, what in (
        ("reacquired_dropped", "share of the dropped facts re-acquired by rework"),
        ("reacquired_kept", "share of the kept facts re-acquired by rework"),
        ("difference", "reacquired_dropped − reacquired_kept"))
      for end, how in (("", ""), ("_low", ": low end of its session-clustered interval (NaN where not supported)"),
                       ("_high", ": high end of that interval"))),
    Column("note", description="how the difference's interval was made, or why there is none"),
], "One row per agent and fact class: facts dropped or kept by the summary, and re-acquired by rework.")


def reacquisition_table(facts: pd.DataFrame, *, level: float = 0.95, in_window: bool = True) -> pd.DataFrame:
    """Per agent and fact class: the share of needed-later facts re-acquired by rework when the summary
    dropped them and when it kept them, and the difference (dropped − kept), each with a session-clustered
    interval where supported. ``in_window``: only facts first used in the window."""
    data = facts[facts["used_in_window"].astype(bool)] if in_window else facts
    rows = []
    for (agent, cls), part in [*data.groupby(["agent", "class"], sort=True),
                               *(((a, "all"), p) for a, p in data.groupby("agent", sort=True))]:
        row: dict[str, Any] = {"agent": agent, "class": cls, "n_facts": len(part),
                               "n_dropped": int((~part["present"].astype(bool)).sum()),
                               "n_sessions": part["session"].nunique()}
        for name, flag in (("dropped", False), ("kept", True)):
            sel = part[part["present"].astype(bool) == flag]
            est, low, high, _ = _interval(sel["reacquired"].to_numpy(dtype=float), sel["session"].tolist(), _mean,
                                          level=level)
            row.update({f"reacquired_{name}": est, f"reacquired_{name}_low": low, f"reacquired_{name}_high": high})
        both = np.column_stack([part["reacquired"].to_numpy(dtype=float), part["present"].to_numpy(dtype=float)])
        est, low, high, note = _interval(both, part["session"].tolist(), _dropped_minus_kept, level=level)
        row.update({"difference": est, "difference_low": low, "difference_high": high, "note": note})
        rows.append(row)
    return REACQUISITION.frame(rows)


# --------------------------------------------------------------------------- rework beside orphan references


VS_ORPHANS = Table("rework_orphans", [
    *_IDENTITY[:3], Column("compaction_id", description="the compaction entry"), _IDENTITY[5],
    Column("rework", description="rework after the compaction"),
    Column("rework_control", description="the mean at its controls"),
    Column("rework_excess", description="rework − rework_control"),
    Column("rereads", description="re-reads after the compaction"),
    Column("rereads_control", description="the mean at its controls"),
    Column("references", description="span facts the agent used before the next compaction (:mod:`pimem.replays."
           "orphans`)"),
    Column("orphans", description="those its context did not hold at their first use"),
    Column("orphan_rate", description="orphans / references"),
], "One row per recorded compaction with a control: rework beside orphan references.")


def rework_vs_orphans(session: SessionLike, points: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per recorded compaction of a session: its rework (after it and at its controls) beside its orphan
    references on the recording (:func:`pimem.replays.orphans.orphan_references`, the closed-loop
    baseline: facts of the span the agent used before the next compaction that its context did not
    hold at that use), each on the longest path through the compaction."""
    session = as_session(session)
    points = points if points is not None else rework_points(session)
    table = paired(points, ["rework", "rereads"])
    parts = [orphan_references(session, leaf_id=path.leaf) for path in _session_paths(session, None)]
    orphans = (pd.concat([_plain(p) for p in parts], ignore_index=True).drop_duplicates("compaction_id")
               if parts else ORPHANS.frame([]))
    joined = table.merge(orphans[["compaction_id", "references", "orphans", "orphan_rate"]], on="compaction_id",
                         how="left")
    return VS_ORPHANS.frame(joined[VS_ORPHANS.names].to_dict("records"))


EXAMPLES = Table("rework_examples", [
    Column("session", description="the session's id"),
    Column("file", description="the session file"),
    Column("compaction_id", description="the compaction entry"),
    Column("rework", description="rework after it"),
    Column("rework_control", description="the mean at its controls"),
    Column("what", description="signal and file (last segment) or command, with how many times"),
], "The compactions with the most rework beyond their controls, one per session.")


def rework_examples(points: pd.DataFrame, *, count: int = 3) -> pd.DataFrame:
    """The ``count`` compactions with the most rework beyond their controls (one per session), each with
    what the agent did after it in a few words: ``what`` lists signal and file or command (its last
    path segment) with how many times, in order of first occurrence."""
    table = paired(points, ["rework"]).sort_values(["rework_excess", "rework"], ascending=False, kind="stable")
    table = table.drop_duplicates("session").head(count)
    events = points.attrs.get("events")
    rows = []
    for _, r in table.iterrows():
        what: dict[str, int] = {}
        if events is not None:
            mine = events[(events["file"] == r["file"]) & (events["compaction_id"] == r["compaction_id"])
                          & (events["point"] == "after")]
            for e in mine.itertuples():
                subject = str(e.subject)
                named_file = e.signal in ("rereads", "reverts") and "/" in subject
                short = subject.rsplit("/", 1)[-1] if named_file else subject[:60]
                key = f"{e.signal} {short}"
                what[key] = what.get(key, 0) + 1
        rows.append({"session": r["session"], "file": r["file"], "compaction_id": r["compaction_id"],
                     "rework": r["rework"], "rework_control": r["rework_control"],
                     "what": "; ".join(f"{k} ×{n}" if n > 1 else k for k, n in what.items())})
    return EXAMPLES.frame(rows)


for _table, _function in ((POINTS, rework_points), (POINTS, rework_corpus), (REWORK_TABLE, rework_table),
                          (CORRELATIONS, rework_correlations), (FACTS, fact_reacquisition),
                          (REACQUISITION, reacquisition_table), (SIGNAL_DOCS, signal_docs),
                          (VS_ORPHANS, rework_vs_orphans), (EXAMPLES, rework_examples)):
    _table.document(_function)

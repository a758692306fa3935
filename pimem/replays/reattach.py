"""What Claude Code attaches to the conversation after it compacts, rebuilt from its transcript.

Claude Code's compaction (the same code in its releases 2.1.5 and 2.1.33 on npm, the versions of the
real transcripts at hand) sends, after the summary, what the transcript does not show as messages:

* the :data:`REATTACH_MAX_FILES` files it read, wrote or edited last (by modification time; not
  ``CLAUDE.md``, not the plan file), each read again whole: at most :data:`REATTACH_MAX_LINES`
  numbered lines, sent as a call to ``Read`` and its result as a JSON string, or a one-line note
  naming it when its text is above :data:`REATTACH_TOKENS_PER_FILE` tokens; files are kept while
  their chars/4 stay within :data:`REATTACH_BUDGET`;
* the todo list (the last ``TodoWrite``), the plan file, and every skill invoked in the session, whole.

The transcript shows what is needed (``details`` from :func:`~pimem.sessions.importers.claude_code.file_facts`:
the lines a ``Read`` left out, the whole file after an edit); where it does not, the text shown is
taken as the file. Files are ordered by when the recording last touched them: it does not show the
modification time of a file that was only read. Whether a text is above the token cap needs the
provider's tokenizer, which is not public: :data:`READ_CHARS_PER_TOKEN` stands for it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

from pimem.core.compaction.compaction import get_assistant_usage
from pimem.replays.recording import input_tokens, output_tokens

__all__ = ["Reattachment", "ReattachedFile", "reattachment", "reattached_tokens", "read_chars_per_token",
           "REATTACH_MAX_FILES", "REATTACH_TOKENS_PER_FILE", "REATTACH_BUDGET", "REATTACH_MAX_LINES",
           "READ_CHARS_PER_TOKEN"]

REATTACH_MAX_FILES = 5
REATTACH_TOKENS_PER_FILE = 5_000
REATTACH_BUDGET = 50_000
REATTACH_MAX_LINES = 2_000
#: Characters of a ``Read`` result (numbered lines) per token the provider counted for it: the median
#: of :func:`read_chars_per_token` over the 941 reads in the 62 real Claude Code sessions with a
#: compaction in the shared corpus (copies of a session once). :func:`pimem.replays.validation.validate`
#: learns it with the session held out (2.618 to 2.631).
READ_CHARS_PER_TOKEN = 2.62
_NUMBER = 7  # "{n:>6}→" before each line Claude Code reads
# A file is attached as two messages, "Called the Read tool with the following input: {"file_path":…}" and
# "Result of calling the Read tool: " + the result as a JSON string: its numbered text escaped (newlines,
# tabs and quotes take two characters), then the system reminder every Read result ends with (345
# characters escaped, 340 as the transcripts show it).
_READ_FRAME = 47 + 33 + 2 + 345
_FRAME = 200  # the sentences and system-reminder tags around the todo list, the plan, the skills
_REFERENCE = 160  # "Note: <file> was read before the last conversation was summarized, but ... too large ..."
_FILE_TOOLS = ("Read", "Write", "Edit", "MultiEdit", "NotebookEdit")
_READ_MIN_CHARS = 2_000


@dataclasses.dataclass(frozen=True)
class ReattachedFile:
    """A file Claude Code would read again: its text's ``chars`` (without line numbers) and ``lines``
    as the recording shows them (``exact``) or scales them from the part it read; ``escaped``: how
    much longer its numbered text is as a JSON string (from the text the recording shows of it)."""

    path: str
    chars: float
    lines: float
    exact: bool
    escaped: float = 1.0

    def tokens(self, chars_per_token: float = READ_CHARS_PER_TOKEN) -> float:
        """chars/4 of what is attached: the numbered text as a JSON string in its two messages, or the
        note that names the file when its text is above :data:`REATTACH_TOKENS_PER_FILE` tokens at
        ``chars_per_token``."""
        if self.chars / chars_per_token > REATTACH_TOKENS_PER_FILE:
            return (_REFERENCE + len(self.path)) / 4
        call = len(json.dumps({"file_path": self.path}, separators=(",", ":"), ensure_ascii=False))
        return ((self.chars + _NUMBER * self.lines) * self.escaped + _READ_FRAME + call) / 4


@dataclasses.dataclass(frozen=True)
class Reattachment:
    """What Claude Code attaches after a compaction at the end of a recorded path, in chars (/4 for
    :meth:`tokens`): the most recent ``files`` first, the ``todos``, ``plan`` and ``skills`` (0: none)."""

    files: tuple[ReattachedFile, ...]
    todos: float = 0.0
    plan: float = 0.0
    skills: float = 0.0

    def file_tokens(self, chars_per_token: float = READ_CHARS_PER_TOKEN) -> float:
        """chars/4 of the files attached: the :data:`REATTACH_MAX_FILES` most recent, each kept while
        the total stays within :data:`REATTACH_BUDGET`."""
        total = 0.0
        for file in self.files[:REATTACH_MAX_FILES]:
            size = file.tokens(chars_per_token)
            if total + size <= REATTACH_BUDGET:
                total += size
        return total

    def tokens(self, chars_per_token: float = READ_CHARS_PER_TOKEN) -> float:
        """chars/4 of everything attached."""
        rest = sum((chars + _FRAME) / 4 for chars in (self.todos, self.plan, self.skills) if chars)
        return self.file_tokens(chars_per_token) + rest


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))


def _escaped(text: str) -> float | None:
    """How much longer ``text`` is as a JSON string (None for an empty text)."""
    return (len(json.dumps(text, ensure_ascii=False)) - 2) / len(text) if text else None


def _is_plan(path: str) -> bool:
    return "/.claude/plans/" in path.replace("\\", "/")


def _counts(facts: Any, key: str, names: tuple[str, ...]) -> tuple[int, ...] | None:
    """``facts[key][name]`` for each name when all are non-negative integers, else None."""
    part = facts.get(key) if isinstance(facts, dict) else None
    if not isinstance(part, dict):
        return None
    values: list[Any] = [part.get(name) for name in names]
    if not all(type(v) is int and v >= 0 for v in values):
        return None
    return tuple(int(v) for v in values)


def _read_file(text: str, facts: Any) -> tuple[float, float, bool]:
    """``(chars, lines, exact)`` of the whole file a ``Read`` result shows part or all of."""
    shown = text.split("\n\n<system-reminder>", 1)[0]
    read = _counts(facts, "read", ("numLines", "totalLines"))
    if read is None:
        lines = shown.count("\n") + 1
        return max(0.0, len(shown) - _NUMBER * lines), float(lines), False
    numbered, total = read
    chars = max(0.0, len(shown) - _NUMBER * numbered)
    whole = min(total, REATTACH_MAX_LINES)
    if numbered >= whole or numbered == 0:
        return chars, float(max(numbered, 1)), numbered >= total
    return chars * whole / numbered, float(whole), False


def reattachment(path_entries: Sequence[dict]) -> Reattachment:
    """What Claude Code attaches after a compaction at the end of ``path_entries`` (a recorded path)."""
    calls: dict[Any, tuple[str, dict]] = {}
    files: dict[str, tuple[int, float, float, bool]] = {}
    escaped: dict[str, float] = {}  # file -> how much longer the text shown of it is as a JSON string
    todos = plan = 0.0
    skills: dict[str, float] = {}
    skill: str | None = None  # a skill just launched: its text is the next meta message
    for step, entry in enumerate(path_entries):
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if (isinstance(block, dict) and block.get("type") == "toolCall"
                        and isinstance(block.get("arguments"), dict)):
                    calls[block.get("id")] = (str(block.get("name")), block["arguments"])
        elif role == "toolResult" and message.get("toolCallId") in calls:
            name, args = calls.pop(message.get("toolCallId"))
            if message.get("isError"):
                continue
            facts = message.get("details")
            after = _counts(facts, "file", ("chars", "lines"))
            if name == "TodoWrite" and isinstance(args.get("todos"), list):
                todos = float(len(json.dumps(args["todos"], separators=(",", ":"), ensure_ascii=False))
                              if args["todos"] else 0)
            elif name == "Skill" and isinstance(args.get("skill"), str):
                skill = args["skill"]
            elif name == "ExitPlanMode" and (told := _counts(facts, "plan", ("chars",))) is not None:
                plan = float(told[0])
            if name not in _FILE_TOOLS:
                continue
            file = args.get("file_path") or args.get("notebook_path")
            if not isinstance(file, str) or file.lower().endswith("claude.md"):
                continue
            written = args.get("content")
            shown = (_text(message.get("content")).split("\n\n<system-reminder>", 1)[0] if name == "Read"
                     else written if name == "Write" and isinstance(written, str) else "")
            ratio = _escaped(shown)
            if ratio is not None and not _is_plan(file):
                escaped[file] = ratio
            if name == "Read":
                size = _read_file(_text(message.get("content")), facts)
            elif after is not None:
                size = float(after[0]), float(min(after[1], REATTACH_MAX_LINES)), True
            elif name == "Write" and isinstance(args.get("content"), str):
                size = float(len(args["content"])), float(args["content"].count("\n") + 1), True
            else:  # an edit that does not say the file's size: what was known of it
                size = files[file][1:] if file in files else (0.0, 0.0, False)
            if _is_plan(file):
                plan = size[0]
            else:
                files[file] = (step, *size)
        elif role == "user" and skill is not None:
            source = entry.get("source")
            if isinstance(source, dict) and source.get("isMeta"):
                skills[skill] = float(len(_text(message.get("content"))))
            skill = None
    recent = sorted(files.items(), key=lambda item: -item[1][0])
    known = sorted(escaped.values())  # a file whose text the recording never shows: the files' median
    typical = (known[len(known) // 2] + known[(len(known) - 1) // 2]) / 2 if known else 1.0
    return Reattachment(tuple(ReattachedFile(path, chars, lines, exact, escaped.get(path, typical))
                              for path, (_, chars, lines, exact) in recent),
                        todos=todos, plan=plan, skills=sum(skills.values()))


def reattached_tokens(path_entries: Sequence[dict], *, chars_per_token: float = READ_CHARS_PER_TOKEN) -> float:
    """chars/4 of what Claude Code attaches after a compaction at the end of ``path_entries``
    (:func:`reattachment`)."""
    return reattachment(path_entries).tokens(chars_per_token)


def read_chars_per_token(path_entries: Sequence[dict]) -> list[float]:
    """For each ``Read`` result of more than 2,000 characters that was all a recorded request added to
    the one before (its response aside): its characters per token the provider counted for it
    (``input − previous input − previous output``)."""
    names: dict[Any, str] = {}
    ratios: list[float] = []
    previous: tuple[float, float] | None = None
    added: list[tuple[str, int]] = []
    for entry in path_entries:
        if entry.get("type") == "compaction":
            previous, added = None, []
            continue
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    names[block.get("id")] = str(block.get("name"))
            if get_assistant_usage(message) is None:
                previous, added = None, []
                continue
            now = input_tokens(message)
            if previous is not None and len(added) == 1 and added[0][0] == "Read" and added[0][1] > _READ_MIN_CHARS:
                counted = now - previous[0] - previous[1]
                if counted > 0:
                    ratios.append(added[0][1] / counted)
            previous, added = (now, output_tokens(message)), []
        elif role == "toolResult" and not message.get("isError"):
            added.append((names.get(message.get("toolCallId"), ""), len(_text(message.get("content")))))
        else:
            added.append(("", 0))
    return ratios

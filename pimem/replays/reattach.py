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
import statistics
from typing import Any, Sequence

from pimem.core.compaction.compaction import get_assistant_usage
from pimem.replays.recording import input_tokens, output_tokens
from pimem.text.messages import message_text

__all__ = ["Reattachment", "ReattachedFile", "Reattacher", "reattachment", "read_chars_per_token",
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
    return message_text({"content": content}, separator="", thinking=None, tool_calls=None, images=False)


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


def _read_file(shown: str, facts: Any) -> tuple[float, float, bool]:
    """``(chars, lines, exact)`` of the whole file a ``Read`` result shows (its reminder cut) part or all of."""
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


class Reattacher:
    """What Claude Code attaches after a compaction at any step of a recorded path: :meth:`at` walks the
    path once for steps asked in order (an earlier step starts the walk again)."""

    def __init__(self, path_entries: Sequence[dict]) -> None:
        self.path = path_entries
        self._restart()

    def _restart(self) -> None:
        self.step = 0
        self.calls: dict[Any, tuple[str, dict]] = {}
        self.files: dict[str, tuple[int, float, float, bool]] = {}
        self.escaped: dict[str, float] = {}  # file -> how much longer the text shown of it is as a JSON string
        self.todos = self.plan = 0.0
        self.skills: dict[str, float] = {}
        self.skill: str | None = None  # a skill just launched: its text is the next meta message

    def at(self, step: int) -> Reattachment:
        """What Claude Code attaches after a compaction made before entry ``step`` (after ``path[:step]``)."""
        if step < self.step:
            self._restart()
        for index in range(self.step, min(step, len(self.path))):
            self._read(index, self.path[index])
        self.step = max(self.step, step)
        recent = sorted(self.files.items(), key=lambda item: -item[1][0])
        # a file whose text the recording never shows: the median of the files shown
        typical = statistics.median(self.escaped.values()) if self.escaped else 1.0
        return Reattachment(tuple(ReattachedFile(path, chars, lines, exact, self.escaped.get(path, typical))
                                  for path, (_, chars, lines, exact) in recent),
                            todos=self.todos, plan=self.plan, skills=sum(self.skills.values()))

    def _read(self, step: int, entry: dict) -> None:
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict):
            return
        role = message.get("role")
        if role == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if (isinstance(block, dict) and block.get("type") == "toolCall"
                        and isinstance(block.get("arguments"), dict)):
                    self.calls[block.get("id")] = (str(block.get("name")), block["arguments"])
        elif role == "toolResult" and message.get("toolCallId") in self.calls:
            name, args = self.calls.pop(message.get("toolCallId"))
            if not message.get("isError"):
                self._result(step, name, args, message)
        elif role == "user" and self.skill is not None:
            source = entry.get("source")
            if isinstance(source, dict) and source.get("isMeta"):
                self.skills[self.skill] = float(len(_text(message.get("content"))))
            self.skill = None

    def _result(self, step: int, name: str, args: dict, message: dict) -> None:
        facts = message.get("details")
        if name == "TodoWrite" and isinstance(args.get("todos"), list):
            self.todos = float(len(json.dumps(args["todos"], separators=(",", ":"), ensure_ascii=False))
                               if args["todos"] else 0)
        elif name == "Skill" and isinstance(args.get("skill"), str):
            self.skill = args["skill"]
        elif name == "ExitPlanMode" and (told := _counts(facts, "plan", ("chars",))) is not None:
            self.plan = float(told[0])
        file = args.get("file_path") or args.get("notebook_path")
        if name not in _FILE_TOOLS or not isinstance(file, str) or file.lower().endswith("claude.md"):
            return
        written = args.get("content") if name == "Write" and isinstance(args.get("content"), str) else None
        after = _counts(facts, "file", ("chars", "lines"))
        shown = ""
        if name == "Read":
            shown = _text(message.get("content")).split("\n\n<system-reminder>", 1)[0]
            size = _read_file(shown, facts)
        elif after is not None:
            size = float(after[0]), float(min(after[1], REATTACH_MAX_LINES)), True
        elif written is not None:
            size = float(len(written)), float(written.count("\n") + 1), True
        else:  # an edit that does not say the file's size: what was known of it
            size = self.files[file][1:] if file in self.files else (0.0, 0.0, False)
        if _is_plan(file):
            self.plan = size[0]
            return
        self.files[file] = (step, *size)
        ratio = _escaped(shown or written or "")
        if ratio is not None:
            self.escaped[file] = ratio


def reattachment(path_entries: Sequence[dict]) -> Reattachment:
    """What Claude Code attaches after a compaction at the end of ``path_entries`` (a recorded path)."""
    return Reattacher(path_entries).at(len(path_entries))


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

"""An offline, deterministic summarizer that fills Pi's templates from the serialized conversation.

It reads exactly the text Pi sends to the model (``<conversation>…</conversation>``, an optional
``<previous-summary>…</previous-summary>``, or ``# Conversation … # Instructions`` for a turn prefix),
parses the ``[User]: / [Assistant thinking]: / [Assistant]: / [Assistant tool calls]: / [Tool result]:``
parts that ``serializeConversation`` writes, and answers with the same Markdown template a model is asked
for. It is a baseline to compare real models against. Its rules:

1. **Goal**: each user request in order (user parts that are not command runs, embedded summaries or
   acknowledgements shorter than three words), condensed to its first sentences; duplicates dropped.
2. **Constraints & Preferences**: user sentences with an imperative marker (don't, do not, never, must,
   always, prefer, should, avoid, make sure, ensure, only, no need, keep); ``Additional focus`` from the
   instructions is listed first.
3. **Done**: successful ``edit``/``write`` calls (per path, with the edit count), and passing verification
   commands (test, check, build, lint, type checks, ``git commit``…) run through ``bash`` or by the user.
   A tool result counts as failed when a line looks like an error (``error``, ``failed``, ``Traceback``,
   ``Command exited with code N``, ``Could not …``, ``No such file``…, but not ``0 errors``).
4. **In Progress**: the latest user request, plus files modified after it and the last assistant statement.
5. **Blocked**: failed tool results not resolved later (resolved = a later success on the same path, or
   the same command head), each with its exact error line.
6. **Key Decisions**: assistant sentences stating a choice (use, instead of, rather than, decided, going
   with, switch to, better to, approach…), split into decision and rationale at because/since/so/to avoid.
7. **Next Steps**: fix each open blocker, then forward-looking assistant sentences from the last two
   assistant texts (next, then, still, remaining, TODO, need to, will), else continue the latest request.
8. **Critical Context**: exact error lines, modified and read paths, commands run, and identifiers
   (backticked names, ``call()`` names, paths mentioned in text), most frequent first.

Update requests (with ``<previous-summary>``) merge per Pi's update rules: the previous summary is parsed
by the drift parser (:func:`pimem.text.sections.section_items`, so the summarizer and the measures read a
summary the same way; headings that name no template section are kept in Critical Context as
``Heading: line``); earlier goals, constraints, Done items and decisions are preserved; previous In
Progress items whose paths or identifiers now appear in a new Done item move to Done; previous blockers
whose paths or command heads now succeed are dropped; Next Steps are recomputed and earlier ones kept
unless done. ``<read-files>``/``<modified-files>`` blocks in the previous summary are dropped (compaction
appends them again), a split-turn part is folded into the sections.

Turn-prefix requests use the turn-prefix template (Original Request / Progress So Far / Context Needed to
Continue); branch requests use the branch template (no Critical Context; exact paths and error lines
stay in the Progress items). Every section is always present, with ``(none)`` when empty.

``max_tokens`` is measured with Pi's estimator (``ceil(UTF-16 length / 4)``): when the summary is too
long, items are dropped from the lowest-priority sections first (Critical Context, Next Steps, Key
Decisions, Constraints, In Progress, Done, Blocked, Goal; oldest first, a note counts what was omitted),
then long items are shortened. If even the bare template does not fit, the text is cut and the response
stops with ``"length"``, as a model would. Usage follows Pi's shape with ``input`` the estimate of system
prompt + prompt and ``output`` the estimate of the text; cost is zero.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pimem.base.memo import memoised
from pimem.base.js import utf16_len
from pimem.core.compaction.utils import serialize_conversation
from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.core.messages import convert_to_llm
from pimem.text.sections import section_items

__all__ = [
    "ExtractiveSummarizer",
    "ParsedPart",
    "ToolCall",
    "parse_conversation",
    "parse_tool_calls",
    "split_request",
    "parse_summary_sections",
    "estimate_text_tokens",
    "zero_usage",
]

# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


_utf16_len = utf16_len


def estimate_text_tokens(text: str) -> int:
    """Pi's estimator for a text: ``ceil(UTF-16 length / 4)``."""
    return math.ceil(_utf16_len(text) / 4)


def zero_usage() -> dict[str, Any]:
    """A Pi usage dict with every count and cost zero."""
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _shorten(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters at a word boundary, marking the cut with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip() + "…"


@memoised(1 << 14)
def _norm_key(text: str) -> str:
    return re.sub(r"[^a-z0-9/._`-]+", " ", text.lower()).strip()


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = _norm_key(item)
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n+")


def _sentences(text: str) -> list[str]:
    return [s.strip(" -*\t") for s in _SENTENCE_SPLIT.split(text) if s and s.strip(" -*\t")]


# ---------------------------------------------------------------------------------------------
# Request and conversation parsing
# ---------------------------------------------------------------------------------------------

_ROLE_TAGS = ("User", "Assistant thinking", "Assistant", "Assistant tool calls", "Tool result")
_PART_START = re.compile(r"\n\n(?=\[(?:User|Assistant thinking|Assistant|Assistant tool calls|Tool result)\]: )")
_PART_HEAD = re.compile(r"\[(User|Assistant thinking|Assistant|Assistant tool calls|Tool result)\]: ")
_COMPACTION_PREFIX = "The conversation history before this point was compacted into the following summary:"
_BRANCH_PREFIX = "The following is a summary of a branch that this conversation came back from:"


@dataclass
class ToolCall:
    """One ``name(k=JSON, …)`` call from an ``[Assistant tool calls]`` part."""

    name: str
    args: dict[str, Any]
    result: str | None = None
    error_lines: list[str] = field(default_factory=list)
    position: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.error_lines)

    @property
    def path(self) -> str | None:
        p = self.args.get("path") or self.args.get("file_path") or self.args.get("filePath")
        return p if isinstance(p, str) and p else None

    @property
    def command(self) -> str | None:
        c = self.args.get("command")
        return c if isinstance(c, str) and c else None


@dataclass
class ParsedPart:
    """One serialized part: its role tag and text (tool calls parsed for ``Assistant tool calls``)."""

    role: str
    text: str
    calls: list[ToolCall] = field(default_factory=list)


_PREVIOUS_SESSION_SUMMARY = "Previous session summary:\n"


def split_request(request: SummaryRequest) -> tuple[str, str | None, str]:
    """Split a request prompt into (conversation text, previous summary or None, instructions).

    A request made of a conversation (``messages``, Pi 0.13.2's format) is split into its
    serialized messages, the ``Previous session summary:`` message and the instructions."""
    messages = list(getattr(request, "messages", None) or ())
    if messages:
        previous = None
        first = messages[0]
        if first.get("role") == "user" and str(first.get("content", "")).startswith(_PREVIOUS_SESSION_SUMMARY):
            previous = first["content"][len(_PREVIOUS_SESSION_SUMMARY):]
            messages = messages[1:]
        return serialize_conversation(convert_to_llm(messages[:-1])), previous, request.prompt
    prompt = request.prompt
    if request.kind == "turn_prefix" and prompt.startswith("# Conversation\n"):
        idx = prompt.rfind("\n\n# Instructions\n")
        if idx >= 0:
            return prompt[len("# Conversation\n") : idx], None, prompt[idx + len("\n\n# Instructions\n") :]
    if prompt.startswith("<conversation>\n"):
        body = prompt[len("<conversation>\n") :]
        prev_end = body.rfind("\n</previous-summary>\n\n")
        if prev_end >= 0:
            conv_end = body.rfind("\n</conversation>\n\n<previous-summary>\n", 0, prev_end)
            if conv_end >= 0:
                prev_start = conv_end + len("\n</conversation>\n\n<previous-summary>\n")
                return (
                    body[:conv_end],
                    body[prev_start:prev_end],
                    body[prev_end + len("\n</previous-summary>\n\n") :],
                )
        conv_end = body.rfind("\n</conversation>\n\n")
        if conv_end >= 0:
            return body[:conv_end], None, body[conv_end + len("\n</conversation>\n\n") :]
        conv_end = body.rfind("\n</conversation>")
        if conv_end >= 0:
            return body[:conv_end], None, ""
    return prompt, None, ""


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Parse ``name(k=JSON, k2=JSON); name2(…)`` as written by ``serializeConversation``."""
    calls: list[ToolCall] = []
    decoder = json.JSONDecoder()
    i, n = 0, len(text)
    while i < n:
        m = re.compile(r"\s*([^\s(;]+)\(").match(text, i)
        if not m:
            break
        name, i = m.group(1), m.end()
        args: dict[str, Any] = {}
        ok = True
        while i < n and text[i] != ")":
            km = re.compile(r"([^=,()]+)=").match(text, i)
            if not km:
                ok = False
                break
            key, i = km.group(1).strip(), km.end()
            try:
                value, i = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                ok = False
                break
            args[key] = value
            if text.startswith(", ", i):
                i += 2
        calls.append(ToolCall(name=name, args=args))
        if not ok:
            break
        i += 1  # the closing parenthesis
        if text.startswith("; ", i):
            i += 2
    return calls


def parse_conversation(text: str) -> list[ParsedPart]:
    """Split serialized conversation text into its role-tagged parts."""
    parts: list[ParsedPart] = []
    if not text.strip():
        return parts
    for chunk in _PART_START.split(text):
        m = _PART_HEAD.match(chunk)
        if m:
            role, body = m.group(1), chunk[m.end() :]
        else:
            role, body = "User", chunk
        part = ParsedPart(role=role, text=body)
        if role == "Assistant tool calls":
            part.calls = [ToolCall(name=name, args=args) for name, args in _tool_calls(body)]
        parts.append(part)
    return parts


@memoised(1 << 12)
def _tool_calls(text: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """:func:`parse_tool_calls` as (name, arguments) pairs, memoised (the calls are made fresh)."""
    return tuple((call.name, call.args) for call in parse_tool_calls(text))


# ---------------------------------------------------------------------------------------------
# Classification rules
# ---------------------------------------------------------------------------------------------

_ERROR_LINE = re.compile(
    r"(\berror\b|\bErr(or)?:|\b\w+(Error|Exception)\b|\bfailed\b|\bfailure\b|\bFAIL(ED)?\b|Traceback \(most recent call last\)|"
    r"\bexception\b|No such file or directory|\bENOENT\b|\bcannot\b|\bcan't\b|Could not |"
    r"No changes made to|not found|Command exited with code [1-9]|Command aborted|command cancelled|"
    r"Permission denied|\bpanic(ked)?\b|Segmentation fault|^\s*×|✗|✖)",
    re.IGNORECASE,
)
_NOT_ERROR = re.compile(r"\b(0|no|zero) (errors?|failures?|failed)\b|\berrors?: 0\b|\bfailed: 0\b", re.IGNORECASE)
_STRONG_ERROR = re.compile(r"\berror\b|\b\w+(Error|Exception)\b|Traceback|Could not |No such file|ENOENT|Exception|FAIL", re.IGNORECASE)
_EXIT_CODE = re.compile(r"Command exited with code [1-9]\d*|Command aborted|\(command cancelled\)")
_VERIFY_CMD = re.compile(
    r"\b(test|tests|pytest|check|lint|build|tsc|tsgo|mypy|ruff|eslint|biome|cargo|make|go (test|vet|build)|"
    r"npm (run|test|ci)|pnpm|yarn|vitest|jest|git commit|git push|compile|typecheck|verify)\b",
    re.IGNORECASE,
)
_MUTATING_TOOLS = {"edit", "write", "multiedit", "apply_patch", "create"}
_CONSTRAINT = re.compile(
    r"\b(don't|dont|do not|never|must|mustn't|always|prefer|should|shouldn't|avoid|make sure|ensure|"
    r"only|no need|keep|without|instead)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(i'll use|i will use|we'll use|let's use|let me use|use .{1,60} instead|instead of|rather than|"
    r"decided|decide to|decision|going with|go with|opted|chose|choose|switch(ed)? to|better to|"
    r"the (right|best|simplest|cleanest) (approach|way|fix)|approach (is|will)|the plan is|we should)\b",
    re.IGNORECASE,
)
_RATIONALE = re.compile(r"(?<!\s)\s+(?:because|since|so that|so|as|to avoid|which means|—|-{1,2})\s+", re.IGNORECASE)
_FORWARD = re.compile(
    r"\b(next|then|still|remaining|todo|to-do|need to|needs to|will|i'll|we'll|should|follow[- ]up|later)\b",
    re.IGNORECASE,
)
_ACK = re.compile(r"^(ok(ay)?|yes|yep|no|nope|sure|thanks?( you)?|ty|go( on| ahead)?|continue|proceed|k|y|n|lgtm|"
                  r"great|good|nice|perfect|cool|done)[.!?\s]*$", re.IGNORECASE)
# Patterns start only where a token starts (the look-behinds), so a long run of word characters,
# dots or pluses cannot make them retry from every position (quadratic time on long lines).
_PATH_IN_TEXT = re.compile(r"(?<![\w/.@+-])(?:~|\.{1,2})?/?(?:[\w@.+-]+/)+[\w@+-]+(?:\.[\w]+)+(?::\d+)?")
BARE_FILE = re.compile(r"(?<![\w/.@-])[\w-]+\.(?:py|ts|tsx|js|jsx|mjs|cjs|json|jsonl|md|rs|go|java|c|h|cpp|toml|ya?ml|sh|css|html|sql|txt|ipynb)\b")
# identifiers worth keeping: paths, calls, snake_case, camelCase, CONSTANTS, TypeNames, flags
_CODE_LIKE = re.compile(r"[./()_:\[\]<>=#-]|[a-z][A-Z]|^[A-Z][A-Za-z0-9]+$|^[A-Z0-9_]{3,}$")
_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_CALL_NAME = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*\w)\(\)")


def _error_lines(text: str, limit: int = 2) -> list[str]:
    """The exact lines of a tool result that look like errors (most specific first)."""
    strong: list[str] = []
    weak: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or not _ERROR_LINE.search(line) or _NOT_ERROR.search(line):
            continue
        line = _shorten(line, 240)
        (strong if _STRONG_ERROR.search(line) and not _EXIT_CODE.fullmatch(line) else weak).append(line)
    return _dedupe(strong + weak)[:limit]


_FIRST_LINE_ERROR = re.compile(
    r"(error\b|err(or)?:|\b\w*Error\b|could not\b|cannot\b|can't\b|failed\b|no such file|enoent|eacces|"
    r"permission denied|offset \d+ is beyond|(file|path|directory) not found|no changes made|unknown tool|"
    r"invalid\b|validation failed|tool .* not found|.{0,200}: no such file or directory|"
    r"edits\[\d+\] and edits\[\d+\] overlap|traceback)",
    re.IGNORECASE,
)
_TRUNCATED = re.compile(r"\n\n\[\.\.\. \d+ more characters truncated\]\Z")


def result_errors(tool: str, text: str) -> list[str]:
    """Error lines of a tool result, or [] when the call looks successful.

    Command tools (``bash`` and the user's ``Ran`` blocks) fail when Pi's exit note is present
    (``Command exited with code N``, ``Command aborted``, ``(command cancelled)``), or when output
    cut at 2000 characters shows strong error lines. Other tools fail when their first line reads
    as an error (file contents that merely mention errors do not count).
    """
    if tool in {"bash", "shell", "powershell", "user-command"}:
        exit_line = _EXIT_CODE.search(text)
        if exit_line:
            errs = [e for e in _error_lines(text, 3) if not _EXIT_CODE.fullmatch(e)][:1]
            return errs + [exit_line.group(0)]
        if _TRUNCATED.search(text):
            return [e for e in _error_lines(text, 2) if _STRONG_ERROR.search(e)]
        return []
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if first and _FIRST_LINE_ERROR.match(first):
        return [_shorten(first, 240)]
    return []


def _command_head(command: str) -> str:
    words = command.strip().split()
    return " ".join(words[:3])


def _code(text: str) -> str:
    text = text.replace("`", "'")
    return f"`{text}`"


def _prose(text: str) -> str:
    """Text without fenced code blocks, tables and Markdown emphasis (for sentence rules)."""
    text = re.sub(r"```.*?(```|\Z)", " ", text, flags=re.DOTALL)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))
    return text.replace("**", "")


def _first_sentences(text: str, limit: int = 220) -> str:
    text = _collapse(text)
    sents = _sentences(text)
    out = ""
    for s in sents:
        cand = (out + " " + s).strip()
        if len(cand) > limit and out:
            break
        out = cand
        if len(out) >= limit * 0.5:
            break
    return _shorten(out or text, limit)


# ---------------------------------------------------------------------------------------------
# Facts gathered from one conversation
# ---------------------------------------------------------------------------------------------


@dataclass
class _Facts:
    requests: list[str] = field(default_factory=list)
    request_positions: list[int] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    done_keys: list[str] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    resolved_errors: set[str] = field(default_factory=set)
    failure_errors: dict[str, list[str]] = field(default_factory=dict)
    modified: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)
    embedded_summaries: list[str] = field(default_factory=list)
    succeeded_keys: set[str] = field(default_factory=set)
    last_assistant: str = ""


# What one part's text says, whatever the conversation around it: memoised, since the runs of one
# session (and consecutive summaries of one run) summarize the same messages again.


@memoised(1 << 13)
def _user_part(text: str) -> tuple:
    """A user part: ("summary", inner text), ("command", command, output), or ("text", the request or
    None, its constraints, its identifier candidates in order)."""
    if text.startswith(_COMPACTION_PREFIX) or text.startswith(_BRANCH_PREFIX):
        inner = text.split("<summary>\n", 1)[-1]
        return "summary", inner.rsplit("</summary>", 1)[0].rstrip("\n")
    m = re.match(r"Ran `(.*?)`\n", text, re.DOTALL)
    if m:
        return "command", m.group(1), text[m.end() :]
    collapsed = _collapse(text)
    request = None
    if collapsed and (len(collapsed.split()) >= 3 or not _ACK.match(collapsed)) and len(collapsed.split()) >= 2:
        request = _first_sentences(text)
    constraints = tuple(_shorten(_collapse(sent), 200) for sent in _sentences(text)
                        if _CONSTRAINT.search(sent) and 3 <= len(sent.split()) <= 60)
    idents = tuple([m2.group(1) for m2 in _BACKTICK.finditer(text)] + [m2.group(0) for m2 in _PATH_IN_TEXT.finditer(text)])
    return "text", request, constraints, idents


@memoised(1 << 13)
def _assistant_part(text: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """An assistant part: its prose, its decisions and its identifier candidates in order."""
    prose = _prose(text)
    sents = _sentences(prose)
    decisions = []
    for k, sent in enumerate(sents):
        if _DECISION.search(sent) and 4 <= len(sent.split()) <= 70:
            following = sents[k + 1] if k + 1 < len(sents) else ""
            decisions.append(_format_decision(_collapse(sent).rstrip(":"), _collapse(following)))
    idents = [m2.group(1) for m2 in _BACKTICK.finditer(text)] + [m2.group(1) + "()" for m2 in _CALL_NAME.finditer(text)]
    return prose, tuple(decisions), tuple(idents)


@memoised(1 << 13)
def _result_errors(tool: str, text: str) -> tuple[str, ...]:
    """:func:`result_errors`, memoised."""
    return tuple(result_errors(tool, text))


@memoised(1 << 12)
def _unmatched_errors(text: str) -> tuple[str, ...]:
    """:func:`_error_lines` of a tool result without a call, memoised."""
    return tuple(_error_lines(text))


def _gather(parts: list[ParsedPart]) -> _Facts:
    facts = _Facts()
    pending: list[ToolCall] = []
    calls: list[ToolCall] = []
    user_commands: list[tuple[str, str, int]] = []
    assistant_texts: list[tuple[int, str]] = []
    ident_counter: Counter[str] = Counter()
    ident_first: dict[str, int] = {}

    def note_ident(name: str, pos: int) -> None:
        kept = _identifier(name)
        if kept is None:
            return
        ident_counter[kept] += 1
        ident_first.setdefault(kept, pos)

    for pos, part in enumerate(parts):
        if part.role == "User":
            read = _user_part(part.text)
            if read[0] == "summary":
                facts.embedded_summaries.append(read[1])
                continue
            if read[0] == "command":
                user_commands.append((read[1], read[2], pos))
                continue
            _, request, constraints, idents = read
            if request is not None:
                facts.requests.append(request)
                facts.request_positions.append(pos)
            facts.constraints.extend(constraints)
            for name in idents:
                note_ident(name, pos)
        elif part.role == "Assistant":
            prose, decisions, idents = _assistant_part(part.text)
            assistant_texts.append((pos, prose))
            facts.decisions.extend(decisions)
            for name in idents:
                note_ident(name, pos)
        elif part.role == "Assistant tool calls":
            for call in part.calls:
                call.position = pos
                calls.append(call)
            pending = list(part.calls)
        elif part.role == "Tool result":
            if pending:
                call = pending.pop(0)
                call.result = part.text
                call.error_lines = list(_result_errors(call.name.lower(), part.text))
            else:
                facts.errors.extend(_unmatched_errors(part.text))

    # Successes and failures, in order, with resolution of earlier failures.
    open_failures: list[tuple[str, str, int]] = []  # (key, bullet text, position)
    failure_errors = facts.failure_errors
    edits_per_path: Counter[str] = Counter()
    written: set[str] = set()
    for call in calls:
        path = call.path
        command = call.command
        name = call.name.lower()
        if path:
            note_ident(path, call.position)
        key = f"path:{path}" if path else (f"cmd:{_command_head(command)}" if command else f"tool:{name}")
        if call.result is None and not call.failed:
            continue
        if call.failed:
            facts.errors.extend(call.error_lines)
            what = _code(path) if path else (_code(_shorten(command, 120)) if command else _code(call.name))
            bullet = f"{call.name} {what}: {call.error_lines[0]}"
            open_failures.append((key, bullet, call.position))
            failure_errors.setdefault(key, []).extend(call.error_lines)
            continue
        facts.succeeded_keys.add(key)
        _resolve(facts, open_failures, key)
        open_failures = [f for f in open_failures if f[0] != key]
        if name in _MUTATING_TOOLS and path:
            if name == "write":
                written.add(path)
            edits_per_path[path] += 1
            if path not in facts.modified:
                facts.modified.append(path)
        elif name == "read" and path:
            if path not in facts.read:
                facts.read.append(path)
        elif command:
            shown = _command_line(command)
            facts.commands.append(shown)
            if _verifies(command):
                facts.done.append(f"Ran {_code(shown)} successfully")
                facts.done_keys.append(f"cmd:{_command_head(command)}")
    for command, output, pos in user_commands:
        errs = result_errors("user-command", output)
        key = f"cmd:{_command_head(command)}"
        facts.commands.append(_command_line(command))
        if errs:
            facts.errors.extend(errs)
            open_failures.append((key, f"user ran {_code(_shorten(command, 120))}: {errs[0]}", pos))
            failure_errors.setdefault(key, []).extend(errs)
        else:
            facts.succeeded_keys.add(key)
            _resolve(facts, open_failures, key)
            open_failures = [f for f in open_failures if f[0] != key]
            if _verifies(command):
                facts.done.append(f"User ran {_code(_command_line(command))} successfully")
                facts.done_keys.append(key)
    for path in facts.modified:
        verb = "Wrote" if path in written and edits_per_path[path] == 1 else "Edited"
        count = f" ({edits_per_path[path]} changes)" if edits_per_path[path] > 1 else ""
        facts.done.insert(len([d for d in facts.done if d.startswith(("Wrote", "Edited"))]), f"{verb} {_code(path)}{count}")
        facts.done_keys.append(f"path:{path}")
    facts.blocked = [b for _, b, _ in open_failures]

    # In progress: the latest request and what happened after it.
    if facts.requests:
        facts.in_progress.append(facts.requests[-1])
        last_req_pos = facts.request_positions[-1]
        recent = [c.path for c in calls if c.position > last_req_pos and c.path and c.name.lower() in _MUTATING_TOOLS]
        recent = list(dict.fromkeys(p for p in recent if p))
        if recent:
            facts.in_progress.append("Working on " + ", ".join(_code(p) for p in recent[:6]))
    if assistant_texts:
        facts.last_assistant = _first_sentences(assistant_texts[-1][1], 240)
        facts.in_progress.append("Latest: " + facts.last_assistant)

    # Next steps: open blockers first, then forward-looking statements.
    for _, bullet, _ in open_failures:
        facts.next_steps.append("Fix " + bullet)
    for _, text in assistant_texts[-2:]:
        facts.next_steps.extend(_forward_statements(text))
    if not facts.next_steps and facts.requests:
        facts.next_steps.append("Continue: " + facts.requests[-1])

    ranked = sorted(ident_counter, key=lambda k: (-ident_counter[k], ident_first[k]))
    facts.identifiers = ranked
    for name in ("requests", "constraints", "decisions", "next_steps", "errors", "commands", "in_progress"):
        setattr(facts, name, _dedupe(getattr(facts, name)))
    facts.next_steps = facts.next_steps[:8]
    return facts


@memoised(1 << 13)
def _identifier(name: str) -> str | None:
    """``name`` stripped when it reads as an identifier worth listing, else None (memoised)."""
    name = name.strip()
    if len(name) < 3 or len(name) > 80 or "\n" in name or not _CODE_LIKE.search(name) or name.count(" ") > 2:
        return None
    return name


@memoised(1 << 12)
def _command_line(command: str) -> str:
    """A command as listed: white space collapsed, at most 160 characters (memoised)."""
    return _shorten(_collapse(command), 160)


@memoised(1 << 12)
def _verifies(command: str) -> bool:
    """Whether a command runs a verification (tests, checks, builds, commits; memoised)."""
    return _VERIFY_CMD.search(command) is not None


_LIST_MARKER = re.compile(r"^(\d+[.)]|[-*])\s+")


@memoised(1 << 12)
def _forward_statements(text: str) -> tuple[str, ...]:
    """Next-step candidates of one assistant prose text: its list lines when the text looks forward,
    then its forward-looking sentences (memoised: consecutive summaries meet the same texts)."""
    out: list[str] = []
    if _FORWARD.search(text):
        for line in text.splitlines():
            stripped = line.strip()
            if _LIST_MARKER.match(stripped):
                out.append(_shorten(_collapse(_LIST_MARKER.sub("", stripped)), 200))
    for sent in _sentences(text):
        if (_FORWARD.search(sent) and not _DECISION.search(sent) and 4 <= len(sent.split()) <= 50
                and not sent.endswith("?")):
            out.append(_shorten(_collapse(sent), 200))
    return tuple(out)


def _resolve(facts: _Facts, open_failures: list[tuple[str, str, int]], key: str) -> None:
    """Mark the error lines of earlier failures with ``key`` as resolved."""
    if any(f[0] == key for f in open_failures):
        facts.resolved_errors.update(facts.failure_errors.get(key, []))


def _format_decision(sentence: str, following: str = "") -> str:
    """``**decision**: rationale``; the rationale is the clause after because/since/so…, else the next
    sentence when it is short prose, else ``(no rationale stated)``."""
    sentence = sentence.rstrip(".")
    parts = _RATIONALE.split(sentence, maxsplit=1)
    if len(parts) == 2 and len(parts[0].split()) >= 2 and len(parts[1].split()) >= 2:
        return f"**{_shorten(parts[0], 120)}**: {_shorten(parts[1], 200)}"
    if following and 3 <= len(following.split()) <= 40 and not following.endswith(":"):
        return f"**{_shorten(sentence, 160)}**: {_shorten(following, 200)}"
    return f"**{_shorten(sentence, 160)}**: (no rationale stated)"


# ---------------------------------------------------------------------------------------------
# Previous summaries
# ---------------------------------------------------------------------------------------------

_SECTION_NAMES = ("goal", "constraints", "done", "in_progress", "blocked", "decisions", "next", "critical")


def parse_summary_sections(summary: str) -> dict[str, list[str]]:
    """Parse a summary (Pi's template or free Markdown) into template sections of items.

    Read with the drift parser (:func:`pimem.text.sections.section_items`), so the summarizer and
    the drift measures agree on what a section holds. File blocks are never read; the split-turn part
    is folded in (Original Request → goal, Progress So Far → done, Context Needed → critical); text
    outside the template's sections goes to ``critical`` (as ``Heading: line`` under a heading).
    """
    return {name: list(items) for name, items in _parsed_sections(summary).items()}


@memoised(64)
def _parsed_sections(summary: str) -> dict[str, tuple[str, ...]]:
    """:func:`parse_summary_sections`, memoised: the runs of one session meet the same previous summaries."""
    items = section_items(summary)
    sections = {
        "goal": items["goal"] + items["original_request"],
        "constraints": items["constraints"],
        "done": items["done"] + items["progress_so_far"],
        "in_progress": items["progress"] + items["in_progress"],
        "blocked": items["blocked"],
        "decisions": items["key_decisions"],
        "next": items["next_steps"],
        "critical": items["critical_context"] + items["context_needed"] + items["other"],
    }
    return {name: tuple(_dedupe(sections[name])) for name in _SECTION_NAMES}


@memoised(1 << 14)
def _mentions(item: str) -> frozenset[str]:
    """Backticked names, paths and file names an item mentions (memoised: an update meets the
    previous summary's items again)."""
    found = {m.group(1) for m in _BACKTICK.finditer(item)}
    found |= {m.group(0) for m in _PATH_IN_TEXT.finditer(item)}
    found |= {m.group(0) for m in BARE_FILE.finditer(item)}
    return frozenset(f.strip("'") for f in found if len(f) >= 3)


# ---------------------------------------------------------------------------------------------
# Rendering with a token budget
# ---------------------------------------------------------------------------------------------


@dataclass
class _Section:
    heading: str
    items: list[str]
    bullet: str = "- "  # "- ", "- [x] ", "- [ ] ", or "1. " (numbered)
    keep_newest: bool = True  # when trimming, drop the oldest items first
    paragraph: bool = False  # render items as plain lines (Original Request)
    omitted: int = 0

    def render(self) -> str:
        items = list(self.items)
        if not items:
            body = "(none)" if self.paragraph else f"{'- ' if self.bullet == '1. ' else self.bullet}(none)"
        elif self.paragraph:
            body = "\n".join(items)
        elif self.bullet == "1. ":
            body = "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))
        else:
            body = "\n".join(f"{self.bullet}{item}" for item in items)
        if self.omitted:
            which = "earlier" if self.keep_newest else "more"
            note = f"({self.omitted} {which} item{'s' if self.omitted != 1 else ''} omitted for length)"
            body = f"{'- ' if not self.paragraph else ''}{note}\n{body}" if self.keep_newest else f"{body}\n- {note}"
        return f"{self.heading}\n{body}"


def _join_rendered(sections: list[_Section], rendered: list[str]) -> str:
    """The template text of ``sections`` from each section's rendering (``rendered[i]`` of ``sections[i]``)."""
    out: list[str] = []
    progress_open = False
    for sec, text in zip(sections, rendered):
        if sec.heading.startswith("### ") and not progress_open:
            out.append("## Progress")
            progress_open = True
        out.append(text)
    text = "\n\n".join(out)
    # "## Progress" heading sits directly above its first subsection
    return text.replace("## Progress\n\n### ", "## Progress\n### ")


def _fit(sections: list[_Section], trim_order: list[int], max_tokens: int | None) -> tuple[str, bool]:
    """Render within ``max_tokens`` (Pi's estimate), trimming by priority. Returns (text, fitted).

    Each section is rendered again only when its items change (the others' renderings are kept)."""
    rendered = [sec.render() for sec in sections]
    text = _join_rendered(sections, rendered)
    if max_tokens is None or estimate_text_tokens(text) <= max_tokens:
        return text, True

    def fits() -> bool:
        nonlocal text
        text = _join_rendered(sections, rendered)
        return estimate_text_tokens(text) <= max_tokens

    # 1. drop items, lowest-priority section first, oldest (or last) first; keep one item each.
    for idx in trim_order:
        sec = sections[idx]
        while len(sec.items) > 1 and not fits():
            sec.items.pop(0 if sec.keep_newest else -1)
            sec.omitted += 1
            rendered[idx] = sec.render()
        if fits():
            return text, True
    # 2. shorten the remaining items.
    for limit in (160, 100, 60, 30):
        for idx in trim_order:
            sec = sections[idx]
            sec.items = [_shorten(item, limit) for item in sec.items]
            rendered[idx] = sec.render()
        if fits():
            return text, True
    # 3. drop the last items and the omission notes.
    for idx in trim_order:
        sections[idx].items = []
        sections[idx].omitted = 0
        rendered[idx] = sections[idx].render()
        if fits():
            return text, True
    text = _join_rendered(sections, rendered)
    # Even the bare template does not fit: cut as a model would at its token cap.
    budget_chars = max(0, max_tokens * 4)
    cut = text.encode("utf-16-le", "surrogatepass")[: budget_chars * 2].decode("utf-16-le", errors="ignore")
    return cut, False


# ---------------------------------------------------------------------------------------------
# The summarizer
# ---------------------------------------------------------------------------------------------

_LIMITS = {"goal": 8, "constraints": 12, "done": 40, "in_progress": 6, "blocked": 8, "decisions": 15,
           "next": 8, "critical": 30}


class ExtractiveSummarizer:
    """Offline, deterministic summarizer that fills Pi's templates (rules in the module docstring).

    Args:
        max_identifiers: the most identifiers listed under the critical context.
        max_errors: the most error lines listed (the latest ones).
    """

    model = "extractive"

    def __init__(self, *, max_identifiers: int = 20, max_errors: int = 8) -> None:
        self.max_identifiers = max_identifiers
        self.max_errors = max_errors

    def __repr__(self) -> str:
        return "ExtractiveSummarizer()"

    def identity(self) -> dict[str, Any]:
        """What determines this summarizer's answers (for cache keys)."""
        return {"class": "ExtractiveSummarizer", "model": self.model, "version": 2,
                "max_identifiers": self.max_identifiers, "max_errors": self.max_errors}

    # -- public ------------------------------------------------------------------------------------

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        start = time.perf_counter()
        conversation, previous, instructions = split_request(request)
        focus = None
        m = re.search(r"\n\nAdditional focus: (.*)\Z", instructions, re.DOTALL)
        if m:
            focus = _collapse(m.group(1))
        parts = parse_conversation(conversation)
        facts = _gather(parts)
        if request.kind == "turn_prefix":
            sections, order = self._turn_prefix_sections(facts)
        else:
            prev_sections = parse_summary_sections(previous) if previous is not None else None
            for embedded in facts.embedded_summaries:  # summaries inside the conversation (branches)
                emb = parse_summary_sections(embedded)
                prev_sections = emb if prev_sections is None else _merge_prev(prev_sections, emb)
            sections, order = self._template_sections(facts, prev_sections, focus, branch=request.kind == "branch")
        text, fitted = _fit(sections, order, request.max_tokens)
        usage = zero_usage()
        usage["input"] = math.ceil((_utf16_len(request.system_prompt) + _utf16_len(request.prompt)) / 4)
        usage["output"] = estimate_text_tokens(text)
        usage["totalTokens"] = usage["input"] + usage["output"]
        return SummaryResponse(
            text=text,
            usage=usage,
            stop_reason="stop" if fitted else "length",
            latency_s=time.perf_counter() - start,
            extra={"summarizer": "extractive"},
        )

    # -- templates ---------------------------------------------------------------------------------

    def _critical(self, facts: _Facts) -> list[str]:
        items: list[str] = []
        for line in facts.errors[-self.max_errors :]:
            label = "Error (resolved)" if line in facts.resolved_errors else "Error"
            items.append(f"{label}: {_code(line)}")
        if facts.modified:
            items.append("Modified: " + ", ".join(_code(p) for p in facts.modified))
        read_only = [p for p in facts.read if p not in facts.modified]
        if read_only:
            items.append("Read: " + ", ".join(_code(p) for p in read_only))
        if facts.commands:
            items.append("Commands: " + ", ".join(_code(c) for c in facts.commands[-8:]))
        skip = set(facts.modified) | set(facts.read)
        idents = [i for i in facts.identifiers if i not in skip][: self.max_identifiers]
        if idents:
            items.append("Identifiers: " + ", ".join(_code(i) for i in idents))
        return items

    def _template_sections(
        self, facts: _Facts, prev: dict[str, list[str]] | None, focus: str | None, *, branch: bool
    ) -> tuple[list[_Section], list[int]]:
        goal = list(facts.requests)
        constraints = ([f"Focus: {focus}"] if focus else []) + facts.constraints
        done = list(facts.done)
        in_progress = list(facts.in_progress)
        blocked = list(facts.blocked)
        decisions = list(facts.decisions)
        next_steps = list(facts.next_steps)
        critical = [] if branch else self._critical(facts)
        if branch:
            # No Critical Context section: keep exact error lines in Blocked and paths in Done.
            pass
        if prev is not None:
            new_done_mentions: set[str] = set()
            for item in done:
                new_done_mentions |= _mentions(item)
            moved = [i for i in prev["in_progress"] if _mentions(i) and _mentions(i) <= new_done_mentions]
            still = [i for i in prev["in_progress"] if i not in moved and not i.startswith(("Latest:", "Working on"))]
            done = prev["done"] + moved + done
            resolved = []
            for item in prev["blocked"]:
                keys = {f"path:{m}" for m in _mentions(item)} | {f"cmd:{_command_head(m)}" for m in _mentions(item)}
                if keys & facts.succeeded_keys:
                    resolved.append(item)
            blocked = [b for b in prev["blocked"] if b not in resolved] + blocked
            goal = prev["goal"] + goal
            constraints = prev["constraints"] + constraints
            in_progress = in_progress + still if in_progress else still
            decisions = prev["decisions"] + decisions
            prev_next = [n for n in prev["next"] if not (_mentions(n) and _mentions(n) <= new_done_mentions)]
            next_steps = next_steps + prev_next
            critical = _merge_critical(prev["critical"], critical) if not branch else critical
        lim = _LIMITS
        sections = [
            _Section("## Goal", _dedupe(goal)[: lim["goal"] * (3 if prev else 1)], bullet="- ", keep_newest=False),
            _Section("## Constraints & Preferences", _dedupe(constraints), keep_newest=False),
            _Section("### Done", _dedupe(done), bullet="- [x] "),
            _Section("### In Progress", _dedupe(in_progress)[: lim["in_progress"]], bullet="- [ ] ", keep_newest=False),
            _Section("### Blocked", _dedupe(blocked)[-lim["blocked"] :]),
            _Section("## Key Decisions", _dedupe(decisions)),
            _Section("## Next Steps", _dedupe(next_steps)[: lim["next"]], bullet="1. ", keep_newest=False),
        ]
        if not branch:
            sections.append(_Section("## Critical Context", _dedupe(critical), keep_newest=False))
        # trim order: lowest priority first
        names = [s.heading for s in sections]
        order_names = ["## Critical Context", "## Next Steps", "## Key Decisions", "## Constraints & Preferences",
                       "### In Progress", "### Done", "### Blocked", "## Goal"]
        order = [names.index(n) for n in order_names if n in names]
        return sections, order

    def _turn_prefix_sections(self, facts: _Facts) -> tuple[list[_Section], list[int]]:
        request = facts.requests[0] if facts.requests else ""
        if facts.embedded_summaries and not request:
            request = "Continue the work described in the earlier summary"
        progress = list(facts.done)
        progress += [f"Blocked: {b}" for b in facts.blocked]
        progress += [_strip_bold(d) for d in facts.decisions]
        if facts.last_assistant:
            progress.append("Latest: " + facts.last_assistant)
        context = self._critical(facts)
        sections = [
            _Section("## Original Request", [request] if request else [], paragraph=True),
            _Section("## Progress So Far", _dedupe(progress)),
            _Section("## Context Needed to Continue", _dedupe(context), keep_newest=False),
        ]
        return sections, [2, 1, 0]


_LIST_LABELS = ("Modified", "Read", "Commands", "Identifiers")
_CODE_LIST = re.compile(r"`[^`]*`(?:, `[^`]*`)*")
_CODE_ITEM = re.compile(r"`([^`]*)`")


@memoised(1 << 12)
def _code_list(item: str) -> tuple[str, tuple[str, ...] | None]:
    """``Label: `a`, `b``` as (label, its values); (label, None) for any other item (memoised)."""
    label, _, rest = item.partition(": ")
    if label in _LIST_LABELS and _CODE_LIST.fullmatch(rest):
        return label, tuple(m.group(1) for m in _CODE_ITEM.finditer(rest))
    return label, None


def _merge_critical(old: list[str], new: list[str]) -> list[str]:
    """Merge Critical Context items; ``Label: `a`, `b``` lists with the same label are united."""
    merged: list[str] = []
    lists: dict[str, list[str]] = {}
    known: dict[str, set[str]] = {}
    for item in old + new:
        label, listed = _code_list(item)
        if listed is not None:
            values = lists.get(label)
            if values is None:
                values = lists[label] = []
                known[label] = set()
                merged.append(label)  # placeholder, filled below
            seen = known[label]
            for value in listed:
                if value not in seen:
                    seen.add(value)
                    values.append(value)
        else:
            merged.append(item)
    out = []
    for item in merged:
        if item in lists:
            out.append(f"{item}: " + ", ".join(_code(v) for v in lists[item]))
        else:
            out.append(item)
    return out


def _strip_bold(decision: str) -> str:
    return decision.replace("**", "")


def _merge_prev(a: dict[str, list[str]], b: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: _dedupe(a.get(name, []) + b.get(name, [])) for name in _SECTION_NAMES}

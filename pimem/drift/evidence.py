"""State claims and the span's last evidence on them.

A summary line that says something is done, passes, builds, succeeded, failed, is blocked or pending is
a **state claim**. :func:`span_events` reads the summarized span as a list of **events**, in order:

=============== =====================================================================================
event           from
=============== =====================================================================================
``test``,       a command run (a bash tool call with its result, a user ``!`` command) classified by
``lint``,       the command (``pytest``, ``go test``, ``mise run lint``, ``tsc``, ``git commit``…):
``build``,      ``pass`` when it succeeded, ``fail`` when its result is an error, exits non-zero or
``check``,      reports failures; ``open`` when the user refused it (it never ran) or when the span
``commit``,     holds no result for it (it was still going when the span ended). A command line
``push``        of several runs (``test && lint``) gives one event each, up to the one that failed
``change``      a tool call that writes a file (Pi's ``write`` / ``edit``, Claude Code's ``Write`` /
                ``Edit`` / ``MultiEdit`` / ``NotebookEdit``): ``done``, or ``fail`` when it failed
``request``     a user message (the user's own words, nothing injected): ``open`` while no command
                or change follows it in the span (the span ends on the user's ask)
``plan``        an assistant sentence announcing work ("let me fix…", "next, …", "still need to…"):
                ``open`` while no change naming the same things follows it
=============== =====================================================================================

:func:`state_conflict` compares a claim with them. A claim that something **passes** (tests, lint, the
build, a commit or push) is contradicted when the latest matching run of that kind failed or was refused;
a claim that tests or the build **fail now** ("still fails", "is failing") is contradicted when the
latest matching run passed. A claim that work is **done** (implemented, fixed, added, committed…) is
contradicted when, of the events on the same work (naming one of its paths or code names; for a claim
without names, three of its words and half of them) that match it about as well as the best one (80% of
its score: 3 per shared name, 1 per shared word), the latest is an open request or plan, or a failed
change. The runs of a kind that count are those whose command names the claim's tests, when any does;
else every run of that kind (whole runs only for a claim about all tests or the full suite).

What it rewards and how it fails: a summary that reports the state the span ended in. It reads words:
a state stated in other words ("ready to ship"), work done before the span (nothing in it names it), or
a run whose output hides its failure are not seen; a done claim about a task whose last mention in the
span is a plan that was carried out under other names is wrongly called contradicted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pimem.text.facts import identifiers_in_text, paths_in_text, users_words
from pimem.text.messages import text_blocks
from pimem.text.normalize import normal_words

if TYPE_CHECKING:
    from pimem.drift.faithfulness import Claim

__all__ = ["Event", "StateConflict", "span_events", "claim_state", "state_conflict", "RUN_KINDS"]

RUN_KINDS: tuple[str, ...] = ("test", "lint", "build", "check", "commit", "push")

# what a command runs (checked in this order)
_RUN_COMMANDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("commit", re.compile(r"\bgit\s+commit\b")),
    ("push", re.compile(r"\bgit\s+push\b|\bgh\s+pr\s+create\b")),
    ("lint", re.compile(r"\blint\b|golangci|eslint|ruff\b|flake8|pylint|clippy|biome|gofmt|prettier\s+--check")),
    ("test", re.compile(r"\btest(?::[\w-]+)?\b|pytest|jest|vitest|mocha|\bspec\b|unittest|\bctest\b")),
    ("check", re.compile(r"\bmypy\b|pyright|tsc\b|tsgo|\bnpm\s+run\s+check\b|\bcargo\s+check\b|\bgo\s+vet\b")),
    ("build", re.compile(r"\bbuild\b|\bmake\b|\bcompile|\bgo\s+install\b|gradle|\bmvn\b|webpack")),
)
# words that name a kind of run in a claim
_RUN_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("commit", re.compile(r"\bcommit(?:s|ted)?\b|\bworking tree (?:is )?clean\b", re.I)),
    ("push", re.compile(r"\bpush(?:ed)?\b", re.I)),
    ("lint", re.compile(r"\blint(?:er|ing|s)?\b|golangci|eslint|errcheck|goconst", re.I)),
    ("test", re.compile(r"\btests?\b|\btest suite\b|\bspecs?\b|\bpytest\b|\btest:\w+", re.I)),
    ("check", re.compile(r"\btype ?checks?\b|\bmypy\b|\btsc\b|\btsgo\b|\bnpm run check\b", re.I)),
    ("build", re.compile(r"\bbuilds?\b|\bbuilt\b|\bcompil(?:es|ed|ation|e)\b", re.I)),
)
_FAILED_OUTPUT = re.compile(
    r"^\s*(?:--- )?FAIL\b|\bFAILED\b|\b[1-9]\d* (?:failed|failing|failures?|errors?|issues?)\b|"
    r"^(?:\w+Error|error)(?:\[\w+\])?:|\berror TS\d+|: error:|\bpanic:|Traceback \(most recent|"
    r"\bERROR\b.*\bfailed\b|Exit code [1-9]|exited with code [1-9]|\bcannot use\b|\bundefined: |"
    r"^\S+\.\w+:\d+:\d+: ", re.M)
_REFUSED = re.compile(r"doesn't want to proceed with this tool use|tool use was rejected|Request interrupted", re.I)
# what a change touches: what it writes and what it replaces
_WRITTEN_ARGUMENTS = ("content", "newText", "new_string", "new_source", "edits", "oldText", "old_string")
_WRITE_TOOLS = {"write": "path", "edit": "path", "Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path",
                "NotebookEdit": "notebook_path"}
_PLAN = re.compile(r"\b(?:let me|let's|i'll|i will|i need to|we need to|still need|need to|next,? (?:i|we)\b|"
                   r"next (?:is|up|step)\b|(?:should|shall) i (?:continue|proceed|go on)\b|"
                   r"now (?:i|we)(?:'ll| will| need)|going to|todo\b|to do:)", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WHOLE = re.compile(r"\b(?:all|full|whole|entire|every|suite|test:ci|ci)\b", re.I)
_PARTIAL_RUN = re.compile(r"\s-run\b|\s-k\s|::|\s--filter\b|\s-t\s|\s--grep\b|_test\.\w+|\btest_\w+\.py\b")
_CODE_TOKEN = re.compile(r"(?<![\w$.])[A-Za-z_$][\w$]*(?:[A-Z][\w$]*|_[\w$]+)(?![\w$])")  # an inner capital or _
_TEST_NAME = re.compile(r"^test|_test\.\w+$|\.test\.\w+$|^test_.*\.py$")

# state words of a claim
_DONE = re.compile(
    r"\b(?:pass(?:es|ed|ing)?|green|succeed(?:s|ed)?|success(?:ful(?:ly)?)?|clean|done|complete[ds]?|finished|"
    r"implemented|fixed|resolved|committed|pushed|merged|released|verified|works|working (?:correctly|now)|"
    r"builds|built|compiles|0 issues|0 failures|0 failed|no longer fail\w*|no (?:lint )?(?:issues|errors|failures))"
    r"\b|✅|\[x\]", re.I)
_OPEN = re.compile(
    r"\b(?:fail(?:s|ed|ing|ures?)?|broken|blocked|pending|in progress|todo|not yet|remaining|unfixed|unresolved|"
    r"still (?:needs?|to|fails?|failing|broken)|not (?:done|committed|run|tested|verified|fixed|passing|implemented|"
    r"pushed))\b|❌|\[ \]", re.I)
# a run's state now, not a past run ("all tests passed" before a change may be history)
_NOW_PASSING = re.compile(r"\b(?:pass|passes|passing|green|clean|succeeds|builds|compiles|works|0 issues|"
                          r"no (?:lint )?(?:issues|errors|failures)|committed|pushed|is (?:done|complete))\b|✅", re.I)
_NOW_FAILING = re.compile(r"\b(?:still|currently|now)\s+(?:fails?|failing|broken)\b|"
                          r"\b(?:is|are)\s+(?:failing|broken)\b", re.I)
_NEGATED_OPEN = re.compile(r"\b(?:no longer|not|never|without|0|zero|no)\s+(?:\w+\s+)?(?:fail\w*|errors?|issues?|"
                           r"broken)\b", re.I)
_STATE_WORDS = frozenset(normal_words("pass passes passed passing green succeed succeeded success successful clean done "
                                      "complete completed finished implemented fixed resolved committed pushed merged "
                                      "released verified works working builds built compiles fail fails failed "
                                      "failing failure broken blocked pending progress todo remaining all now still "
                                      "none nothing left task tasks"))


@dataclass(frozen=True)
class Event:
    """One piece of evidence of the span (see module docs)."""

    position: int
    kind: str
    status: str  # "pass" | "fail" | "done" | "open"
    text: str
    names: frozenset[str]
    words: frozenset[str]
    written: frozenset[str] = frozenset()  # a change's: the names in what it wrote (a plan it carries out)


@dataclass(frozen=True)
class StateConflict:
    """What the claim says (``claimed``), what the evidence says (``given``) and the evidence itself."""

    claimed: str
    given: str
    evidence: str


def _names(text: str) -> frozenset[str]:
    """Paths (and their file names) and code names of a text, lower-cased."""
    out: set[str] = set()
    for p, _, _ in paths_in_text(text):
        out.add(p.lower())
        out.add(p.rsplit("/", 1)[-1].lower())
    # code names in any case ("CLIVersion" and "cliVersion" name one thing), dotted names' last part
    out.update(t.lower() for t in _CODE_TOKEN.findall(text) if len(t) >= 4)
    for i, _, _ in identifiers_in_text(text):
        if len(i) >= 4:
            out.add(i.lower())
            last = i.rsplit(".", 1)[-1]  # ``paths.CheckpointPath`` names ``CheckpointPath``
            if len(last) >= 4:
                out.add(last.lower())
    return frozenset(out)


def _run_kind(command: str) -> str | None:
    for kind, rx in _RUN_COMMANDS:
        if rx.search(command):
            return kind
    return None


_CHAIN = re.compile(r"&&|\|\||;|\n")
_FAILED_KIND = re.compile(r"^\s*\[(\w+)(?::[\w-]+)?\].*\b(?:ERROR|FAIL)", re.M)


def _runs(command: str, output: str, status: str) -> list[tuple[str, str]]:
    """(kind, status) of each run of a command line: ``a && b`` stops at the first failure, so when it
    failed the kind that failed is the one its output names (``[lint] ERROR``), else the last; those
    before it passed and those after it never ran."""
    kinds = list(dict.fromkeys(k for k in (_run_kind(part) for part in _CHAIN.split(command)) if k))
    if status != "fail" or len(kinds) < 2:
        return [(k, status) for k in kinds]
    named = [m.group(1) for m in _FAILED_KIND.finditer(output)]
    failed = next((k for k in kinds if any(k in n or n in k for n in named)), kinds[-1])
    at = kinds.index(failed)
    return [(k, "pass") for k in kinds[:at]] + [(failed, "fail")]


def _result_status(text: str, is_error: bool) -> str:
    if _REFUSED.search(text):
        return "open"
    return "fail" if is_error or _FAILED_OUTPUT.search(text) else "pass"


def _tool_results(messages: Sequence[tuple[str | None, dict]]) -> dict[str, tuple[int, dict]]:
    out = {}
    for i, (_, m) in enumerate(messages):
        if m.get("role") == "toolResult" and isinstance(m.get("toolCallId"), str):
            out[m["toolCallId"]] = (i, m)
    return out


def span_events(messages: Sequence[tuple[str | None, dict]]) -> list[Event]:
    """The evidence events of a span, in order (see module docs)."""
    results = _tool_results(messages)
    events: list[Event] = []
    for i, (_, m) in enumerate(messages):
        role = m.get("role")
        if role == "user" and not m.get("injected"):
            text = users_words(text_blocks(m.get("content"))).strip()
            if len(text) >= 8:
                events.append(Event(i, "request", "open", text[:600], _names(text), frozenset(normal_words(text))))
        elif role == "bashExecution":
            command, output = str(m.get("command", "")), str(m.get("output", ""))
            if not m.get("cancelled"):
                status = "fail" if m.get("exitCode") not in (0, None) else _result_status(output, False)
                text = f"{command}\n{output[:400]}"
                for kind, run_status in _runs(command, output, status):
                    events.append(Event(i, kind, run_status, text, _names(text), frozenset(normal_words(command))))
        elif role == "assistant" and isinstance(m.get("content"), list):
            for block in m["content"]:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    for sentence in _SENTENCE.split(str(block.get("text", ""))):
                        if 8 <= len(sentence) <= 400 and _PLAN.search(sentence):
                            events.append(Event(i, "plan", "open", sentence, _names(sentence),
                                                frozenset(normal_words(sentence))))
                if block.get("type") != "toolCall":
                    continue
                args: dict = block["arguments"] if isinstance(block.get("arguments"), dict) else {}
                name = str(block.get("name", ""))
                found = results.get(str(block.get("id")))
                result: dict = found[1] if found is not None else {}
                result_text = text_blocks(result.get("content")) if found is not None else ""
                is_error = bool(result.get("isError"))
                at = found[0] if found is not None else i
                if name in _WRITE_TOOLS and isinstance(args.get(_WRITE_TOOLS[name]), str):
                    path = args[_WRITE_TOOLS[name]]
                    status = "fail" if is_error or _REFUSED.search(result_text) else "done"
                    written = "\n".join(str(args.get(k, ""))[:3000] for k in _WRITTEN_ARGUMENTS if args.get(k))
                    names = _names(path) | frozenset({path.lower(), path.rsplit("/", 1)[-1].lower()})
                    events.append(Event(at, "change", status, f"{name} {path}", names,
                                        frozenset(normal_words(path.rsplit("/", 1)[-1])), names | _names(written)))
                elif isinstance(args.get("command"), str):
                    command = args["command"]
                    text = f"{command}\n{result_text[:400]}"
                    # a run with no result in the span was still going when the span ended: its outcome is open
                    status = _result_status(result_text, is_error) if found else "open"
                    for kind, run_status in _runs(command, result_text, status):
                        events.append(Event(at, kind, run_status, text, _names(text),
                                            frozenset(normal_words(command))))
    events.sort(key=lambda e: e.position)
    return _settled(events)


def _settled(events: list[Event]) -> list[Event]:
    """Requests answered by a later run or change, and plans carried out by a later change naming the same
    things, are no longer open evidence (they are dropped)."""
    out = []
    for k, e in enumerate(events):
        if e.kind == "request" and any(x.kind == "change" or x.kind in RUN_KINDS for x in events[k + 1:]):
            continue
        if e.kind == "plan" and any(x.kind == "change" and (x.written & e.names or x.words & e.words and not e.names)
                                    for x in events[k + 1:]):
            continue
        out.append(e)
    return out


_STEP = re.compile(r"^\W*(?:\d+[.)]\s*)?(?:once|when|after|until|if|before|then|next|to do|todo|"
                   r"(?:re-?)?(?:run|write|add|create|update|fix|delete|remove|keep|make|move|rename|use|investigate|"
                   r"check|verify|implement|consider|ensure|test|document|commit|push)\b(?!\w*ed\b))", re.I)


_MODAL = re.compile(r"\b(?:must|should|needs? to|has to|have to|ought to|to be)\s+(?:\w+\s+)?"
                    r"(?:pass|succeed|build|work|be (?:green|clean|done))", re.I)


def claim_state(text: str) -> str | None:
    """``"done"`` (passes, finished…), ``"failing"`` (fails now) or None for a line that states no state
    (a step to take or a condition, "Delete old code once the new code works", states none)."""
    if _STEP.match(text) or _MODAL.search(text):
        return None
    if _NOW_FAILING.search(text) and not _NEGATED_OPEN.search(text):
        return "failing"
    if _DONE.search(text) and not (_OPEN.search(text) and not _NEGATED_OPEN.search(text)):
        return "done"
    return None


def _claim_kinds(text: str) -> list[str]:
    return [kind for kind, rx in _RUN_WORDS if rx.search(text)]


def _topic(claim: Claim) -> tuple[frozenset[str], frozenset[str]]:
    names = _names(claim.text)
    return names, frozenset(claim.words - _STATE_WORDS)


def _matches(event: Event, names: frozenset[str], words: frozenset[str]) -> bool:
    """The event names one of the claim's names; a claim without names: three of its words and half of them."""
    if names:
        return bool(names & event.names)
    common = words & event.words
    return len(common) >= 3 and 2 * len(common) >= len(words)


def state_conflict(claim: Claim, events: Sequence[Event]) -> StateConflict | None:
    """The latest evidence of ``events`` that the claim's state contradicts (see module docs), or None."""
    if not events or claim.fenced:  # a line of a code block quotes; it claims no state
        return None
    state = claim_state(claim.text)
    if state is None:
        return None
    names, words = _topic(claim)
    kinds = _claim_kinds(claim.text)
    tests = frozenset(n for n in names if _TEST_NAME.search(n))  # named tests narrow the runs that count
    checked = False
    for kind in kinds:
        runs = [e for e in events if e.kind == kind]
        if _WHOLE.search(claim.text):  # "all tests", "the full suite": a run of one test says nothing of them
            runs = [e for e in runs if not _PARTIAL_RUN.search(e.text.split("\n", 1)[0])]
        # a run that names the claim's tests in its command; names in an output appear mostly when they fail
        named = [e for e in runs if any(t in e.text.split("\n", 1)[0].lower() for t in tests)]
        last = (named or runs)[-1] if runs else None
        if last is None:
            continue
        checked = True
        if state == "done" and last.status in ("fail", "open") and _NOW_PASSING.search(claim.text):
            return StateConflict(f"{kind}: {state}", f"{kind}: {last.status}", last.text[:200])
        if state == "failing" and kind in ("test", "build", "lint", "check") and last.status == "pass":
            return StateConflict(f"{kind}: failing", f"{kind}: pass", last.text[:200])
    if state != "done" or not (names or len(words) >= 2):
        return None
    # the evidence on the same work: of the events that match, those that match about as well as the best
    # (a request about tests of a feature names the feature too, but the changes that built it match better)
    # a claim about runs ("… and the tests pass") was judged by its runs: only the user's open ask can still
    # contradict the work it claims done, not a plan of the assistant's
    kinds_read = ("request", "change") if checked else ("request", "plan", "change")
    matching = [(e, 3 * len(names & e.names) + len(words & e.words)) for e in events
                if e.kind in kinds_read and _matches(e, names, words)]
    if not matching:
        return None
    best = max(score for _, score in matching)
    last = [e for e, score in matching if score >= 0.8 * best][-1]
    if last.status in ("open", "fail"):
        return StateConflict("done", f"{last.kind}: {last.status}", last.text[:200])
    return None

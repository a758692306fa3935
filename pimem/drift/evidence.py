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
                ``open`` while no change naming the same things follows it (a plan only to look — "let
                me check…", "I'll read…" — or a hypothetical "would need to" announces no work)
=============== =====================================================================================

A command's kind is read outside its quoted strings and here-documents (a commit message that says "tests
pass" runs no test; nor does a ``test-branch`` directory).

:func:`state_conflict` compares a claim with them. A claim that something **passes** (tests, lint, the
build, a commit or push) is contradicted when the latest matching run of that kind failed or was refused;
a claim that tests or the build **fail now** ("still fails", "is failing") is contradicted when the
latest matching run passed. Each clause of a line states its own runs ("the build failed; vet is clean");
a passing test or check run after a build shows that it builds; a claim naming tests or a commit id is
judged by the runs naming them (with none, by whole-suite runs: another named test's run says nothing of
named test functions; a test file's tests may run by their names). A claim that something it names was
left **unchanged** is contradicted by a change of it. A claim that work is **done** (implemented, fixed,
added, committed…) is contradicted when, of the events on the same work (naming one of its paths or code names; for a claim
without names, three of its words and half of them) that match it about as well as the best one (80% of
its score: 3 per shared name, 1 per shared word), the latest is an open request or plan, or a failed
change. The runs of a kind that count are those whose command names the claim's tests, when any does;
else every run of that kind (whole runs only for a claim about all tests or the full suite).

:func:`unshown_outcome` says when an outcome a claim states now (tests, lint, the build pass; the work is
committed) is not shown by the span at all: the span ends with code changes that no passing run followed
(and no commit sealed the run's state), its changes were never committed, or the command named never ran.
Such a claim is a result absent from the span (:mod:`pimem.drift.faithfulness` counts it as invented).
Words that only look like a state state none: "pass `x`" hands a value over, "a clean tree" describes one,
"builds the tree" constructs one, "Current task: Fix…" is a step.

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

__all__ = ["Event", "StateConflict", "span_events", "claim_state", "state_conflict", "outcome_kinds",
           "unshown_outcome", "RUN_KINDS"]

RUN_KINDS: tuple[str, ...] = ("test", "lint", "build", "check", "commit", "push")

# what a command runs (checked in this order)
_RUN_COMMANDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("commit", re.compile(r"\bgit\s+commit\b")),
    ("push", re.compile(r"\bgit\s+push\b|\bgh\s+pr\s+create\b")),
    ("lint", re.compile(r"\blint\b|golangci|eslint|ruff\b|flake8|pylint|clippy|biome|gofmt|prettier\s+--check")),
    ("test", re.compile(r"(?<![\w/.-])test(?::[\w-]+)?(?![\w-])|pytest|jest|vitest|mocha|\bspec\b|unittest|\bctest\b")),
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
# a plan only to look (check, read, find…) or a hypothetical need ("would need to") leaves no work open
_LOOKING = re.compile(r"\b(?:let me|let's|i'll|i will|i need to|now i'll|next,? i'll)\s+"
                      r"(?:also\s+|first\s+|now\s+|quickly\s+)?"
                      r"(?:check|look|see|read|find|search|explore|understand|examine|investigate|trace|inspect|review|"
                      r"view|open|grep|list|confirm)\b|\bwould (?:need|have) to\b", re.I)
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
    r"pushed)|nothing (?:(?:is|was|has been) )?(?:committed|pushed|run|tested|done)|uncommitted|unpushed)\b|❌|\[ \]",
    re.I)
# a run's state now, not a past run ("all tests passed" before a change may be history)
_NOW_PASSING = re.compile(r"\b(?:pass|passes|passing|green|clean|succeeds|builds|compiles|works|0 issues|"
                          r"no (?:lint )?(?:issues|errors|failures)|committed|pushed|is (?:done|complete))\b|✅", re.I)
_PAST = re.compile(r"\b(?:had|was|were|used to)\s+(?:\w+\s+)?(?:0|no|zero|clean|green|passing|pass)\b", re.I)
_NOW_FAILING = re.compile(r"\b(?:still|currently|now)\s+(?:fails?|failing|broken)\b|"
                          r"\b(?:is|are)\s+(?:failing|broken)\b", re.I)
_NEGATED_OPEN = re.compile(r"\b(?:no longer|not|never|without|0|zero|no)\s+(?:\w+\s+)?(?:fail\w*|errors?|issues?|"
                           r"broken)\b", re.I)
# words that look like a state but are not one: "hooks pass `agent.Type()`" hands a value over, "a clean
# working tree" describes a thing ("lint is clean", "the build is clean." state one)
_NOT_A_STATE = re.compile(r"\bpass(?:es|ed|ing)?\s+(?=[`'\"(]|(?:the|a|an|it|them|its|their|this|that|these|those|"
                          r"through|along|down|into|as|nil|null|true|false|none)\b)|"
                          r"\bclean(?=\s+(?!and\b|now\b|again\b|with\b|too\b)[a-z])|"
                          r"\b(?:builds|compiles)\s+(?=[`'\"]|(?!and\b|now\b|again\b|cleanly\b|fine\b|successfully\b|"
                          r"without\b|with\b|on\b|in\b|locally\b|too\b)[a-z])", re.I)
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


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1.*?^\s*\2\b", re.S | re.M)
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')


def _unquoted(command: str) -> str:
    """The command without its quoted strings and here-documents: a commit message or a pull request's body
    that says "tests pass" runs no test."""
    return _QUOTED.sub('""', _HEREDOC.sub("", command))


def _runs(command: str, output: str, status: str) -> list[tuple[str, str]]:
    """(kind, status) of each run of a command line: ``a && b`` stops at the first failure, so when it
    failed the kind that failed is the one its output names (``[lint] ERROR``), else the last; those
    before it passed and those after it never ran."""
    kinds = list(dict.fromkeys(k for k in (_run_kind(part) for part in _CHAIN.split(_unquoted(command))) if k))
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
                        if 8 <= len(sentence) <= 400 and _PLAN.search(sentence) and not _LOOKING.search(sentence):
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
                   r"check|verify|implement|consider|ensure|test|document|commit|push|explain|debug|trace|find|figure|"
                   r"answer|ask|clarify|wait|continue|design|plan|look|decide|discuss|confirm|reply)\b(?!\w*ed\b))",
                   re.I)
# a line's own label ("Current task (in plan mode): Fix …"): the rest is read for a step
_LABEL = re.compile(r"^\W*[A-Za-z][\w ()/'-]{0,50}:\s+(?=\S)")


_MODAL = re.compile(r"\b(?:must|should|needs? to|has to|have to|ought to|to be)\s+(?:\w+\s+)?"
                    r"(?:pass|succeed|build|work|be (?:green|clean|done))", re.I)


_CHECKED = re.compile(r"^\W*(?:✅|\[x\])", re.I)


def _is_step(text: str) -> bool:
    """A step to take or a condition ("Run…", "Current task: Fix…", "must pass before…"); an item checked
    off ("✅ Commit the changes") is a step done."""
    if _CHECKED.match(text):
        return False
    return bool(_STEP.match(text) or _MODAL.search(text) or _STEP.match(_LABEL.sub("", text, count=1)))


def claim_state(text: str) -> str | None:
    """``"done"`` (passes, finished…), ``"failing"`` (fails now) or None for a line that states no state
    (a step to take or a condition, "Delete old code once the new code works", states none)."""
    if _is_step(text):
        return None
    text = _NOT_A_STATE.sub(" ", text)
    if _NOW_FAILING.search(text) and not _NEGATED_OPEN.search(text):
        return "failing"
    if _DONE.search(text) and not (_OPEN.search(text) and not _NEGATED_OPEN.search(text)):
        return "done"
    return None


def _claim_kinds(text: str) -> list[str]:
    return [kind for kind, rx in _RUN_WORDS if rx.search(text)]


def _said(claim: Claim) -> str:
    """The claim's words about state: its paths left out (``committed.go`` names no commit) and words that
    only look like a state (:data:`_NOT_A_STATE`)."""
    text = claim.text
    for p in sorted(claim.paths, key=len, reverse=True):
        text = text.replace(p, " ")
    return _NOT_A_STATE.sub(" ", text)


# the words that state a run's outcome (a noun such as "commits" names no commit made)
_OUTCOME_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(r"\bcommitted\b|\bworking tree (?:is )?clean\b|^\W*(?:✅|\[x\])\W*commit", re.I)
     if kind == "commit" else re.compile(r"\bpushed\b", re.I) if kind == "push" else rx) for kind, rx in _RUN_WORDS)
_CLAUSE = re.compile(r";\s|\.\s")


def outcome_kinds(claim: Claim) -> list[str]:
    """The kinds of run whose outcome the claim states now, clause by clause ("lint is clean; nothing
    committed" states lint's): none for a line that states no state, a step, or a past state."""
    if claim.fenced or claim_state(claim.text) is None and not _DONE.search(claim.text):
        return []
    kinds: list[str] = []
    for clause in _CLAUSE.split(_said(claim)):
        if claim_state(clause) == "done" and _NOW_PASSING.search(clause) and not _PAST.search(clause):
            kinds += [k for k, rx in _OUTCOME_WORDS if rx.search(clause) and k not in kinds]
    return kinds


_CODE_RUNS = ("test", "lint", "build", "check")
_DOCUMENT = re.compile(r"\.(?:md|mdx|txt|rst|adoc)$|(?:^|/)(?:docs?|plans?)/", re.I)


def unshown_outcome(claim: Claim, events: Sequence[Event]) -> str | None:
    """Why the span does not show the outcome the claim states now, or None. A run's outcome holds for the
    code it ran on: a claim that tests, lint, the build or a check pass is not shown when the span ends with
    changes to code (a document's change aside) that no passing run of any of them followed, unless a
    commit was made or begun after the run (the outcome may be the committed work's). Work is committed or
    pushed only if a span that made changes holds a commit or push. A named command passes only if it ran."""
    kinds = outcome_kinds(claim)
    if not kinds or not events:
        return None
    for command in claim.commands:
        if _run_kind(command) and not any(e.kind in RUN_KINDS and command.lower() in e.text.split("\n", 1)[0].lower()
                                           for e in events):
            return f"`{command}` never ran"
    changes = [e for e in events if e.kind == "change" and e.status == "done"]
    for kind in kinds:
        runs = [e for e in events if e.kind == kind and e.status == "pass"]
        if kind not in _CODE_RUNS:  # commit, push
            if changes and not runs:
                return f"{kind}: the span's changes never {'committed' if kind == 'commit' else 'pushed'}"
            continue
        edits = [e for e in changes if not _DOCUMENT.search(e.text)]
        if not edits or not runs:
            continue  # nothing changed, or no run of the kind: its outcome may be from before the span
        checked = max(e.position for e in events if e.kind in _CODE_RUNS and e.status == "pass")
        if edits[-1].position > checked and not any(
                e.kind == "commit" and e.status in ("pass", "open") and e.position > checked for e in events):
            return f"{kind}: code changed after the last run"
    return None


_UNCHANGED = re.compile(r"\b(?:unchanged|untouched|unmodified|as is|(?:not|never)\s+(?:been\s+)?(?:changed|modified|"
                        r"touched|edited))\b", re.I)


def _unchanged_conflict(claim: Claim, events: Sequence[Event]) -> StateConflict | None:
    """A claim that something it names was left unchanged, where the span changed it."""
    for clause in re.split(r"[;,.]\s|\s(?:and|but|while)\s", claim.text):
        if not _UNCHANGED.search(clause):
            continue
        names = _names(clause)
        for e in reversed(events):
            if e.kind == "change" and e.status == "done" and names & e.names:
                return StateConflict("unchanged", "change: done", e.text[:200])
    return None


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
    unchanged = _unchanged_conflict(claim, events)
    if unchanged is not None:
        return unchanged
    if _is_step(claim.text):
        return None
    names, words = _topic(claim)
    # named tests and commit ids narrow the runs that count (a test's name without its ``_*`` pattern)
    tests = frozenset(n.rstrip("_*") for n in names if _TEST_NAME.search(n))
    ids = frozenset(lit[3:] for lit in getattr(claim, "literals", ()) if lit.startswith("id:"))
    checked = False
    for clause in _CLAUSE.split(_said(claim)):  # "the build failed; vet is clean": each clause its own state
        state = claim_state(clause)
        if state is None:
            continue
        for kind in _claim_kinds(clause):
            runs = [e for e in events if e.kind == kind
                    or kind == "build" and e.kind in ("test", "check") and e.status == "pass"]  # tests compile it
            if _WHOLE.search(clause):  # "all tests", "the full suite": a run of one test says nothing of them
                runs = [e for e in runs if not _PARTIAL_RUN.search(e.text.split("\n", 1)[0])]
            # a run that names the claim's tests in its command (names in an output appear mostly when they
            # fail) or its commit id; a run of other named tests says nothing of them
            named = [e for e in runs if any(t in e.text.split("\n", 1)[0].lower() for t in tests)
                     or any(i in e.text.lower() for i in ids)]
            if tests and not named and not any("." in t for t in tests):  # a test file's tests run by name
                runs = [e for e in runs if not _PARTIAL_RUN.search(e.text.split("\n", 1)[0])]
            last = (named or runs)[-1] if runs else None
            if last is None:
                continue
            checked = True
            if (state == "done" and last.status in ("fail", "open") and _NOW_PASSING.search(clause)
                    and not _PAST.search(clause)):
                return StateConflict(f"{kind}: {state}", f"{kind}: {last.status}", last.text[:200])
            if state == "failing" and kind in ("test", "build", "lint", "check") and last.status == "pass":
                return StateConflict(f"{kind}: failing", f"{kind}: pass", last.text[:200])
    state = claim_state(claim.text)
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

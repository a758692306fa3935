"""State claims (done, passes, builds, fails, pending) against the span's last evidence."""

from __future__ import annotations

from pimem.drift.evidence import claim_state, span_events, state_conflict, unshown_outcome
from pimem.drift.faithfulness import faithfulness_measures, parse_claim
from pimem.drift.records import CompactionRecord
from tests.support import messages


def _run(cid: str, command: str, output: str, *, error: bool = False, answered: bool = True) -> list[tuple[str, dict]]:
    call = messages.assistant(messages.tool_call(cid, "bash", command=command))
    out = [(f"{cid}-call", call)]
    if answered:
        out.append((f"{cid}-result", messages.tool_result(output, call_id=cid, is_error=error)))
    return out


def _edit(cid: str, path: str, new: str) -> list[tuple[str, dict]]:
    call = messages.assistant(messages.tool_call(cid, "edit", path=path, oldText="x", newText=new))
    return [(f"{cid}-call", call), (f"{cid}-result", messages.tool_result(f"Edited {path}", call_id=cid, name="edit"))]


def _record(span: list[tuple[str, dict]]) -> CompactionRecord:
    return CompactionRecord(0, {"type": "compaction", "summary": ""}, span, [], [], None, [], [], 0)


def _conflict(text: str, span: list[tuple[str, dict]]):
    return state_conflict(parse_claim(text), span_events(span))


GREEN_THEN_RED = (_run("c1", "pytest -q", "12 passed") + _edit("c2", "src/tax.py", "def rate(): return 0.2")
                  + _run("c3", "pytest -q", "1 failed, 11 passed\nFAILED tests/test_tax.py::test_rate", error=True))


def test_a_passing_claim_is_judged_by_the_latest_run_of_its_kind() -> None:
    found = _conflict("All tests pass", GREEN_THEN_RED)
    assert found is not None and found.given == "test: fail" and "FAILED tests/test_tax.py" in found.evidence
    # the same claim where the last run passed, and a claim about another kind of run, hold
    assert _conflict("All tests pass", GREEN_THEN_RED[:3]) is None
    assert _conflict("Lint passes", GREEN_THEN_RED) is None
    # "tests still fail" where the last run passed is contradicted too
    assert _conflict("The tests still fail", GREEN_THEN_RED[:2]) is not None


def test_history_steps_and_requirements_state_nothing() -> None:
    for text in ("All tests passed before the refactor", "Run the tests until they pass",
                 "`npm run check` must pass before every commit", "Delete the old code once the new code works"):
        assert _conflict(text, GREEN_THEN_RED) is None, text
    assert claim_state("Fixed and verified: all 9 tests pass") == "done"
    assert claim_state("The build is still failing") == "failing"
    assert claim_state("No longer fails: 0 failures") == "done"


def test_a_run_still_going_or_refused_is_open() -> None:
    going = _run("c1", "mise run lint", "", answered=False)
    assert _conflict("Lint is clean (0 issues)", _run("c0", "mise run lint", "0 issues.") + going) is not None
    refused = _run("c2", "git commit -m 'wip'", "The user doesn't want to proceed with this tool use.", error=True)
    assert _conflict("All changes are committed", refused) is not None
    # a command line of several runs: the one that failed is the one its output names, those before it passed
    chained = _run("c3", "mise run test && mise run lint", "ok all\n[lint] ERROR task failed", error=True)
    assert _conflict("All tests pass", chained) is None and _conflict("Lint passes", chained) is not None


def test_a_whole_suite_claim_reads_whole_runs_only() -> None:
    span = (_run("c1", "go test ./...", "--- FAIL: TestA\nFAIL", error=True)
            + _run("c2", "go test -run TestA ./pkg", "ok"))
    assert _conflict("The full test suite passes", span) is not None
    assert _conflict("`TestA` passes", span) is None


def test_done_work_against_an_open_request_or_plan() -> None:
    asked = [("u1", messages.user("Please add unit tests for `parseConfig` in config_test.go"))]
    assert _conflict("Unit tests for `parseConfig` added in config_test.go, done", asked) is not None
    # a request answered by a change is no longer open evidence
    answered = asked + _edit("c1", "config_test.go", "func TestParseConfig(t *testing.T) {}")
    assert _conflict("Unit tests for `parseConfig` added in config_test.go, done", answered) is None
    # a plan carried out by a change naming the same things is settled; one left undone is open
    plan = [("a1", messages.assistant("Next, I'll fix `loadRates` in rates.go."))]
    assert _conflict("Fixed `loadRates` in rates.go", plan) is not None
    assert _conflict("Fixed `loadRates` in rates.go", plan + _edit("c2", "rates.go", "func loadRates() {}")) is None


def test_an_overclaimed_summary_scores_below_the_true_one() -> None:
    span = [("u0", messages.user("Fix the rate lookup in src/tax.py and make the tests pass"))] + GREEN_THEN_RED
    rec = _record(span)
    true = "## Progress\n- Edited `src/tax.py`: `rate()` returns 0.2\n- `pytest -q` fails: 1 failed, 11 passed"
    over = "## Progress\n- Edited `src/tax.py`: `rate()` returns 0.2\n- Done: `pytest -q` passes, all tests green"
    a, b = faithfulness_measures(rec, true, needed=[]), faithfulness_measures(rec, over, needed=[])
    assert a["faithfulness"] == 1.0 and b["claims_contradicted"] == 1 and b["contradicted_state"] == 1
    assert b["faithfulness"] < a["faithfulness"]


def test_words_that_only_look_like_a_state_state_nothing() -> None:
    # handing a value over, and a clean working tree, are no test result
    assert claim_state("The hooks pass `agent.Type()` to `InitializeSession`") is None
    assert claim_state("A coworker hit the error with a clean working tree") is None
    assert claim_state("Lint is clean") == "done" and claim_state("The tests pass") == "done"
    # a line whose label leads to a step to take states none either
    assert claim_state("Current task (in plan mode): Fix the path resolution, then it works") is None
    assert claim_state("Current work: the unit tests are written and pass") == "done"


def test_a_named_thing_left_unchanged_is_contradicted_by_its_change() -> None:
    span = _edit("c1", "strategy/auto_commit.go", "func save() {}") + _edit("c2", "strategy/manual_commit.go", "x")
    found = _conflict("Only manual_commit was updated; auto_commit was left unchanged", span)
    assert found is not None and found.claimed == "unchanged" and "auto_commit.go" in found.evidence
    assert _conflict("Only manual_commit was updated; registry.go was left unchanged", span) is None


def test_an_outcome_is_shown_only_by_a_run_after_the_last_change() -> None:
    green = _run("c1", "pytest -q", "12 passed")
    edited = green + _edit("c2", "src/tax.py", "def rate(): return 0.3")
    assert unshown_outcome(parse_claim("All tests pass"), span_events(green)) is None
    assert unshown_outcome(parse_claim("All tests pass"), span_events(edited)) == "test: code changed after the last run"
    # a commit between the run and the change: the outcome may be the committed work's
    sealed = green + _run("c7", "git commit -m 'rate'", "1 file changed") + _edit("c8", "src/tax.py", "y = 2")
    assert unshown_outcome(parse_claim("All tests pass"), span_events(sealed)) is None
    begun = green + _run("c9", "git commit -m 'rate'", "", answered=False) + _edit("c8", "src/tax.py", "y = 2")
    assert unshown_outcome(parse_claim("All tests pass"), span_events(begun)) is None
    # a passing run of another kind after the change (the code was checked since)
    assert unshown_outcome(parse_claim("All tests pass"), span_events(edited + _run("c6", "ruff check", "ok"))) is None
    # a document changed after the run does not touch the code it ran on; a past run states no outcome now
    documented = green + _edit("c3", "docs/plan.md", "# Plan")
    assert unshown_outcome(parse_claim("All tests pass"), span_events(documented)) is None
    assert unshown_outcome(parse_claim("All tests passed before the rename"), span_events(edited)) is None
    # work committed in a span that changed files and never committed; a named command that never ran
    assert unshown_outcome(parse_claim("The changes are committed"), span_events(edited)) is not None
    only_commits = _edit("c9", "README.md", "x") + _run("c10", "git commit -m 'docs'", "1 file changed")
    assert unshown_outcome(parse_claim("The changes are committed"), span_events(only_commits)) is None
    assert unshown_outcome(parse_claim("The changes are committed"),
                           span_events(edited + _run("c4", "git commit -m 'rate'", "1 file changed"))) is None
    assert unshown_outcome(parse_claim("`mise run test:ci` passes"), span_events(green)) == "`mise run test:ci` never ran"
    # outcomes are read clause by clause; a noun or a verb with an object states none
    assert parse_claim("Lint is clean; tests pass. Nothing committed.").outcomes == ("lint", "test")
    assert parse_claim("Builds the node tree; rewind works on commits").outcomes == ()
    # an item checked off is a step done, and a dash joins a command to its outcome
    assert parse_claim("✅ Commit the changes and open a PR (done)").outcomes == ("commit",)
    assert unshown_outcome(parse_claim("`mise run test:ci` — passes"), span_events(green)) is not None


def test_an_unshown_outcome_counts_against_faithfulness() -> None:
    rec = _record(GREEN_THEN_RED[:3] + _run("c4", "pytest -q", "12 passed") + _edit("c5", "src/tax.py", "x = 1"))
    shown = "## Progress\n- Edited `src/tax.py`: `rate()` returns 0.2\n- Refactoring `src/tax.py` after a green run"
    claimed = shown + "\n- All tests pass"
    a, b = faithfulness_measures(rec, shown, needed=[]), faithfulness_measures(rec, claimed, needed=[])
    # the outcome is counted (a result the span must show) and not shown: the code changed after the run
    assert b["n_claims"] == a["n_claims"] + 1 and b["claims_invented"] == a["claims_invented"] + 1
    assert b["faithfulness"] < a["faithfulness"]


def test_a_commit_message_that_speaks_of_tests_runs_none() -> None:
    message = "git commit -m \"$(cat <<'EOF'\nFix the rate\n\nmake test passes, lint clean\nEOF\n)\""
    events = span_events(_run("c1", message, "[main 1a2b3c4] Fix the rate") + _run("c2", "gh pr create --body 'npm test ok'", "url"))
    assert [(e.kind, e.status) for e in events] == [("commit", "pass"), ("push", "pass")]
    # nor does a directory named test-something
    assert span_events(_run("c3", "cd /tmp && git init --bare test-branch-err", "exit: 1", error=True)) == []


def test_each_clause_states_its_own_run() -> None:
    broken = _run("c1", "go build ./...", "undefined: defaultAgent", error=True) + _run("c2", "go vet ./...", "")
    assert _conflict("`go build ./...` failed (undefined: defaultAgent); `go vet` gave no errors", broken) is None
    lint_red = _run("c3", "mise run lint", "[lint] 2 issues", error=True)
    assert _conflict("Lint is clean; nothing committed", lint_red) is not None
    # a past state is history: lint had 0 issues before the last run
    assert _conflict("Tests added; lint had 0 issues", _run("c4", "mise run lint", "0 issues.") + lint_red) is None


def test_a_build_is_shown_by_the_tests_that_ran_after_it() -> None:
    span = _run("c1", "go build ./...", "undefined: agent", error=True) + _run("c2", "go test ./...", "ok  pkg 0.2s")
    assert _conflict("Build fixed (missing import); the build compiles and tests pass", span) is None
    assert _conflict("The build compiles", _run("c1", "go build ./...", "undefined: agent", error=True)) is not None


def test_named_tests_and_commits_are_judged_by_their_own_runs() -> None:
    span = (_run("c1", "go test -run TestApply ./session", "ok") +
            _run("c2", "go test -run TestMarkEnded ./cli", "--- FAIL: TestMarkEnded", error=True))
    assert _conflict("The 9 `TestApply_*` tests pass", span) is None
    # with no run naming them, the whole suite's runs count, not another named test's
    assert _conflict("The 9 `TestApply_*` tests pass", span[2:]) is None
    # a test file's tests run by their names: a failing named run counts against it
    assert _conflict("Created phase_test.go; its tests pass on the first run", span[2:]) is not None
    suite = span[2:] + _run("c3", "go test ./...", "--- FAIL: TestApplyOne", error=True)
    assert _conflict("The 9 `TestApply_*` tests pass", suite) is not None
    commits = (_run("c4", "git commit -m 'feat'", "[main 7e00b6e] feat\n 10 files changed")
               + _run("c5", "git commit -m 'fix'", "", answered=False))
    assert _conflict("Committed (7e00b6e) and pushed", commits) is None
    assert _conflict("All work is committed", commits) is not None


def test_a_plan_only_to_look_leaves_no_work_open() -> None:
    look = [("a1", messages.assistant("Let me also check what `buildinfo.Version` defaults to in tests."))]
    assert _conflict("`buildinfo.Version` is set in committed.go, done", look) is None
    fix = [("a1", messages.assistant("Let me fix how `buildinfo.Version` is set."))]
    assert _conflict("`buildinfo.Version` is set in committed.go, done", fix) is not None

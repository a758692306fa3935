"""State claims (done, passes, builds, fails, pending) against the span's last evidence."""

from __future__ import annotations

from pimem.drift.evidence import claim_state, span_events, state_conflict
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

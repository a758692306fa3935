"""A hand-built session whose later trajectory says exactly which facts were needed after its compaction."""

from __future__ import annotations

from tests.drift.test_drift import _assistant, _Chain, _result, _user

TRIVIA = ", ".join(f"`helperNumber{i}`" for i in range(40))

GOOD_SUMMARY = """## Goal
Refactor billing in `src/billing/core.py` without changing `compute_total()` semantics.

## Constraints & Preferences
- Integration tests only; the user does not want unit tests.

## Progress
### Done
- [x] Wrote `src/billing/tax.py` with a `TaxTable` class

### In Progress
- [ ] Fix KeyError 'vat_rate' in 'TaxTable.lookup'

### Blocked
- (none)

## Key Decisions
- **TaxTable class instead of the module-level dict**: one place for rates

## Next Steps
1. Fix the `vat_rate` lookup and rerun `pytest -q tests/test_billing.py`

## Critical Context
- `compute_total()` semantics must not change"""

WRONG_POLARITY = GOOD_SUMMARY.replace("- Integration tests only; the user does not want unit tests.",
                                      "- The user rejected integration tests.")


def build_needed_chain(summary: str = GOOD_SUMMARY) -> tuple[_Chain, dict[str, str]]:
    """One compaction. Used later: the constraint, compute_total(), TaxTable, tax.py, the KeyError.
    Never used again: the forty helperNumber names. Shown by the kept tail: tests/test_integration.py."""
    c = _Chain()
    ids: dict[str, str] = {}
    ids["u1"] = c.msg(_user("Refactor the billing module in src/billing/core.py. Never change the semantics of "
                            "`compute_total()`. I only want integration tests for billing, no unit tests."))
    c.msg(_assistant(f"Looking around first. Unrelated helpers seen: {TRIVIA}.",
                     [("read", {"path": "src/billing/core.py"})]))
    c.msg(_result("def compute_total(items):\n    return sum(i.price for i in items)", name="read"))
    c.msg(_assistant("I'll use a TaxTable class instead of the module-level rates dict, rather than a global lookup.",
                     [("write", {"path": "src/billing/tax.py", "content": "class TaxTable:\n    def lookup(self): ..."})]))
    c.msg(_result("Successfully wrote src/billing/tax.py", name="write"))
    c.msg(_assistant("", [("bash", {"command": "pytest -q tests/test_billing.py"})]))
    c.msg(_result("KeyError: 'vat_rate' not found in 'TaxTable.lookup'\nCommand exited with code 1", is_error=True))
    ids["keep"] = c.msg(_user("Next, the new file tests/test_integration.py please"))
    c.msg(_assistant("Writing them.", [("write", {"path": "tests/test_integration.py", "content": "def test_x(): ..."})]))
    c.msg(_result("Successfully wrote tests/test_integration.py", name="write"))
    ids["c1"] = c.compaction(summary + "\n\n<read-files>\nsrc/billing/core.py\n</read-files>\n\n<modified-files>\n"
                             "src/billing/tax.py\ntests/test_integration.py\n</modified-files>", ids["keep"])
    ids["later"] = c.msg(_user("Remember: integration tests only for billing, no unit tests. Continue."))
    c.msg(_assistant("Fixing the KeyError for 'vat_rate' in 'TaxTable.lookup' now; I keep the TaxTable class "
                     "instead of the module-level rates dict.",
                     [("edit", {"path": "src/billing/tax.py", "oldText": "...", "newText": "RATES = {'vat_rate': 0.2}"})]))
    c.msg(_result("Successfully edited src/billing/tax.py", name="edit"))
    c.msg(_assistant("`compute_total()` keeps its semantics; tests/test_integration.py passes.",
                     [("bash", {"command": "pytest -q tests/test_billing.py"})]))
    c.msg(_result("1 passed"))
    return c, ids


SECOND_CARRYING = """## Goal
Refactor billing in `src/billing/core.py`; never change the semantics of `compute_total()`.

## Progress
### Done
- [x] `TaxTable` in `src/billing/tax.py`; KeyError 'vat_rate' in 'TaxTable.lookup' fixed

## Next Steps
1. Document the `RATES` table"""
SECOND_FORGETTING = """## Goal
Document the rates.

## Next Steps
1. Document the `RATES` table"""


def build_two_compaction_chain(second: str = SECOND_CARRYING) -> tuple[_Chain, dict[str, str]]:
    """The needed chain, then a second compaction; after it the session uses facts that only span 1 had
    (``src/billing/core.py``, the never-change constraint)."""
    c, ids = build_needed_chain()
    ids["keep2"] = c.msg(_user("Document the RATES table please"))
    c.msg(_assistant("Documenting.", [("write", {"path": "docs/rates.md", "content": "RATES"})]))
    c.msg(_result("Successfully wrote docs/rates.md", name="write"))
    ids["c2"] = c.compaction(second, ids["keep2"])
    c.msg(_user("Back to src/billing/core.py: never change the semantics of compute_total there."))
    c.msg(_assistant("Reading it again.", [("read", {"path": "src/billing/core.py"})]))
    return c, ids

"""Contradictions: changed values, negations and reversed decisions against what the summarizer was given;
the labelled set and its held-out half."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from pimem.drift.contradictions import find_contradiction, load_contradiction_labels
from pimem.drift.labels import contradiction_figures
from pimem.drift.faithfulness import contradiction_check
from pimem.drift.faithfulness import SourceText, parse_claim
from pimem.drift.labels import LabelFormatError, precision_recall
from tests.conftest import REAL_DIR, SHARED_DIR

LABELS = Path(__file__).resolve().parents[2] / "datasets" / "labels" / "contradictions.jsonl"

GIVEN = SourceText([
    "The AgentSession class is now 885 lines and holds all shared logic.",
    "885 src/core/agent-session.ts",
    "Fixed total count: 44 → 46 color tokens",
    "I'll use a TaxTable class instead of a plain dict for the rates.",
    "mv examples/full-compaction.ts examples/custom-compaction.ts",
    "Release v0.27.3 is out; tagged and pushed.",
    "Created src/modes/print-mode.ts with runPrintMode and setModel wiring.",
    "Listeners are not cleared on reset or compact; dispose() is the only cleanup.",
    "Run `npm run check` before every commit.",
    "The before_compact event now carries resolveApiKey.",
    "This is now the 3rd error around the working directory.",
    "5. Current branch starts expanded, others collapsed",
    "Move the dialog to the center of the screen, not to the top but to the middle.",
    "Wrote /repo/cmd/strategy/push_common.go with getLastPrompt and formatCheckpointLabel helpers.",
    'Set title := "Entire Sessions" in the view.',
    "It resolves against the working directory instead of the repo root, which causes bugs.",
    "  12→	// Branch → Sessions → Checkpoints",
])


def kind(text):
    found = find_contradiction(parse_claim(text), GIVEN)
    return found.kind if found is not None else None


@pytest.mark.parametrize("text, expected", [
    ("`src/core/agent-session.ts` (958 lines)", "number"),
    ("Fixed total count: 44 → 48 color tokens", "number"),
    ("v0.27.2 - tagged and pushed", "version"),
    ("Created `src/core/print-mode.ts`", "path"),
    ("Wired `getModel` in print mode", "name"),
    ("The `after_compact` event now carries `resolveApiKey`", "name"),
    ("Run `npm run test` before every commit", "name"),
    ("Use a plain dict instead of a TaxTable class for the rates", "reversal"),
    ("Fixed total count: 46 → 44 color tokens", "reversal"),
    ("Renamed `custom-compaction.ts` to `full-compaction.ts`", "reversal"),
    ("Listeners are cleared on reset or compact of the session", "negation"),
    ("This is the 2nd error around the working directory", "number"),
    ("Current branch collapsed by default, the others expanded", "reversal"),
    ("Wrote `cmd/strategy/push_remote.go`", "path"),
    ("Added the `getLatestPrompt` helper", "name"),
    ("Added the `formatSessionLabel` helper", "name"),
    ('Title shows "Entire Checkpoints"', "name"),
    ("Use a plain dict, not a TaxTable class, for the rates", "reversal"),
])
def test_each_kind_is_found(text, expected):
    assert kind(text) == expected


@pytest.mark.parametrize("text", [
    "`src/core/agent-session.ts` (885 lines)",
    "Fixed total count: 44 → 46 color tokens",
    "Use a TaxTable class rather than a plain dict",
    "Renamed `full-compaction.ts` to `custom-compaction.ts`",
    "Listeners are not cleared on reset or compact of the session",
    "Deployed the service to Kubernetes",  # invented, not contradicted
    "Run `npm run check` before committing",
    "This is the 3rd error around the working directory",
    "Current branch expanded by default, the others collapsed",
    'Title shows "Entire Sessions"',
    "Use the repo root rather than the working directory",  # the line describes the fault, not a decision
    "Sessions are listed before Checkpoints",  # an arrow chain is a hierarchy, not a change
    "Move the dialog not to the top but to the middle of the screen",
])
def test_agreeing_and_unrelated_claims_are_not_contradictions(text):
    assert kind(text) is None


def test_the_labelled_set_is_well_formed():
    df = load_contradiction_labels(LABELS)
    assert len(df) >= 150 and df["id"].is_unique
    assert set(df["split"]) == {"tune", "heldout"} and set(df["label"]) == {"supported", "contradicted", "unsupported"}
    assert (df["label"] == "contradicted").sum() >= 60
    # an edit and the real claim it was made from are in the same half
    source_split = dict(zip(df["id"], df["split"]))
    edits = df[df["source_id"].notna()]
    assert len(edits) and all(source_split[s] == sp for s, sp in zip(edits["source_id"], edits["split"]))
    assert all(e for e, lab in zip(df["evidence"], df["label"]) if lab != "unsupported")


def test_a_malformed_label_line_names_file_and_line(tmp_path):
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines()[:2]]
    rows[1]["label"] = "maybe"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(LabelFormatError, match=r"bad\.jsonl:2: label 'maybe'"):
        load_contradiction_labels(bad)


CC_LABELS = LABELS.with_name("contradictions-claude-code.jsonl")
CC_DIR = SHARED_DIR / "datasets" / "claude-code" / "entireio-cli"

# held-out figures of datasets/labels/README.md ("The detector on it"), reported once; a regression check
# allows MARGIN below them
HELD_OUT = {"pi": {"precision": 0.79, "recall": 0.29}, "cc": {"precision": 0.79, "recall": 0.24},
            "pooled": {"precision": 0.79, "recall": 0.26}}
MARGIN = 0.05


def test_the_claude_code_set_is_well_formed():
    df = load_contradiction_labels(CC_LABELS)
    assert len(df) >= 150 and df["id"].is_unique
    assert (df["label"] == "contradicted").sum() >= 60 and set(df["split"]) == {"tune", "heldout"}
    assert all(s.startswith("claude-code/entireio-cli/") for s in df["session"])
    assert df["compaction_uuid"].str.fullmatch(r"[0-9a-f-]{36}").all()
    source_split = dict(zip(df["id"], df["split"]))
    edits = df[df["source_id"].notna()]
    assert all(source_split[s] == sp for s, sp in zip(edits["source_id"], edits["split"]))
    # the halves were drawn by the SHA-256 of the claim's group (the claim an edit was made from)
    for _, row in df.iterrows():
        group = row["source_id"] if isinstance(row["source_id"], str) else row["id"]
        odd = int(hashlib.sha256(group.encode()).hexdigest(), 16) % 2
        assert row["split"] == ("heldout" if odd else "tune"), row["id"]
    assert all(len(e) <= 200 for e in df["evidence"])  # short quotes only


def _checked(labels, shared_dir):
    from pimem.drift.labels import label_records
    from pimem.drift.faithfulness import given_source

    records = label_records(labels, shared_dir)
    for _, row in labels[labels["evidence"] != ""].iterrows():  # every quote is verbatim in what the summarizer saw
        assert row["evidence"] in given_source(records[row["session"]][row["compaction_index"]]).text, row["id"]
    return contradiction_check(labels, records)


@pytest.fixture(scope="module")
def checked():
    if not REAL_DIR.exists():
        pytest.skip("real Pi sessions not available (../shared/datasets/pi-mono)")
    return _checked(load_contradiction_labels(LABELS), REAL_DIR.parents[1])  # Pi's sessions alone


@pytest.fixture(scope="module")
def checked_cc():
    if not CC_DIR.exists():
        pytest.skip("real Claude Code transcripts not available (../shared/datasets/claude-code)")
    return _checked(load_contradiction_labels(CC_LABELS), SHARED_DIR)


def _assert_at_least_reported(checked, which):
    held = contradiction_figures(checked[checked["split"] == "heldout"]).iloc[0]
    assert held["precision"] >= HELD_OUT[which]["precision"] - MARGIN, held.to_dict()
    assert held["recall"] >= HELD_OUT[which]["recall"] - MARGIN, held.to_dict()
    tune = precision_recall(list(checked.loc[checked["split"] == "tune", "truth"]),
                            list(checked.loc[checked["split"] == "tune", "predicted"]))
    assert tune["precision"] >= 0.9  # the rules were adjusted on the tuning halves, keeping precision there


def test_pi_held_out_precision_and_recall_as_the_readme_states(checked):
    _assert_at_least_reported(checked, "pi")


def test_claude_code_held_out_precision_and_recall_as_the_readme_states(checked_cc):
    _assert_at_least_reported(checked_cc, "cc")


def test_pooled_held_out_figures_and_their_interval(checked, checked_cc):
    import pandas as pd

    both = pd.concat([checked, checked_cc])
    _assert_at_least_reported(both, "pooled")
    held = contradiction_figures(both[both["split"] == "heldout"]).iloc[0]
    assert held["n"] == len(both[both["split"] == "heldout"]) and held["n_sessions"] == 12
    # 12 sessions support a 95% interval for recall (by the coverage simulation); 3 do not
    assert held["recall_low"] <= held["recall"] <= held["recall_high"]
    pi_only = contradiction_figures(checked[checked["split"] == "heldout"]).iloc[0]
    assert math.isnan(pi_only["recall_low"]) and "no 95% interval" in pi_only["recall_note"]


def test_a_label_pointing_at_another_compaction_is_refused(tmp_path):
    if not CC_DIR.exists():
        pytest.skip("real Claude Code transcripts not available (../shared/datasets/claude-code)")
    from pimem.drift.labels import label_records

    df = load_contradiction_labels(CC_LABELS).head(1).copy()
    df["compaction_uuid"] = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(LabelFormatError, match=r"is not 00000000"):
        label_records(df, SHARED_DIR)


SECOND_PASS = LABELS.with_name("contradictions-second-pass.jsonl")


def test_cohen_kappa_on_known_tables():
    from pimem.drift.labels import cohen_kappa

    # 2×2 table [[20, 5], [10, 15]]: observed 0.70, chance 0.50 → 0.40
    first = ["yes"] * 25 + ["no"] * 25
    second = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(first, second) == pytest.approx(0.4)
    assert cohen_kappa(first, first) == 1.0
    assert math.isnan(cohen_kappa(["a"] * 3, ["a"] * 3))
    with pytest.raises(ValueError):
        cohen_kappa(["a"], [])


def test_second_pass_agreement_as_the_readme_states():
    from pimem.drift.labels import cohen_kappa

    first = dict(zip(*load_contradiction_labels(LABELS)[["id", "label"]].T.values))
    second = [json.loads(line) for line in SECOND_PASS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(second) == 50 and len({r["id"] for r in second}) == 50 and all(r["id"] in first for r in second)
    kappa = cohen_kappa([first[r["id"]] for r in second], [r["label"] for r in second])
    assert kappa >= 0.95  # the README reports 50 of 50 (kappa 1.00); a regression check on the committed files

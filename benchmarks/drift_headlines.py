"""Headline summary measures: summary sources side by side on the same compactions, and the matcher check.

Run: ``.venv/bin/python benchmarks/drift_headlines.py [--window 32000 --reserve 4096 --keep 6000]
[--source NAME=session.jsonl ...] [--model-source NAME] [--labels datasets/labels/before-compaction.facts.jsonl]``

For every session with recorded compactions (the real ``before-compaction.jsonl``), the recorded
summaries are set beside the extractive summarizer and the four degenerate baselines, each
summarizing exactly the recorded spans at the recorded summary's length (``max_tokens="matched"``),
then again at each summarizer's own length. A session without compactions (``large-session.jsonl``,
the samples) is first replayed with the extractive summarizer at ``--window``; its replayed
compactions are then the reference. ``--source NAME=FILE`` adds the summaries stored in another
session file (for example a replay written with another model) as a column; ``--model-source NAME``
adds the model of ``PIMEM_BASE_URL`` / ``OPENAI_API_KEY`` (cached). The matcher check compares the
automatic matcher with the hand-labelled set. The real sessions are read from
``../shared/datasets/pi-mono`` (or ``$PIMEM_SHARED_DIR/datasets/pi-mono``) when that folder exists.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import pandas as pd

import pimem
from pimem.drift import compare_sources, matcher_check
from pimem.summarizers.baselines import baseline_summarizers
from pimem.summarizers.extractive import ExtractiveSummarizer

ROOT = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared")) / "datasets" / "pi-mono"
LABELS = ROOT / "datasets" / "labels" / "before-compaction.facts.jsonl"
ROWS = ["score", "recall_faithful", "faithfulness", "claims_contradicted", "claims_invented", "budget_tokens",
        "needed_recall", "needed_recall_constraint", "needed_recall_decision", "needed_recall_error",
        "needed_recall_artifact", "needed_recall_reference", "needed_recall_carried", "n_needed", "fact_recall",
        "content_sections", "conformance", "written_tokens", "pipeline_modified_recall"]


def _markdown(table: pd.DataFrame) -> str:
    cols = list(table.columns)
    lines = ["| measure | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
    for measure in [r for r in ROWS if r in table.index]:
        cells = []
        for c in cols:
            v = table.loc[measure, c]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append("–")
            elif measure in ("written_tokens", "n_needed", "budget_tokens", "claims_contradicted", "claims_invented"):
                cells.append(f"{v:,.0f}")
            else:
                cells.append(f"{v:.2f}")
        lines.append(f"| {measure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=int, default=32000)
    ap.add_argument("--reserve", type=int, default=4096)
    ap.add_argument("--keep", type=int, default=6000)
    ap.add_argument("--source", action="append", default=[], metavar="NAME=FILE",
                    help="another column: the summaries stored in a session file")
    ap.add_argument("--model-source", default=None, metavar="NAME",
                    help="another column: the model from PIMEM_BASE_URL / OPENAI_API_KEY")
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument("--samples", action="store_true", help="also the bundled samples")
    args = ap.parse_args()
    settings = pimem.CompactionSettings(reserve_tokens=args.reserve, keep_recent_tokens=args.keep)
    extra: dict[str, object] = {}
    for spec in args.source:
        name, _, file = spec.partition("=")
        if not file:
            ap.error(f"--source takes NAME=FILE, not {spec!r}")
        extra[name] = Path(file)
    if args.model_source:
        extra[args.model_source] = pimem.summarizer_from_env()

    paths = [p for p in (REAL / "before-compaction.jsonl", REAL / "large-session.jsonl") if p.exists()]
    if args.samples:
        paths += list(pimem.sample_session_paths())
    pd.set_option("display.width", 250)
    for path in paths:
        session = pimem.load_session(path)
        if any(e["type"] == "compaction" for e in session.get_branch()):
            subject, reference = session, "recorded"
        else:
            subject = pimem.replay(session, settings, context_window=args.window)
            reference = f"extractive replay w={args.window}"
        sources = {reference: "recorded", "extractive": ExtractiveSummarizer(), **baseline_summarizers(budget=None),
                   **extra}
        if reference != "recorded":
            sources.pop("extractive")
        matched = compare_sources(subject, sources)
        n = len(matched.records[reference])
        print(f"\n## {path.name}: {n} compaction(s), sources at the reference summary's length\n")
        print(_markdown(matched.table))
        own = compare_sources(subject, sources, max_tokens=None, records=matched.records[reference])
        print(f"\n## {path.name}: each summarizer at its own length (Pi's 0.8 × reserveTokens budget)\n")
        print(_markdown(own.table))
        for note in dict.fromkeys(matched.notes):
            print(f"- note: {note}")

    real = REAL / "before-compaction.jsonl"
    if args.labels.exists() and real.exists():
        check = matcher_check(args.labels, real)
        print(f"\n## Matcher against {args.labels.name} (present vs absent/contradicted)\n")
        print(check.table().to_string(index=False))
        print()
        print(check.table(by="origin").to_string(index=False))
        print()
        print(check.table(by="compaction_index").to_string(index=False))
        print("\n## Automatic used-later test against the labels\n")
        print(check.used_later_table().to_string(index=False))


if __name__ == "__main__":
    main()

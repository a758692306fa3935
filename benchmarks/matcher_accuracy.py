"""Precision and recall of the fact matchers on the hand-labelled facts, per half (tune / held-out).

Run (the embedding rows need the extra: ``scripts/embedding-test`` builds its venv)::

    PIMEM_SHARED_DIR=../shared ~/.cache/pimem/embeddings-venv/bin/python benchmarks/matcher_accuracy.py [--tune]

Matchers: ``rules`` (:func:`pimem.drift.paraphrase.rule_matcher`), ``normalized``
(:func:`pimem.drift.paraphrase.normalized_matcher`), ``embedding`` (normalised, then free text by
all-MiniLM-L6-v2 similarity) and ``embedding only`` (every fact by similarity), on the 232 facts of
``datasets/labels/before-compaction.facts.jsonl`` split by :func:`pimem.drift.labels.label_split`. Subsets: all
facts, free text (constraints, decisions, errors, goals, progress, artifacts) and the reader's facts (written
by reading, mostly paraphrased in the summaries). ``--tune`` prints the thresholds :func:`tune_threshold`
picks on the tuning half (the module's constants must equal them).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pandas as pd

from pimem.drift.labels import load_labels, matcher_check, precision_recall

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared"))
LABELS = ROOT / "datasets" / "labels" / "before-compaction.facts.jsonl"
FREE = ("constraint", "decision", "error", "goal", "progress", "artifact")


def markdown(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def rows_for(name: str, facts: pd.DataFrame) -> list[dict]:
    out = []
    for split in ("tune", "heldout", "both"):
        part = facts if split == "both" else facts[facts["split"] == split]
        for subset, sel in (("all", part), ("free text", part[part["kind"].isin(FREE)]),
                            ("reader facts", part[part["origin"] == "reader"])):
            out.append({"matcher": name, "half": split, "facts": subset,
                        **precision_recall(list(sel["label_present"]), list(sel["predicted_present"].astype(bool)))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", action="store_true", help="print the thresholds chosen on the tuning half")
    args = ap.parse_args()
    session = SHARED / "datasets" / "pi-mono" / "before-compaction.jsonl"
    labels = load_labels(LABELS)
    matchers: dict[str, object] = {"rules": "rules", "normalized": "normalized"}
    from pimem.drift.embedding import embedding_matcher, embeddings_available

    if embeddings_available():
        matchers["embedding"] = embedding_matcher()
        matchers["embedding only"] = embedding_matcher(names="embedding")
    else:
        print("(the embeddings extra is not installed: embedding rows left out)")
    rows = []
    for name, matcher in matchers.items():
        start = time.process_time()
        facts = matcher_check(labels, session, matcher, used_later=False).facts  # type: ignore[arg-type]
        rows.extend(rows_for(name, facts))
        print(f"\n{name}: {time.process_time() - start:.1f} CPU-s\n")
        table = pd.DataFrame(rows)
        print(markdown(table[table["matcher"] == name]), flush=True)
    if args.tune and embeddings_available():
        from pimem.drift.labels import tuned_thresholds

        print("thresholds chosen on the tuning half:", tuned_thresholds(labels, session))

if __name__ == "__main__":
    main()

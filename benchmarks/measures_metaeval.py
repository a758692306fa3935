"""The meta-evaluation of the summary measures on every real summary, the headline over them, and the
held-out contradiction set.

Run: ``.venv/bin/python benchmarks/measures_metaeval.py [--no-claude-code] [--limit N] [--out DIR]
[--shard K/N] [--from-scores CSV ...] [--hand-only] [--hand-before CSV] [--baselines]``

Also the rewrites written by reading (``datasets/metaeval/``, :func:`pimem.drift.metaeval.hand_evaluate`):
per class and pooled, the held-out split apart, with two-stage intervals; ``--hand-before PAIRS_CSV``
sets the pairs of an earlier run (``metaeval-hand-pairs.csv`` of a run on other code) beside them, and
``--hand-only`` runs only this part (about 40 CPU seconds). ``--baselines`` scores the degenerate baselines
and the extractive summarizer on every real span at the real summary's length.

Reads the real compactions of ``../shared/datasets`` (or ``$PIMEM_SHARED_DIR/datasets``): the 5 Pi
compactions of ``pi-mono/`` (:func:`pimem.drift.metaeval.pi_records`) and the 86 Claude Code compactions
of ``claude-code/entireio-cli/`` (:func:`pimem.drift.metaeval.claude_code_records`). Every real summary is
rewritten (:data:`pimem.drift.metaeval.PERTURBATIONS`) and scored with every measure; the tables are
printed as markdown and written to ``--out`` (default ``benchmarks/results/``) as
``metaeval-scores.csv`` (one row per compaction × rewrite: scores and counts, no text) and
``metaeval-table.csv`` (per measure: share of pairs in the expected order). The CPU time is printed (about
5.5 CPU minutes for all of it). ``--shard 0/2`` and ``--shard 1/2`` score half the sessions each (run them
side by side); ``--from-scores results/metaeval-scores.0.csv results/metaeval-scores.1.csv`` then writes the
tables. A session's "other session" rewrite is the next session's summary in the order scored, so a sharded
run pairs them differently from a single one.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import pandas as pd

from pimem.drift.contradictions import load_contradiction_labels
from pimem.drift.faithfulness import contradiction_check
from pimem.drift.intervals import MIN_COMPACTION_FACTS, cluster_interval
from pimem.drift.labels import precision_recall
from pimem.drift.metaeval import (EXPECTED, HAND_CLASSES, MetaEvaluation, claude_code_records, hand_evaluate,
                                  load_hand_rewrites, meta_evaluate, pi_records)
from pimem.drift.needed import DEFAULT_WEIGHTS, FACT_CLASSES

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared"))
LABELS = ROOT / "datasets" / "labels" / "contradictions.jsonl"
OLD = ("needed_recall", "needed_recall_all", "fact_recall", "content_sections", "conformance")
NEW = ("score", "recall_faithful", "faithfulness")


def _cell(v: object, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def markdown(df: pd.DataFrame, digits: int = 2) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_cell(row[c], digits) for c in cols) + " |")
    return "\n".join(lines)


def needed_weight(scores: pd.DataFrame) -> pd.Series:
    """Σ class weight over a compaction's needed facts (the micro-average's weight)."""
    if "needed_weight" in scores.columns:
        return scores["needed_weight"]
    return sum(scores[f"n_needed_{c}"].fillna(0) * DEFAULT_WEIGHTS[c] for c in FACT_CLASSES)


def order_table(me: MetaEvaluation) -> pd.DataFrame:
    """Per measure (new headline and its parts first, then the old measures): the share of pairs in the
    expected order, its interval or why there is none, and the counts."""
    table = me.table().set_index("measure")
    rows = []
    for m in [*NEW, *OLD]:
        if m not in table.index:
            continue
        r = table.loc[m]
        interval = (f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]" if not math.isnan(r["ci_low"])
                    else "none: " + str(r["interval"]).split(": ", 1)[-1])
        row = {"measure": m, "role": "new" if m in NEW else "old", "in order": r["in_order"], "95% interval": interval,
               "pairs": int(r["n_pairs"]), "compactions": int(r["n_compactions"]), "sessions": int(r["n_sessions"])}
        for a, rel, b in EXPECTED:
            key = f"{a} {rel} {b}"
            row[key.replace("real ", "").replace("truncated_", "trunc_")] = r.get(key, math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def _short(ci: object) -> str:
    est, low, high = ci.estimate, ci.low, ci.high  # type: ignore[attr-defined]
    if math.isnan(est):
        return "–"
    if math.isnan(low):
        return f"{est:.2f} (no interval: {ci.note.split('about ')[-1].split(' in')[0]} coverage at {ci.n_groups} sessions)"  # type: ignore[attr-defined]
    return f"{est:.2f} [{low:.2f}, {high:.2f}]"


def headline(scores: pd.DataFrame, label: str) -> dict[str, object]:
    """The headline over the real summaries of ``scores``: macro (per compaction) and micro (pooled over
    needed facts by class weight), with two-stage cluster intervals where supported."""
    real = scores[scores["rewrite"] == "real"].copy()
    real["weight"] = needed_weight(real)
    ok = real[real["score"].notna()]
    groups, clusters = ok["session"].tolist(), [f"{s}#{c}" for s, c in zip(ok["session"], ok["compaction"])]
    macro = cluster_interval(ok["score"].tolist(), groups, clusters, macro=True)
    micro = cluster_interval(ok["score"].tolist(), groups, clusters, weights=ok["weight"].tolist())
    old = cluster_interval(ok["needed_recall"].tolist(), groups, clusters, macro=True)
    few = int((ok["n_needed"] < MIN_COMPACTION_FACTS).sum())
    return {"summaries": label, "compactions": len(real), "scorable": len(ok), "sessions": ok["session"].nunique(),
            "needed facts": int(ok["n_needed"].sum()), f"< {MIN_COMPACTION_FACTS} facts": few,
            "score, per compaction (macro)": _short(macro), "score, pooled over facts (micro)": _short(micro),
            "old needed_recall (macro)": _short(old),
            "faithfulness (macro)": real["faithfulness"].mean()}


HAND = ROOT / "datasets" / "metaeval"


def hand_table(pairs: pd.DataFrame, split: str | None) -> pd.DataFrame:
    """Per class and pooled: the share of the score's pairs in order, n, and its interval or why none."""
    sub = pairs[pairs["measure"] == "score"]
    if split is not None:
        sub = sub[sub["split"] == split]
    rows = []
    for name in [*HAND_CLASSES, "pooled"]:
        part = sub if name == "pooled" else sub[sub["class"] == name]
        if part.empty:
            continue
        ci = cluster_interval(part["in_order"].astype(float).tolist(), part["session"].tolist(),
                              [f"{s}#{c}" for s, c in zip(part["session"], part["compaction"])])
        interval = (f"[{ci.low:.2f}, {ci.high:.2f}]" if not math.isnan(ci.low)
                    else "none (" + ci.note.split(": ", 1)[-1] + ")")
        rows.append({"class": name, "in order": ci.estimate, "n": len(part), "held": int(part["in_order"].sum()),
                     "compactions": ci.n_clusters, "sessions": ci.n_groups, "95% interval": interval})
    return pd.DataFrame(rows)


def run_hand(records: dict, out: Path, before: Path | None) -> None:
    rewrites = [r for file in sorted(HAND.glob("rewrites-*.jsonl")) for r in load_hand_rewrites(file)]
    start = time.process_time()
    he = hand_evaluate(records, rewrites)
    pairs = he.pairs
    pairs.to_csv(out / "metaeval-hand-pairs.csv", index=False)
    he.scores.to_csv(out / "metaeval-hand-scores.csv", index=False)
    print(f"\n## Rewrites written by reading ({len(rewrites)} rewrites of "
          f"{len({(r.session, r.compaction) for r in rewrites})} compactions, "
          f"{(time.process_time() - start) / 60:.1f} CPU minutes)\n")
    earlier = pd.read_csv(before) if before is not None else None
    for split in (*sorted(set(pairs["split"])), None):
        table = hand_table(pairs, split)
        if earlier is not None:
            old = hand_table(earlier, split).set_index("class")["in order"]
            table.insert(1, "before", [old.get(c, math.nan) for c in table["class"]])
        print(f"\n### {split or 'all splits'}\n")
        print(markdown(table))
    filler = pairs[(pairs["measure"] == "score") & (pairs["class"] == "filler")]
    ratio = filler["a"] / filler["b"]
    print(f"\nfiller: score with filler ÷ real score, median {ratio.median():.3f}, min {ratio.min():.3f} "
          f"(n = {len(ratio)})")


def baselines_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per source: the score per compaction (macro) and pooled over the needed facts (micro) with their
    two-stage intervals, Claude Code and Pi apart and together."""
    rows = []
    pi_names = {"before-compaction.jsonl", "history/compact.jsonl", "history/session.jsonl"}
    for label, part in (("claude-code", table[~table["session"].isin(pi_names)]),
                        ("pi", table[table["session"].isin(pi_names)]), ("all", table)):
        for source, group in part.groupby("source", sort=False):
            ok = group[group["score"].notna()]
            if ok.empty:
                continue
            groups, clusters = ok["session"].tolist(), [f"{s}#{c}" for s, c in zip(ok["session"], ok["compaction"])]
            macro = cluster_interval(ok["score"].tolist(), groups, clusters, macro=True)
            micro = cluster_interval(ok["score"].tolist(), groups, clusters, weights=ok["needed_weight"].tolist())
            rows.append({"summaries": label, "source": source, "compactions": len(ok),
                         "sessions": ok["session"].nunique(), "score (macro)": _short(macro),
                         "score (micro)": _short(micro), "written tokens": ok["written_tokens"].mean()})
    return pd.DataFrame(rows)


def run_baselines(records: dict) -> pd.DataFrame:
    """The score of the extractive summarizer and of each degenerate baseline on every real span, at the
    real summary's length (Pi's token estimate), beside the real summary's."""
    from pimem.core.compaction.compaction import build_history_prompt
    from pimem.core.llm import SummaryRequest
    from pimem.core.prompts import SUMMARIZATION_SYSTEM_PROMPT
    from pimem.drift.measures import summary_measures
    from pimem.drift.needed import needed_later_facts
    from pimem.summarizers.baselines import baseline_summarizers
    from pimem.summarizers.extractive import ExtractiveSummarizer
    from pimem.text.facts import extract_facts
    from pimem.text.sections import summarizer_text

    sources = {"extractive": ExtractiveSummarizer(), **baseline_summarizers(budget=None)}
    rows = []
    for name, recs in records.items():
        for k, rec in enumerate(recs):
            needed, facts = needed_later_facts(rec), extract_facts(rec.span)
            budget = max(1, math.ceil(len(summarizer_text(rec.summary).encode("utf-16-le")) / 8))
            prompt = build_history_prompt([m for _, m in rec.span], None, rec.previous_summary)
            texts = {"real": rec.summary}
            for source, summarizer in sources.items():
                request = SummaryRequest(kind="history", system_prompt=SUMMARIZATION_SYSTEM_PROMPT, prompt=prompt,
                                         max_tokens=budget)
                texts[source] = summarizer.complete(request).text
            for source, text in texts.items():
                m = summary_measures(rec, text, needed=needed, span_facts=facts)
                rows.append({"session": name, "compaction": k, "source": source, "score": m["score"],
                             "needed_weight": m["needed_weight"], "written_tokens": m["written_tokens"]})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-claude-code", action="store_true", help="the 5 Pi compactions only")
    ap.add_argument("--limit", type=int, default=None, help="the first N Claude Code files only")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--shard", default=None, metavar="K/N",
                    help="score every N-th session from the K-th (the Pi sessions in shard 0); writes "
                         "metaeval-scores.K.csv")
    ap.add_argument("--from-scores", nargs="+", type=Path, default=None, metavar="CSV",
                    help="no scoring: the tables from scores files written before (shards concatenated)")
    ap.add_argument("--hand-only", action="store_true", help="only the rewrites written by reading")
    ap.add_argument("--hand-before", type=Path, default=None, metavar="CSV",
                    help="the metaeval-hand-pairs.csv of an earlier run, set beside this one")
    ap.add_argument("--baselines", action="store_true",
                    help="score the extractive summarizer and the baselines on every real span")
    args = ap.parse_args()
    if args.hand_only or args.baselines:
        args.out.mkdir(parents=True, exist_ok=True)
        records = dict(pi_records(SHARED / "datasets" / "pi-mono"))
        records.update(claude_code_records(SHARED))
        if args.hand_only:
            run_hand(records, args.out, args.hand_before)
        if args.baselines:
            start = time.process_time()
            table = run_baselines(records)
            table.to_csv(args.out / "metaeval-baselines.csv", index=False)
            print(f"\n## The score of each source on the real spans ({(time.process_time() - start) / 60:.1f} "
                  f"CPU minutes)\n")
            print(markdown(baselines_table(table)))
        return
    pi_dir = SHARED / "datasets" / "pi-mono"
    pi_names = {"before-compaction.jsonl", "history/compact.jsonl", "history/session.jsonl"}
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.process_time()
    if args.from_scores:
        scores = pd.concat([pd.read_csv(f) for f in args.from_scores], ignore_index=True)
        me = MetaEvaluation(scores.drop(columns="source"), (*NEW, *OLD))
    else:
        if not pi_dir.exists():
            raise SystemExit(f"no real sessions at {pi_dir}")
        k, n = (int(x) for x in args.shard.split("/")) if args.shard else (0, 1)
        records: dict[str, list] = dict(pi_records(pi_dir)) if k == 0 else {}
        if not args.no_claude_code and (SHARED / "datasets" / "claude-code").exists():
            cc = claude_code_records(SHARED, limit=args.limit)
            records.update({sid: recs for i, (sid, recs) in enumerate(sorted(cc.items())) if i % n == k})
        me = meta_evaluate(records)
        scores = me.scores.assign(source=["pi" if s in pi_names else "claude-code" for s in me.scores["session"]])
        numeric = scores[[c for c in scores.columns if c in ("session", "compaction", "rewrite", "source")
                          or pd.api.types.is_numeric_dtype(scores[c])]]
        numeric.to_csv(args.out / (f"metaeval-scores.{k}.csv" if args.shard else "metaeval-scores.csv"), index=False)
    cpu = time.process_time() - start
    n = scores.groupby(["session", "compaction"]).ngroups
    print(f"# Meta-evaluation on {n} real compactions ({scores['session'].nunique()} sessions), "
          f"{cpu / 60:.1f} CPU minutes\n")
    table = order_table(me)
    table.to_csv(args.out / "metaeval-table.csv", index=False)
    print(markdown(table))
    for source in ("pi", "claude-code"):
        part = scores[scores["source"] == source]
        if len(part) and source == "claude-code":
            print(f"\n## {source} only\n")
            print(markdown(order_table(MetaEvaluation(part.drop(columns="source"), me.measures))))
    print("\n## Mean score per rewrite\n")
    means = me.mean_scores()[[*NEW, "needed_recall", "fact_recall", "written_tokens"]].reset_index()
    print(markdown(means))
    print("\n## The headline over every real summary\n")
    rows = [headline(scores[scores["source"] == s], s) for s in ("pi", "claude-code") if (scores["source"] == s).any()]
    rows.append(headline(scores, "all"))
    print(markdown(pd.DataFrame(rows)))
    if not args.shard:  # a shard holds only some sessions; run --hand-only on its own
        run_hand(records if not args.from_scores else {**pi_records(pi_dir), **claude_code_records(SHARED)},
                 args.out, args.hand_before)
    if LABELS.exists() and pi_dir.exists():
        checked = contradiction_check(load_contradiction_labels(LABELS), pi_records(pi_dir))
        print("\n## Contradiction detector on the labelled set\n")
        rows = []
        for split in ("tune", "heldout"):
            part = checked[checked["split"] == split]
            rows.append({"half": split, **precision_recall(list(part["truth"]), list(part["predicted"]))})
        print(markdown(pd.DataFrame(rows)))


if __name__ == "__main__":
    main()

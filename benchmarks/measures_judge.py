"""The optional model judge of summary claims (:class:`pimem.drift.faithfulness.ClaimJudge`) against the
rules, on a fixed sample of the rewrites written by reading (``datasets/metaeval/``, both splits).

Run: ``.venv/bin/python benchmarks/measures_judge.py [--per-rewrite 2] [--per-compaction 3] [--terse 1]
[--base-url URL --model NAME] [--evidence-chars 4000] [--out DIR] [--order]``

The sample (every compaction of both splits, 18 in 17 sessions; checkable claims only):

* **edited** — in each ``overclaim`` and ``false_claim`` rewrite, the claims that are not claims of the
  real summary (lines an edit changed or added): false by construction, the rewrite's rationale says why.
  The first ``--per-rewrite`` in the text's order.
* **untouched** — claims of the real summary that no ``overclaim`` or ``false_claim`` edit of its
  compaction changes: what the real summarizer wrote, by default true (mostly supported by the span).
  ``--per-compaction`` of them, those with the smallest SHA-256 of their text.
* **terse** — claims of the ``terse`` rewrite (a short faithful summary written from the span, every
  statement checked against it): true. ``--terse`` per compaction, by the same order.

This truth was written by reading, not by any measure. Each claim is judged by the rules (the default,
offline) and by the judge, through :func:`pimem.drift.faithfulness.judge_agreement` (both read as
supported / contradicted / unsupported). Printed, with n: Cohen's kappa rules vs judge; per verdict source
the share of edited claims it calls contradicted or unsupported (and contradicted alone), the share of
untouched and terse claims it calls supported, and the mean of the two (balanced accuracy: 0.5 for one
verdict given to every claim); the same per agent and per split. Written to ``--out``
(default ``benchmarks/results/``): ``measures-judge.csv`` (one row per claim: where it is from, its group,
both verdicts and the SHA-256 of its text; no text, the real summaries are not copied into the project).

The judge: the local model by default (``pimem model start --threads 1 --n-ctx 8192``, Qwen2.5-Coder-0.5B-
Instruct, answers of at most 16 tokens), or any OpenAI-compatible endpoint (``--base-url``, ``--model``; the
key from ``$OPENAI_API_KEY``). Every answer is cached on disk (``judge.sqlite`` beside the summary cache,
:func:`pimem.summarizers.cached.default_cache_path`), so a second run asks nothing. ``--order`` also scores
the ``overclaim`` and ``false_claim`` rewrites and their real summaries with the judge's verdicts in place of
the rules' (:func:`pimem.drift.metaeval.hand_evaluate` with ``score=summary_measures(..., judge=...)``) and
prints the pairwise ordering per class beside the rules': that judges every checkable claim of 18 real
summaries and their rewrites (about 2,100), some 18 hours with the 0.5B model on one thread of this machine
(31 s a claim; the default sample of 144 claims took 75 minutes).

Reads the real compactions of ``../shared/datasets`` (or ``$PIMEM_SHARED_DIR/datasets``); exits with a
message when they are absent.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import math
import os
import sys
import time
from pathlib import Path

import pandas as pd

from pimem.drift.faithfulness import ClaimJudge, judge_agreement, summary_claims
from pimem.drift.intervals import cohen_kappa
from pimem.drift.measures import summary_measures
from pimem.drift.metaeval import HandRewrite, claude_code_records, hand_evaluate, load_hand_rewrites, pi_records
from pimem.summarizers.cached import CachedSummarizer, default_cache_path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PIMEM_SHARED_DIR", ROOT.parent / "shared"))
HAND = ROOT / "datasets" / "metaeval"
FALSE_CLASSES = ("overclaim", "false_claim")
GROUPS = ("edited", "untouched", "terse")
SOURCES = ("rules", "judge")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checkable(text: str) -> list[str]:
    return [c.text for c in summary_claims(text) if c.checkable]


def edited_claims(rewrite: HandRewrite, real: str) -> list[str]:
    """The checkable claims of ``rewrite`` (applied to the real summary ``real``) that are not claims of the
    real summary, in the text's order: lines its edits changed or added."""
    before = set(_checkable(real))
    return [c for c in _checkable(rewrite.apply(real)) if c not in before]


def sample(records: dict, rewrites: list[HandRewrite], per_rewrite: int, per_compaction: int,
           terse: int) -> list[dict]:
    """The claims to judge (see module docs): one dict per (compaction, text, group) with the claim texts."""
    out: list[dict] = []
    by_compaction: dict[tuple[str, int], list[HandRewrite]] = {}
    for rw in rewrites:
        by_compaction.setdefault((rw.session, rw.compaction), []).append(rw)
    for (session, k), group in by_compaction.items():
        rec = records[session][k]
        where = {"split": group[0].split, "agent": "pi" if session.endswith(".jsonl") else "claude-code",
                 "session": session, "compaction": k}
        falses = [rw for rw in group if rw.cls in FALSE_CLASSES]
        for rw in falses:
            out.append({**where, "group": "edited", "item": rw.id, "class": rw.cls, "text": rw.apply(rec.summary),
                        "claims": edited_claims(rw, rec.summary)[:per_rewrite]})
        kept = set(_checkable(rec.summary))
        for rw in falses:
            kept &= set(_checkable(rw.apply(rec.summary)))
        out.append({**where, "group": "untouched", "item": "real", "class": "real", "text": rec.summary,
                    "claims": sorted(kept, key=_digest)[:per_compaction]})
        for rw in group:
            if rw.cls == "terse":
                text = rw.apply(rec.summary)
                out.append({**where, "group": "terse", "item": rw.id, "class": rw.cls, "text": text,
                            "claims": sorted(set(_checkable(text)), key=_digest)[:terse]})
    return out


def make_judge(base_url: str | None, model: str | None, evidence_chars: int) -> ClaimJudge:
    """The judge: the local model's running server, or ``model`` at ``base_url``; cached on disk."""
    if base_url:
        from pimem.summarizers.openai_compat import OpenAISummarizer

        if not model:
            raise ValueError("a judge at --base-url needs --model")
        inner = OpenAISummarizer(model, base_url, temperature=0.0)
    else:
        from pimem.summarizers.local import LocalModelSummarizer

        inner = LocalModelSummarizer(max_tokens_cap=16)
    cached = CachedSummarizer(inner, default_cache_path().with_name("judge.sqlite"))
    return ClaimJudge(cached, evidence_chars=evidence_chars)


def judged(records: dict, items: list[dict], judge: ClaimJudge, quiet: bool = False) -> pd.DataFrame:
    """One row per sampled claim: where it is from, its group and truth, the rules' and the judge's verdicts."""
    rows = []
    start = time.time()
    done = 0
    for it in items:
        rec = records[it["session"]][it["compaction"]]
        table, _ = judge_agreement(rec, it["text"], judge, only=set(it["claims"]))
        seen = set()
        for r in table.to_dict("records"):
            if r["claim"] in seen:  # a claim repeated in one text counts once
                continue
            seen.add(r["claim"])
            rows.append({k: it[k] for k in ("split", "agent", "session", "compaction", "group", "item", "class")}
                        | {"claim_sha256": _digest(r["claim"])[:16], "truth": "false" if it["group"] == "edited"
                           else "true", "rules": r["rules"], "judge": r["judge"]})
        done += len(seen)
        if not quiet:
            print(f"  {it['item']:<28} {it['group']:<9} {len(seen)} claims ({done} in {time.time() - start:.0f} s)",
                  file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def _share(mask: pd.Series) -> str:
    return f"{mask.mean():.2f} ({int(mask.sum())}/{len(mask)})" if len(mask) else "–"


def accuracy_table(df: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """Per verdict source (and ``by``): the share of edited claims called contradicted or unsupported, called
    contradicted, and of untouched and terse claims called supported, n per cell as (hits/n); the balanced
    accuracy (the mean of the share of edited claims not supported and of true claims supported: 0.5 for a
    source that gives every claim one verdict)."""
    rows = []
    keys = [None] if by is None else sorted(df[by].unique())
    for key in keys:
        sub = df if key is None else df[df[by] == key]
        for source in SOURCES:
            edited, untouched, terse = (sub[sub["group"] == g][source] for g in GROUPS)
            caught = edited.isin(["contradicted", "unsupported"])
            kept = pd.concat([untouched, terse]) == "supported"
            row = {by: key} if by else {}
            row.update({"source": source,
                        "edited: not supported": _share(caught),
                        "edited: contradicted": _share(edited == "contradicted"),
                        "untouched: supported": _share(untouched == "supported"),
                        "terse: supported": _share(terse == "supported"),
                        "balanced accuracy": (caught.mean() + kept.mean()) / 2 if len(caught) and len(kept)
                        else math.nan,
                        "no answer": int((sub[source] == "no answer").sum())})
            rows.append(row)
    return pd.DataFrame(rows)


def kappa_table(df: pd.DataFrame) -> pd.DataFrame:
    """Cohen's kappa rules vs judge and the share agreeing, pooled and per group, over answered claims."""
    rows = []
    for name in ("all", *GROUPS):
        sub = df if name == "all" else df[df["group"] == name]
        sub = sub[sub["judge"] != "no answer"]
        if sub.empty:
            continue
        rows.append({"claims": name, "n": len(sub), "kappa": cohen_kappa(list(sub["rules"]), list(sub["judge"])),
                     "agree": (sub["rules"] == sub["judge"]).mean()})
    return pd.DataFrame(rows)


def markdown(df: pd.DataFrame) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return "–" if math.isnan(v) else f"{v:.2f}"
        return str(v)

    lines = ["| " + " | ".join(df.columns) + " |", "|" + " --- |" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def order(records: dict, rewrites: list[HandRewrite], judge: ClaimJudge) -> pd.DataFrame:
    """Pairwise ordering of the ``overclaim`` and ``false_claim`` rewrites by ``score``, the rules' verdicts
    beside the judge's, per class and pooled."""
    chosen = [rw for rw in rewrites if rw.cls in FALSE_CLASSES]
    tables = []
    for source, score in (("rules", None), ("judge", functools.partial(summary_measures, judge=judge))):
        table = hand_evaluate(records, chosen, measures=("score",), score=score).table("score")
        tables.append(table.assign(source=source)[["source", "class", "in_order", "n_in_order", "n_pairs"]])
    return pd.concat(tables, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-rewrite", type=int, default=2, help="edited claims per overclaim / false_claim rewrite")
    ap.add_argument("--per-compaction", type=int, default=3, help="untouched claims of each real summary")
    ap.add_argument("--terse", type=int, default=1, help="claims of each terse rewrite")
    ap.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint (default: the local model)")
    ap.add_argument("--model", default=None, help="the model at --base-url")
    ap.add_argument("--evidence-chars", type=int, default=4000, help="the most characters of excerpts per claim")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--order", action="store_true", help="also the ordering per class with the judge's verdicts")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.base_url and not args.model:
        ap.error("--base-url needs --model")
    if not (SHARED / "datasets").is_dir():
        print(f"no shared data at {SHARED / 'datasets'}: nothing to measure", file=sys.stderr)
        return 0
    rewrites = load_hand_rewrites(HAND / "rewrites-heldout.jsonl") + load_hand_rewrites(HAND / "rewrites-tune.jsonl")
    records = dict(pi_records(SHARED / "datasets" / "pi-mono"))
    records.update(claude_code_records(SHARED))
    judge = make_judge(args.base_url, args.model, args.evidence_chars)
    items = sample(records, rewrites, args.per_rewrite, args.per_compaction, args.terse)
    start = time.time()
    df = judged(records, items, judge, args.quiet)
    elapsed = time.time() - start
    cache = judge.model
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "measures-judge.csv"
    tmp = target.with_suffix(".csv.tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, target)
    counts = ", ".join(f"{g} {int((df['group'] == g).sum())}" for g in GROUPS)
    print(f"judge {judge.model!r}, evidence at most {args.evidence_chars} characters; {len(df)} claims ({counts}) "
          f"of {len(set(zip(df['session'], df['compaction'])))} compactions in {df['session'].nunique()} sessions; "
          f"{cache.misses} requests, {cache.hits} from the cache, {elapsed:.0f} s\n")
    print("Agreement of the judge with the rules (supported / contradicted / unsupported; answered claims):\n")
    print(markdown(kappa_table(df)) + "\n")
    print("Verdicts against the truth written by reading (share (hits/n)):\n")
    print(markdown(accuracy_table(df)) + "\n")
    for by in ("agent", "split"):
        print(markdown(accuracy_table(df, by)) + "\n")
    print("Judge's answers: " + ", ".join(f"{k} {v}" for k, v in df["judge"].value_counts().items()) + "\n")
    if args.order:
        print("Pairs in the expected order by score, rules' verdicts vs the judge's:\n")
        print(markdown(order(records, rewrites, judge)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

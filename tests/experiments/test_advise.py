"""The advisor: the Pareto front of cost, summary score and refused requests, its held-out check, and the
settings.json block Pi reads back as the pick."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from pimem.core.settings_manager import Settings
from pimem.experiments.advise import ADVICE, ADVICE_CHECK, advise, pareto_front, settings_block

REPO = Path(__file__).resolve().parents[2]
REAL_PI = REPO / "datasets" / "real" / "pi"


def test_the_front_holds_the_settings_no_other_beats_in_every_objective():
    table = pd.DataFrame({
        "cost_total": [1.0, 2.0, 3.0, 1.5, 1.0, math.nan],
        "score": [0.2, 0.5, 0.4, 0.2, 0.2, 0.9],
        "refused_requests": [0, 0, 0, 0, 1, 0],
    })
    front = pareto_front(table)
    # 0 cheapest; 1 best score; 2 dominated by 1; 3 dominated by 0; 4 dominated by 0; 5 has no cost
    assert front.tolist() == [True, True, False, False, False, False]
    # an objective missing everywhere is left out, not a reason to have no front
    assert pareto_front(table.assign(score=math.nan)).tolist() == [True, False, False, False, False, False]


def test_the_settings_block_is_what_pi_reads_for_that_model_alone():
    block = settings_block("anthropic/claude-opus-4-5", 32_768, 10_000)
    assert block == {"compaction": {"modelOverrides": {"anthropic/claude-opus-4-5": {
        "reserveTokens": 32_768, "keepRecentTokens": 10_000}}}}
    settings = Settings.from_dict(json.loads(json.dumps(block)))
    mine = settings.compaction_for("anthropic", "claude-opus-4-5")
    assert (mine.reserve_tokens, mine.keep_recent_tokens) == (32_768, 10_000)
    other = settings.compaction_for("anthropic", "claude-sonnet-4-5")
    assert (other.reserve_tokens, other.keep_recent_tokens) == (16_384, 20_000)  # Pi's defaults


def test_advise_rejects_a_model_it_cannot_size(samples_dir):
    with pytest.raises(ValueError, match="provider/modelId"):
        advise([samples_dir / "auth-login-bug.jsonl"], "claude-opus-4-5")
    with pytest.raises(ValueError, match="not in Pi's model table"):
        advise([samples_dir / "auth-login-bug.jsonl"], "acme/unknown-model")


@pytest.mark.slow
def test_advise_on_real_sessions_checks_its_pick_on_held_out_ones(tmp_path):
    paths = sorted(REAL_PI.glob("*.jsonl.gz"))
    if len(paths) < 3:
        pytest.skip("no bundled real sessions")
    advice = advise(paths, "anthropic/claude-opus-4-5", reserve=[8_192, 32_768], keep=[10_000, 40_000],
                    window=128_000, folds=3, workers=2, progress=False, n_boot=50, cache=tmp_path / "c.sqlite")
    assert advice.context_window == 128_000
    runs = advice.runs
    assert set(runs["context_window"]) == {128_000} and runs["error"].isna().all()
    assert set(runs["cost_model"]) == {"claude-opus-4-5"}  # priced at the model asked for
    table = advice.table
    assert list(table.columns) == ADVICE.names and list(advice.validation.columns) == ADVICE_CHECK.names
    assert len(table) == 4 and table["on_front"].any()
    assert (table["n"] == table["n"].iloc[0]).all() and table["n"].iloc[0] >= 2  # the same sessions everywhere
    assert advice.n_sessions == runs["unit"].nunique() - len({runs.loc[runs["session"] == s, "unit"].iloc[0]
                                                              for s in advice.left_out}) >= table["n"].iloc[0]
    on = table[table["on_front"]]
    for _, row in table[~table["on_front"]].iterrows():  # every setting off the front is beaten by one on it
        assert any(o.cost_total <= row["cost_total"] and o.score >= row["score"]
                   and o.refused_requests <= row["refused_requests"] for o in on.itertuples())
    pick = advice.pick
    assert pick is not None and (pick["reserve_tokens"], pick["keep_recent_tokens"]) in set(
        zip(on["reserve_tokens"], on["keep_recent_tokens"]))
    v = advice.validation
    assert len(v) == 3 and set(", ".join(v["held_out"]).split(", ")) == set(runs["unit"]) - {
        runs.loc[runs["session"] == s, "unit"].iloc[0] for s in advice.left_out}
    assert 0 <= advice.held_out_hit_rate <= 1
    loss = advice.held_out_loss()
    assert math.isfinite(loss["cost_total"])
    for row in v.itertuples():  # a fold whose pick is its best loses nothing
        if row.pick == row.best:
            assert row.score_loss == pytest.approx(0) and row.cost_loss == pytest.approx(0)
    block = json.loads(advice.settings_json())
    model = block["compaction"]["modelOverrides"]["anthropic/claude-opus-4-5"]
    assert model == {"reserveTokens": pick["reserve_tokens"], "keepRecentTokens": pick["keep_recent_tokens"]}

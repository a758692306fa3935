"""Cache-aware cost: the price table against Pi's recorded costs, the prefix-cache model against the
recorded cache reads, invalidation at compactions and context edits, and sweeps with strategy axes."""

from __future__ import annotations

import math
import warnings

import pandas as pd
import pytest

from pimem.replays.engine import replay
from pimem.core.compaction.compaction import CompactionSettings
from pimem.core.session_manager import load_session
from pimem.replays.cost import COST_COLUMNS, PRICES, Price, ReplayCost, price_for, recorded_cost, replay_cost
from pimem.errors import ConfigurationError

SETTINGS = CompactionSettings(reserve_tokens=4096, keep_recent_tokens=4000)


def _replay(session, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return replay(session, kw.pop("settings", SETTINGS), context_window=kw.pop("window", 24000), **kw)


def test_price_lookup_and_overrides():
    assert price_for("claude-sonnet-4-5") == PRICES["claude-sonnet-4-5"]
    assert price_for("claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4-5"]
    assert price_for("anthropic/claude-opus-4-5") == PRICES["claude-opus-4-5"]
    mine = Price(1, 2, 0.1, 1.5)
    assert price_for("claude-sonnet-4-5", {"claude-sonnet-4-5": mine}) == mine
    assert price_for("my-local", {"my-local": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}}) == \
        Price(0, 0, 0, 0)
    with pytest.raises(ConfigurationError, match="no price for model 'mystery-1'"):
        price_for("mystery-1")
    with pytest.raises(ConfigurationError, match="a price needs"):
        price_for("x", {"x": {"input": 1}})


def test_table_reproduces_pis_recorded_costs(sample_paths, real_v3_paths):
    rows = pd.concat([recorded_cost(load_session(p)) for p in [*sample_paths, *real_v3_paths]])
    rows = rows[rows["recorded_cost"].notna() & (rows["recorded_cost"] > 0)]
    assert len(rows) > 500
    assert (rows["cost"] - rows["recorded_cost"]).abs().max() < 1e-9


def test_prefix_cache_model_follows_the_recording(before_compaction):
    """Replaying before-compaction.jsonl where it compacted, with its own summaries, the modelled
    prompt cache reads per request match the recorded ones on most requests, and the total cost
    is within 11% of what Pi recorded (the recording has cache misses no model can know: the model
    prices 38.34 where Pi recorded 42.60, 10.0% under; the aborted answer at step 20, sized at its
    recorded 50,953 tokens since nothing was replayed differently before it, took 0.03 off)."""
    from pimem.summarizers.recorded import RecordedSummarizer

    session = before_compaction
    result = _replay(session, settings=CompactionSettings(), window=None, triggers="recorded",
                     summarizer=RecordedSummarizer(session), strategy="no-split-turn")
    assert len(result.compactions) == 2
    rec = recorded_cost(session)
    merged = result.calls.merge(rec, on="entry_id")
    # the share of each request read from the cache, modelled and recorded (sizes differ after the
    # compactions: the replay's cut is Pi 0.87.1's, not the older Pi's that recorded the file)
    modelled = merged["prefix_tokens"] / merged["context_tokens"]
    recorded = merged["cache_read"] / merged["recorded_tokens"]
    assert ((modelled - recorded).abs() <= 0.02).mean() > 0.9
    cost = replay_cost(result, cache_ttl_s=None)
    assert cost["cost_total"] == pytest.approx(rec["recorded_cost"].sum(), rel=0.11)


def test_compaction_and_edits_invalidate_the_cache(auth):
    result = _replay(auth)
    calls = result.calls.reset_index(drop=True)
    assert calls.loc[0, "prefix_tokens"] == 0
    overhead = result.calibration.overhead
    steps_after = [calls[calls["step"] >= c_step].index.min()
                   for c_step in result.events[result.events["kind"] == "compaction"]["step"]]
    assert steps_after
    for i in steps_after:
        # the first request after a compaction reads at most the system prompt and tools
        assert calls.loc[i, "prefix_tokens"] <= overhead + 1e-6
    others = calls.drop(index=[0, *steps_after])
    assert (others["prefix_tokens"] > others["context_tokens"] * 0.5).mean() > 0.9
    # per-turn masking breaks the cache from the masked position on: more writes than Pi
    masked = _replay(auth, strategy="masking:keep_turns=3", triggers="threshold")
    a, b = replay_cost(result), replay_cost(masked)
    assert b["cache_write_tokens"] > a["cache_write_tokens"]
    assert b["cache_hit_rate"] < a["cache_hit_rate"]


def test_ttl_expiry_and_cost_parts(auth):
    result = _replay(auth)
    forever = replay_cost(result, cache_ttl_s=None)
    never = replay_cost(result, cache_ttl_s=-1)
    assert never["cache_read_tokens"] == 0
    assert never["cache_write_tokens"] == pytest.approx(forever["cache_read_tokens"] + forever["cache_write_tokens"])
    parts = [k for k in forever if k.startswith("cost_") and k not in ("cost_total", "cost_model")]
    assert forever["cost_total"] == pytest.approx(sum(forever[k] for k in parts))
    assert forever["cost_summarization"] > 0  # the extractive summarizer reports its token counts
    free = replay_cost(result, model="free")
    assert free["cost_total"] == 0 and free["cost_model"] == "free"
    assert math.isclose(forever["output_tokens"], result.calls["output_tokens"].sum())


def test_sweep_strategy_and_summarizer_axes(samples_dir, tmp_path):
    from pimem.experiments.sweep import sweep

    grid = {"strategy": ["pi-0.87.1", "hybrid:keep_turns=5"], "summarizer": ["extractive", "fact-dump"],
            "context_window": [24000], "reserve_tokens": [4096], "keep_recent_tokens": [4000]}
    log = tmp_path / "runs.jsonl"
    df = sweep([samples_dir / "auth-login-bug.jsonl"], grid, workers=1, progress=False, results_path=log)
    assert df["error"].isna().all() and len(df) == 4
    assert list(df["strategy"]) == ["pi-0.87.1", "pi-0.87.1", "hybrid:keep_turns=5", "hybrid:keep_turns=5"]
    assert list(df["summarizer"]) == ["extractive", "fact-dump"] * 2
    for col in ("needed_recall", "context_needed_recall", "masked_needed", "cost_total", "cache_hit_rate",
                "context_edits"):
        assert col in df.columns
    assert df["run_hash"].nunique() == 4
    assert (df[df["strategy"] == "pi-0.87.1"]["context_edits"] == 0).all()
    assert (df[df["strategy"] != "pi-0.87.1"]["context_edits"] > 0).all()
    again = sweep([samples_dir / "auth-login-bug.jsonl"], grid, workers=1, progress=False, results_path=log)
    assert again["resumed"].all()
    cheap = sweep([samples_dir / "auth-login-bug.jsonl"], grid, workers=1, progress=False,
                  prices={"claude-sonnet-4-5": Price(0, 0, 0, 0)}, measures="cost")
    assert (cheap["cost_total"] == 0).all() and "needed_recall" not in cheap.columns


@pytest.mark.parametrize("grid, words", [
    ({"strategy": ["nope"]}, "unknown compaction strategy"),
    ({"summarizer": ["gpt-9"]}, "unknown summarizer 'gpt-9'"),
])
def test_sweep_rejects_unknown_axes(samples_dir, grid, words):
    from pimem.experiments.sweep import sweep

    with pytest.raises(ConfigurationError, match=words):
        sweep([samples_dir / "auth-login-bug.jsonl"], grid, workers=1, progress=False)


def test_a_session_whose_model_has_no_price_runs_with_an_empty_cost_and_a_warning(tmp_path):
    """The sweep's run is not lost for want of a price: its cost is empty and a warning says why;
    a model asked for by name must still be priced."""
    from pimem.errors import PimemWarning, UnknownPriceError
    from pimem.experiments.sweep import sweep

    path = tmp_path / "no-model.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}\n'
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hello","timestamp":1735689601000}}\n')
    with pytest.warns(PimemWarning, match="no price for model ''; .*cost columns are left empty"):
        runs = sweep([path], {"reserve_tokens": [1000], "keep_recent_tokens": [500]}, workers=1, progress=False)
    assert runs["error"].isna().all()
    assert math.isnan(runs["cost_total"].iloc[0])
    with pytest.raises(UnknownPriceError):
        price_for("mystery-1")
    runs = sweep([path], {"reserve_tokens": [1000], "keep_recent_tokens": [500]}, workers=1, progress=False,
                 cost_model="mystery-1")
    assert runs["error"].str.contains("no price for model 'mystery-1'").all()


def test_a_refused_request_costs_nothing(sample_paths):
    """Pi records a request the provider refused as an error message with zero usage: no input, no
    output, nothing written to the cache; the next request reads what the last answered one wrote."""
    checked = 0
    for path in sample_paths:
        result = _replay(path, settings=CompactionSettings(reserve_tokens=500, keep_recent_tokens=800),
                         window=3500, token_source="chars")
        calls = result.calls.reset_index(drop=True)
        refused = calls[calls["refused"]]
        if not len(refused):
            continue
        zero_usage = [e["message"]["usage"] for e in result.session.entries if e.get("type") == "message"
                      and e["message"].get("stopReason") == "error"]
        assert zero_usage and all(u["input"] == u["output"] == u["totalTokens"] == 0 for u in zero_usage)
        assert (refused["prefix_tokens"] == 0).all()
        answered = calls[~calls["refused"]]
        cost = replay_cost(result, model="claude-sonnet-4-5", cache_ttl_s=None)
        assert cost["output_tokens"] == pytest.approx(answered["output_tokens"].sum())
        assert cost["output_tokens"] < calls["output_tokens"].sum()
        assert cost["cache_read_tokens"] + cost["cache_write_tokens"] == pytest.approx(answered["context_tokens"].sum())
        # an answered request after a refused one reads at most what the previous answered request sent
        for i in refused.index:
            later = answered[answered.index > i]
            earlier = answered[answered.index < i]
            if len(later) and len(earlier):
                assert later["prefix_tokens"].iloc[0] <= earlier["context_tokens"].iloc[-1] + 1e-6
        checked += 1
    assert checked


def test_the_cost_has_the_keys_and_kinds_of_its_typeddict(auth):
    cost = replay_cost(_replay(auth))
    assert list(cost) == list(ReplayCost.__annotations__) == COST_COLUMNS
    assert isinstance(cost["cost_model"], str) and cost["cost_model"]
    assert {k: type(v) for k, v in cost.items() if k != "cost_model" and type(v) is not float} == {}


def test_the_cost_reads_the_replays_rows_as_its_tables_hold_them(sample_paths):
    """Priced from the replay's own rows (no table made) or from its tables (a result holding only
    frames, and a replay whose table was edited), every figure is the same float."""
    from types import SimpleNamespace

    checked = 0
    for path in sample_paths:
        for window, source in ((3500, "chars"), (24000, "calibrated")):
            result = _replay(path, settings=CompactionSettings(reserve_tokens=500, keep_recent_tokens=800),
                             window=window, token_source=source)
            for ttl in (None, 300.0, 1.0):
                from_rows = replay_cost(result, model="claude-sonnet-4-5", cache_ttl_s=ttl)
                tables = SimpleNamespace(session=result.session, calls=result.calls, events=result.events)
                assert replay_cost(tables, model="claude-sonnet-4-5", cache_ttl_s=ttl) == from_rows
                checked += 1
            fewer = result.calls.iloc[: len(result.calls) // 2]
            result.calls = fewer
            assert replay_cost(result, model="claude-sonnet-4-5")["output_tokens"] == \
                pytest.approx(fewer.loc[~fewer["refused"], "output_tokens"].sum())
    assert checked >= 6

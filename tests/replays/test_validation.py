"""Token sources validated on real compactions, out of sample; intervals from the errors, coverage checked."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pimem.replays.validation import (
    CorpusFile,
    corpus_files,
    interval_coverage,
    request_sizes,
    validate,
    validation_table,
)
from pimem.errors import ConfigurationError
from pimem.replays.tokens import partial_recording


@pytest.fixture(scope="module")
def pi_frame(real_dir: Path) -> pd.DataFrame:
    files = [f for f in corpus_files(real_dir.parents[1]) if f.agent == "pi"]  # shared, or the bundled copies
    return validate(files, tiktoken=False)


def test_each_compaction_is_predicted_from_the_requests_before_it_only(real_dir: Path, tmp_path: Path) -> None:
    """Doubling every recorded request after the first compaction of before-compaction.jsonl changes
    the truths of that compaction's rows and none of their predictions."""
    source = real_dir / "before-compaction.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()
    seen_compaction = False
    changed = []
    for line in lines:
        entry = json.loads(line)
        if entry.get("type") == "compaction":
            seen_compaction = True
        message = entry.get("message") if entry.get("type") == "message" else None
        if seen_compaction and message and message.get("role") == "assistant" and message.get("usage"):
            for key in ("input", "cacheRead", "cacheWrite", "totalTokens"):
                message["usage"][key] = 2 * (message["usage"].get(key) or 0)
        changed.append(json.dumps(entry))
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text("\n".join(changed) + "\n", encoding="utf-8")
    a = validate([CorpusFile("pi", source)], tiktoken=False)
    b = validate([CorpusFile("pi", doubled)], tiktoken=False)
    first = a["compaction"].iloc[0]
    a1 = a[(a["compaction"] == first) & a["source"].isin(["calibrated", "calibrated-fit", "chars"])]
    b1 = b[(b["compaction"] == first) & b["source"].isin(["calibrated", "calibrated-fit", "chars"])]
    assert len(a1) == len(b1) > 0
    assert np.allclose(a1["predicted"].to_numpy(), b1["predicted"].to_numpy())
    assert np.allclose(2 * a1["recorded"].to_numpy(), b1["recorded"].to_numpy())
    assert (a1["fit_points"] > 100).all()


def test_copies_of_a_compaction_count_once(real_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy-of-before-compaction.jsonl"
    shutil.copyfile(real_dir / "before-compaction.jsonl", copy)
    once = validate([CorpusFile("pi", real_dir / "before-compaction.jsonl")], tiktoken=False)
    twice = validate([CorpusFile("pi", real_dir / "before-compaction.jsonl"), CorpusFile("pi", copy)], tiktoken=False)
    assert twice["compaction"].nunique() == once["compaction"].nunique() == 2
    assert len(twice) == len(once)


def test_the_table_of_the_real_pi_sessions(pi_frame: pd.DataFrame) -> None:
    """Three scored Pi compactions (a fourth has no request after it), requests 1-3 each: n = 9. The
    bare counts miss the overhead every request carries; with it they come closer; the calibrated
    source is within 16% everywhere."""
    table = validation_table(pi_frame).set_index("source")
    assert (table["n"] == 9).all() and (table["compactions"] == 3).all()
    assert table.loc["chars-bare", "median_bias"] < table.loc["chars", "median_bias"] < 0
    assert table.loc["calibrated", "p90_abs_error"] < 0.16
    assert pi_frame[pi_frame["source"].isna()]["requests_after"].eq(0).all()  # the unscorable one, and why
    later = validation_table(pi_frame, ks=(10,)).set_index("source")
    assert (later["n"] == 3).all()


def test_request_sizes_number_the_requests_after_each_compaction(real_dir: Path) -> None:
    from pimem.sessions.load import load_session

    path = load_session(real_dir / "before-compaction.jsonl").get_branch()
    sizes = request_sizes(path, tiktoken=False)
    assert sizes["compaction"].max() == 2
    for c in (1, 2):
        after = sizes[sizes["compaction"] == c]["since"].tolist()
        assert after[:3] == [1, 2, 3]
    assert (sizes[sizes["compaction"] == 0]["since"] == 0).all()
    assert (sizes["recorded"] > sizes["estimate"]).mean() > 0.95  # every request carries more than it shows


def test_partial_recordings_are_named() -> None:
    def chat(first_input: int) -> list[dict]:
        user = {"type": "message", "id": "u", "parentId": None,
                "message": {"role": "user", "content": [{"type": "text", "text": "hello"}], "timestamp": 1}}
        answer = {"type": "message", "id": "a", "parentId": "u",
                  "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "stopReason": "stop",
                              "usage": {"input": first_input, "output": 5, "cacheRead": 0, "cacheWrite": 0,
                                        "totalTokens": first_input + 5}, "timestamp": 2}}
        return [user, answer]

    assert partial_recording(chat(3_000)) is None
    assert "first request counted 120,000 tokens" in (partial_recording(chat(120_000)) or "")
    orphan = chat(3_000)
    orphan[0]["parentId"] = "gone"
    assert "parent is not in the file" in (partial_recording(orphan) or "")


def test_interval_coverage_holds_out_each_session() -> None:
    """40 sessions whose requests share a session-level error (sd 10%) plus a small one of their own:
    the interval for a held-out session, built from the others at a nominal level chosen without it,
    covers at least 90% of the held-out truths; with every session but two, too few to hold any out."""
    rng = np.random.default_rng(0)
    rows = []
    for s in range(40):
        offset = rng.normal(0.0, 0.1)
        for k in (1, 2, 3):
            ratio = offset + rng.normal(0.0, 0.02)
            rows.append({"agent": "a", "session": f"s{s}", "compaction": f"c{s}", "k": k,
                         "source": "calibrated+profile", "predicted": 1000.0, "recorded": 1000.0 * (1 + ratio),
                         "error": 1 / (1 + ratio) - 1})
    frame = pd.DataFrame(rows)
    result = interval_coverage(frame).set_index("agent").loc["a"]
    assert result["n"] == 120 and result["sessions"] == 40
    assert result["holds"] and result["coverage"] >= 0.9 and 0.9 <= result["nominal"] <= 1.0
    assert result["low"] < -0.1 < 0.1 < result["high"]
    two = interval_coverage(frame[frame["session"].isin(["s0", "s1"])]).set_index("agent").loc["a"]
    assert two["n"] == 0 and not two["holds"]


def test_replay_intervals_follow_the_errors(auth) -> None:
    """No error: every draw is the replay itself. Errors of ±40%: a replay that models its sizes 40%
    larger compacts at least as often, one 40% smaller at most as often, and the interval spans both."""
    from pimem.replays.validation import replay_intervals

    settings = {"reserve_tokens": 2000, "keep_recent_tokens": 2000}
    exact = replay_intervals(auth, [0.0], draws=3, settings=settings, context_window=12_000).set_index("metric")
    assert (exact["low"] == exact["value"]).all() and (exact["high"] == exact["value"]).all()
    assert exact.loc["compactions", "value"] >= 1
    spread = replay_intervals(auth, [-0.4, 0.4], draws=8, seed=1, settings=settings,
                              context_window=12_000).set_index("metric")
    assert spread.loc["compactions", "low"] <= exact.loc["compactions", "value"] <= spread.loc["compactions", "high"]
    assert spread.loc["compactions", "low"] < spread.loc["compactions", "high"]
    with pytest.raises(ConfigurationError, match="at least one finite error"):
        replay_intervals(auth, [float("nan")], draws=2)


def test_request_sizes_name_the_summary_and_the_thinking_sent(real_dir: Path) -> None:
    from pimem.sessions.load import load_session

    path = load_session(real_dir / "before-compaction.jsonl").get_branch()
    sizes = request_sizes(path, tiktoken=True)
    before, after = sizes[sizes["compaction"] == 0], sizes[sizes["compaction"] > 0]
    assert (before["summary_estimate"] == 0).all() and (before["summary_counted"] == 0).all()
    assert (after["summary_estimate"] > 100).all() and (after["summary_counted"] > 100).all()
    assert (after["summary_estimate"] < after["estimate"]).all()  # the summary is part of what was sent
    assert (sizes["thinking"] >= 0).all() and (sizes["thinking"] < sizes["estimate"]).all()


def test_the_previous_compaction_corrects_the_next_by_its_known_error(pi_frame: pd.DataFrame) -> None:
    """before-compaction.jsonl compacted twice: the second compaction's ``+previous`` sources add the
    first one's median error on its requests 1-3 (known before the second); the first has none to add."""
    rows = pi_frame[pi_frame["file"].str.endswith("before-compaction.jsonl") & pi_frame["source"].notna()]
    first, second = sorted(rows["compaction"].unique(), key=lambda c: rows[rows["compaction"] == c]["fit_points"].min())

    def values(compaction: str, source: str) -> pd.Series:
        picked = rows[(rows["compaction"] == compaction) & (rows["source"] == source)]
        return picked.set_index("k")["predicted"]

    plain = rows[(rows["compaction"] == first) & (rows["source"] == "anchored+files") & rows["k"].isin([1, 2, 3])]
    known = float(np.median(plain["recorded"] - plain["predicted"]))
    assert known != 0
    assert np.allclose(values(first, "anchored+files+previous"), values(first, "anchored+files"))
    assert np.allclose(values(second, "anchored+files+previous"), values(second, "anchored+files") + known)
    ratio = float(np.median(plain["predicted"] / plain["recorded"] - 1))
    assert np.allclose(values(second, "anchored+files+previous-ratio"), values(second, "anchored+files") / (1 + ratio))


def test_a_summary_rate_is_learnt_on_the_other_sessions_only() -> None:
    """Three sessions whose summaries (basis 1,000) came out at 0.5, 1.0 and 2.0 tokens per unit above
    the rest: each held-out session gets the median of the other two; later requests get it too."""
    from pimem.replays.validation import agent_profiles

    rows = []
    for s, factor in (("s0", 0.5), ("s1", 1.0), ("s2", 2.0)):
        for k in (1, 2, 10):
            rows.append({"agent": "a", "session": s, "compaction": s, "k": k, "source": "anchored+files+summary-rate",
                         "predicted": 10_000.0, "recorded": 10_000.0 + factor * 1_000, "basis": 1_000.0,
                         "error": np.nan})
    filled = agent_profiles(pd.DataFrame(rows)).groupby("session")["predicted"].agg(["min", "max"])
    assert filled.loc["s0"].tolist() == [11_500.0, 11_500.0]  # median of 1.0 and 2.0
    assert filled.loc["s1"].tolist() == [11_250.0, 11_250.0]
    assert filled.loc["s2"].tolist() == [10_750.0, 10_750.0]
    alone = agent_profiles(pd.DataFrame(rows[:3]))
    assert alone["predicted"].isna().all()  # no other session: nothing learnt, nothing scored


def test_compare_sources_counts_on_the_same_requests() -> None:
    from pimem.replays.validation import sources_head_to_head

    rows = []
    for s in range(4):
        for k in (1, 2):
            for source, error in (("ref", 0.10), ("new", 0.05 if s < 3 else 0.20)):
                rows.append({"agent": "a", "session": f"s{s}", "compaction": f"c{s}", "k": k, "source": source,
                             "error": error})
    result = sources_head_to_head(pd.DataFrame(rows), "ref").set_index("source").loc["new"]
    assert result["n"] == 8 and result["sessions"] == 4
    assert result["requests_closer"] == 6 and result["requests_further"] == 2
    assert result["sessions_closer"] == 3 and result["sessions_further"] == 1
    assert result["median_change"] == pytest.approx(-0.05)
    assert result["p90_change"] == pytest.approx(0.10)

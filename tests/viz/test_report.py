"""The drift report HTML and the study job, end to end on the bundled samples."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from pimem.replays.engine import replay  # noqa: E402
from pimem.core.compaction.compaction import CompactionSettings  # noqa: E402
from pimem.core.session_manager import Session, load_session  # noqa: E402
from pimem.drift import drift_report  # noqa: E402
from pimem.viz.report import run_study, write_drift_report  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _images(text: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", text)]


def test_drift_report_of_a_replay(samples_dir, tmp_path):
    result = replay(samples_dir / "auth-login-bug.jsonl", CompactionSettings(reserve_tokens=4000, keep_recent_tokens=4000),
                    context_window=16000)
    out = write_drift_report(result, tmp_path / "r" / "drift.html", title="Drift <of> auth & co")
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "<title>Drift &lt;of&gt; auth &amp; co</title>" in text
    images = _images(text)
    assert len(images) >= 3 and all(i.startswith(PNG) for i in images)  # context, drift curves, tree
    assert "Per compaction" in text
    # one table row per compaction in the per-compaction table
    section = text.split("<h2>Per compaction</h2>")[1].split("<h2>")[0]
    assert section.count("<tr>") - 1 == len(result.compactions)
    assert [p.name for p in out.parent.iterdir()] == ["drift.html"]  # no temporary file left
    # what the replay cannot know, and tokens_before against the plotted line, are stated
    assert "The replay is open-loop" in text and "tokens_before is not the plotted context" in text
    orphans = text.split("<h2>Orphan references")[1].split("<h2>")[0]
    assert orphans.count("<tr>") - 1 == len(result.compactions)
    rework = text.split("<h2>What the agent did after each compaction</h2>")[1].split("<h2>")[0]
    assert "A replay cannot show this" in rework and "<table" not in rework


def test_report_header_counts_agree_with_the_replay(samples_dir, tmp_path):
    """After a threshold replay with refused requests: the header's counts of the recording's entries
    kept, left out and dropped, and of the entries the replay wrote, are the replayed session's."""
    recording = load_session(samples_dir / "auth-login-bug.jsonl")
    with pytest.warns(Warning):
        result = replay(recording, CompactionSettings(reserve_tokens=2000, keep_recent_tokens=3000),
                        context_window=11000)
    s = result.summary()
    assert s["refused_requests"] and s["left_out_entries"]  # the case that made the counts go wrong
    text = write_drift_report(result, tmp_path / "drift.html").read_text(encoding="utf-8")
    header = re.search(r"entries: ([\d,]+) of the recording's ([\d,]+) \(([\d,]+) of failed runs left out; "
                       r"([\d,]+) recorded compactions and labels dropped\) and ([\d,]+) written by the replay "
                       r"\(([\d,]+) compactions, ([\d,]+) refused requests, ([\d,]+) context edits\); "
                       r"([\d,]+) compactions on the active path", html.unescape(text))
    assert header, text[:2000]
    kept, recorded, left_out, dropped, written, compactions, refused, edits, on_path = (
        int(g.replace(",", "")) for g in header.groups())
    recorded_ids = {e["id"] for e in recording.get_branch()}
    entries = result.session.entries
    assert kept == sum(e["id"] in recorded_ids for e in entries)
    assert recorded == len(recording.get_branch()) == s["entries"]
    assert left_out == s["left_out_entries"]
    assert dropped == sum(e["type"] in ("compaction", "label") and e["id"] not in {x["id"] for x in entries}
                          for e in recording.get_branch())
    assert compactions == on_path == s["compactions"] == sum(e["type"] == "compaction" for e in entries)
    assert refused == s["refused_requests"] == sum(e["type"] == "message" and e["message"].get("stopReason") == "error"
                                                   and e["id"] not in recorded_ids for e in entries)
    assert edits == sum(e["type"] == "context_edit" for e in entries)
    assert written == compactions + refused + edits == len(entries) - kept


def test_drift_report_escapes_session_text(tmp_path):
    s = Session.new("/tmp/<b>", session_id="<script>x</script>", timestamp="2026-01-01T00:00:00.000Z")
    s.append_message({"role": "user", "content": "hello", "timestamp": 1}, timestamp="2026-01-01T00:00:01.000Z")
    text = write_drift_report(s, tmp_path / "d.html").read_text()
    assert "<script>" not in text and html.escape("<script>x</script>") in text
    assert "No compaction on the active path" in text


def test_drift_report_of_a_session_file(samples_dir, tmp_path):
    text = write_drift_report(samples_dir / "auth-login-bug.jsonl", tmp_path / "d.html").read_text()
    assert "3 compactions on the active path" in text
    assert "Estimate vs recorded usage" in text
    assert "closed-loop baseline" in text and "The replay is open-loop" not in text
    assert len(_images(text)) == 6  # drift curves, measures by source, recall curve, rework, tree, estimates
    rework = text.split("<h2>What the agent did after each compaction</h2>")[1].split("<h2>")[0]
    points = drift_report(load_session(samples_dir / "auth-login-bug.jsonl")).attrs["rework"]
    assert rework.count("<tr>") - 1 == len(points) > 3  # each compaction and its controls


def test_drift_report_sets_the_summaries_beside_the_baselines(samples_dir, tmp_path):
    text = write_drift_report(samples_dir / "auth-login-bug.jsonl", tmp_path / "d.html").read_text()
    section = text.split("<h2>Measures grounded in the recording</h2>")[1]
    for name in ("this session", "extractive", "empty template", "fact dump", "head truncation", "tail truncation"):
        assert f">{name}<" in section, name
    assert "Pipeline check: file lists" in section and "how it can be gamed" in section
    assert "needed_recall" in section and "pipeline_modified_recall" in section
    few = write_drift_report(samples_dir / "auth-login-bug.jsonl", tmp_path / "e.html", compare_max=1).read_text()
    assert "the comparison with other summary sources is left out" in few
    assert len(_images(few)) == 4  # drift curves, rework, tree, estimates


def test_drift_report_leaves_the_target_alone_on_failure(tmp_path):
    target = tmp_path / "d.html"
    target.write_text("old")
    with pytest.raises(Exception):
        write_drift_report(tmp_path / "missing.jsonl", target)
    assert target.read_text() == "old"


STUDY_SOURCES = ("calibrated", "chars")


@pytest.fixture(scope="module")
def study(sample_paths, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("study")
    summary = run_study(sample_paths, out, reserve=[2048, 4096], keep=[2000, 6000], window=[30000, 3000],
                        workers=2, progress=False, token_sources=STUDY_SOURCES)
    return out, summary


@pytest.mark.slow
def test_study_writes_every_part(study, sample_paths):
    out, summary = study
    df = pd.read_csv(out / "sweep.csv")
    # reserve 2048/4096 × keep 2000/6000 × window 30000/3000, under two token sources: window 3000
    # leaves no room (reserve 4096 ≥ window) or is degenerate (keep ≥ 3000 − 2048); at 30000 what
    # leaves each session room for its largest step and compacts it
    from pimem.viz.report import session_size, study_grid

    grids = {str(p): study_grid(session_size(p), [2048, 4096], [2000, 6000], [30000, 3000]) for p in sample_paths}
    assert len(df) == sum(len(g) for g, _ in grids.values()) * 2
    for p, (g, left_out) in grids.items():
        assert len(g) + left_out == 8
        assert len(df[df["session"] == p]) == len(g) * 2
    assert set(df["context_window"]) == {30000}
    assert set(df["token_source"]) == set(STUDY_SOURCES)
    left = [lo for _, lo in grids.values()]
    said = f"{left[0]} per session" if len(set(left)) == 1 else f"{sum(left)} in all"
    assert f"(settings without room or degenerate left out: {said})" in summary
    assert df["error"].isna().all()
    table = pd.read_csv(out / "summary.csv")
    assert len(table) == 4 and (table["n_sessions"] == df["session"].nunique()).all()
    assert (table["compactions_band_low"] <= table["compactions"]).all()
    assert (table["compactions"] <= table["compactions_band_high"]).all()
    assert (df.loc[df["context_window"] == 30000, "compactions"] > 0).any()
    assert (out / "heatmap-w30000.png").read_bytes().startswith(PNG)
    studied = [p for p in sample_paths if grids[str(p)][0]]
    assert len(studied) >= 2
    for p in studied:
        report = (out / "reports" / f"{p.stem}.html").read_text()
        assert report.startswith("<!DOCTYPE html>")
        replayed = load_session(out / "replays" / f"{p.stem}.jsonl")
        assert len(replayed.entries) >= len(load_session(p).get_branch()) - 10
    index = (out / "index.html").read_text()
    for link in ["sweep.csv", "heatmap-w30000.png"] + [f"reports/{p.stem}.html" for p in studied]:
        assert f"'{link}'" in index
        assert (out / link).exists()
    assert (out / "cache.sqlite").exists()
    assert f"{len(df)} runs (0 with errors)" in summary
    # every count of the index is the sweep's: runs, refused requests, failed turns
    assert f"({len(df)} runs, " in index
    refused_note = (f"Requests larger than the window, refused by the provider: {int(df['refused_requests'].sum()):,} "
                    f"in {int((df['refused_requests'] > 0).sum()):,} of {len(df):,} runs; failed turns: "
                    f"{int(df['failed_turns'].sum()):,}; runs above their window not reported as refused: 0.")
    assert refused_note in html.unescape(index)
    # a session without a setting that fits says why
    for p in sample_paths:
        if not grids[str(p)][0]:
            assert "no setting of the grid fits this session" in html.unescape(index)
    assert str(out / "index.html") in summary


@pytest.mark.slow
def test_study_rerun_resumes_from_its_results(study, sample_paths):
    out, _ = study
    before = pd.read_csv(out / "sweep.csv")
    summary = run_study(sample_paths, out, reserve=[2048, 4096], keep=[2000, 6000], window=[30000, 3000],
                        workers=1, progress=False, token_sources=STUDY_SOURCES)
    after = pd.read_csv(out / "sweep.csv")
    assert after["resumed"].all()
    pd.testing.assert_series_equal(before["compactions"], after["compactions"])
    assert "0 with errors" in summary


def test_study_rejects_bad_arguments(sample_paths, tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        run_study([tmp_path / "nope.jsonl"], tmp_path / "o", progress=False)
    with pytest.raises(ValueError, match="reserve"):
        run_study(sample_paths, tmp_path / "o", reserve=[-1], progress=False)
    with pytest.raises(ValueError, match="no setting"):
        run_study(sample_paths, tmp_path / "o", reserve=[5000], window=[4000], progress=False)
    with pytest.raises(ValueError, match="no session"):
        run_study([], tmp_path / "o", progress=False)


def test_study_names_stay_distinct_when_a_stem_looks_like_a_renamed_one():
    from pimem.viz.report import _unique_names

    names = _unique_names([Path("a/s.jsonl"), Path("b/s.jsonl"), Path("c/s-2.jsonl")])
    assert len(set(names)) == 3
    assert names[0] == "s" and names[2] == "s-2"


def test_study_index_links_survive_unusual_file_names():
    from pimem.viz.report import _index_html

    row = {"name": "fix #1 50%", "size": 10, "reserve": 1, "keep": 1, "window": 5, "compactions": 1,
           "peak_context_tokens": 2.0, "orphan_reference_rate": 0.5, "warnings": None,
           "report": "reports/fix #1 50%.html", "replay": "replays/fix #1 50%.jsonl"}
    page = _index_html(pd.DataFrame(), [row], [], "grid", "", 0.1, summary=pd.DataFrame(), by=[],
                       sources=["calibrated"], reference="calibrated")
    assert "href='reports/fix%20%231%2050%25.html'" in page
    assert "href='replays/fix%20%231%2050%25.jsonl'" in page
    assert ">fix #1 50%<" in page  # the visible name stays as it is


# --------------------------------------------------------------------------- tables that scale


def _section(text: str, heading: str) -> str:
    return text.split(f"<h2>{heading}")[1].split("<h2>")[0]


def _cells(fragment: str, numeric: bool = False) -> list[str]:
    pattern = r"<td class=''>(.*?)</td>" if numeric else r"<td[^>]*>(.*?)</td>"
    return [html.unescape(c) for c in re.findall(pattern, fragment, re.S)]


@pytest.fixture(scope="module")
def big_html(tmp_path_factory) -> str:
    """The drift report of 500 compactions (built as data) for a small session."""
    from tests.support.big_inputs import big_report

    session = Session.new("/tmp/p", session_id="big", timestamp="2026-01-01T00:00:00.000Z")
    session.append_message({"role": "user", "content": "hello", "timestamp": 1}, timestamp="2026-01-01T00:00:01.000Z")
    out = write_drift_report(session, tmp_path_factory.mktemp("big") / "big.html", report=big_report())
    return out.read_text(encoding="utf-8")


def test_every_table_scrolls_inside_a_wrapper(big_html, study) -> None:
    out, _ = study
    for text in (big_html, (out / "index.html").read_text(), next((out / "reports").glob("*.html")).read_text()):
        tables = text.count("<table")
        assert tables > 0 and text.count("<div class='table-wrap") == tables
        assert "overflow-x:auto" in text and "max-width:100%" in text


def test_headline_of_500_compactions_is_a_few_numbers_per_measure(big_html) -> None:
    from pimem.drift import headline
    from tests.support.big_inputs import big_report

    head = headline(big_report())
    section = _section(big_html, "Headline")
    rows = re.findall(r"<tr>(.*?)</tr>", section, re.S)
    assert len(rows) - 1 == len(head)  # one row per measure (and the header), lists included
    assert "mean over 500 compactions" in section
    assert max(len(c) for c in _cells(section)) < 60
    recall = pd.Series(head["fact_recall"])
    row = next(r for r in rows if "fact_recall (mean" in r)
    assert _cells(row)[1:] == [f"{v:.3g}" for v in (recall.mean(), recall.min(), recall.median(), recall.max())]


def test_report_numbers_are_formatted(big_html, samples_dir, tmp_path) -> None:
    settings = CompactionSettings(reserve_tokens=4000, keep_recent_tokens=4000)
    result = replay(samples_dir / "auth-login-bug.jsonl", settings, context_window=16000)
    small = write_drift_report(result, tmp_path / "d.html").read_text(encoding="utf-8")
    for text in (small, big_html):
        cells = _cells(text)
        assert cells and not [c for c in cells if re.search(r"\d\.0*[1-9]\d{3,}", c)]  # ≤ 3 significant decimals
        numbers = _cells(text, numeric=True)
        assert numbers and not [c for c in numbers if re.fullmatch(r"\d{5,}(\.\d+)?", c)]  # thousands separated
    replay_cells = _cells(_section(small, "Replay"))
    assert "calibrated" in replay_cells and any(re.fullmatch(r"\d{1,3}(,\d{3})+", c) for c in replay_cells)


def test_lost_facts_keep_their_original_case(big_html) -> None:
    section = _section(big_html, "Facts lost")
    facts = _cells(section)
    assert any(re.fullmatch(r"CamelCaseName\d+", c) for c in facts)
    assert not any(re.fullmatch(r"camelcasename\d+", c) for c in facts)
    assert "<div class='table-wrap tall'>" in section and "more rows" in section


def test_per_compaction_table_shows_every_compaction_in_a_scrolling_box(big_html) -> None:
    section = _section(big_html, "Per compaction")
    assert section.count("<tr>") - 1 == 500 and "<div class='table-wrap tall'>" in section
    assert "compression_<wbr>ratio_<wbr>with_<wbr>prev" in section  # long headers may wrap


def test_reports_fit_the_browser_width(big_html, study, tmp_path) -> None:
    from tests.support.browser import chromium, overflow

    if chromium() is None:
        pytest.skip("no Chromium installed")
    out, _ = study
    big = tmp_path / "big.html"
    big.write_text(big_html, encoding="utf-8")
    pages = [out / "index.html", next((out / "reports").glob("*.html")), big]
    rows = overflow(pages, widths=(1400, 800))
    assert len(rows) == 6
    for row in rows:
        assert row["scroll"] <= row["inner"] and row["over"] == [], row


def _one_failed_test_session(error: str, progress: str, header: dict | None = None) -> Session:
    """A bash call failing with ``error``, then two compactions: the first summary's Progress holds
    ``progress``, the second drops it (so the report lists what was lost)."""
    ts = "2026-01-01T00:00:00.000Z"

    def msg(eid, parent, message):
        return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": message}

    entries = [
        msg("u1", None, {"role": "user", "content": "run the tests, then call loadConfig(path)", "timestamp": 1}),
        msg("a1", "u1", {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash",
                                                            "arguments": {"command": "npm test"}}],
                         "stopReason": "toolUse", "timestamp": 2}),
        msg("t1", "a1", {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "isError": True,
                         "content": [{"type": "text", "text": error}], "timestamp": 3}),
        msg("a2", "t1", {"role": "assistant", "content": [{"type": "text", "text": "looking"}], "timestamp": 4}),
        {"type": "compaction", "id": "k1", "parentId": "a2", "timestamp": ts, "firstKeptEntryId": "a2",
         "tokensBefore": 100, "summary": f"## Goal\nFix the tests\n\n## Progress\n{progress}\n"},
        msg("u2", "k1", {"role": "user", "content": "go on", "timestamp": 5}),
        msg("a3", "u2", {"role": "assistant", "content": [{"type": "text", "text": "done"}], "timestamp": 6}),
        {"type": "compaction", "id": "k2", "parentId": "a3", "timestamp": ts, "firstKeptEntryId": "a3",
         "tokensBefore": 100, "summary": "## Goal\nFix the tests\n"},
    ]
    header = header or {"type": "session", "version": 3, "id": "s", "timestamp": ts, "cwd": "/p"}
    return Session(header, entries)


def test_lost_facts_are_shown_as_written(tmp_path) -> None:
    error = "Error: Cannot find module 'FooBar' from src/Main.ts"
    session = _one_failed_test_session(error, f"{error}\nCall loadConfig next")
    text = write_drift_report(session, tmp_path / "d.html").read_text(encoding="utf-8")
    lost = _cells(_section(text, "Facts lost"))
    assert error in lost  # as written, not lower-cased
    assert error.lower() not in lost
    assert "loadConfig" in lost and "loadConfig(" not in lost  # identifiers as normalized, case kept


def test_study_grids_are_derived_from_each_session(samples_dir):
    """Left out, the grid follows the session: windows hold the request overhead plus a fifth and two
    fifths of the conversation; reserve and keep are shares of the room left for it."""
    from pimem.viz.report import (DEFAULT_KEEP_SHARES, DEFAULT_RESERVE_SHARES, DEFAULT_WINDOW_SHARES, SessionSize,
                                  session_size, study_grid)

    size = session_size(samples_dir / "logslice-since-flag.jsonl")
    assert size.estimate > 50000 and size.overhead > 0 and size.slope > 0.5 and size.largest_step > 1000
    grid, left_out = study_grid(size)
    assert len(grid) + left_out == 18 and len(grid) >= 12
    windows = sorted({g["context_window"] for g in grid})
    assert len(windows) == len(DEFAULT_WINDOW_SHARES)
    least = size.room_needed(0, 0) / (1 - 0.8 * max(DEFAULT_RESERVE_SHARES) - max(DEFAULT_KEEP_SHARES))
    for w, share in zip(windows, DEFAULT_WINDOW_SHARES):
        room = max(share * size.slope * size.estimate, least * share / min(DEFAULT_WINDOW_SHARES))
        assert w == pytest.approx(size.overhead + room, rel=0.05)
    runs = set()
    for g in grid:
        room = g["context_window"] - size.overhead
        assert g["reserve_tokens"] == pytest.approx(g["reserve_share"] * room, rel=0.05)
        assert g["keep_recent_tokens"] < g["context_window"] - g["reserve_tokens"]
        # no cell is degenerate: the summary, the kept tail and two largest steps fit; the session
        # reaches the threshold; and no two cells are the same setting
        assert room >= 0.8 * g["reserve_tokens"] + g["keep_recent_tokens"] + 2 * size.largest_step
        assert g["context_window"] - g["reserve_tokens"] < size.reach
        runs.add((g["reserve_tokens"], g["keep_recent_tokens"], g["context_window"]))
    assert len(runs) == len(grid)
    # a session whose largest step is most of it has no such setting, and the study says why
    small = session_size(samples_dir / "ventas-pipeline-refactor.jsonl")
    assert small.largest_step > 0.3 * (small.reach - small.overhead)
    assert study_grid(small) == ([], 18)
    # values given are used as they are; settings without room are left out and counted
    grid, left_out = study_grid(SessionSize(10000), reserve=[1000, 9000], window=[8000])
    assert {g["reserve_tokens"] for g in grid} == {1000} and left_out == 3
    assert all(g["window_share"] != g["window_share"] for g in grid)  # NaN: not a share


@pytest.mark.slow
def test_a_default_study_measures_something_in_every_report(samples_dir, tmp_path):
    """A session of 60k estimated tokens: with the derived grid its drift report has compactions,
    states the open-loop assumption and shows the orphan-reference rate; no run fails a turn. A
    session of 2k whose largest step is most of it has no setting, and the index says why."""
    paths = [samples_dir / "logslice-since-flag.jsonl"]
    tiny = samples_dir / "gpxkit-antimeridian.jsonl"
    out = tmp_path / "study"
    summary = run_study(paths + [tiny], out, workers=1, progress=False, token_sources=STUDY_SOURCES)
    df = pd.read_csv(out / "sweep.csv")
    assert df["error"].isna().all()
    assert set(df["window_share"]) == {0.2, 0.4}
    assert set(df["session"]) == {str(p) for p in paths}
    assert (df.groupby("session")["context_window"].nunique() == 2).all()
    assert (df["failed_turns"] == 0).all() and (df["compactions"] > 0).all()
    assert (df["peak_context_tokens"] <= df["context_window"]).all()
    assert (out / "heatmap-w20pct.png").read_bytes().startswith(PNG)
    assert "no setting of the grid fits this session" in html.unescape((out / "index.html").read_text())
    for p in paths:
        report = (out / "reports" / f"{p.stem}.html").read_text()
        assert "No compaction on the active path" not in report
        assert "The replay is open-loop" in report and "Orphan references" in report
    index = (out / "index.html").read_text()
    assert "The replay is open-loop" in index and "orphan-reference rate" in index
    assert "paired bootstrap" in index and "band across the token sources" in index
    assert " 0 compactions" not in summary


@pytest.mark.slow
def test_every_study_report_links_back_to_the_index(study, sample_paths):
    out, _ = study
    for p in sample_paths:
        if not (out / "reports" / f"{p.stem}.html").exists():  # no setting of the grid fits it: the index says why
            assert p.stem in (out / "index.html").read_text(encoding="utf-8")
            continue
        report = (out / "reports" / f"{p.stem}.html").read_text(encoding="utf-8")
        links = re.findall(r"<a href='([^']*)'>&larr; back to the study index</a>", report)
        assert links == ["../index.html", "../index.html"]  # at the top and the bottom
        assert (out / "reports" / links[0]).resolve() == (out / "index.html").resolve()


@pytest.mark.slow
def test_study_heatmaps_are_two_panels_wide_to_stay_readable_at_800_px(study):
    import matplotlib.image as mpimg

    out, _ = study
    height, width = mpimg.imread(out / "heatmap-w30000.png").shape[:2]
    # four panels in 2 × 2 at 100 dpi: about 860 px wide, so an 800 px page shows them at ≥ 85% scale
    # (in one row of four they were 1,720 px wide and shown at 45%)
    assert width <= 900 and height >= 0.7 * width, (width, height)


def test_report_and_index_escape_markup_in_session_names_and_summaries(tmp_path) -> None:
    """Text from a session (its id, a summary's words) and a session's name go through the
    templates' autoescaping: ``<script>`` and ``&`` arrive as text, never as markup."""
    from pimem.viz.report import _index_html

    error = "Error: <script>alert('x')</script> & rm -rf failed"
    header = {"type": "session", "version": 3, "id": "<script>s</script>&1", "timestamp": "2026-01-01T00:00:00.000Z",
              "cwd": "/p&<q>"}
    text = write_drift_report(_one_failed_test_session(error, error, header), tmp_path / "d.html",
                              title="<script>t</script> & co").read_text(encoding="utf-8")
    assert "<script" not in text
    assert "<title>&lt;script&gt;t&lt;/script&gt; &amp; co</title>" in text
    assert "<code>&lt;script&gt;s&lt;/script&gt;&amp;1</code>" in text
    assert error in _cells(_section(text, "Facts lost"))  # the summary's words, as text
    assert html.escape(error, quote=False).split("'")[0] in text

    name = "<script>n</script> & co"
    row = {"name": name, "size": 10, "reserve": 1, "keep": 1, "window": 5, "compactions": 1,
           "peak_context_tokens": 2.0, "orphan_reference_rate": 0.5, "warnings": "w & <u>",
           "report": f"reports/{name}.html", "replay": f"replays/{name}.jsonl"}
    page = _index_html(pd.DataFrame(), [row, {"name": name, "error": "E: <i>&"}], [], "grid & <g>", "", 0.1,
                       summary=pd.DataFrame(), by=[], sources=["calibrated"], reference="calibrated")
    assert "<script" not in page and "<i>" not in page and "<u>" not in page
    assert "w &amp; &lt;u&gt;" in page
    assert page.count(">&lt;script&gt;n&lt;/script&gt; &amp; co<") == 2  # both rows show the name as text
    assert "href='reports/%3Cscript%3En%3C/script%3E%20%26%20co.html'" in page
    assert "failed: E: &lt;i&gt;&amp;" in page and "grid &amp; &lt;g&gt;" in page

"""Imported sessions in use: discovery and corpus loading find the other agents' folders, a
corpus deduplicates checkpoint copies, ``pimem import`` writes Pi files, replays, sweeps,
measures and ``pimem study`` run on imports; and, on the shared real data, every recorded
compaction arrives exactly as the index lists it."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from pimem.core.session_manager import load_session as load_pi_session
from pimem.sessions.discover import default_session_files, discover_sessions, load_sessions
from pimem.sessions.load import load_session
from tests.conftest import SHARED_DIR

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "imports"
CLAUDE = FIXTURES / "claude-code-demo.jsonl"
CODEX = FIXTURES / "codex-demo.jsonl"
DATASETS = SHARED_DIR / "datasets"
INDEX = DATASETS / "real-sessions-index.json"


def _agent_home(tmp_path: Path) -> dict[str, str]:
    """A Pi, Claude Code and Codex home laid out as the agents lay them out."""
    project = tmp_path / "claude" / "projects" / "-work-demo"
    (project / "sub" / "subagents").mkdir(parents=True)
    shutil.copy(CLAUDE, project / "11111111-2222-4333-8444-555555555555.jsonl")
    shutil.copy(CLAUDE, project / "sub" / "subagents" / "agent-1.jsonl")  # not a session of its own
    day = tmp_path / "codex" / "sessions" / "2026" / "02" / "03"
    day.mkdir(parents=True)
    shutil.copy(CODEX, day / "rollout-2026-02-03T09-00-00-0199aaaa.jsonl")
    (day / "notes.jsonl").write_text("{}\n")  # not a rollout name
    pi = tmp_path / "pi" / "sessions" / "--work-demo--"
    pi.mkdir(parents=True)
    from pimem.sessions.samples import sample_dir

    sample = sorted(sample_dir().glob("*.jsonl"))[0]
    shutil.copy(sample, pi / sample.name)
    return {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex"),
            "PI_CODING_AGENT_DIR": str(tmp_path / "pi")}


def test_default_files_are_where_each_agent_keeps_them(tmp_path: Path) -> None:
    env = _agent_home(tmp_path)
    files = default_session_files(env)
    names = [p.name for p in files]
    assert len(files) == 3
    assert "11111111-2222-4333-8444-555555555555.jsonl" in names
    assert "rollout-2026-02-03T09-00-00-0199aaaa.jsonl" in names
    assert "agent-1.jsonl" not in names and "notes.jsonl" not in names
    assert default_session_files({"CLAUDE_CONFIG_DIR": str(tmp_path / "none"), "CODEX_HOME": str(tmp_path / "none"),
                                  "PI_CODING_AGENT_DIR": str(tmp_path / "none")}) == []


def test_discovery_lists_other_agents_with_their_format(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(CLAUDE, folder / "cc.jsonl")
    with open(CODEX, "rb") as src, gzip.open(folder / "rollout.jsonl.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    (folder / "broken.jsonl").write_text("not json\n")
    df = discover_sessions(folder)
    by_name = {Path(p).name: row for p, row in zip(df["path"], df.to_dict("records"))}
    cc = by_name["cc.jsonl"]
    assert cc["source_format"] == "claude-code" and cc["session_id"] == "11111111-2222-4333-8444-555555555555"
    assert cc["name"] == "Fix the flaky parser test" and cc["entry_count"] == 17 and cc["message_count"] == 15
    assert cc["first_user_message"] == "The parser test fails one run in ten. Find out why."
    assert by_name["rollout.jsonl.gz"]["source_format"] == "codex"
    assert by_name["rollout.jsonl.gz"]["cwd"] == "/work/demo"
    assert isinstance(by_name["broken.jsonl"]["error"], str)


def test_corpus_loads_imports_and_keeps_each_compaction_once(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    lines = CLAUDE.read_text().splitlines(keepends=True)
    (folder / "a-early.jsonl").write_text("".join(lines[:17]))  # a checkpoint taken just after the compaction
    shutil.copy(CLAUDE, folder / "b-full.jsonl")
    shutil.copy(CODEX, folder / "c-codex.jsonl")
    corpus = load_sessions(folder, progress=False)
    assert len(corpus) == 3 and corpus.errors.empty
    every = corpus.compactions_df(dedupe=False)
    assert len(every) == 4  # the same Claude Code compaction twice, and Codex's two
    once = corpus.compactions_df()
    assert len(once) == 3
    cc = once[once["id"] == "c-0001"]
    assert len(cc) == 1 and Path(str(cc["path"].iloc[0])).name == "b-full.jsonl"  # the longer copy
    assert set(corpus.messages_df()["source_format"]) == {"claude-code", "codex"}
    assert list(corpus.entries_df().columns[:3]) == ["session_id", "path", "source_format"]


def test_replay_and_sweep_run_on_an_imported_session(tmp_path: Path) -> None:
    from pimem.experiments.sweep import sweep
    from pimem.replays.engine import replay

    from pimem.core.compaction.compaction import CompactionSettings

    # just above the 1,171 calibrated tokens every request carries and the file Claude Code attaches
    # after a compaction: compactions, and no turn fails (at 1,300 the attached file makes two fail)
    settings = CompactionSettings(reserve_tokens=100, keep_recent_tokens=50)
    result = replay(CLAUDE, settings, context_window=1330, seed=3)  # a path: recognised and imported
    made = [e for e in result.session.entries if e.get("type") == "compaction"]
    assert made and all(e["summary"] for e in made)
    assert result.summary()["failed_turns"] == 0
    written = result.session.write(tmp_path / "replayed.jsonl")
    assert not load_pi_session(written).warnings
    grid = {"context_window": [1200, 4000], "reserve_tokens": [200], "keep_recent_tokens": [100]}
    runs = sweep([CLAUDE, CODEX], grid, progress=False, workers=1, measures=False)
    assert len(runs) == 4 and not runs["error"].notna().any()


def test_recorded_claude_code_summaries_are_a_source_of_measures() -> None:
    from pimem.drift.measures import compare_sources
    from pimem.summarizers.baselines import baseline_summarizers
    from pimem.summarizers.extractive import ExtractiveSummarizer

    session = load_session(CLAUDE)
    # the demo's model wrote two short lines (Claude Code's own lines around them are not the model's), too
    # few tokens for Pi's template at a matched length: the summarizers get Pi's own budget
    comparison = compare_sources(session, {"claude-code": "recorded", "extractive": ExtractiveSummarizer(),
                                           **baseline_summarizers()}, max_tokens=None)
    rows = comparison.per_compaction.set_index("source")
    assert comparison.summaries["claude-code"][0].startswith("This session is being continued")
    assert rows["error"].isna().all(), rows["error"].dropna().to_dict()
    assert "firstKeptEntryId" not in " ".join(comparison.notes)  # nothing kept is not a missing entry
    assert set(rows.index) == {"claude-code", "extractive", "empty template", "fact dump", "head truncation",
                               "tail truncation"}
    # Claude Code's summary does not follow Pi's section template; Pi's summarizers do
    assert rows.loc["claude-code", "conformance"] == 0 and rows.loc["extractive", "conformance"] == 1


def test_pimem_import_writes_pi_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pimem.cli.main import main

    src = tmp_path / "src"
    (src / "deep").mkdir(parents=True)
    shutil.copy(CLAUDE, src / "deep" / "cc.jsonl")
    with open(CODEX, "rb") as f, gzip.open(src / "rollout.jsonl.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    out = tmp_path / "out"
    assert main(["import", str(src), "-o", str(out), "--table", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["format"] for r in rows} == {"claude-code", "codex"}
    assert {Path(r["output"]).relative_to(out).as_posix() for r in rows} == {"deep/cc.jsonl", "rollout.jsonl"}
    cc = next(r for r in rows if r["format"] == "claude-code")
    assert (cc["records"], cc["skipped"], cc["compactions"]) == (23, 5, 1)
    back = load_pi_session(out / "deep" / "cc.jsonl")
    assert back.name == "Fix the flaky parser test" and not back.warnings
    assert load_session(out / "deep" / "cc.jsonl").source_format == "pi"  # now a Pi file


@pytest.mark.slow
def test_pimem_study_runs_on_a_folder_of_claude_code_sessions(tmp_path: Path) -> None:
    from pimem.cli.main import main

    src = tmp_path / "claude"
    src.mkdir()
    shutil.copy(CLAUDE, src / "cc.jsonl")
    out = tmp_path / "study"
    # The demo transcript is tiny next to its ~1,200-token per-request overhead, so the default grid
    # (windows a few percent above that overhead) leaves no room for a summary and every compaction
    # fails (the study then exits 1). An explicit setting with room compacts it several times.
    assert main(["study", str(src), "-o", str(out), "-q", "--workers", "1", "--token-source", "calibrated",
                 "--window", "3000", "--reserve", "1800", "--keep", "20"]) == 0
    assert (out / "index.html").stat().st_size > 0 and (out / "sweep.csv").stat().st_size > 0
    assert (out / "reports" / "cc.html").exists()


# --------------------------------------------------------------------------- the shared real data


@pytest.fixture(scope="module")
def index() -> dict:
    if not INDEX.exists():
        pytest.skip("shared real sessions not present")
    return json.loads(INDEX.read_text())


@pytest.mark.slow
def test_every_real_claude_code_compaction_arrives_as_indexed(index: dict) -> None:
    listed = [c for c in index["compactions"] if c["source"].startswith("claude-code/")]
    assert len(listed) == 86
    by_file: dict[str, list[dict]] = {}
    for c in listed:
        by_file.setdefault(c["stored"], []).append(c)
    for stored, events in by_file.items():
        session = load_session(DATASETS / stored)
        for c in events:
            entry = session.get_entry(c["boundary_uuid"])
            assert entry is not None and entry["type"] == "compaction", (stored, c["boundary_uuid"])
            assert entry["tokensBefore"] == c["preTokens"] and entry["details"]["trigger"] == c["trigger"]
            assert entry["source"]["summaryUuid"] == c["summary_uuid"]
            assert len(entry["summary"]) == c["summary_chars"]


@pytest.mark.slow
def test_the_real_corpus_holds_86_distinct_claude_code_compactions(index: dict) -> None:
    corpus = load_sessions(DATASETS / "claude-code", progress=False, workers=1)
    assert len(corpus) == 79 and corpus.errors.empty  # 76 checkpoint files + 3 controls
    assert len({s.id for s in corpus}) == 66  # 63 sessions + 3 controls
    every = corpus.compactions_df(dedupe=False)
    once = corpus.compactions_df()
    assert len(every) == 92 and len(once) == 86
    assert set(once["source_format"]) == {"claude-code"}
    names = [s.name for s in corpus if s.name]
    assert names  # title lines named sessions; none became a compaction
    assert all(not e["summary"].startswith(tuple(names)) for s in corpus for e in s.entries
               if e.get("type") == "compaction")


@pytest.mark.slow
def test_real_codex_remote_compactions_are_summary_less_and_warned(index: dict) -> None:
    listed = [c for c in index["compactions"] if c["source"].startswith("codex/")]
    for c in listed:
        session = load_session(DATASETS / c["stored"])
        entry = next(e for e in session.entries if e.get("type") == "compaction" and e["source"]["line"] == c["line"])
        assert entry["summary"] == "" and entry["details"]["remote"] is True
        kept = [e for e in session.entries if e.get("parentId") == entry["id"] or
                e.get("source", {}).get("line") == c["line"] and e is not entry]
        assert len(kept) == c["replacement_history_items"] - c["replacement_item_types"].get("compaction", 0)
        assert any(w.line == c["line"] and "no summary text exists" in w.reason for w in session.warnings)


@pytest.mark.slow
def test_pimem_study_runs_on_a_real_claude_code_session(index: dict, tmp_path: Path) -> None:
    from pimem.cli.main import main

    smallest = min((DATASETS / f["stored"] for f in index["files"] if f["source"] == "claude-code/entireio-cli"
                    and f["compactions"]), key=lambda p: p.stat().st_size)
    src = tmp_path / "claude"
    src.mkdir()
    shutil.copy(smallest, src / smallest.name)
    out = tmp_path / "study"
    assert main(["study", str(src), "-o", str(out), "-q", "--workers", "1", "--token-source", "calibrated"]) == 0
    runs = __import__("pandas").read_csv(out / "sweep.csv")
    assert len(runs) > 0 and runs["error"].isna().all()

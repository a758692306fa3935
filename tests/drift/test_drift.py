"""Drift measurements on hand-built chains with known answers, and on the real session."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import pandas as pd
import pytest

import pimem
from pimem.drift import (
    Fact,
    TfidfSpace,
    compaction_metrics,
    compaction_spans,
    drift_report,
    extract_facts,
    fact_present,
    headline,
    jaccard,
    lost_facts,
    parse_summary,
    retention_by_age,
    section_similarity,
    survival_curves,
)
from pimem.text.sections import BRANCH_SUMMARY_PREAMBLE, SPLIT_TURN_SEPARATOR
from tests.support import messages

TEMPLATE = """## Goal
Fix the flaky parser in `src/parser.py`.

## Constraints & Preferences
- Never touch the public API

## Progress
### Done
- [x] Reproduced the failure

### In Progress
- [ ] Rewriting `parse_header()`

### Blocked
- (none)

## Key Decisions
- **Use a state machine**: simpler than regex

## Next Steps
1. Run `pytest -q`

## Critical Context
- Error: unexpected EOF at line 12"""


# --------------------------------------------------------------------------- sections


def test_conformant_template_with_blocks_and_split_turn() -> None:
    text = (
        TEMPLATE
        + SPLIT_TURN_SEPARATOR
        + "## Original Request\nAdd retries\n\n## Progress So Far\n- read the client\n\n## Context Needed to Continue\n- none"
        + "\n\n<read-files>\nsrc/a.py\nsrc/b.py\n</read-files>\n\n<modified-files>\nsrc/parser.py\n</modified-files>"
    )
    s = parse_summary(text)
    c = s.conformance
    assert s.kind == "compaction"
    assert c.missing == [] and c.extra == [] and c.renamed == [] and not c.reordered and c.empty == []
    assert c.is_conformant and c.score == 1.0
    assert c.none_sections == ["blocked"]
    assert s.read_files == ["src/a.py", "src/b.py"] and s.modified_files == ["src/parser.py"]
    assert s.turn_context is not None and set(s.turn_sections) == {"original_request", "progress_so_far", "context_needed"}
    assert "Rewriting" in s.get("progress") and "Rewriting" in s.get("in_progress")
    assert "<read-files>" not in s.body and "Turn Context" not in s.body


def test_renamed_missing_reordered_empty_sections() -> None:
    text = TEMPLATE.replace("## Key Decisions", "## Key Decisions Made").replace(
        "## Critical Context\n- Error: unexpected EOF at line 12", "## Critical Context\n- [Any data, examples]"
    )
    text = text.replace("## Goal\nFix the flaky parser in `src/parser.py`.\n\n", "")
    text += "\n\n## Goal\nFix the flaky parser.\n\n## Branch Notes\nmain"
    c = parse_summary(text).conformance
    assert ("Key Decisions Made", "key_decisions") in c.renamed
    assert c.missing == []
    assert c.reordered and c.order_inversions == 1
    assert c.empty == ["critical_context"]
    assert c.extra == ["Branch Notes"]
    assert not c.is_conformant


def test_missing_section_and_crlf_and_bold_titles() -> None:
    crlf = parse_summary(TEMPLATE.replace("\n", "\r\n"))
    assert crlf.sections == parse_summary(TEMPLATE).sections
    bold = parse_summary("**Goal:**\nShip it\n\n**Next Steps**\n1. test\n\n**Notes**\nfoo")
    assert bold.sections["goal"] == "Ship it"
    assert "constraints" in bold.conformance.missing and bold.conformance.extra == ["Notes"]
    # a bold line inside a Markdown section is content, not a heading
    nested = parse_summary("## Goal\n**Important:** x\n\n## Next Steps\n1. y")
    assert nested.conformance.extra == [] and "Important" in nested.sections["goal"]


def test_branch_summary_preamble() -> None:
    body = TEMPLATE.split("\n\n## Critical Context")[0]
    s = parse_summary(BRANCH_SUMMARY_PREAMBLE + body)
    assert s.kind == "branch" and s.preamble
    assert s.conformance.is_conformant and "critical_context" not in s.conformance.expected


def test_parse_summary_rejects_non_text() -> None:
    with pytest.raises(TypeError, match="string"):
        parse_summary(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- facts


_user = functools.partial(messages.user, blocks=True)


def _assistant(text: str = "", calls: list[tuple[str, dict]] = ()) -> dict:
    blocks = [text] if text else []
    blocks += [messages.tool_call(f"c{i}", name, **args) for i, (name, args) in enumerate(calls)]
    return messages.assistant(*blocks, stopReason="stop")


def _result(text: str, is_error: bool = False, name: str = "bash") -> dict:
    return messages.tool_result(text, name=name, is_error=is_error)


def test_extract_facts_kinds_and_provenance() -> None:
    msgs = [
        ("u1", _user("Please never use global state. Look at @src/app/server.ts, it takes 250 ms.")),
        ("a1", _assistant("I'll use `RequestQueue.push()` instead of a lock.",
                          [("read", {"path": "./src/app/server.ts"}),
                           ("bash", {"command": "cd /repo && npm run build 2>&1 | tail -5; git status"})])),
        ("r1", _result("> build\nsrc/x.ts(3,1): error TS2304: Cannot find name 'foo'.", is_error=True)),
        ("r2", _result("all good\nError: disk quota exceeded\n")),
    ]
    facts = extract_facts(msgs)
    by_kind: dict[str, set[str]] = {}
    for f in facts:
        by_kind.setdefault(f.kind, set()).add(f.value)
    assert "src/app/server.ts" in by_kind["path"]
    assert by_kind["command"] == {"npm run build", "git status"}
    assert "RequestQueue.push" in by_kind["identifier"]
    assert "250 ms" in by_kind["number"]
    assert any("never use global state" in v for v in by_kind["constraint"])
    assert any("instead of a lock" in v for v in by_kind["decision"])
    assert any("ts2304" in v for v in by_kind["error"]) and "error: disk quota exceeded" in by_kind["error"]
    path_fact = next(f for f in facts if f.kind == "path")
    assert path_fact.entry_id == "u1" and path_fact.position == 0  # first occurrence wins
    assert len({f.key for f in facts}) == len(facts)
    with pytest.raises(ValueError, match="unknown fact kinds"):
        extract_facts(msgs, kinds=["colour"])
    with pytest.raises(TypeError, match="cannot read facts"):
        extract_facts([42])


def test_fact_presence_rules() -> None:
    summary = "Edited `packages/core/src/main.ts` and src/util/io.py; `runFast()` took 1.5s. Ran `npm test`."
    assert fact_present(Fact("path", "/home/u/repo/packages/core/src/main.ts", None, 0, 0, "assistant", "tool_call", ""), summary)
    assert fact_present(("path", "io.py"), summary)  # the summary is more specific
    assert not fact_present(("path", "/other/place/main.ts"), summary)  # basename alone is not enough
    assert fact_present(("identifier", "runFast"), summary)
    assert not fact_present(("identifier", "run"), summary)
    assert fact_present(("number", "1.5 s"), summary)
    assert not fact_present(("number", "1.5 ms"), summary)
    assert fact_present(("command", "npm test"), summary)
    assert fact_present(("constraint", "always run the tests before committing"),
                        "User wants: run tests before committing")
    assert not fact_present(("constraint", "always run the tests before committing"), "nothing relevant")


def test_similarity_measures() -> None:
    assert jaccard("alpha beta gamma", "gamma beta alpha") == 1.0
    assert jaccard("alpha beta", "delta epsilon") == 0.0
    space = TfidfSpace(["alpha beta gamma", "alpha delta", "epsilon"])
    assert space.cosine("alpha beta gamma", "alpha beta gamma") == pytest.approx(1.0)
    assert space.cosine("alpha beta", "epsilon") == 0.0
    assert 0 < space.cosine("alpha beta", "alpha delta") < 1


# --------------------------------------------------------------------------- hand-built chains


class _Chain:
    """Builds a linear v3 entry list with known ids."""

    def __init__(self) -> None:
        self.entries: list[dict] = []

    def _add(self, entry: dict) -> str:
        eid = f"e{len(self.entries):07d}"
        parent = self.entries[-1]["id"] if self.entries else None
        self.entries.append({"id": eid, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", **entry})
        return eid

    def msg(self, message: dict) -> str:
        return self._add({"type": "message", "message": message})

    def compaction(self, summary: str, first_kept: str, details: dict | None = None) -> str:
        e = {"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": 1000}
        if details is not None:
            e["details"] = details
        return self._add(e)


def _summary(goal: str, done: str, extra: str = "") -> str:
    return TEMPLATE.replace("Fix the flaky parser in `src/parser.py`.", goal).replace(
        "- [x] Reproduced the failure", done
    ) + extra


def build_chain() -> tuple[_Chain, dict[str, str]]:
    """Three compactions. Step 1 holds `compute_total()`; step 2 drops it; step 3 keeps the path."""
    c = _Chain()
    ids: dict[str, str] = {}
    ids["u1"] = c.msg(_user("Refactor billing. Never change `compute_total()` semantics."))
    c.msg(_assistant("Reading.", [("read", {"path": "src/billing/core.py"})]))
    c.msg(_result("def compute_total(): ...", name="read"))
    ids["keep1"] = c.msg(_user("Now add tests"))
    c.msg(_assistant("Writing tests.", [("write", {"path": "tests/test_billing.py", "content": "x"})]))
    c.msg(_result("ok", name="write"))
    ids["c1"] = c.compaction(
        _summary("Refactor billing in src/billing/core.py", "- [x] `compute_total()` read; never change its semantics",
                 "\n\n<read-files>\nsrc/billing/core.py\n</read-files>"),
        ids["keep1"],
        details={"readFiles": ["src/billing/core.py"], "modifiedFiles": []},
    )
    ids["keep2"] = c.msg(_user("Also run the linter with `ruff check`"))
    c.msg(_assistant("", [("bash", {"command": "ruff check src"})]))
    c.msg(_result("src/billing/core.py:3:1: F401 unused import", is_error=True))
    ids["c2"] = c.compaction(
        _summary("Refactor billing in src/billing/core.py", "- [x] tests in tests/test_billing.py",
                 "\n\n<read-files>\nsrc/billing/core.py\n</read-files>\n\n<modified-files>\ntests/test_billing.py\n</modified-files>"),
        ids["keep2"],
        details={"readFiles": ["src/billing/core.py"], "modifiedFiles": ["tests/test_billing.py"]},
    )
    ids["keep3"] = c.msg(_user("thanks, continue"))
    c.msg(_assistant("Continuing."))
    ids["c3"] = c.compaction(
        _summary("Refactor billing in src/billing/core.py", "- [x] ran `ruff check src`"),
        ids["keep3"],
    )
    c.msg(_user("done?"))
    return c, ids


def test_spans_follow_first_kept_entries() -> None:
    chain, ids = build_chain()
    spans = compaction_spans(chain.entries)
    assert [s.entry["id"] for s in spans] == [ids["c1"], ids["c2"], ids["c3"]]
    assert spans[0].entry_ids[0] == ids["u1"] and spans[0].entry_ids[-1] != ids["keep1"]
    assert len(spans[0].entry_ids) == 3
    # the second span starts at the first compaction's kept entry and skips the compaction itself
    assert spans[1].entry_ids[0] == ids["keep1"] and ids["c1"] not in spans[1].entry_ids
    assert spans[1].entry_ids[-1] != ids["keep2"] and len(spans[1].entry_ids) == 3
    # true files follow Pi: the previous compaction's details plus the span's tool calls
    assert spans[1].read_files == ["src/billing/core.py"] and spans[1].modified_files == ["tests/test_billing.py"]


def test_fact_removed_at_step_two_is_lost_at_step_two() -> None:
    chain, ids = build_chain()
    report = drift_report(chain.entries)
    assert list(report["compaction"]) == [0, 1, 2]
    assert list(report["entry_id"]) == [ids["c1"], ids["c2"], ids["c3"]]
    lost = lost_facts(report)
    row = lost[lost["key"] == "identifier:compute_total"]
    assert list(row["lost_at"]) == [1]  # the second compaction (0-based index 1)
    presence = report.attrs["presence"]
    ct = presence[presence["key"] == "identifier:compute_total"].sort_values("compaction")
    assert list(ct["present"]) == [True, False, False]
    assert report.loc[0, "prev_retention"] != report.loc[0, "prev_retention"]  # NaN for the first
    assert report.loc[1, "prev_retention"] < 1.0 and report.loc[1, "n_lost"] >= 1
    # the path is kept by every summary
    path_rows = presence[presence["key"] == "path:src/billing/core.py"]
    assert path_rows["present"].all()
    # span 3 holds the linter error (dropped) and the ruff command (kept by summary 3)
    assert report.loc[2, "recall_error"] == 0.0 and report.loc[2, "recall_command"] == 1.0
    assert math.isnan(report.loc[1, "recall_error"])  # no error in span 2
    ages = retention_by_age(report)
    assert list(ages["age"]) == [0, 1, 2]
    assert ages.loc[ages["age"] == 0, "retention"].iloc[0] == 1.0
    assert ages.loc[ages["age"] == 1, "retention"].iloc[0] < 1.0
    # the file blocks are scored against Pi's true lists
    assert report.loc[0, "pipeline_read_recall"] == 1.0 and report.loc[0, "pipeline_read_precision"] == 1.0
    assert report.loc[1, "pipeline_modified_recall"] == 1.0
    assert math.isnan(report.loc[2, "pipeline_read_precision"])  # no block in the third summary
    # identical goals: no goal drift from the first summary
    assert (report["goal_sim_first_jaccard"] == 1.0).all()
    assert (report["cumulative_loss"].diff().dropna() >= -1e-12).any()


def test_survival_and_sections_frames() -> None:
    chain, _ = build_chain()
    report = drift_report(chain.entries)
    surv = survival_curves(report)
    assert set(surv.columns) == {"kind", "age", "at_risk", "survived", "survival"}
    all_kinds = surv[surv["kind"] == "all"].sort_values("age")
    assert all_kinds["survival"].iloc[0] == 1.0
    assert (all_kinds["survival"].diff().dropna() <= 1e-12).all()  # non-increasing
    ident = surv[(surv["kind"] == "identifier") & (surv["age"] == 1)]
    assert ident["survival"].iloc[0] < 1.0
    sec = section_similarity(report)
    goal = sec[(sec["section"] == "goal") & (sec["compaction"] == 1)]
    assert goal["jaccard_prev"].iloc[0] == 1.0
    done = sec[(sec["section"] == "done") & (sec["compaction"] == 1)]
    assert done["jaccard_prev"].iloc[0] < 1.0
    h = headline(report)
    assert h["compactions"] == 3 and 0 < h["retention_after_1"] < 1
    with pytest.raises(ValueError, match="not a drift report"):
        retention_by_age(pd.DataFrame())


def test_replay_result_shape_and_empty_session() -> None:
    chain, _ = build_chain()

    class Result:
        session = chain.entries
        events = pd.DataFrame()

    assert len(drift_report(Result())) == 3
    empty = drift_report([{"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-01T00:00:00Z",
                           "message": _user("hi")}])
    assert len(empty) == 0
    assert list(empty.columns) == list(drift_report(Result()).columns)  # the same schema, with no rows
    with pytest.raises(TypeError, match="Session"):
        drift_report(42)


def test_compaction_metrics_standalone() -> None:
    msgs = [_user("edit src/a.py"), _assistant("ok", [("edit", {"path": "src/a.py", "oldText": "a", "newText": "b"})])]
    summary = TEMPLATE + "\n\n<modified-files>\nsrc/a.py\nsrc/zzz.py\n</modified-files>"
    m = compaction_metrics(summary, msgs, modified_files=["src/a.py"])
    assert m["pipeline_modified_recall"] == 1.0 and m["pipeline_modified_precision"] == 0.5
    assert m["pipeline_read_precision"] == 1.0 and math.isnan(m["pipeline_read_recall"])  # no read files, none claimed
    assert m["summary_tokens"] > 0 and m["compression_ratio"] < 1 and m["compresses"] is False


# --------------------------------------------------------------------------- the real session


def _real_entries(path: Path) -> list[dict]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in lines if e.get("type") != "session"]


def test_real_session_recorded_summaries(real_v3_paths: list[Path]) -> None:
    path = real_v3_paths[0]
    assert path.name == "before-compaction.jsonl"
    report = drift_report(_real_entries(path))
    assert list(report["entry_id"]) == ["c97191b3", "38159d54"]
    assert list(report["span_start_id"]) == ["4a6205d4", "49ed8d59"]  # the second starts at the first's kept entry
    assert (report["compression_ratio"] > 50).all() and report["compresses"].all()
    assert ((report["fact_recall"] > 0) & (report["fact_recall"] < 1)).all()
    assert (report["recall_path"] > report["recall_command"]).all()
    assert (report["file_mention_recall"] > 0.5).all()
    assert not report["files_block_present"].any()  # recorded before Pi added file blocks
    assert "Key Decisions Made -> key_decisions" in report.loc[0, "renamed"]
    assert "key_decisions" in report.loc[1, "missing"]
    assert 0 < report.loc[1, "prev_retention"] < 1
    assert report.loc[1, "cumulative_loss"] > report.loc[0, "cumulative_loss"]
    assert report.loc[1, "goal_sim_first_jaccard"] == 1.0  # the Goal line was copied verbatim
    ages = retention_by_age(report, by_kind=True)
    assert set(ages["age"]) == {0, 1}


# --------------------------------------------------------------------------- replays


def test_drift_over_extractive_replay(sample_paths: list[Path]) -> None:
    import pimem
    from pimem.core.compaction.compaction import CompactionSettings

    session = pimem.load_session(sample_paths[0])
    result = pimem.replay(session, CompactionSettings(reserve_tokens=3000, keep_recent_tokens=2000), context_window=12000)
    report = pimem.drift_report(result)
    spans = compaction_spans(result.session)
    assert len(report) == len(spans) >= 2
    # the extractive summarizer fills Pi's template exactly
    full = report[report["n_found"] > 1]
    assert len(full) > 0 and (full["conformance"] == 1.0).all()
    for col in ("fact_recall", "prev_retention", "cumulative_loss", "pipeline_read_recall"):
        vals = report[col].dropna()
        assert ((vals >= 0) & (vals <= 1)).all(), col
    ages = pimem.retention_by_age(report)
    assert ages["age"].iloc[0] == 0 and ages["retention"].iloc[0] == 1.0


def test_lost_facts_when_every_fact_is_seen_from_the_first_compaction():
    # No fact is introduced late, so the presence table has no missing cells (a bool pivot).
    presence = pd.DataFrame({
        "key": ["path:a", "path:a", "path:b", "path:b"], "kind": ["path"] * 4,
        "compaction": [0, 1, 0, 1], "introduced_at": [0] * 4, "age": [0, 1, 0, 1],
        "present": [True, False, True, True], "in_span": [True, False, True, False],
    })
    report = pd.DataFrame({"compaction": [0, 1]})
    report.attrs["presence"] = presence
    lost = lost_facts(report)
    assert lost.to_dict("records") == [{"key": "path:a", "kind": "path", "lost_at": 1}]


def _lost_facts_by_definition(report: pd.DataFrame) -> list[dict]:
    """Every fact held by one summary (present is True) and not by the next (present is False)."""
    p = report.attrs["presence"]
    present = {(k, kind, c): bool(v) for k, kind, c, v in zip(p["key"], p["kind"], p["compaction"], p["present"])}
    compactions = sorted(set(p["compaction"]))
    return [{"key": k, "kind": kind, "lost_at": b} for k, kind in sorted({(k, kind) for k, kind, _ in present})
            for a, b in zip(compactions, compactions[1:])
            if present.get((k, kind, a)) is True and present.get((k, kind, b)) is False]


def test_lost_facts_follow_their_definition_on_long_chains(auth):
    from tests.support.big_inputs import big_report

    recorded = drift_report(auth)
    for report in (recorded, big_report(compactions=80)):
        expected = _lost_facts_by_definition(report)
        assert len(expected) > 2
        assert lost_facts(report).to_dict("records") == expected


def test_section_tokens_count_utf16_units_like_pi():
    ts = "2026-01-01T00:00:00.000Z"
    entries = [
        {"type": "message", "id": "a1", "parentId": None, "timestamp": ts,
         "message": {"role": "user", "content": "fix x", "timestamp": 0}},
        {"type": "message", "id": "a2", "parentId": "a1", "timestamp": ts,
         "message": {"role": "user", "content": "more", "timestamp": 0}},
        {"type": "compaction", "id": "c1", "parentId": "a2", "timestamp": ts, "summary": "## Goal\n" + "😀" * 6 + "\n",
         "firstKeptEntryId": "a2", "tokensBefore": 10},
    ]
    sections = drift_report(entries).attrs["sections"]
    goal = sections[sections["section"] == "goal"].iloc[0]
    assert goal["tokens"] == 3  # 12 UTF-16 units / 4, as Pi's estimate counts them


# --------------------------------------------------------------------------- adversarial text


def test_long_adversarial_lines_parse_in_linear_time() -> None:
    """Inputs on which backtracking patterns took hours (cubic or quadratic) are handled at 200 KB.

    A regression makes this test run for hours instead of a fraction of a second.
    """
    n = 200_000
    unclosed = "## Goal\nfix it\n<read-files>" + " " * n
    parsed = parse_summary(unclosed)
    assert parsed.read_files is None  # an unclosed block is not a file list
    assert [h.key for h in parsed.headings] == ["goal"] and list(parsed.sections) == ["goal"]
    heading = parse_summary("# a" + " " * n + "x\nbody")
    assert heading.headings[0].title.startswith("a") and heading.headings[0].title.endswith("x")
    facts = extract_facts([_user("123," * (n // 4) + " and 5 ms"), _user("a+" * (n // 2))])
    assert any(f.kind == "number" and f.value.endswith("ms") for f in facts)


def test_atx_closing_hashes_follow_commonmark() -> None:
    titles = [h.title for h in parse_summary("# Use C#\n## Goal ##\n### Next Steps #\nx").headings]
    assert titles == ["Use C#", "Goal", "Next Steps"]

"""Branch summaries: entry collection, budget, preamble and file blocks, errors returned."""

from __future__ import annotations

from pimem.core.compaction.branch_summarization import (
    collect_entries_for_branch_summary,
    generate_branch_summary,
    prepare_branch_entries,
)
from pimem.core.compaction.compaction import ModelInfo
from pimem.core.session_manager import Session
from tests.support.summarizers import FixedSummarizer

TS = "2025-01-01T00:00:00.000Z"


def tree() -> Session:
    s = Session.new("/tmp/project")
    root = s.append_message({"role": "user", "content": "start", "timestamp": 1})
    s.append_message({"role": "assistant", "content": [
        {"type": "toolCall", "id": "t", "name": "edit", "arguments": {"path": "/src/a.py"}}], "timestamp": 2})
    s.append_message({"role": "toolResult", "toolCallId": "t", "toolName": "edit", "content": "ok", "timestamp": 3})
    s.append_message({"role": "user", "content": "x" * 4000, "timestamp": 4})
    return s, root["id"]


def test_collect_entries_back_to_common_ancestor():
    s, root = tree()
    old_leaf = s.leaf_id
    entries, common = collect_entries_for_branch_summary(s, old_leaf, root)
    assert common == root and len(entries) == 3 and entries[-1]["id"] == old_leaf
    assert collect_entries_for_branch_summary(s, None, root) == ([], None)


def test_budget_keeps_newest_and_summary_under_ninety_percent():
    s, root = tree()
    entries = s.get_branch()
    prep = prepare_branch_entries(entries, token_budget=0)
    assert [m["role"] for m in prep.messages] == ["user", "assistant", "user"]  # tool result skipped
    small = prepare_branch_entries(entries, token_budget=1000)
    assert [m["role"] for m in small.messages] == ["user"] and small.total_tokens == 1000
    # file ops are taken before the budget check, so the message that stops the walk still counts
    assert small.file_ops.edited == {"/src/a.py"}
    summ = [{"type": "branch_summary", "id": "b", "parentId": None, "timestamp": TS, "summary": "s" * 400,
             "details": {"readFiles": ["/r"], "modifiedFiles": ["/m"]}},
            {"type": "message", "id": "u", "parentId": "b", "timestamp": TS,
             "message": {"role": "user", "content": "u" * 3000}}]
    prep = prepare_branch_entries(summ, token_budget=840)  # 850 > 840 but 750 < 0.9 * 840
    assert [m["role"] for m in prep.messages] == ["branchSummary", "user"] and prep.total_tokens == 850
    assert [m["role"] for m in prepare_branch_entries(summ, token_budget=820).messages] == ["user"]
    assert prep.file_ops.read == {"/r"} and prep.file_ops.edited == {"/m"}


def test_generate_branch_summary_preamble_files_and_errors():
    s, root = tree()
    entries, _ = collect_entries_for_branch_summary(s, s.leaf_id, root)
    summarizer = FixedSummarizer("BRANCH")
    res = generate_branch_summary(entries, summarizer, model=ModelInfo(0, 2000, True))
    req = summarizer.requests[0]
    assert req.kind == "branch" and req.max_tokens == 2000 and req.reasoning is None
    assert res.summary.startswith("The user explored a different conversation branch before returning here.\n"
                                  "Summary of that exploration:\n\nBRANCH\n\n<modified-files>\n/src/a.py\n</modified-files>")
    assert res.modified_files == ["/src/a.py"] and res.read_files == []
    assert generate_branch_summary([], FixedSummarizer(), model=ModelInfo()).summary == "No content to summarize"
    err = generate_branch_summary(entries, FixedSummarizer(stop_reason="error", error_message="x"), model=ModelInfo())
    assert err.error == "Branch summarization failed: x" and err.summary is None
    assert generate_branch_summary(entries, FixedSummarizer(stop_reason="aborted"), model=ModelInfo()).aborted
    assert generate_branch_summary(entries, FixedSummarizer(called_tool=True), model=ModelInfo()).error == (
        "Branch summarization attempted to call a tool")
    custom = FixedSummarizer()
    generate_branch_summary(entries, custom, model=ModelInfo(), custom_instructions="ONLY THIS", replace_instructions=True)
    assert custom.requests[0].prompt.endswith("</conversation>\n\nONLY THIS") and custom.requests[0].max_tokens == 4096

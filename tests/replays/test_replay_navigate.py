"""navigate: Pi's /tree with a summary, on a copy of the session."""

from __future__ import annotations

from pimem.replays.navigate import navigate


def test_navigate_leaves_a_branch_summary_at_the_target(real_v3_paths):
    from pimem.core.session_manager import load_session

    source = load_session(real_v3_paths[1])
    before = [dict(e) for e in source.entries]
    branch = source.get_branch()
    target = next(e for e in reversed(branch[: len(branch) // 2])
                  if e["type"] == "message" and e["message"]["role"] == "user")
    new = navigate(source, target["id"], summarize=True)
    assert source.entries == before and source.leaf_id == branch[-1]["id"]  # the source is untouched
    summary = new.get_entry(new.leaf_id)
    assert summary["type"] == "branch_summary"
    assert summary["fromId"] == branch[-1]["id"]
    assert summary["parentId"] == target["parentId"]  # a user message target: Pi moves to its parent
    assert summary["summary"]
    plain = navigate(source, target["id"], summarize=False)
    assert plain.leaf_id == target["parentId"]
    assert len(plain.entries) == len(source.entries)

"""One summary parser: the drift measures and the extractive summarizer read sections the same way."""

from __future__ import annotations

import pytest

from pimem.text.sections import (BRANCH_SUMMARY_PREAMBLE, SPLIT_TURN_SEPARATOR, parse_summary, parsed_summary,
                                 section_items, summarizer_text)
from pimem.summarizers.extractive import parse_summary_sections

FREE_FORM = """# Context Checkpoint: Refactoring

## Branch
`refactor` in `/repo`

## Key Decisions Made
1. **Keep old code** - new files instead

## Completed Work Packages (WP1-WP3)
| WP | Status |
|----|--------|
| WP1 | done |

## Current Task: File Reorganization
Moving files.

## Next Steps (WP4)
### WP4: Create main-new.ts (NEXT)
- Copy `main.ts`

## User Preferences
- **E2E tests only** - no unit tests

<read-files>
src/read_only.py
</read-files>

<modified-files>
src/written.py
</modified-files>"""


def test_section_items_follow_the_drift_parser() -> None:
    parsed = parse_summary(FREE_FORM)
    items = section_items(parsed)
    assert set(parsed.sections) == {"key_decisions", "done", "in_progress", "next_steps", "constraints"}
    assert items["key_decisions"] == ["**Keep old code** - new files instead"]
    assert items["in_progress"] == ["Moving files."]
    assert items["next_steps"] == ["WP4: Create main-new.ts (NEXT)", "Copy `main.ts`"]
    assert items["constraints"] == ["**E2E tests only** - no unit tests"]
    assert items["other"] == ["Branch: `refactor` in `/repo`"]  # the title is dropped
    assert "| WP1 | done |" in items["done"] and not any(set(i) <= set("|-: ") for i in items["done"])
    flat = [i for v in items.values() for i in v]
    assert not any("read_only" in i or "written" in i for i in flat)


def test_extractive_reads_previous_summaries_with_the_same_parser() -> None:
    drift = section_items(FREE_FORM)
    mine = parse_summary_sections(FREE_FORM)
    assert mine["decisions"] == drift["key_decisions"]
    assert mine["in_progress"] == drift["progress"] + drift["in_progress"]
    assert mine["next"] == drift["next_steps"]
    assert mine["constraints"] == drift["constraints"]
    assert "Branch: `refactor` in `/repo`" in mine["critical"]
    assert not any("src/read_only.py" in i for v in mine.values() for i in v)


def test_branch_preamble_and_split_turn_are_pipeline_text() -> None:
    text = (BRANCH_SUMMARY_PREAMBLE + "## Goal\n- explore\n\n## Critical Context\n- `x.py`" + SPLIT_TURN_SEPARATOR
            + "## Original Request\nadd retries\n\n## Progress So Far\n- read it\n\n## Context Needed to Continue\n- `y.py`")
    items = section_items(text)
    assert items["goal"] == ["explore"] and items["critical_context"] == ["`x.py`"]
    assert items["original_request"] == ["add retries"] and items["context_needed"] == ["`y.py`"]
    assert not any("explored a different" in i for v in items.values() for i in v)
    assert section_items("No prior history.")["other"] == []


def test_summarizer_text_drops_every_file_block() -> None:
    text = "## Goal\n- a\n\n<read-files>\nx.py\n</read-files>\n\n<modified-files>\ny.py\n</modified-files>\n"
    assert summarizer_text(text) == "## Goal\n- a"
    copied = "## Goal\n- a\n\n<read-files>\nold.py\n</read-files>\n\nmore\r\n\n<read-files>\nnew.py\n</read-files>"
    assert summarizer_text(copied) == "## Goal\n- a\n\nmore"
    parsed = parse_summary(text)
    assert parsed.written_text == "## Goal\n- a" and parsed.read_files == ["x.py"]
    with pytest.raises(TypeError):
        summarizer_text(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["auto", "compaction", "branch"])
def test_the_memoised_parse_is_the_parse(kind):
    """``parsed_summary`` gives what ``parse_summary`` gives, for either kind and for the branch
    preamble however its line breaks are written, and the same object the second time."""
    texts = [FREE_FORM, FREE_FORM.replace("\n", "\r\n"), BRANCH_SUMMARY_PREAMBLE + FREE_FORM,
             (BRANCH_SUMMARY_PREAMBLE + FREE_FORM).replace("\n", "\r\n"), BRANCH_SUMMARY_PREAMBLE.rstrip("\n"),
             BRANCH_SUMMARY_PREAMBLE.rstrip("\n").replace("\n", "\r") + "\r\rGoal", "", "\r",
             "## Goal\nx" + SPLIT_TURN_SEPARATOR + "**Original Request:**\ny"]
    for text in texts:
        assert parsed_summary(text, kind) == parse_summary(text, kind), repr(text[:60])
        assert parsed_summary(text, kind) is parsed_summary(text, kind)
    assert parsed_summary(BRANCH_SUMMARY_PREAMBLE + "x").kind == "branch"
    assert parsed_summary(FREE_FORM).kind == "compaction"
    with pytest.raises(TypeError, match="must be a string"):
        parsed_summary(None, kind)  # type: ignore[arg-type]

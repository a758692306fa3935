"""Pi's prompt texts, stored byte for byte as data files (see ``NOTICE``).

Pi is © Mario Zechner and contributors, MIT licensed.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

__all__ = [
    "load_prompt",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "SUMMARIZATION_PROMPT",
    "UPDATE_SUMMARIZATION_INSTRUCTIONS",
    "UPDATE_SUMMARIZATION_PROMPT",
    "TURN_PREFIX_SUMMARIZATION_PROMPT",
    "BRANCH_SUMMARY_PROMPT",
    "BRANCH_SUMMARY_PREAMBLE",
]


@lru_cache(maxsize=None)
def load_prompt(name: str) -> str:
    """The text of ``pimem/core/prompts/<name>`` exactly as stored (no newline added or removed)."""
    data = resources.files(__name__).joinpath(name).read_bytes()
    return data.decode("utf-8")


SUMMARIZATION_SYSTEM_PROMPT = load_prompt("summarization_system.md")
SUMMARIZATION_PROMPT = load_prompt("summarization.md")
UPDATE_SUMMARIZATION_INSTRUCTIONS = load_prompt("update_summarization_instructions.md")
UPDATE_SUMMARIZATION_PROMPT = load_prompt("update_summarization_header.md") + UPDATE_SUMMARIZATION_INSTRUCTIONS
TURN_PREFIX_SUMMARIZATION_PROMPT = load_prompt("turn_prefix_summarization.md")
BRANCH_SUMMARY_PROMPT = load_prompt("branch_summary.md")
BRANCH_SUMMARY_PREAMBLE = load_prompt("branch_summary_preamble.md")

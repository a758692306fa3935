"""pimem: a research toolkit for the session memory of the Pi coding agent.

Sessions load into pandas, Pi's context projection, compaction and branch-summary
pipeline is reimplemented exactly (Pi 0.87.1), and recorded sessions can be replayed
under other settings and measured.

Public names are imported lazily so that ``import pimem`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> module that defines it
_EXPORTS: dict[str, str] = {
    # foundation
    "Session": "pimem.session",
    "SessionFormatError": "pimem.session",
    "SessionWarning": "pimem.session",
    "load_session": "pimem.session",
    "js_stringify": "pimem.jsonio",
    "utf16_len": "pimem.jsonio",
    "js_slice": "pimem.jsonio",
    "discover_sessions": "pimem.discover",
    "load_sessions": "pimem.discover",
    "Corpus": "pimem.discover",
    "default_sessions_dir": "pimem.discover",
    # pipeline
    "build_session_context": "pimem.context",
    "session_entry_to_context_messages": "pimem.context",
    "convert_to_llm": "pimem.context",
    "SessionContext": "pimem.context",
    "estimate_tokens": "pimem.tokens",
    "estimate_chars": "pimem.tokens",
    "TokenCache": "pimem.tokens",
    "estimate_context_tokens": "pimem.tokens",
    "calculate_context_tokens": "pimem.tokens",
    "ContextUsageEstimate": "pimem.tokens",
    "CompactionSettings": "pimem.compaction",
    "should_compact": "pimem.compaction",
    "find_cut_point": "pimem.compaction",
    "find_turn_start_index": "pimem.compaction",
    "CutPointResult": "pimem.compaction",
    "prepare_compaction": "pimem.compaction",
    "CompactionPreparation": "pimem.compaction",
    "compact": "pimem.compaction",
    "CompactionResult": "pimem.compaction",
    "ModelInfo": "pimem.compaction",
    "SummarizationError": "pimem.compaction",
    "serialize_conversation": "pimem.serialize",
    "serialize_messages": "pimem.serialize",
    "SerializationCache": "pimem.serialize",
    "compute_file_lists": "pimem.serialize",
    "format_file_operations": "pimem.serialize",
    "FileOperations": "pimem.serialize",
    "collect_entries_for_branch_summary": "pimem.branch",
    "prepare_branch_entries": "pimem.branch",
    "generate_branch_summary": "pimem.branch",
    "BranchPreparation": "pimem.branch",
    "BranchSummaryResult": "pimem.branch",
    "load_settings": "pimem.settings",
    "Settings": "pimem.settings",
    "Hooks": "pimem.hooks",
    "NULL_LEAF": "pimem.context",
    "build_session_projection": "pimem.context",
    "get_current_system_message": "pimem.context",
    "estimate_projected_context_tokens": "pimem.tokens",
    "ContextTracker": "pimem.compaction",
    "run_compaction": "pimem.hooks",
    "run_tree_navigation": "pimem.hooks",
    "Cancel": "pimem.hooks",
    # summarizers
    "SummaryRequest": "pimem.summarizers.base",
    "SummaryResponse": "pimem.summarizers.base",
    "Summarizer": "pimem.summarizers.base",
    "ExtractiveSummarizer": "pimem.summarizers.extractive",
    "OpenAISummarizer": "pimem.summarizers.openai_compat",
    "AsyncOpenAISummarizer": "pimem.summarizers.openai_compat",
    "CachedSummarizer": "pimem.summarizers.cached",
    "RecordedSummarizer": "pimem.summarizers.recorded",
    "summarizer_from_env": "pimem.summarizers",
    # replay
    "replay": "pimem.replay",
    "ReplayResult": "pimem.replay",
    "navigate": "pimem.replay",
    "sweep": "pimem.sweep",
    # samples
    "sample_dir": "pimem.samples",
    "sample_session_paths": "pimem.samples",
    "load_samples": "pimem.samples",
    # drift
    "parse_summary": "pimem.drift",
    "extract_facts": "pimem.drift",
    "compaction_metrics": "pimem.drift",
    "drift_report": "pimem.drift",
    "retention_by_age": "pimem.drift",
    "survival_curves": "pimem.drift",
    "probe_eval": "pimem.drift",
    "SummarySections": "pimem.drift",
    "Fact": "pimem.drift",
    # reports
    "write_drift_report": "pimem.report",
    "run_study": "pimem.report",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


# ``replay`` and ``sweep`` are both functions and the modules that define them. Importing a
# submodule binds its name on the package, which would hide the function behind the module, so
# these two are imported eagerly: the function is bound last and stays.
from pimem.replay import ReplayResult, navigate, replay  # noqa: E402
from pimem.sweep import sweep  # noqa: E402


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pimem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

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
    # errors
    **{name: "pimem.errors" for name in (
        "PimemError", "SessionFormatError", "EntryNotFoundError", "InvalidEntryError", "SettingsError",
        "SettingsFileError", "JavaScriptTypeError", "SummarizationError", "ConfigurationError",
        "CacheCorruptError", "CacheUnavailableError", "NoRecordingError", "SourceOverwriteError", "UnknownPriceError",
        "UserError", "ModelError", "NotAChatModelError", "JudgeError", "LabelFormatError", "PimemWarning",
        "ReplayWarning", "SkippedFileWarning",
    )},
    # foundation
    "Session": "pimem.sessions.session",
    "SessionLike": "pimem.sessions.session",
    "as_session": "pimem.sessions.session",
    "SessionWarning": "pimem.core.session_manager",
    "load_session": "pimem.sessions.load",
    "as_session": "pimem.sessions.load",
    "SessionLike": "pimem.sessions.load",
    "detect_format": "pimem.sessions.load",
    "import_claude_code": "pimem.sessions.importers.claude_code",
    "import_codex": "pimem.sessions.importers.codex",
    "ImportReport": "pimem.sessions.importers.records",
    "js_stringify": "pimem.base.js",
    "utf16_len": "pimem.base.js",
    "js_slice": "pimem.base.js",
    "discover_sessions": "pimem.sessions.discover",
    "load_sessions": "pimem.sessions.discover",
    "Corpus": "pimem.sessions.discover",
    "default_sessions_dir": "pimem.sessions.discover",
    # pipeline
    "build_session_context": "pimem.core.incremental.paths",
    "session_entry_to_context_messages": "pimem.core.session_manager",
    "convert_to_llm": "pimem.core.messages",
    "SessionContext": "pimem.core.session_manager",
    "estimate_tokens": "pimem.core.compaction.compaction",
    "estimate_chars": "pimem.core.compaction.compaction",
    "TokenCache": "pimem.core.incremental.caches",
    "estimate_context_tokens": "pimem.core.compaction.compaction",
    "calculate_context_tokens": "pimem.core.compaction.compaction",
    "ContextUsageEstimate": "pimem.core.compaction.compaction",
    "CompactionSettings": "pimem.core.compaction.compaction",
    "should_compact": "pimem.core.compaction.compaction",
    "find_cut_point": "pimem.core.compaction.compaction",
    "find_turn_start_index": "pimem.core.compaction.compaction",
    "CutPointResult": "pimem.core.compaction.compaction",
    "prepare_compaction": "pimem.core.compaction.compaction",
    "CompactionPreparation": "pimem.core.compaction.compaction",
    "compact": "pimem.core.compaction.compaction",
    "CompactionResult": "pimem.core.compaction.compaction",
    "ModelInfo": "pimem.core.compaction.compaction",
    "serialize_conversation": "pimem.core.compaction.utils",
    "serialize_messages": "pimem.core.incremental.caches",
    "SerializationCache": "pimem.core.incremental.caches",
    "compute_file_lists": "pimem.core.compaction.utils",
    "format_file_operations": "pimem.core.compaction.utils",
    "FileOperations": "pimem.core.compaction.utils",
    "collect_entries_for_branch_summary": "pimem.core.compaction.branch_summarization",
    "prepare_branch_entries": "pimem.core.compaction.branch_summarization",
    "generate_branch_summary": "pimem.core.compaction.branch_summarization",
    "BranchPreparation": "pimem.core.compaction.branch_summarization",
    "BranchSummaryResult": "pimem.core.compaction.branch_summarization",
    "load_settings": "pimem.core.settings_manager",
    "Settings": "pimem.core.settings_manager",
    "Hooks": "pimem.core.agent_session",
    "NULL_LEAF": "pimem.core.session_manager",
    "build_session_projection": "pimem.core.incremental.paths",
    "get_current_system_message": "pimem.core.pi_ai",
    "estimate_projected_context_tokens": "pimem.core.compaction.compaction",
    "ContextTracker": "pimem.core.incremental.tracker",
    "run_compaction": "pimem.core.agent_session",
    "run_tree_navigation": "pimem.core.agent_session",
    "Cancel": "pimem.core.agent_session",
    # summarizers
    "SummaryRequest": "pimem.core.llm",
    "SummaryResponse": "pimem.core.llm",
    "Summarizer": "pimem.core.llm",
    "ExtractiveSummarizer": "pimem.summarizers.extractive",
    "OpenAISummarizer": "pimem.summarizers.openai_compat",
    "AsyncOpenAISummarizer": "pimem.summarizers.openai_compat",
    "CachedSummarizer": "pimem.summarizers.cached",
    "RecordedSummarizer": "pimem.summarizers.recorded",
    "summarizer_from_env": "pimem.summarizers",
    "EmptyTemplateSummarizer": "pimem.summarizers.baselines",
    "FactDumpSummarizer": "pimem.summarizers.baselines",
    "HeadTruncationSummarizer": "pimem.summarizers.baselines",
    "TailTruncationSummarizer": "pimem.summarizers.baselines",
    "baseline_summarizers": "pimem.summarizers.baselines",
    # replay
    "replay": "pimem.replays.engine",
    "ReplayResult": "pimem.replays.result",
    "navigate": "pimem.replays.navigate",
    "check_settings": "pimem.replays.settings",
    "Calibration": "pimem.replays.calibration",
    "fit_calibration": "pimem.replays.calibration",
    "orphan_references": "pimem.replays.orphans",
    "resume_probe": "pimem.drift.resume_probe",
    "sweep": "pimem.experiments.sweep",
    "sweep_summary": "pimem.experiments.uncertainty",
    "token_source_bands": "pimem.experiments.uncertainty",
    "bootstrap_ci": "pimem.experiments.uncertainty",
    "paired_difference": "pimem.experiments.uncertainty",
    # strategies and cost
    "CompactionStrategy": "pimem.replays.strategies.base",
    "get_strategy": "pimem.replays.strategies.base",
    "strategy_names": "pimem.replays.strategies.base",
    "register_strategy": "pimem.replays.strategies.base",
    "PromptTemplates": "pimem.core.compaction.compaction",
    "run_measures": "pimem.experiments.run_measures",
    "replay_cost": "pimem.replays.cost",
    "Price": "pimem.replays.cost",
    "PRICES": "pimem.replays.cost",
    # samples
    "sample_dir": "pimem.sessions.samples",
    "sample_session_paths": "pimem.sessions.samples",
    "load_samples": "pimem.sessions.samples",
    "labels_dir": "pimem.drift.labels",
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
    # modules kept under their former top-level names
    "strategies": "module:pimem.replays.strategies",
    "widgets": "module:pimem.viz.widgets",
    # reports
    "write_drift_report": "pimem.viz.report",
    "run_study": "pimem.viz.report",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pimem' has no attribute {name!r}")
    if module.startswith("module:"):
        value = importlib.import_module(module.removeprefix("module:"))
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

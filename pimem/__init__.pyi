"""The one list of pimem's public names: each ``from HOME import NAME as NAME`` line is ``pimem.NAME``.

The lazy facade (``pimem/__init__.py``) reads this file to know what to load from where, and type
checkers and IDEs read it for the types, so the two cannot disagree. To export a name, add its line
here (``tests/package/test_exported_members.py`` checks that every line resolves)."""

from __future__ import annotations

from pimem.base.js import js_slice as js_slice, js_stringify as js_stringify, utf16_len as utf16_len
from pimem.base.tables import Column as Column, Table as Table
from pimem.core.agent_session import (
    Cancel as Cancel,
    Hooks as Hooks,
    run_compaction as run_compaction,
    run_tree_navigation as run_tree_navigation,
)
from pimem.core.compaction.branch_summarization import (
    BranchPreparation as BranchPreparation,
    BranchSummaryResult as BranchSummaryResult,
    collect_entries_for_branch_summary as collect_entries_for_branch_summary,
    generate_branch_summary as generate_branch_summary,
    prepare_branch_entries as prepare_branch_entries,
)
from pimem.core.compaction.compaction import (
    CompactionPreparation as CompactionPreparation,
    CompactionResult as CompactionResult,
    CompactionSettings as CompactionSettings,
    ContextUsageEstimate as ContextUsageEstimate,
    CutPointResult as CutPointResult,
    ModelInfo as ModelInfo,
    PromptTemplates as PromptTemplates,
    calculate_context_tokens as calculate_context_tokens,
    compact as compact,
    estimate_chars as estimate_chars,
    estimate_context_tokens as estimate_context_tokens,
    estimate_projected_context_tokens as estimate_projected_context_tokens,
    estimate_tokens as estimate_tokens,
    find_turn_start_index as find_turn_start_index,
    should_compact as should_compact,
)
from pimem.core.compaction.utils import (
    FileOperations as FileOperations,
    compute_file_lists as compute_file_lists,
    format_file_operations as format_file_operations,
    serialize_conversation as serialize_conversation,
)
from pimem.core.incremental.caches import (
    SerializationCache as SerializationCache,
    TokenCache as TokenCache,
    serialize_messages as serialize_messages,
)
from pimem.core.incremental.paths import (
    build_session_context as build_session_context,
    build_session_projection as build_session_projection,
    find_cut_point as find_cut_point,
    prepare_compaction as prepare_compaction,
)
from pimem.core.incremental.tracker import ContextTracker as ContextTracker
from pimem.core.llm import (
    Summarizer as Summarizer,
    SummaryRequest as SummaryRequest,
    SummaryResponse as SummaryResponse,
)
from pimem.core.messages import convert_to_llm as convert_to_llm
from pimem.core.pi_ai import get_current_system_message as get_current_system_message
from pimem.core.session_manager import (
    NULL_LEAF as NULL_LEAF,
    SessionContext as SessionContext,
    SessionWarning as SessionWarning,
    session_entry_to_context_messages as session_entry_to_context_messages,
)
from pimem.core.settings_manager import Settings as Settings, load_settings as load_settings
from pimem.drift import (
    Comparison as Comparison,
    Fact as Fact,
    SummarySections as SummarySections,
    compaction_metrics as compaction_metrics,
    compare_sources as compare_sources,
    drift_report as drift_report,
    extract_facts as extract_facts,
    matcher_check as matcher_check,
    measure_docs as measure_docs,
    parse_summary as parse_summary,
    probe_eval as probe_eval,
    recall_curve as recall_curve,
    retention_by_age as retention_by_age,
    survival_curves as survival_curves,
)
from pimem.drift.faithfulness import ClaimJudge as ClaimJudge, judge_agreement as judge_agreement
from pimem.drift.labels import labels_dir as labels_dir
from pimem.drift.resume_probe import resume_probe as resume_probe
from pimem.errors import (
    ArgumentTypeError as ArgumentTypeError,
    CacheCorruptError as CacheCorruptError,
    CacheUnavailableError as CacheUnavailableError,
    ColumnError as ColumnError,
    ConfigurationError as ConfigurationError,
    EntryNotFoundError as EntryNotFoundError,
    InvalidEntryError as InvalidEntryError,
    JavaScriptTypeError as JavaScriptTypeError,
    JudgeError as JudgeError,
    LabelFormatError as LabelFormatError,
    ModelError as ModelError,
    NoRecordingError as NoRecordingError,
    NotAChatModelError as NotAChatModelError,
    PimemError as PimemError,
    PimemWarning as PimemWarning,
    ReplayWarning as ReplayWarning,
    SessionFormatError as SessionFormatError,
    SettingsError as SettingsError,
    SettingsFileError as SettingsFileError,
    SkippedFileWarning as SkippedFileWarning,
    SourceOverwriteError as SourceOverwriteError,
    SummarizationError as SummarizationError,
    UnknownColumnError as UnknownColumnError,
    UnknownPriceError as UnknownPriceError,
    UserError as UserError,
)
from pimem.experiments.advise import Advice as Advice, advise as advise
from pimem.experiments.run_measures import run_measures as run_measures
from pimem.experiments.sweep import sweep as sweep
from pimem.experiments.tables import columns as columns
from pimem.experiments.uncertainty import (
    bootstrap_ci as bootstrap_ci,
    paired_difference as paired_difference,
    sweep_summary as sweep_summary,
    token_source_bands as token_source_bands,
)
from pimem.replays.calibration import Calibration as Calibration, fit_calibration as fit_calibration
from pimem.replays.cost import PRICES as PRICES, Price as Price, replay_cost as replay_cost
from pimem.replays.engine import replay as replay
from pimem.replays.navigate import navigate as navigate
from pimem.replays.orphans import orphan_references as orphan_references
from pimem.replays.result import ReplayResult as ReplayResult
from pimem.replays.settings import check_settings as check_settings
from pimem.replays.strategies.base import (
    CompactionStrategy as CompactionStrategy,
    get_strategy as get_strategy,
    register_strategy as register_strategy,
    strategy_names as strategy_names,
)
from pimem.sessions.discover import (
    Corpus as Corpus,
    default_sessions_dir as default_sessions_dir,
    discover_sessions as discover_sessions,
    load_sessions as load_sessions,
)
from pimem.sessions.importers.claude_code import import_claude_code as import_claude_code
from pimem.sessions.importers.codex import import_codex as import_codex
from pimem.sessions.importers.records import ImportReport as ImportReport
from pimem.sessions.load import (
    SessionLike as SessionLike,
    as_session as as_session,
    detect_format as detect_format,
    load_session as load_session,
)
from pimem.sessions.samples import (
    load_samples as load_samples,
    load_real_sessions as load_real_sessions,
    real_dir as real_dir,
    real_session_paths as real_session_paths,
    sample_dir as sample_dir,
    sample_session_paths as sample_session_paths,
)
from pimem.sessions.session import Session as Session
from pimem.summarizers import summarizer_from_env as summarizer_from_env
from pimem.summarizers.baselines import (
    EmptyTemplateSummarizer as EmptyTemplateSummarizer,
    FactDumpSummarizer as FactDumpSummarizer,
    HeadTruncationSummarizer as HeadTruncationSummarizer,
    TailTruncationSummarizer as TailTruncationSummarizer,
    baseline_summarizers as baseline_summarizers,
)
from pimem.summarizers.cached import CachedSummarizer as CachedSummarizer
from pimem.summarizers.extractive import ExtractiveSummarizer as ExtractiveSummarizer
from pimem.summarizers.openai_compat import (
    AsyncOpenAISummarizer as AsyncOpenAISummarizer,
    OpenAISummarizer as OpenAISummarizer,
)
from pimem.summarizers.recorded import RecordedSummarizer as RecordedSummarizer
from pimem.viz.report import run_study as run_study, write_drift_report as write_drift_report
from pimem.replays import strategies as strategies
from pimem.viz import widgets as widgets

__version__: str
__all__: list[str]

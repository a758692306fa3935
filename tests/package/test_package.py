"""The package's public surface: exports resolve, ``import pimem`` stays light (the layers:
``test_layers.py``)."""

from __future__ import annotations

import subprocess
import sys

import pimem

def test_every_export_resolves() -> None:
    missing = [name for name in pimem.__all__ if getattr(pimem, name, None) is None]
    assert missing == []


def test_replay_and_sweep_are_functions() -> None:
    assert callable(pimem.replay) and pimem.replay.__name__ == "replay"
    assert callable(pimem.sweep) and pimem.sweep.__name__ == "sweep"


def test_prompt_notice_ships_with_the_package() -> None:
    from importlib.resources import files

    notice = files("pimem.core.prompts").joinpath("NOTICE").read_text(encoding="utf-8")
    assert "Mario Zechner" in notice and "MIT" in notice


def test_import_is_light() -> None:
    heavy = ["pandas", "numpy", "matplotlib", "openai", "tiktoken", "ipywidgets"]
    code = f"import pimem, sys; print(*[m in sys.modules for m in {heavy!r}])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert dict(zip(heavy, out)) == {m: "False" for m in heavy}


def test_core_pipeline_imports_without_pandas() -> None:
    code = (
        "import sys; import pimem; pimem.load_session; pimem.build_session_context; pimem.prepare_compaction;"
        " pimem.ContextTracker; pimem.run_compaction; print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"]


def test_every_public_error_and_warning_lives_in_errors() -> None:
    import importlib
    import inspect
    import pkgutil

    import pimem.errors

    elsewhere = []
    for info in pkgutil.walk_packages(pimem.__path__, "pimem."):
        if info.name.endswith("__main__") or info.name == "pimem.errors":
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, (Exception, Warning)) and not name.startswith("_")
                    and obj.__module__ == info.name):
                elsewhere.append(f"{info.name}.{name}")
    assert elsewhere == []
    assert all(name in pimem.__all__ for name in pimem.errors.__all__)


# The entry points of a first session (README, "A first look"): each documents every parameter.
ENTRY_POINTS = ["load_session", "as_session", "load_sessions", "build_session_context", "prepare_compaction", "replay",
                "sweep", "drift_report", "orphan_references",
                # discovery and import, replay set-up and cost, text and measures
                "detect_format", "default_sessions_dir", "discover_sessions", "import_claude_code", "import_codex",
                "check_settings", "fit_calibration", "get_strategy", "register_strategy", "replay_cost",
                "parse_summary", "extract_facts", "compaction_metrics", "baseline_summarizers",
                "survival_curves", "retention_by_age", "summarizer_from_env", "probe_eval", "resume_probe",
                "run_measures", "bootstrap_ci", "paired_difference", "sweep_summary", "token_source_bands", "navigate",
                "run_compaction", "run_tree_navigation", "compact", "generate_branch_summary",
                # Pi's functions and JavaScript's
                "calculate_context_tokens", "compute_file_lists", "convert_to_llm", "estimate_chars", "estimate_tokens",
                "get_current_system_message", "serialize_conversation", "session_entry_to_context_messages",
                "build_session_projection", "estimate_context_tokens", "format_file_operations", "load_settings",
                "prepare_branch_entries", "serialize_messages", "collect_entries_for_branch_summary",
                "estimate_projected_context_tokens", "find_turn_start_index", "should_compact", "find_cut_point",
                "js_stringify", "js_slice", "utf16_len"]


def test_the_entry_points_document_every_parameter_under_args() -> None:
    import inspect

    undocumented = {}
    for name in ENTRY_POINTS:
        function = getattr(pimem, name)
        doc = inspect.getdoc(function) or ""
        args = doc.partition("\nArgs:\n")[2]
        missing = [p for p in inspect.signature(function).parameters if f"\n    {p}:" not in "\n" + args]
        if not args or missing:
            undocumented[name] = missing or ["no Args: section"]
    assert undocumented == {}

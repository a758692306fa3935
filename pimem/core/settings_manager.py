"""Pi's settings (core/settings-manager.js) and a small model table.

``load_settings`` reads ``<agent_dir>/settings.json`` (default ``$PI_CODING_AGENT_DIR`` or
``~/.pi/agent``) and ``<project_dir>/.pi/settings.json`` and deep-merges them as Pi does:
nested objects merge key by key, anything else from the project file replaces the global
value. A file that does not parse is recorded in ``Settings.errors`` (with a warning) and
counts as ``{}``, as in Pi. Token settings are validated when read, with Pi's messages.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pimem.base.js import js_string
from pimem.core.compaction.compaction import CompactionSettings, ModelInfo
from pimem.core.porting import port
from pimem.errors import SettingsError, SettingsFileError
from pimem.base.js import loads_deep

__all__ = [
    "DEFAULT_COMPACTION_TOKEN_SETTINGS",
    "MODEL_TABLE",
    "Settings",
    "SettingsError",
    "SettingsFileError",
    "deep_merge_settings",
    "default_agent_dir",
    "load_settings",
    "lookup_model",
]

DEFAULT_COMPACTION_TOKEN_SETTINGS = {"reserveTokens": 16384, "keepRecentTokens": 20000}
_MAX_SAFE_INTEGER = 2**53 - 1
_ABSENT: Any = object()

# provider/id -> (context window, max output tokens, reasoning), from the model catalogue of
# @earendil-works/pi-ai as shipped with pi-coding-agent 0.87.1.
MODEL_TABLE: dict[str, tuple[int, int, bool]] = {
    "anthropic/claude-opus-4-5": (200000, 64000, True),
    "anthropic/claude-opus-4-5-20251101": (200000, 64000, True),
    "anthropic/claude-opus-4-6": (1000000, 128000, True),
    "anthropic/claude-sonnet-4-5": (1000000, 64000, True),
    "anthropic/claude-sonnet-4-5-20250929": (1000000, 64000, True),
    "anthropic/claude-sonnet-4-6": (1000000, 128000, True),
    "anthropic/claude-haiku-4-5": (200000, 64000, True),
    "openai/gpt-5": (400000, 128000, True),
    "openai/gpt-5-mini": (400000, 128000, True),
    "openai/gpt-5.1": (400000, 128000, True),
    "openai/gpt-5.1-codex": (400000, 128000, True),
    "openai/gpt-5.2": (400000, 128000, True),
    "openai/gpt-4.1": (1047576, 32768, False),
    "openai/gpt-4o": (128000, 16384, False),
    "openai/o3": (200000, 100000, True),
    "openai/o4-mini": (200000, 100000, True),
    "google/gemini-2.5-pro": (1048576, 65536, True),
    "google/gemini-2.5-flash": (1048576, 65536, True),
}


def default_agent_dir() -> Path:
    """``getAgentDir()``: ``$PI_CODING_AGENT_DIR`` (``~`` expanded) or ``~/.pi/agent``."""
    env = os.environ.get("PI_CODING_AGENT_DIR")
    if env:
        return Path(os.path.expanduser(env))
    return Path.home() / ".pi" / "agent"


def _mergeable(value: Any) -> bool:
    return isinstance(value, dict)


@port("settings-manager.js", "deepMergeObjects")
def deep_merge_settings(base: Mapping[str, Any] | Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Pi's ``deepMergeObjects``: objects merge recursively, other override values replace."""
    result = dict(base)
    for key, value in overrides.items():
        base_value = base.get(key)
        result[key] = deep_merge_settings(base_value, value) if _mergeable(base_value) and _mergeable(value) else value
    return result


def _is_safe_nonneg_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value <= _MAX_SAFE_INTEGER
    if isinstance(value, float):
        return value.is_integer() and 0 <= value <= _MAX_SAFE_INTEGER
    return False


def _js_object(value: Any) -> Any:
    """An array seen through JavaScript's object spread (``{...array}``): keys are indices."""
    return {str(i): v for i, v in enumerate(value)} if isinstance(value, list) else value


@port("settings-manager.js", "SettingsManager.migrateSettings")
def _migrate(settings: dict) -> dict:
    """Pi's ``migrateSettings``: queueMode, websockets, the skills object, retry.maxDelayMs."""
    if "queueMode" in settings and "steeringMode" not in settings:
        settings["steeringMode"] = settings.pop("queueMode")
    if "transport" not in settings and isinstance(settings.get("websockets"), bool):
        settings["transport"] = "websocket" if settings.pop("websockets") else "sse"
    skills = settings.get("skills")
    if isinstance(skills, dict):
        if "enableSkillCommands" in skills and "enableSkillCommands" not in settings:
            settings["enableSkillCommands"] = skills["enableSkillCommands"]
        directories = skills.get("customDirectories")
        if isinstance(directories, list) and directories:
            settings["skills"] = directories
        else:
            del settings["skills"]
    retry = settings.get("retry")
    if isinstance(retry, dict):
        provider = retry.get("provider")
        provider = _js_object(provider) if isinstance(provider, (dict, list)) else None
        max_delay = retry.get("maxDelayMs")
        if (isinstance(max_delay, (int, float)) and not isinstance(max_delay, bool)
                and (provider is None or provider.get("maxRetryDelayMs") is None)):
            retry["provider"] = {**(provider or {}), "maxRetryDelayMs": max_delay}
        retry.pop("maxDelayMs", None)
    return settings


def lookup_model(provider: str | None, model_id: str | None, table: Mapping[str, tuple] | None = None) -> ModelInfo | None:
    """The table's :class:`ModelInfo` for ``provider/model_id`` (None when unknown)."""
    row = (table if table is not None else MODEL_TABLE).get(f"{provider}/{model_id}")
    if row is None:
        return None
    window, max_tokens, reasoning = row[:3]
    return ModelInfo(context_window=window, max_tokens=max_tokens, reasoning=reasoning, provider=provider, id=model_id)


@port("settings-manager.js", "SettingsManager")
@dataclass
class Settings:
    """Merged Pi settings (Pi's ``SettingsManager``, read only: ``data`` is the merged JSON) plus the model
    table.

    Args:
        data: the merged settings JSON (the project's values over the global ones).
        global_settings: the global settings file's JSON.
        project_settings: the project settings file's JSON.
        errors: the settings files that could not be read (each also warned).
        models: ``"provider/id"`` → (context window, max output tokens, reasoning); default: Pi 0.87.1's.
    """

    data: dict[str, Any] = field(default_factory=dict)
    global_settings: dict[str, Any] = field(default_factory=dict)
    project_settings: dict[str, Any] = field(default_factory=dict)
    errors: list[SettingsFileError] = field(default_factory=list)
    models: dict[str, tuple[int, int, bool]] = field(default_factory=lambda: dict(MODEL_TABLE))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], project: Mapping[str, Any] | None = None) -> "Settings":
        """Settings from in-memory dicts (global, optional project)."""
        g = _migrate(json.loads(json.dumps(dict(data))))
        p = _migrate(json.loads(json.dumps(dict(project or {}))))
        return cls(deep_merge_settings(g, p), g, p)

    # -- compaction ---------------------------------------------------------
    @property
    @port("settings-manager.js", "SettingsManager.getCompactionEnabled")
    def compaction_enabled(self) -> Any:
        """``getCompactionEnabled``: ``compaction.enabled ?? true``."""
        compaction = self.data.get("compaction")
        value = compaction.get("enabled") if isinstance(compaction, dict) else None
        return True if value is None else value

    @port("settings-manager.js", "SettingsManager.getCompactionTokenSetting")
    def _token_setting(self, key: str, model_key: str | None) -> int:
        """``getCompactionTokenSetting``: the model's override, else the ordinary setting, else the default."""
        compaction = self.data.get("compaction")
        compaction = compaction if isinstance(compaction, dict) else {}
        # JSON null is not JavaScript undefined: Pi rejects null values here.
        ordinary = compaction.get(key, _ABSENT)
        if ordinary is not _ABSENT and not _is_safe_nonneg_int(ordinary):
            raise SettingsError(
                f"Invalid compaction.{key} setting: {js_string(ordinary)}. Expected a non-negative safe integer."
            )
        entry: Any = _ABSENT
        if model_key is not None:
            overrides = compaction.get("modelOverrides")
            if isinstance(overrides, dict):
                entry = overrides.get(model_key, _ABSENT)
        if entry is not _ABSENT and not _mergeable(entry):
            raise SettingsError(
                f'Invalid compaction.modelOverrides["{model_key}"] setting: {js_string(entry)}. Expected an object.'
            )
        override = entry.get(key, _ABSENT) if entry is not _ABSENT else _ABSENT
        if override is not _ABSENT and not _is_safe_nonneg_int(override):
            raise SettingsError(
                f'Invalid compaction.modelOverrides["{model_key}"].{key} setting: {js_string(override)}. '
                "Expected a non-negative safe integer."
            )
        if override is not _ABSENT:
            return int(override)
        if ordinary is not _ABSENT:
            return int(ordinary)
        return DEFAULT_COMPACTION_TOKEN_SETTINGS[key]

    @port("settings-manager.js", "SettingsManager.getCompactionSettings")
    def compaction_for(self, provider: str | None = None, model_id: str | None = None) -> CompactionSettings:
        """``getCompactionSettings(model)``: model override → ordinary setting → default, per field."""
        model_key = None
        if provider is not None or model_id is not None:
            # `${model.provider}/${model.id}`: a missing part prints "undefined".
            model_key = "/".join("undefined" if part is None else js_string(part) for part in (provider, model_id))
        return CompactionSettings(
            enabled=self.compaction_enabled,
            reserve_tokens=self._token_setting("reserveTokens", model_key),
            keep_recent_tokens=self._token_setting("keepRecentTokens", model_key),
        )

    @property
    def compaction(self) -> CompactionSettings:
        """Compaction settings without a model override."""
        return self.compaction_for()

    @property
    @port("settings-manager.js", "SettingsManager.getBranchSummarySettings")
    def branch_summary_reserve_tokens(self) -> Any:
        """``getBranchSummarySettings().reserveTokens``: ``branchSummary.reserveTokens ?? 16384``."""
        bs = self.data.get("branchSummary")
        value = bs.get("reserveTokens") if isinstance(bs, dict) else None
        return 16384 if value is None else value

    # -- models ---------------------------------------------------------------
    def model(self, provider: str | None, model_id: str | None) -> ModelInfo | None:
        """The model table's entry (user entries added with :meth:`set_model` win)."""
        return lookup_model(provider, model_id, self.models)

    def set_model(self, provider: str, model_id: str, context_window: int, max_tokens: int, reasoning: bool) -> None:
        """Add or override a model in this settings' table."""
        self.models[f"{provider}/{model_id}"] = (int(context_window), int(max_tokens), bool(reasoning))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_js_int(text: str) -> int | float:
    """JSON.parse reads every number as a double: integers past 2**53 lose precision."""
    value = int(text)
    return value if abs(value) <= _MAX_SAFE_INTEGER else float(text)


def _parse_settings_json(text: str) -> Any:
    """``JSON.parse``: no NaN/Infinity literals, integers as doubles; any nesting depth."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_js_int)
    except RecursionError:  # nested deeper than the recursive parser goes: the iterative one (same values)

        return loads_deep(text)


@port("settings-manager.js", "SettingsManager.loadFromStorage")
def _read_settings_file(path: Path, scope: str, errors: list[SettingsFileError]) -> dict[str, Any]:
    """One settings file as Pi's ``loadFromStorage`` reads it; failures are recorded, giving ``{}``."""
    if not path.exists():
        return {}
    try:
        # Node decodes invalid UTF-8 as U+FFFD rather than failing.
        text = path.read_bytes().decode("utf-8", errors="replace")
        if not text:
            return {}
        # Pi tests for an empty file before it strips the BOM: a lone BOM is a parse error.
        data = _parse_settings_json(text[1:] if text.startswith("\ufeff") else text)
        if isinstance(data, list):
            data = _js_object(data)
        if not isinstance(data, dict):
            raise ValueError(f"settings must be a JSON object, not {type(data).__name__}")
    except (OSError, ValueError) as exc:
        line = getattr(exc, "lineno", 1)
        err = SettingsFileError(f"{path}: line {line}: {exc}")
        errors.append(err)
        warnings.warn(f"ignoring {scope} settings: {err}", stacklevel=3)
        return {}
    return _migrate(data)


def load_settings(agent_dir: str | os.PathLike | None = None, project_dir: str | os.PathLike | None = None) -> Settings:
    """Load and merge ``<agent_dir>/settings.json`` and ``<project_dir>/.pi/settings.json``.

    Args:
        agent_dir: Pi's agent folder (its ``settings.json``).
        project_dir: the project folder (its ``.pi/settings.json``).
    """
    agent = Path(agent_dir).expanduser() if agent_dir is not None else default_agent_dir()
    errors: list[SettingsFileError] = []
    global_settings = _read_settings_file(agent / "settings.json", "global", errors)
    project_settings: dict[str, Any] = {}
    if project_dir is not None:
        project_settings = _read_settings_file(Path(project_dir).expanduser() / ".pi" / "settings.json", "project", errors)
    try:
        merged = deep_merge_settings(global_settings, project_settings)
    except RecursionError:  # both files nest the same keys thousands deep: the project file is ignored
        err = SettingsFileError(f"{Path(project_dir or '.') / '.pi' / 'settings.json'}: nested too deeply to merge "
                                "with the global settings")
        errors.append(err)
        warnings.warn(f"ignoring project settings: {err}", stacklevel=2)
        merged, project_settings = dict(global_settings), {}
    return Settings(merged, global_settings, project_settings, errors)

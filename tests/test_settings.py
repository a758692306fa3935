"""Settings: Pi's deep merge, model overrides field by field, validation messages, model table."""

from __future__ import annotations

import json

import pytest

from pimem.settings import Settings, SettingsError, deep_merge_settings, load_settings


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def test_project_wins_and_objects_merge(tmp_path):
    agent, project = tmp_path / "agent", tmp_path / "proj"
    write(agent / "settings.json", {"compaction": {"reserveTokens": 1000, "keepRecentTokens": 500,
                                                   "modelOverrides": {"anthropic/claude-opus-4-5": {"reserveTokens": 7}}}})
    write(project / ".pi" / "settings.json", {"compaction": {"keepRecentTokens": 900, "enabled": False}})
    s = load_settings(agent, project)
    c = s.compaction_for("anthropic", "claude-opus-4-5")
    assert (c.enabled, c.reserve_tokens, c.keep_recent_tokens) == (False, 7, 900)
    assert s.compaction_for("openai", "gpt-5").reserve_tokens == 1000
    assert deep_merge_settings({"a": {"x": 1}, "b": [1]}, {"a": {"y": 2}, "b": [2]}) == {"a": {"x": 1, "y": 2}, "b": [2]}


def test_defaults_and_env_agent_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    write(tmp_path / "settings.json", {"compaction": {"keepRecentTokens": 123}})
    s = load_settings()
    assert s.compaction.keep_recent_tokens == 123 and s.compaction.reserve_tokens == 16384
    assert Settings().compaction_for("x", "y").keep_recent_tokens == 20000


@pytest.mark.parametrize("compaction,message", [
    ({"reserveTokens": -1}, "Invalid compaction.reserveTokens setting: -1. Expected a non-negative safe integer."),
    ({"keepRecentTokens": "big"}, "Invalid compaction.keepRecentTokens setting: big. Expected a non-negative safe integer."),
    ({"reserveTokens": None}, "Invalid compaction.reserveTokens setting: null. Expected a non-negative safe integer."),
    ({"modelOverrides": {"p/m": 5}}, 'Invalid compaction.modelOverrides["p/m"] setting: 5. Expected an object.'),
    ({"modelOverrides": {"p/m": {"reserveTokens": 1.5}}},
     'Invalid compaction.modelOverrides["p/m"].reserveTokens setting: 1.5. Expected a non-negative safe integer.'),
])
def test_invalid_values_name_the_key(compaction, message):
    with pytest.raises(SettingsError) as err:
        Settings.from_dict({"compaction": compaction}).compaction_for("p", "m")
    assert str(err.value) == message


def test_integral_floats_are_integers_and_bad_json_is_recorded(tmp_path):
    assert Settings.from_dict({"compaction": {"reserveTokens": 2000.0}}).compaction.reserve_tokens == 2000
    write(tmp_path / "settings.json", "{not json")
    with pytest.warns(UserWarning, match="settings.json"):
        s = load_settings(tmp_path)
    assert len(s.errors) == 1 and s.compaction.reserve_tokens == 16384


def test_model_table_and_user_models():
    s = Settings()
    opus = s.model("anthropic", "claude-opus-4-5")
    assert (opus.context_window, opus.max_tokens, opus.reasoning) == (200000, 64000, True)
    assert s.model("local", "tiny") is None
    s.set_model("local", "tiny", 8192, 1024, False)
    assert s.model("local", "tiny").context_window == 8192

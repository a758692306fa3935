"""Settings: Pi's deep merge, model overrides field by field, validation messages, model table."""

from __future__ import annotations

import json

import pytest

from pimem.core.settings_manager import (
    Settings,
    SettingsError,
    deep_merge_settings,
    load_settings,
)


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


# -- file reading edge cases (each as Pi's SettingsManager.create reads them) ---------------


def test_lone_bom_is_a_parse_error_but_empty_file_is_not(tmp_path):
    write(tmp_path / "settings.json", "")
    assert load_settings(tmp_path).errors == []
    (tmp_path / "settings.json").write_bytes(b"\xef\xbb\xbf")
    with pytest.warns(UserWarning):
        assert len(load_settings(tmp_path).errors) == 1


def test_json_parse_rules_nan_and_big_integers(tmp_path):
    write(tmp_path / "settings.json", '{"compaction": {"reserveTokens": NaN}}')
    with pytest.warns(UserWarning, match="NaN"):
        s = load_settings(tmp_path)
    assert s.data == {} and len(s.errors) == 1
    write(tmp_path / "settings.json", '{"compaction": {"reserveTokens": 9007199254740993}}')
    with pytest.raises(SettingsError, match=r"setting: 9007199254740992\. Expected"):
        load_settings(tmp_path).compaction


def test_invalid_utf8_and_directory_are_recorded_not_raised(tmp_path):
    (tmp_path / "settings.json").write_bytes(b'{"note": "\xff", "compaction": {"keepRecentTokens": 5}}')
    s = load_settings(tmp_path)
    assert s.data["note"] == "\ufffd" and s.compaction.keep_recent_tokens == 5
    project = tmp_path / "proj"
    (project / ".pi" / "settings.json").mkdir(parents=True)
    with pytest.warns(UserWarning, match="project"):
        assert len(load_settings(tmp_path, project).errors) == 1


def test_top_level_array_is_an_object_and_primitives_are_errors(tmp_path):
    write(tmp_path / "settings.json", '[5, {"compaction": 3}]')
    assert load_settings(tmp_path).data == {"0": 5, "1": {"compaction": 3}}
    write(tmp_path / "settings.json", "null")
    with pytest.warns(UserWarning):
        assert len(load_settings(tmp_path).errors) == 1


def test_all_of_pis_migrations():
    s = Settings.from_dict({
        "queueMode": "all", "websockets": True,
        "skills": {"customDirectories": ["x"], "enableSkillCommands": False},
        "retry": {"maxDelayMs": 5, "provider": {"other": 1}},
    })
    assert s.data == {"steeringMode": "all", "transport": "websocket", "skills": ["x"], "enableSkillCommands": False,
                      "retry": {"provider": {"other": 1, "maxRetryDelayMs": 5}}}
    s = Settings.from_dict({"skills": {"customDirectories": []}, "retry": {"maxDelayMs": 5, "provider": {"maxRetryDelayMs": 9}}})
    assert s.data == {"retry": {"provider": {"maxRetryDelayMs": 9}}}


def test_model_key_with_a_missing_part_prints_undefined():
    s = Settings.from_dict({"compaction": {"modelOverrides": {"undefined/m": {"reserveTokens": 3}}}})
    assert s.compaction_for(None, "m").reserve_tokens == 3


# -- differential: Pi's own SettingsManager on the same folders ------------------------------

_PROBE = r"""
import { readFileSync } from "fs";
const { SettingsManager } = await import(process.argv[2] + "/core/settings-manager.js");
const out = [];
for (const c of JSON.parse(readFileSync(0, "utf-8"))) {
  const sm = SettingsManager.create(c.cwd, c.agentDir);
  const r = { merged: sm.settings, errors: sm.errors.map((e) => e.path).sort(), compaction: {} };
  for (const m of c.models) {
    const key = m ? `${m.provider}/${m.id}` : "-";
    try { r.compaction[key] = sm.getCompactionSettings(m ?? undefined); }
    catch (e) { r.compaction[key] = "ERR " + e.message; }
  }
  r.branch = sm.getBranchSummarySettings().reserveTokens;
  out.push(r);
}
process.stdout.write(JSON.stringify(out));
"""

_MODELS = [None, {"provider": "anthropic", "id": "claude-opus-4-5"}, {"provider": "p", "id": "m"}]

_CASES: list[tuple[str | bytes | None, str | bytes | None]] = [
    (None, None),
    ("", ""),
    ("\ufeff", None),
    ("\ufeff{\"compaction\": {\"reserveTokens\": 5}}", "  "),
    ("{not json", '{"compaction": {"keepRecentTokens": 7}}'),
    ('{"compaction": {"reserveTokens": NaN}}', None),
    ('{"compaction": {"reserveTokens": 1e3, "keepRecentTokens": 9007199254740993}}', None),
    (b'{"a": "\xff\xfe", "compaction": {"keepRecentTokens": 11}}', None),
    ("[5, {\"compaction\": 3}]", "null"),
    ('"text"', "[]"),
    ('{"compaction": {"reserveTokens": 100, "modelOverrides": {"p/m": {"keepRecentTokens": 3}}}}',
     '{"compaction": {"modelOverrides": {"p/m": {"reserveTokens": 4}}, "enabled": false}}'),
    ('{"compaction": {"modelOverrides": {"p/m": [1, 2]}}}', None),
    ('{"compaction": {"modelOverrides": {"p/m": null}}}', None),
    ('{"compaction": {"modelOverrides": {"p/m": {"reserveTokens": -0.0, "keepRecentTokens": null}}}}', None),
    ('{"compaction": {"modelOverrides": "p/m"}, "branchSummary": {"reserveTokens": null}}', None),
    ('{"compaction": {"reserveTokens": 2}}', '{"compaction": null}'),
    ('{"compaction": [1]}', '{"compaction": {"reserveTokens": true}}'),
    ('{"queueMode": "all", "websockets": false, "skills": {"enableSkillCommands": null}, '
     '"retry": {"maxDelayMs": 3, "provider": [7]}}', '{"retry": {"maxDelayMs": "x"}, "skills": {"customDirectories": ["d"]}}'),
]


def _python_view(agent, project) -> dict:
    import warnings as _warnings

    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        s = load_settings(agent, project)
    view = {"merged": s.data, "errors": sorted(str(e).split(": line ")[0] for e in s.errors), "compaction": {}}
    for m in _MODELS:
        key = f"{m['provider']}/{m['id']}" if m else "-"
        try:
            c = s.compaction_for(m["provider"], m["id"]) if m else s.compaction
            view["compaction"][key] = {"enabled": c.enabled, "reserveTokens": c.reserve_tokens,
                                       "keepRecentTokens": c.keep_recent_tokens}
        except SettingsError as exc:
            view["compaction"][key] = f"ERR {exc}"
    view["branch"] = s.branch_summary_reserve_tokens
    return view


def test_matches_pis_settings_manager(tmp_path):
    import subprocess

    from tests.oracle.install import node_path, pi_dist
    from tests.oracle.plugin import oracle_required

    node, dist = node_path(), pi_dist()
    if not (node.is_file() and (dist / "core" / "settings-manager.js").is_file()):
        if oracle_required():
            pytest.fail(f"PIMEM_REQUIRE_ORACLE=1 but Node or Pi is missing at {node} / {dist}")
        pytest.skip("Node and the Pi release are not installed (python -m tests.oracle.install)")
    requests, expected = [], []
    for i, (global_text, project_text) in enumerate(_CASES):
        agent, project = tmp_path / f"c{i}" / "agent", tmp_path / f"c{i}" / "proj"
        agent.mkdir(parents=True)
        project.mkdir()
        for path, text in ((agent / "settings.json", global_text), (project / ".pi" / "settings.json", project_text)):
            if text is not None:
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        requests.append({"cwd": str(project), "agentDir": str(agent), "models": _MODELS})
        expected.append(_python_view(agent, project))
    script = tmp_path / "probe.mjs"
    script.write_text(_PROBE)
    proc = subprocess.run([str(node), str(script), str(dist)], input=json.dumps(requests), capture_output=True,
                          text=True, check=True, timeout=120)
    for case, pi_view, ours in zip(_CASES, json.loads(proc.stdout), expected):
        assert ours == pi_view, case

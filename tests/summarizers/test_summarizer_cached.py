"""CachedSummarizer: hits and misses, keys, concurrent processes, a killed writer, corruption."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pimem.core.llm import SummaryRequest
from pimem.summarizers.cached import (
    CacheCorruptError,
    CachedSummarizer,
    default_cache_path,
)
from pimem.summarizers.openai_compat import OpenAISummarizer
from tests.support.fake_openai_server import Reply, openai_summarizer
from tests.support.summarizers import EchoSummarizer

REPO = Path(__file__).resolve().parents[2]


def req(prompt: str = "p", **kw) -> SummaryRequest:
    base = dict(kind="history", system_prompt="sys", prompt=prompt, max_tokens=100, session_id="route-1")
    base.update(kw)
    return SummaryRequest(**base)


def test_hits_misses_and_stats(tmp_path):
    inner = EchoSummarizer()
    cache = CachedSummarizer(inner, tmp_path / "c.sqlite")
    first = cache.complete(req("a"))
    again = cache.complete(req("a", session_id="another-routing-id"))  # routing id is not in the key
    other = cache.complete(req("a", max_tokens=200))
    assert first.text == again.text == "summary of a" and other.text == "summary of a"
    assert again.extra["cached"] is True and first.extra["cached"] is False
    assert again.usage == first.usage and again.latency_s == first.latency_s
    assert inner.calls == 2 and (cache.hits, cache.misses) == (1, 2)
    stats = cache.stats()
    assert stats["entries"] == 2 and stats["hit_rate"] == pytest.approx(1 / 3)
    assert stats["by_stop_reason"] == {"stop": 2}
    # a fresh object on the same file answers everything from disk
    inner2 = EchoSummarizer()
    cache2 = CachedSummarizer(inner2, tmp_path / "c.sqlite")
    for r in (req("a"), req("a", max_tokens=200)):
        assert cache2.complete(r).extra["cached"]
    assert inner2.calls == 0 and cache2.hits == 2


def test_every_answer_determining_field_is_in_the_key(tmp_path):
    cache = CachedSummarizer(EchoSummarizer(), tmp_path / "c.sqlite")
    base = req("x")
    variants = [base, req("y"), req("x", system_prompt="other"), req("x", max_tokens=None), req("x", reasoning="high"),
                req("x", kind="turn_prefix"), req("x", model="m2"), req("x", cache_retention="short")]
    assert len({cache.key(v) for v in variants}) == len(variants)
    assert cache.key(req("x", session_id="zzz")) == cache.key(base)
    other_model = CachedSummarizer(OpenAISummarizer("model-b", base_url="http://127.0.0.1:9/v1", api_key="k"),
                                   tmp_path / "c.sqlite")
    same_other = CachedSummarizer(OpenAISummarizer("model-b", base_url="http://127.0.0.1:9/v1", api_key="k2"),
                                  tmp_path / "c.sqlite")
    assert other_model.key(base) != cache.key(base)
    assert other_model.key(base) == same_other.key(base)  # the key is not part of the identity


def test_failures_are_not_cached_by_default(tmp_path):
    inner = EchoSummarizer(fail_on="bad")
    cache = CachedSummarizer(inner, tmp_path / "c.sqlite")
    assert cache.complete(req("bad")).stop_reason == "error"
    assert cache.complete(req("bad")).stop_reason == "error"
    assert inner.calls == 2 and len(cache) == 0
    keep = CachedSummarizer(EchoSummarizer(fail_on="bad"), tmp_path / "d.sqlite", cache_failures=True)
    keep.complete(req("bad"))
    assert keep.complete(req("bad")).extra["cached"] and keep.inner.calls == 1


def test_export_dataframe(tmp_path):
    cache = CachedSummarizer(EchoSummarizer(), tmp_path / "c.sqlite")
    for p in ("one", "two", "three"):
        cache.complete(req(p, reasoning="low"))
    df = cache.export()
    assert len(df) == 3 and set(df["text"]) == {"summary of one", "summary of two", "summary of three"}
    assert list(df["reasoning"]) == ["low"] * 3 and (df["max_tokens"] == 100).all()
    assert set(df["input_tokens"]) == {3, 5}
    assert str(df["created"].dt.tz) == "UTC"
    assert all(r["prompt"] in ("one", "two", "three") for r in df["request"])


def test_default_path_under_user_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("PIMEM_CACHE_DIR", raising=False)
    import platformdirs

    assert default_cache_path() == Path(platformdirs.user_cache_dir("pimem")) / "summaries.sqlite"
    monkeypatch.setenv("PIMEM_CACHE_DIR", str(tmp_path))
    assert CachedSummarizer(EchoSummarizer()).path == tmp_path / "summaries.sqlite"


def test_wal_mode(tmp_path):
    cache = CachedSummarizer(EchoSummarizer(), tmp_path / "c.sqlite")
    cache.complete(req("a"))
    conn = sqlite3.connect(tmp_path / "c.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _worker(cache: CachedSummarizer, prompts: list[str], queue) -> None:
    hits0, misses0 = cache.hits, cache.misses  # counters inherited from the parent
    out = [(p, cache.complete(req(p)).text) for p in prompts]
    queue.put((os.getpid(), cache.hits - hits0, cache.misses - misses0, out))


def test_concurrent_writers_from_several_processes(tmp_path):
    cache = CachedSummarizer(EchoSummarizer(), tmp_path / "c.sqlite")
    cache.complete(req("shared-0"))  # the parent's connection must not leak into forked children
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    prompts = [f"shared-{i}" for i in range(40)]
    procs = [ctx.Process(target=_worker, args=(cache, prompts[k:] + prompts[:k], queue)) for k in (0, 10, 20, 30)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    for _, hits, misses, out in results:
        assert hits + misses == 40
        assert all(text == f"summary of {p}" for p, text in out)
    assert len(cache) == 40
    conn = sqlite3.connect(tmp_path / "c.sqlite")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(DISTINCT key) FROM summaries").fetchone()[0] == 40


def test_spawned_worker_can_reopen_a_pickled_cache(tmp_path):
    cache = CachedSummarizer(EchoSummarizer(), tmp_path / "c.sqlite")
    cache.complete(req("seen"))
    clone = pickle.loads(pickle.dumps(cache))
    assert clone._conn is None
    assert clone.complete(req("seen")).extra["cached"]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_worker, args=(cache, ["seen", "new"], queue))
    proc.start()
    _, hits, misses, out = queue.get(timeout=60)
    proc.join(60)
    assert (hits, misses) == (1, 1) and out[1] == ("new", "summary of new")
    assert len(cache) == 2


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from tests.support.summarizers import EchoSummarizer
    from tests.summarizers.test_summarizer_cached import req
    from pimem.summarizers.cached import CachedSummarizer
    cache = CachedSummarizer(EchoSummarizer(), {path!r})
    i = 0
    while True:
        cache.complete(req("k%d" % i + "x" * 5000))
        sys.stdout.write("%d\\n" % i)
        sys.stdout.flush()
        i += 1
    """
)


def test_killed_mid_write_keeps_finished_answers(tmp_path):
    path = tmp_path / "c.sqlite"
    child = subprocess.Popen([sys.executable, "-c", WRITER.format(repo=str(REPO), path=str(path))],
                             stdout=subprocess.PIPE, text=True)
    finished = []
    try:
        for line in child.stdout:
            finished.append(int(line))
            if len(finished) >= 60:
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    inner = EchoSummarizer()
    cache = CachedSummarizer(inner, path)
    for i in finished:
        resp = cache.complete(req("k%d" % i + "x" * 5000))
        assert resp.extra["cached"] and resp.text == "summary of k%d" % i + "x" * 5000
    assert inner.calls == 0
    # a resumed run pays only for what is missing
    cache.complete(req("k%d" % (finished[-1] + 1000) + "x" * 5000))
    assert inner.calls == 1


def test_garbage_file_is_a_clear_error_or_rebuilt(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not a database at all" * 200)
    cache = CachedSummarizer(EchoSummarizer(), path)
    with pytest.raises(CacheCorruptError, match="c.sqlite"):
        cache.complete(req("a"))
    rebuilt = CachedSummarizer(EchoSummarizer(), path, rebuild=True)
    assert rebuilt.complete(req("a")).text == "summary of a"
    assert rebuilt.complete(req("a")).extra["cached"]
    assert list(tmp_path.glob("c.sqlite.corrupt-*"))


def test_tampered_row_is_never_served(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = CachedSummarizer(EchoSummarizer(), path)
    cache.complete(req("a"))
    cache.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE summaries SET text = 'a wrong answer'")
    conn.commit()
    conn.close()
    fresh = CachedSummarizer(EchoSummarizer(), path)
    with pytest.raises(CacheCorruptError, match="checksum"):
        fresh.complete(req("a"))
    healing = CachedSummarizer(EchoSummarizer(), path, rebuild=True)
    assert healing.complete(req("a")).text == "summary of a" and healing.inner.calls == 1


def test_corrupted_pages_are_detected(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = CachedSummarizer(EchoSummarizer(), path)
    for i in range(200):
        cache.complete(req(f"prompt {i} " + "y" * 300))
    cache.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    for offset in range(4096 * 2, len(data), 4096):  # scribble over every page after the first two
        data[offset + 10 : offset + 60] = b"\xff" * 50
    path.write_bytes(bytes(data))
    with pytest.raises(CacheCorruptError):
        CachedSummarizer(EchoSummarizer(), path).complete(req("prompt 5 " + "y" * 300))


def test_key_never_written_to_the_cache_file(tmp_path, server):
    secret = "sk-never-on-disk-9876543210"
    server.script(Reply(content="a real answer"))
    inner = OpenAISummarizer("m", base_url=server.base_url, api_key=secret)
    cache = CachedSummarizer(inner, tmp_path / "c.sqlite")
    cache.complete(req("a"))
    assert cache.complete(req("a")).text == "a real answer" and server.hits == 1
    assert secret not in repr(cache)
    cache.close()
    for f in tmp_path.iterdir():
        assert secret.encode() not in f.read_bytes()
    assert secret not in cache.export().to_string()


def test_draw_zero_keeps_the_key_it_had_before_draws_were_numbered():
    """A cache written before ``sample`` existed still answers: draw 0 has the old key (a golden
    computed with the code of that time), other draws have their own."""
    from pimem.summarizers.cached import request_key

    request = SummaryRequest(kind="history", system_prompt="You summarize.", prompt="<conversation>hi</conversation>",
                             max_tokens=13107, reasoning="high", session_id="x", model="m")
    identity = {"class": "X", "model": "m", "base_url": None}
    golden = "6852a91c6176fcb76c99ac36a22dcaaca7dd9aac51d91e666464c03b1c146e8d"
    assert request_key(request, identity) == golden
    from dataclasses import replace

    keys = {request_key(replace(request, sample=k), identity) for k in range(4)}
    assert golden in keys and len(keys) == 4
    assert "sample" not in request.cache_key_fields()
    assert replace(request, sample=2).cache_key_fields()["sample"] == 2


def test_repeated_draws_at_temperature_are_distinct_and_cached(tmp_path, server):
    """A model at temperature 0.8 behind the cache (real HTTP, real client): each draw index of a
    replay gets its own answer, and a draw asked again comes from the cache."""
    from pimem.replays.engine import replay
    from pimem.core.compaction.compaction import CompactionSettings
    from pimem.sessions.samples import sample_session_paths

    draws = iter(range(10**6))

    def random_model(body):
        return f"## Goal\n- Draw {next(draws)} of a sampled model.\n\n## Next Steps\n1. Continue."

    path = next(p for p in sample_session_paths() if p.name == "auth-login-bug.jsonl")
    settings = CompactionSettings(reserve_tokens=4000, keep_recent_tokens=4000)
    server.responder = random_model
    model = openai_summarizer(server, "sampled-model", temperature=0.8)
    cache = CachedSummarizer(model, tmp_path / "draws.sqlite")

    def summaries(sample):
        result = replay(path, settings, context_window=16000, summarizer=cache, sample=sample,
                        token_source="chars")
        return [c["summary"] for c in result.compactions]

    first = summaries(0)
    assert first and all("Draw" in s for s in first)
    hits = server.hits
    second = summaries(1)
    assert server.hits > hits
    assert len(second) == len(first) and second[0] != first[0]  # another draw, not the cached one
    hits = server.hits
    assert summaries(1) == second and summaries(0) == first  # both draws come from the cache
    assert server.hits == hits
    assert all(body.get("temperature") == 0.8 for body in server.bodies())
    exported = cache.export()
    assert set(exported["sample"]) == {0, 1}
    with pytest.raises(ValueError, match="sample must be a non-negative integer"):
        replay(path, settings, context_window=16000, sample=-1)

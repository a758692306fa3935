"""Odd inputs against the real releases 0.87.1, 1.6.0 and 0.13.2 (live in Node when installed,
always against the committed goldens in ``tests/goldens/odd-inputs``).

* V8's ``Date`` parser: the lenient forms ("Sun, 01 Mar 2026 09:00:00 GMT", "March 1, 2026",
  "2026/03/01", "12/31/2025", "1 March 2026 10:00 UTC"), padded ISO strings and a grid of day
  names, dates, times and zones, in three time zones: ``parse_iso_ms(s) == new Date(s).getTime()``.
* A ``context_edit`` without ``replacement``: ignored on an entry Pi does not edit, a throw on a
  message it edits (0.87.1, 1.6.0).
* Pi 1.6.0's ``prepareCompaction`` throwing on ``nestedCalls: {"calls": 5}``; an assistant whose
  content is a string (V8's error text exactly, no added words).
* Type confusion Pi goes on through: an assistant ``usage`` that is a string or ``true`` (no usage: the
  one before is read), a ``usage.cacheRead`` string beside ``totalTokens``, a ``context_edit`` whose
  ``targetId`` is an object (edits nothing); and where it throws: a system message's ``toolsAdded: [null]``.
* A Pi 0.13.2 compaction whose ``summary`` is null: "null" in the context and the next request.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pimem.base.js import parse_iso_ms
from tests.oracle.odd_inputs import DATES_GOLDEN, GOLDENS, TIME_ZONES, date_strings, node_dates
from tests.oracle.plugin import release_oracle

SESSIONS_GOLDEN = GOLDENS / "sessions.json"
TS = "2026-03-01T09:00:00.000Z"
SETTINGS = {"enabled": True, "reserveTokens": 1000, "keepRecentTokens": 10}


# ------------------------------------------------------------------------------------------
# Dates
# ------------------------------------------------------------------------------------------
@pytest.fixture
def time_zone():
    before = os.environ.get("TZ")

    def use(tz: str) -> None:
        os.environ["TZ"] = tz
        time.tzset()

    yield use
    if before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = before
    time.tzset()


def _date_mismatches(strings: list[str], expected: list[int | None]) -> list[str]:
    return [f"{s!r}: Pi {v}, pimem {parse_iso_ms(s)}" for s, v in zip(strings, expected) if parse_iso_ms(s) != v]


@pytest.mark.parametrize("tz", TIME_ZONES)
def test_dates_match_the_goldens(time_zone, tz):
    golden = json.loads(DATES_GOLDEN.read_text())
    assert golden["strings"] == date_strings()  # the goldens are of today's cases
    time_zone(tz)
    bad = _date_mismatches(golden["strings"], golden["by_time_zone"][tz])
    assert not bad, f"{len(bad)} of {len(golden['strings'])} differ:\n" + "\n".join(bad[:20])
    for form in ("Sun, 01 Mar 2026 09:00:00 GMT", "March 1, 2026", "2026/03/01", "12/31/2025",
                 "1 March 2026 10:00 UTC", " 2026-03-01"):
        assert parse_iso_ms(form) is not None, form
    assert parse_iso_ms(" 2026-03-01T00:00:00Z") is None and parse_iso_ms("2026-03-01T00:00:00Z ") is None


@pytest.mark.oracle
@pytest.mark.parametrize("tz", TIME_ZONES)
def test_dates_match_node(time_zone, tz):
    try:
        expected = node_dates(date_strings(), tz)
    except (OSError, ValueError) as exc:
        pytest.skip(f"node not available: {exc}")
    time_zone(tz)
    bad = _date_mismatches(date_strings(), expected)
    assert not bad, "\n".join(bad[:20])


# ------------------------------------------------------------------------------------------
# Sessions
# ------------------------------------------------------------------------------------------
def _v3(entries: list[dict]) -> str:
    header = {"type": "session", "version": 3, "id": "odd", "timestamp": TS, "cwd": "/w"}
    return "".join(json.dumps(e) + "\n" for e in [header, *entries])


def _msg(eid: str, parent: str | None, message: dict) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": TS, "message": message}


def _user(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": 1}


def _assistant(content: Any, total: int = 100) -> dict:
    return {"role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anthropic",
            "model": "claude-sonnet-4-5", "stopReason": "stop", "timestamp": 2,
            "usage": {"input": total, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}}


def _turns(n: int, start: str | None = None) -> list[dict]:
    out, parent = [], start
    for i in range(n):
        out.append(_msg(f"u{i}", parent, _user(f"question {i} " + "x" * 200)))
        out.append(_msg(f"a{i}", f"u{i}", _assistant([{"type": "text", "text": f"answer {i} " + "y" * 200}],
                                                      500 * (i + 1))))
        parent = f"a{i}"
    return out


def _v3_cases() -> dict[str, tuple[str, list[dict]]]:
    """name -> (file text, requests): the same requests go to 0.87.1 and 1.6.0."""
    cases: dict[str, tuple[str, list[dict]]] = {}
    base = _turns(3)
    model_change = {"type": "model_change", "id": "mc", "parentId": "a2", "timestamp": TS, "provider": "openai",
                    "modelId": "gpt-5"}
    after = _msg("u9", "ed", _user("after the edit"))
    cases["edit-without-replacement-on-a-model-change"] = (
        _v3([*base, model_change, {"type": "context_edit", "id": "ed", "parentId": "mc", "timestamp": TS,
                                   "targetId": "mc"}, after]), [])
    cases["edit-without-replacement-on-a-message"] = (
        _v3([*base, {"type": "context_edit", "id": "ed", "parentId": "a2", "timestamp": TS, "targetId": "u1"},
             after]), [])
    nested = [*_turns(2),
              _msg("t0", "a1", {"role": "toolResult", "toolCallId": "c", "toolName": "code", "content": "ok",
                                "isError": False, "timestamp": 3, "nestedCalls": {"calls": 5}}),
              *[dict(e, parentId=("t0" if e["parentId"] is None else e["parentId"]))
                for e in _turns(3)[0:0]]]
    nested += [_msg("u5", "t0", _user("more " + "z" * 300)),
               _msg("a5", "u5", _assistant([{"type": "text", "text": "done"}], 4000))]
    cases["nested-calls-not-a-list"] = (_v3(nested), [])
    string_content = [*_turns(2), _msg("u5", "a1", _user("q")), _msg("a5", "u5", _assistant("plain string", 3000)),
                      _msg("u6", "a5", _user("next " + "w" * 300)),
                      _msg("a6", "u6", _assistant([{"type": "text", "text": "ok"}], 5000))]
    cases["assistant-content-a-string"] = (_v3(string_content), [])
    for name, usage in (("usage-a-string", "lots"), ("usage-true", True)):
        turns = _turns(3)
        turns[-1]["message"]["usage"] = usage  # the last answer's usage: the one the estimate would read
        cases[name] = (_v3(turns), [])
    turns = _turns(3)
    turns[-1]["message"]["usage"]["cacheRead"] = "7"  # with totalTokens, which calculateContextTokens reads
    cases["usage-cache-read-a-string"] = (_v3(turns), [])
    cases["edit-target-an-object"] = (
        _v3([*base, {"type": "context_edit", "id": "ed", "parentId": "a2", "timestamp": TS, "targetId": {"id": "u1"},
                     "replacement": {"content": "edited"}}, after]), [])
    system = {"type": "message", "id": "sy", "parentId": "a2", "timestamp": TS,
              "message": {"role": "system", "content": "rules", "toolsAdded": [None], "timestamp": 3}}
    cases["system-tools-added-null"] = (_v3([*base, system, _msg("u9", "sy", _user("after the system message"))]), [])
    for name, (text, _) in cases.items():
        leaf = [line for line in text.splitlines()][-1]
        leaf_id = json.loads(leaf)["id"]
        cases[name] = (text, [{"op": "project", "leaves": [leaf_id], "hash": True},
                              {"op": "estimate", "leaves": [leaf_id]},
                              {"op": "prepare", "leaves": [leaf_id], "settings": [SETTINGS], "serialize": True,
                               "hash": True}])
    return cases


def _v1_cases() -> dict[str, tuple[str, list[dict]]]:
    header = {"type": "session", "id": "odd-v1", "timestamp": TS, "cwd": "/w", "provider": "anthropic",
              "modelId": "claude-sonnet-4-5", "thinkingLevel": "off"}
    entries = [header]
    for i in range(3):
        entries.append({"type": "message", "timestamp": TS, "message": _user(f"question {i} " + "x" * 300)})
        entries.append({"type": "message", "timestamp": TS,
                        "message": _assistant([{"type": "text", "text": f"answer {i}"}], 400 * (i + 1))})
    entries.append({"type": "compaction", "timestamp": TS, "summary": None, "firstKeptEntryIndex": 3,
                    "tokensBefore": 1200})
    for i in range(3, 6):
        entries.append({"type": "message", "timestamp": TS, "message": _user(f"question {i} " + "x" * 300)})
        entries.append({"type": "message", "timestamp": TS,
                        "message": _assistant([{"type": "text", "text": f"answer {i}"}], 400 * (i + 1))})
    text = "".join(json.dumps(e) + "\n" for e in entries)
    n = len(entries)
    return {"compaction-summary-null": (text, [{"op": "context", "ends": [8, n]},
                                               {"op": "compact", "ends": [n], "settings": SETTINGS}])}


RELEASES = ("0.87.1", "1.6.0", "0.13.2")


def _cases(release: str) -> dict[str, tuple[str, list[dict]]]:
    return _v1_cases() if release == "0.13.2" else _v3_cases()


def _requests(release: str, folder: Path) -> list[tuple[str, dict]]:
    out = []
    for name, (text, reqs) in _cases(release).items():
        path = folder / f"{name}.jsonl"
        path.write_text(text)
        out += [(name, {**r, "path": str(path)}) for r in reqs]
    return out


def _mirror(release: str) -> Any:
    if release == "0.13.2":
        from tests.releases.test_differential_pi_0_13_2 import Mirror as Mirror0132

        return Mirror0132()
    from tests.oracle.mirror import Mirror

    return Mirror(None if release == "0.87.1" else release)


def _pimem(mirror: Any, release: str, req: dict) -> Any:
    """pimem's answer with the error texts kept (the comparison checks them word for word)."""
    from tests.oracle.mirror import _plain

    fn = getattr(mirror, "op_" + req["op"])
    result = _plain(fn(req))
    return _texts(result)


def _texts(value: Any) -> Any:
    """Throw messages without pimem's exception class name."""
    if isinstance(value, list):
        return [_texts(v) for v in value]
    if isinstance(value, dict):
        out = {k: _texts(v) for k, v in value.items()}
        if isinstance(out.get("throws"), str) and out["throws"].startswith("JavaScriptTypeError: "):
            out["throws"] = out["throws"][len("JavaScriptTypeError: "):]
        return out
    return value


def _comparable(release: str, op: str, result: Any) -> Any:
    from tests.oracle.mirror import normalize

    if release == "0.13.2":
        return result
    keep = json.loads(json.dumps(result))
    messages = _throw_messages(keep)
    return {"result": normalize(op, keep), "throws": messages}


def _throw_messages(value: Any) -> list[str]:
    if isinstance(value, list):
        return [m for v in value for m in _throw_messages(v)]
    if isinstance(value, dict):
        own = [value["throws"]] if isinstance(value.get("throws"), str) else []
        return own + [m for v in value.values() for m in _throw_messages(v)]
    return []


def make_session_goldens() -> Path:
    import tempfile

    payload: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for release in RELEASES:
            reqs = _requests(release, Path(tmp))
            results = release_oracle(release).run_batch([r for _, r in reqs])
            payload[release] = [{"case": name, "op": r["op"], "result": _comparable(release, r["op"], res)}
                                for (name, r), res in zip(reqs, results)]
    SESSIONS_GOLDEN.write_text(json.dumps(payload, ensure_ascii=True, indent=0, sort_keys=True) + "\n")
    return SESSIONS_GOLDEN


def _check(release: str, theirs: list[Any], tmp_path: Path) -> list[str]:
    mirror = _mirror(release)
    problems = []
    for (name, req), res in zip(_requests(release, tmp_path), theirs):
        mine = _comparable(release, req["op"], _pimem(mirror, release, req))
        if mine != res:
            from tests.oracle.plans import first_difference

            problems.append(f"{release} {name} {req['op']}: {first_difference(mine, res)}")
    return problems


@pytest.mark.parametrize("release", RELEASES)
def test_odd_sessions_match_the_goldens(release, tmp_path):
    golden = json.loads(SESSIONS_GOLDEN.read_text())[release]
    reqs = _requests(release, tmp_path)
    assert [(g["case"], g["op"]) for g in golden] == [(n, r["op"]) for n, r in reqs]
    problems = _check(release, [g["result"] for g in golden], tmp_path)
    assert not problems, "\n".join(problems)


@pytest.mark.oracle
@pytest.mark.parametrize("release", RELEASES)
def test_odd_sessions_match_the_release(release, tmp_path):
    oracle = release_oracle(release)
    reqs = _requests(release, tmp_path)
    theirs = [_comparable(release, r["op"], res) for (_, r), res in zip(reqs, oracle.run_batch([r for _, r in reqs]))]
    problems = _check(release, theirs, tmp_path)
    assert not problems, "\n".join(problems)


def test_what_the_goldens_say():
    """The behaviours themselves, readable: ignored edit, Pi's throws, "null" in 0.13.2's text."""
    golden = json.loads(SESSIONS_GOLDEN.read_text())
    by = {(release, g["case"], g["op"]): g["result"] for release, rows in golden.items() for g in rows}
    for release in ("0.87.1", "1.6.0"):
        assert by[(release, "edit-without-replacement-on-a-model-change", "project")]["throws"] == []
        assert by[(release, "edit-without-replacement-on-a-message", "project")]["throws"] == [
            "Cannot read properties of undefined (reading 'content')"]
        assert "msg.content.some is not a function" in by[(release, "assistant-content-a-string", "prepare")][
            "throws"]
        for case in ("usage-a-string", "usage-true"):
            estimate = by[(release, case, "estimate")]
            assert estimate["throws"] == [] and estimate["result"][0]["context"]["lastUsageIndex"] == 3
        for case in ("usage-cache-read-a-string", "edit-target-an-object"):
            assert all(by[(release, case, op)]["throws"] == [] for op in ("project", "estimate", "prepare"))
        assert by[(release, "system-tools-added-null", "project")]["throws"] == [
            "Cannot read properties of null (reading 'name')"]
    assert by[("1.6.0", "nested-calls-not-a-list", "prepare")]["throws"]
    assert by[("0.87.1", "nested-calls-not-a-list", "prepare")]["throws"] == []
    compact = by[("0.13.2", "compaction-summary-null", "compact")][0]
    assert compact["error"] is None and compact["requests"][0]["count"] > 0


if __name__ == "__main__":
    print(make_session_goldens())

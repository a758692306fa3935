"""pimem's Pi 0.13.2 functions (``pimem.releases.pi_0_13_2``) against the real Pi 0.13.2 release.

Pi 0.13.2 wrote the compactions of the real ``before-compaction`` session (v1 format). For every
prefix of a v1 file: ``tokensBefore`` and ``findCutPoint`` (from the start and after the last
compaction, many ``keepRecentTokens``), the context ``loadSessionFromEntries`` builds, and for
many prefixes the whole ``compact()``: the messages sent (digest), instructions, ``maxTokens``
and the CompactionEntry. Files: the real v1 sessions, the sample sessions and generated trees
written as v1 files along their last branch. Live when Node and the release are installed,
always against the goldens in ``tests/goldens/pi-0.13.2``. The recorded compactions themselves
are reproduced without Node.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pimem.base.js import UNDEFINED, js_stringify
from pimem.core.compaction.compaction import CompactionSettings
from pimem.releases import pi_0_13_2 as pi
from tests.conftest import REAL_DIR, REAL_V1, SAMPLES_DIR
from tests.oracle import goldens as golden_store
from tests.oracle.client import ListDigester
from tests.oracle.plans import canonical_digest, file_digest, first_difference, request_key
from tests.oracle.plugin import RELEASE_COUNTS
from tests.core.test_differential_property import draw_trees
from tests.support.summarizers import Oracle0132Summarizer

RELEASE = "0.13.2"
COUNTS = RELEASE_COUNTS[RELEASE]
REAL_V1_PATHS = [REAL_DIR / n for n in REAL_V1 if (REAL_DIR / n).exists()]
TREE_COUNT = int(os.environ.get("PIMEM_PROPERTY_TREES_0_13_2", "600"))
GOLDEN_TREES = 120
GOLDEN_NAME = Path("pi-0.13.2.jsonl")  # tests/goldens/pi-0.13.2/all/pi-0.13.2.json.gz
KEEPS = [0, 1, 100, 1000, 5000, 20000, 50000, 10**9]


# ------------------------------------------------------------------------------------------
# v1 files from v3 sessions (the last branch, ids dropped, compactions by index)
# ------------------------------------------------------------------------------------------
def to_v1(header: dict[str, Any], path: list[dict[str, Any]]) -> str:
    """A v1 session file (as Pi 0.13.2 wrote them) holding ``path``: no ids or version; a
    compaction's first kept entry as its index in the file (header = 0)."""
    index = {e.get("id"): i + 1 for i, e in enumerate(path)}
    lines = [{k: v for k, v in header.items() if k != "version"}]
    for e in path:
        out = {k: v for k, v in e.items() if k not in ("id", "parentId", "firstKeptEntryId")}
        if e.get("type") == "compaction" and e.get("firstKeptEntryId") in index:
            out["firstKeptEntryIndex"] = index[e["firstKeptEntryId"]]
        lines.append(out)
    return "".join(js_stringify(x) + "\n" for x in lines)


def _last_branch(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {e.get("id"): e for e in entries}
    path, cur, seen = [], entries[-1] if entries else None, set()
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        path.append(cur)
        cur = by_id.get(cur.get("parentId"))
    return path[::-1]


def sample_v1_files(folder: Path) -> list[Path]:
    from pimem.core.session_manager import load_session

    out = []
    for src in sorted(SAMPLES_DIR.glob("*.jsonl")):
        s = load_session(src)
        target = folder / f"{src.stem}.v1.jsonl"
        target.write_text(to_v1(s.header, _last_branch(s.entries)), encoding="utf-8")
        out.append(target)
    return out


def tree_v1_files(n: int, salt: int, folder: Path) -> list[Path]:
    out = []
    for i, (header, entries) in enumerate(draw_trees(n, salt)):
        target = folder / f"tree-{salt}-{i:05d}.v1.jsonl"
        target.write_text(to_v1(header, _last_branch(entries)), encoding="utf-8")
        out.append(target)
    return out


# ------------------------------------------------------------------------------------------
# Requests and pimem's answers
# ------------------------------------------------------------------------------------------
def _settings(keep: int, reserve: int = 16384) -> dict[str, Any]:
    return {"enabled": True, "reserveTokens": reserve, "keepRecentTokens": keep}


COMPACT_VARIANTS: list[dict[str, Any]] = [
    {"settings": _settings(20000)},
    {"settings": _settings(1000, 30000), "customInstructions": "Focus on the tests ✓ and 𝔘nicode"},
    {"settings": _settings(0, 100)},
    {"settings": _settings(50), "fail": {"throws": "overloaded"}},
    {"settings": _settings(5000), "fail": {"stopReason": "error", "blocks": [
        {"type": "thinking", "thinking": "t"}, {"type": "text", "text": "a"}, {"type": "text", "text": ""}]}},
]


def requests_for(path: Path, entry_count: int, kind: str) -> list[dict[str, Any]]:
    p = str(path)
    entries = pi.load_entries(path)
    before_compactions = [i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("type") == "compaction"]
    stride = 1 if kind == "tree" else max(1, entry_count // (25 if kind == "real" else 60))
    ends = sorted(set(range(1, entry_count + 1, stride)) | {entry_count} | set(before_compactions)
                  | {i + 1 for i in before_compactions})
    reqs: list[dict[str, Any]] = [
        {"op": "info", "path": p},
        {"op": "cut_points", "path": p, "ends": "all", "keeps": KEEPS},
        {"op": "context", "path": p, "ends": "all"},
    ]
    for v in COMPACT_VARIANTS:
        reqs.append({"op": "compact", "path": p, "ends": ends, **v})
    return reqs


class Mirror:
    def __init__(self) -> None:
        self.digest_list = ListDigester()
        self._entries: dict[str, list[Any]] = {}

    def entries(self, path: str) -> list[Any]:
        if path not in self._entries:
            self._entries[path] = pi.load_entries(path)
        return self._entries[path]

    def run(self, req: dict[str, Any]) -> Any:
        result = getattr(self, "op_" + req["op"])(req)
        return json.loads(js_stringify(result))

    def _ends(self, all_: list[Any], ends: Any) -> list[int]:
        return list(range(1, len(all_) + 1)) if ends == "all" else list(ends)

    @staticmethod
    def _guard(items: list[int], fn: Any) -> list[Any]:
        out = []
        for end in items:
            try:
                out.append(fn(end))
            except Exception:  # noqa: BLE001 - compared as "throws" with Pi's crash on the same item
                out.append({"end": end, "throws": True})
        return out

    def op_info(self, req: dict[str, Any]) -> Any:
        return {"entryCount": len(self.entries(req["path"]))}

    def op_cut_points(self, req: dict[str, Any]) -> Any:
        all_ = self.entries(req["path"])

        def one(end: int) -> Any:
            entries = all_[:end]
            prev = max((i for i, e in enumerate(entries) if e.get("type") == "compaction"), default=-1)
            usage = pi.get_last_assistant_usage(entries)
            return {
                "end": end,
                "tokensBefore": pi.calculate_context_tokens(usage) if usage is not None else 0,
                "cuts": {str(s): [pi.find_cut_point(entries, s, end, k) for k in req["keeps"]]
                         for s in dict.fromkeys([0, prev + 1])},
            }
        return self._guard(self._ends(all_, req["ends"]), one)

    def op_context(self, req: dict[str, Any]) -> Any:
        all_ = self.entries(req["path"])

        def one(end: int) -> Any:
            c = pi.load_session_from_entries(all_[:end])
            level = c["thinkingLevel"]
            return {"end": end, "messages": self.digest_list(c["messages"]), "count": len(c["messages"]),
                    "thinkingLevel": None if level is UNDEFINED else level, "model": c["model"]}
        return self._guard(self._ends(all_, req["ends"]), one)

    def op_compact(self, req: dict[str, Any]) -> Any:
        all_ = self.entries(req["path"])
        d = req["settings"]
        settings = CompactionSettings(enabled=d["enabled"], reserve_tokens=d["reserveTokens"],
                                      keep_recent_tokens=d["keepRecentTokens"])
        out = []
        for end in self._ends(all_, req["ends"]):
            summarizer = Oracle0132Summarizer(req.get("fail"))
            entry = error = None
            try:
                entry = pi.compact(all_[:end], summarizer, settings, req.get("customInstructions"),
                                   model="oracle-model")
                del entry["timestamp"]
            except Exception as exc:  # noqa: BLE001 - Pi's Error message is compared
                error = str(exc)
            requests = [
                {"messages": self.digest_list(r.messages), "count": len(r.messages), "prompt": r.prompt,
                 "systemPrompt": r.system_prompt or None, "maxTokens": r.max_tokens, "modelId": r.model}
                for r in summarizer.requests
            ]
            out.append({"end": end, "requests": requests, "entry": entry, "error": error})
        return out


def normalize(result: Any) -> Any:
    if isinstance(result, list):
        for row in result:
            if isinstance(row, dict) and "throws" in row:
                row["throws"] = True
    return result


# ------------------------------------------------------------------------------------------
# The recorded compactions (no Node needed)
# ------------------------------------------------------------------------------------------
def test_reproduces_the_recorded_compactions() -> None:
    """On before-compaction.v1.jsonl Pi 0.13.2's rules with default settings give exactly the
    recorded firstKeptEntryIndex and tokensBefore of both compactions; Pi 0.87.1's do not."""
    path = REAL_DIR / "before-compaction.v1.jsonl"
    if not path.exists():
        pytest.skip("real Pi sessions not available")
    entries = pi.load_entries(path)
    recorded = [(i, e) for i, e in enumerate(entries) if e.get("type") == "compaction"]
    assert [(i, e["firstKeptEntryIndex"], e["tokensBefore"]) for i, e in recorded] == [
        (359, 293, 175004), (628, 551, 185014)]
    for i, e in recorded:
        prep = pi.prepare_compaction(entries[:i], pi.DEFAULT_COMPACTION_SETTINGS)
        assert (prep.first_kept_entry_index, prep.tokens_before) == (e["firstKeptEntryIndex"], e["tokensBefore"])
        assert entries[prep.first_kept_entry_index]["message"]["role"] == "user"
    # the summaries follow the old instructions ("context checkpoint"), without 0.87.1's file lists
    assert all(e["summary"].startswith("# Context Checkpoint") and "<read-files>" not in e["summary"] for _, e in recorded)
    # Pi 0.87.1 on the same branch cuts elsewhere
    from pimem.core.compaction.compaction import prepare_compaction
    from pimem.core.session_manager import load_session

    s = load_session(REAL_DIR / "before-compaction.jsonl")
    branch = s.get_branch()
    first = next(k for k, e in enumerate(branch) if e.get("type") == "compaction")
    prep = prepare_compaction(branch[:first])
    assert prep is not None and prep.first_kept_entry_id != branch[first]["firstKeptEntryId"]


def test_context_after_compaction_wraps_the_summary() -> None:
    entries = [{"type": "session", "id": "s", "thinkingLevel": "low", "provider": "p", "modelId": "m"},
               {"type": "message", "message": {"role": "user", "content": "a", "timestamp": 1}},
               {"type": "message", "message": {"role": "user", "content": "b", "timestamp": 2}},
               {"type": "compaction", "summary": "S", "firstKeptEntryIndex": 2, "tokensBefore": 5}]
    c = pi.load_session_from_entries(entries)
    assert c["messages"][0]["content"] == pi.SUMMARY_PREFIX + "S" + pi.SUMMARY_SUFFIX
    assert [m["content"] for m in c["messages"][1:]] == ["b"]
    assert (c["thinkingLevel"], c["model"]) == ("low", {"provider": "p", "modelId": "m"})
    with pytest.raises(Exception, match="Already compacted"):
        pi.prepare_compaction(entries)


# ------------------------------------------------------------------------------------------
# Against the release
# ------------------------------------------------------------------------------------------
def _compare(reqs: list[dict[str, Any]], theirs: list[Any], mirror: Mirror, label: str = "") -> list[str]:
    problems = []
    for req, res in zip(reqs, theirs):
        mine, res = normalize(mirror.run(req)), normalize(res)
        COUNTS[f"{label}{req['op']} cases"] += len(mine) if isinstance(mine, list) else 1
        if mine != res:
            problems.append(f"{Path(req['path']).name} {req['op']}: {first_difference(mine, res)}")
    return problems


@pytest.mark.oracle
def test_live_pi_0_13_2(oracle_0_13_2: Any, tmp_path: Path) -> None:
    """Real v1 sessions, the samples as v1 files and PIMEM_PROPERTY_TREES_0_13_2 (default 600)
    generated trees: zero differences from Pi 0.13.2."""
    files = [(p, "real") for p in REAL_V1_PATHS] + [(p, "sample") for p in sample_v1_files(tmp_path)]
    files += [(p, "tree") for p in tree_v1_files(TREE_COUNT, 5, tmp_path)]
    mirror = Mirror()
    problems: list[str] = []
    for start in range(0, len(files), 200):
        reqs = [r for p, kind in files[start:start + 200] for r in requests_for(p, len(pi.load_entries(p)), kind)]
        problems += _compare(reqs, oracle_0_13_2.run_batch(reqs), mirror)
    COUNTS["v1 files"] += len(files)
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:15])


def write_goldens_0_13_2(oracle: Any) -> Path:
    """Pi 0.13.2's results: digests for the real sessions, full results for samples and trees."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = [(p, "real") for p in REAL_V1_PATHS] + [(p, "sample") for p in sample_v1_files(folder)]
        files += [(p, "tree") for p in tree_v1_files(GOLDEN_TREES, 6, folder)]
        payload: dict[str, Any] = {"pi_version": RELEASE, "files": {}, "trees": {}, "requests": []}
        for p, kind in files:
            reqs = requests_for(p, len(pi.load_entries(p)), kind)
            payload["files"][p.name] = file_digest(p)
            if kind == "tree":
                payload["trees"][p.name] = p.read_text(encoding="utf-8")
            for req, res in zip(reqs, oracle.run_batch(reqs)):
                res = normalize(res)
                payload["requests"].append({**req, "path": p.name, "kind": kind,
                                            "result": canonical_digest(res) if kind == "real" else res})
    return golden_store.write_goldens(GOLDEN_NAME, "all", payload, RELEASE)


def test_goldens_pi_0_13_2(tmp_path: Path) -> None:
    """pimem's 0.13.2 functions == Pi 0.13.2's stored results (no Node needed)."""
    store = golden_store.read_goldens(GOLDEN_NAME, "all", RELEASE)
    if store is None:
        pytest.fail("no 0.13.2 goldens; run `python -m tests.oracle.make_goldens --release 0.13.2`", pytrace=False)
    assert store["pi_version"] == RELEASE
    paths = {p.name: p for p in REAL_V1_PATHS + sample_v1_files(tmp_path)}
    for name, text in store["trees"].items():
        paths[name] = tmp_path / name
        paths[name].write_text(text, encoding="utf-8")
    assert len(store["trees"]) == GOLDEN_TREES
    mirror = Mirror()
    problems, checked = [], set()
    for item in store["requests"]:
        path = paths.get(item["path"])
        if path is None:  # a real session not available here
            continue
        assert file_digest(path) == store["files"][item["path"]], f"{item['path']} changed since its goldens"
        req = {k: v for k, v in item.items() if k not in ("result", "kind")}
        req["path"] = str(path)
        mine = normalize(mirror.run(req))
        COUNTS[f"golden {req['op']} cases"] += len(mine) if isinstance(mine, list) else 1
        ok = canonical_digest(mine) == item["result"] if item["kind"] == "real" else mine == item["result"]
        if not ok:
            detail = "" if item["kind"] == "real" else first_difference(mine, item["result"])
            problems.append(f"{item['path']} {request_key(req)} {detail}")
        checked.add(item["path"])
    assert len(checked) >= GOLDEN_TREES + 4
    assert not problems, f"{len(problems)} differences from the goldens:\n" + "\n".join(problems[:15])

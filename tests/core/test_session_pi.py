"""Session loading, migration, tree queries and appends against Pi 0.87.1 running in Node."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

from pimem.base.js import js_stringify, loads_line, parse_iso_ms
from pimem.core.session_manager import Session, load_session
from tests.base.test_jsonio import run_node

LOAD_SCRIPT = r"""
const sm = await import(PI + 'core/session-manager.js');
const out = INPUT.map((p) => {
  const entries = sm.loadEntriesFromFile(p);
  sm.migrateSessionEntries(entries);
  return entries.map((e) => JSON.stringify(e));
});
console.log(JSON.stringify(out));
"""


def pi_load(paths: list[Path]) -> list[list[Any]]:
    answers = run_node(LOAD_SCRIPT, [str(p) for p in paths], need_pi=True)
    return [[loads_line(line) for line in lines] for lines in answers]


def positional(entries: list[dict]) -> list[str]:
    """Entries as JSON with ids replaced by their position (v1 migration makes random ids)."""
    pos = {e.get("id"): f"#{i}" for i, e in enumerate(entries) if isinstance(e.get("id"), str)}
    out = []
    for e in entries:
        e = dict(e)
        if e.get("type") != "session":
            for key in ("id", "parentId", "firstKeptEntryId"):
                if isinstance(e.get(key), str):
                    e[key] = pos.get(e[key], e[key])
        out.append(js_stringify(e))
    return out


def ours(session: Session) -> list[dict]:
    return [session.header, *session.entries]


def copy_to(tmp_path: Path, paths: list[Path]) -> list[Path]:
    """Pi's loader may append a newline to a file; give it copies."""
    copies = []
    for p in paths:
        target = tmp_path / p.name
        shutil.copyfile(p, target)
        copies.append(target)
    return copies


def test_real_v3_load_equals_pi(real_v3_paths: list[Path], tmp_path: Path) -> None:
    copies = copy_to(tmp_path, real_v3_paths)
    for path, pi_entries in zip(copies, pi_load(copies)):
        session = load_session(path)
        assert session.warnings == []
        assert [js_stringify(e) for e in ours(session)] == [js_stringify(e) for e in pi_entries]


def test_real_v1_migration_equals_pi(real_v1_paths: list[Path], tmp_path: Path) -> None:
    copies = copy_to(tmp_path, real_v1_paths)
    for path, pi_entries in zip(copies, pi_load(copies)):
        session = load_session(path, seed=7)
        assert session.header["version"] == 3
        assert positional(ours(session)) == positional(pi_entries)
        compactions = [e for e in session.entries if e["type"] == "compaction"]
        for c in compactions:  # positional mapping above checks they point at the same entries
            assert "firstKeptEntryIndex" not in c and session.get_entry(c["firstKeptEntryId"])


def test_v1_migration_is_reproducible_with_seed(real_v1_paths: list[Path]) -> None:
    a = load_session(real_v1_paths[0], seed=3)
    b = load_session(real_v1_paths[0], seed=3)
    c = load_session(real_v1_paths[0], seed=4)
    assert a.to_jsonl() == b.to_jsonl() != c.to_jsonl()


def _bad_files(tmp_path: Path) -> list[Path]:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}
    e1 = {"type": "message", "id": "a1", "parentId": None, "timestamp": "2025-01-01T00:00:01.000Z",
          "message": {"role": "user", "content": "hi \u2028 😀", "timestamp": 1}}
    e2 = {"type": "weird", "id": "a2", "parentId": "zz", "timestamp": "x", "n": 1.0, "k": {"2": 1, "b": 2, "1": 3}}
    v1_header = {"type": "session", "id": "s1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}
    v1_msg = {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z",
              "message": {"role": "hookMessage", "content": "h", "timestamp": 1}}
    v1_comp = {"type": "compaction", "timestamp": "t", "summary": "S", "firstKeptEntryIndex": 1, "tokensBefore": 5}
    v1_comp_fwd = {"type": "compaction", "timestamp": "t", "summary": "S", "firstKeptEntryIndex": 5, "tokensBefore": 5}
    v1_comp_hdr = {"type": "compaction", "timestamp": "t", "summary": "S", "firstKeptEntryIndex": 0, "tokensBefore": 5}
    files = {
        "malformed.jsonl": [header, "{oops", "", e1, "   ", "[1,", e2, "42", "null"],
        "crlf.jsonl": [header, e1, e2],
        "truncated.jsonl": [header, e1, json.dumps(e2)[:20]],
        "v1.jsonl": [v1_header, v1_msg, v1_comp, v1_msg, v1_comp_fwd, v1_comp_hdr, v1_msg],
        "v2.jsonl": [dict(v1_header, version=2), dict(v1_msg, id="m1", parentId=None)],
        "surrogates.jsonl": [header, '{"type":"message","id":"a1","parentId":null,"timestamp":"t",'
                             '"message":{"role":"user","content":"\\ud800 x \\udfff","timestamp":1}}'],
    }
    paths = []
    for name, lines in files.items():
        sep = "\r\n" if name == "crlf.jsonl" else "\n"
        text = sep.join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines)
        p = tmp_path / name
        p.write_bytes((text + ("" if name == "truncated.jsonl" else sep)).encode("utf-8"))
        paths.append(p)
    return paths


def test_odd_files_load_like_pi(tmp_path: Path) -> None:
    paths = _bad_files(tmp_path)
    sessions = [load_session(p, seed=1) for p in paths]  # before Pi may touch the files
    for path, session, pi_entries in zip(paths, sessions, pi_load(paths)):
        # Pi keeps non-object values in its list; pimem drops them (with a warning)
        pi_objects = [e for e in pi_entries if isinstance(e, dict)]
        assert positional(ours(session)) == positional(pi_objects), path.name
        if len(pi_objects) != len(pi_entries):
            assert any("not an object" in w.reason for w in session.warnings)


# ------------------------------------------------------------------------------------------
# Tree queries and appends, step by step beside Pi's SessionManager
# ------------------------------------------------------------------------------------------


def _tree_file(tmp_path: Path) -> Path:
    def msg(eid: str, parent: str | None, role: str, text: str, ts: int, **extra: Any) -> dict:
        m: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": ts}
        m.update(extra)
        return {"type": "message", "id": eid, "parentId": parent,
                "timestamp": f"2025-01-01T00:00:{ts:02d}.000Z", "message": m}

    lines = [
        {"type": "session", "version": 3, "id": "tree", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"},
        {"type": "message", "id": "s0", "parentId": None, "timestamp": "2025-01-01T00:00:00.500Z",
         "message": {"role": "system", "content": "You are Pi.", "sections": {"a": "one"}, "timestamp": 500}},
        msg("u1", "s0", "user", "hello", 1),
        msg("a1", "u1", "assistant", "hi there", 2),
        msg("u2", "a1", "user", "left branch", 3),
        msg("a2", "u2", "assistant", "left answer", 4),
        msg("u3", "a1", "user", "right branch", 5),
        {"type": "label", "id": "l1", "parentId": "u3", "timestamp": "2025-01-01T00:00:06.000Z",
         "targetId": "u2", "label": "left"},
        {"type": "label", "id": "l2", "parentId": "l1", "timestamp": "2025-01-01T00:00:07.000Z",
         "targetId": "a1", "label": "first"},
        {"type": "label", "id": "l3", "parentId": "l2", "timestamp": "2025-01-01T00:00:08.000Z",
         "targetId": "a1", "label": ""},
        {"type": "session_info", "id": "n1", "parentId": "l3", "timestamp": "2025-01-01T00:00:09.000Z",
         "name": "  My session  "},
        msg("a3", "n1", "assistant", "right answer", 10),
        msg("a2", "u3", "assistant", "duplicate id, later wins", 11),
        {"type": "session_info", "id": "n2", "parentId": "a2", "timestamp": "2025-01-01T00:00:12.000Z",
         "name": "Final name"},
    ]
    p = tmp_path / "tree.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


TREE_SCRIPT = r"""
const { SessionManager, loadEntriesFromFile } = await import(PI + 'core/session-manager.js');
const { path, ops, queryIds } = INPUT;
const m = SessionManager.inMemory('/w', undefined, loadEntriesFromFile(path));
const snap = () => ({
  leaf: m.getLeafId() ?? null,
  name: m.getSessionName() ?? null,
  branches: Object.fromEntries(queryIds.map((id) => [id, m.getBranch(id).map((e) => e.id)])),
  children: Object.fromEntries([...queryIds, null].map((id) => [String(id), m.getChildren(id).map((e) => e.id)])),
  labels: Object.fromEntries(queryIds.map((id) => [id, m.getLabel(id) ?? null])),
});
const before = snap();
for (const op of ops) {
  if (op.op === 'compact') m.appendCompaction(op.summary, op.firstKeptEntryId ?? undefined, op.tokensBefore,
      op.details ?? undefined, op.fromHook ?? undefined, op.usage ?? undefined);
  else if (op.op === 'branch') m.branch(op.id);
  else if (op.op === 'reset') m.resetLeaf();
  else if (op.op === 'branchSummary') m.branchWithSummary(op.target, op.summary, op.details ?? undefined,
      op.fromHook ?? undefined, op.usage ?? undefined);
  else if (op.op === 'message') m.appendMessage(op.message);
}
console.log(JSON.stringify({ before, after: snap(), entries: m.getEntries().map((e) => JSON.stringify(e)) }));
"""

OPS: list[dict[str, Any]] = [
    {"op": "compact", "summary": "sum 1", "firstKeptEntryId": "u3", "tokensBefore": 1234,
     "details": {"readFiles": ["a.py"], "modifiedFiles": []}, "fromHook": False,
     "usage": {"input": 10, "output": 5, "cost": {"total": 0.5}}},
    {"op": "message", "message": {"role": "user", "content": "after compaction", "timestamp": 99}},
    {"op": "branch", "id": "a2"},
    {"op": "branchSummary", "target": "u2", "summary": "went right",
     "details": {"readFiles": [], "modifiedFiles": ["b.py"]}, "fromHook": False},
    {"op": "compact", "summary": "sum 2", "tokensBefore": 7, "fromHook": True},
    {"op": "reset"},
    {"op": "branchSummary", "target": None, "summary": "from the top", "fromHook": False,
     "usage": {"input": 1}},
    {"op": "compact", "summary": "no system here", "firstKeptEntryId": "u1", "tokensBefore": 3},
]


def _apply(session: Session, ops: list[dict[str, Any]]) -> None:
    for op in ops:
        kind = op["op"]
        if kind == "compact":
            result = {k: op.get(k) for k in ("summary", "firstKeptEntryId", "tokensBefore", "details", "usage")}
            session.append_compaction(result, from_hook=op.get("fromHook"))
        elif kind == "branch":
            session.branch(op["id"])
        elif kind == "reset":
            session.reset_leaf()
        elif kind == "branchSummary":
            session.branch_with_summary(
                op["target"], {"summary": op["summary"], "details": op.get("details"), "usage": op.get("usage")},
                from_hook=op.get("fromHook"),
            )
        elif kind == "message":
            session.append_message(op["message"])


def _snap(session: Session, query_ids: list[str]) -> dict[str, Any]:
    return {
        "leaf": session.leaf_id,
        "name": session.name,
        "branches": {i: [e["id"] for e in session.get_branch(i)] for i in query_ids},
        "children": {str(i) if i is not None else "null": [e["id"] for e in session.get_children(i)]
                     for i in [*query_ids, None]},
        "labels": {i: session.get_label(i) for i in query_ids},
    }


def _normalize_new(entries: list[dict], known: set[str]) -> list[str]:
    """Replace fresh ids by order of appearance and fresh timestamps by a placeholder."""
    fresh: dict[str, str] = {}
    out = []
    for e in entries:
        e = json.loads(json.dumps(e))
        if e["id"] not in known:
            fresh.setdefault(e["id"], f"new{len(fresh)}")
            sm = e.get("systemMessage")
            if sm is not None:
                assert sm["timestamp"] == parse_iso_ms(e["timestamp"])
                sm["timestamp"] = 0
            e["timestamp"] = "T"
        for key in ("id", "parentId", "firstKeptEntryId", "fromId"):
            if isinstance(e.get(key), str) and e[key] in fresh:
                e[key] = fresh[e[key]]
        out.append(js_stringify(e))
    return out


def test_tree_and_appends_match_pi(tmp_path: Path) -> None:
    path = _tree_file(tmp_path)
    session = load_session(path, rng=random.Random(5))
    query_ids = ["s0", "u1", "a1", "u2", "a2", "u3", "l1", "l2", "l3", "n1", "a3", "n2"]
    pi = run_node(TREE_SCRIPT, {"path": str(path), "ops": OPS, "queryIds": query_ids}, need_pi=True)
    assert _snap(session, query_ids) == pi["before"]
    known = {e["id"] for e in session.entries}
    _apply(session, OPS)
    pi_entries = [json.loads(x) for x in pi["entries"]]
    assert _rename_fresh(_snap(session, query_ids), session.entries, known) == _rename_fresh(
        pi["after"], pi_entries, known
    )
    assert _normalize_new(session.entries, known) == _normalize_new(pi_entries, known)
    # the first compaction carries the system message of the projected context
    first = next(e for e in session.entries if e.get("summary") == "sum 1")
    assert first["systemMessage"]["content"] == "You are Pi."


def _rename_fresh(snap: dict[str, Any], entries: list[dict], known: set[str]) -> dict[str, Any]:
    """Replace fresh random ids in a snapshot by their order of appearance."""
    fresh: dict[str, str] = {}
    for e in entries:
        if e["id"] not in known:
            fresh.setdefault(e["id"], f"new{len(fresh)}")
    text = json.dumps(snap, sort_keys=True)
    for old, new in fresh.items():
        text = text.replace(f'"{old}"', f'"{new}"')
    return json.loads(text)

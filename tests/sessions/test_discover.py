"""Session discovery and corpus loading, on real files in temporary folder trees."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pimem.sessions import discover
from pimem.core.session_manager import not_a_header
from pimem.base.js import js_string
from pimem.sessions.discover import (
    DISCOVER_COLUMNS,
    Corpus,
    default_sessions_dir,
    discover_sessions,
    load_sessions,
    scan_session_file,
)


def _extract_text_content(message: dict) -> str:
    """Pi's extractTextContent, written out plainly (blocks that are not objects skipped)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return " ".join("" if t is None else js_string(t) for t in texts)


def _line(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def header(sid: str, ts: str = "2025-01-02T03:04:05.000Z", cwd: str = "/work/proj", **extra) -> dict:
    return {"type": "session", "version": 3, "id": sid, "timestamp": ts, "cwd": cwd, **extra}


def msg_entry(eid: str, parent: str | None, role: str, content, ts: str, msg_ts: int | None = None, **extra) -> dict:
    message = {"role": role, "content": content, **extra}
    if msg_ts is not None:
        message["timestamp"] = msg_ts
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": message}


def write_jsonl(path: Path, objs: list[dict], *, newline: str = "\n", bom: bool = False, trailer: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = newline.join(_line(o) for o in objs) + newline + trailer
    data = text.encode("utf-8")
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    return path


GOOD_ENTRIES = [
    header("s-good"),
    msg_entry("u1", None, "user", [{"type": "image", "data": "x", "mimeType": "image/png"}], "2025-01-02T03:04:06.000Z", 1735787046000),
    msg_entry("u2", "u1", "user", [{"type": "text", "text": "fix the"}, {"type": "text", "text": "bug ✨"}], "2025-01-02T03:04:07.000Z", 1735787047000),
    msg_entry("a1", "u2", "assistant", [{"type": "text", "text": "done"}], "2025-01-02T03:05:00.000Z", 1735787090000),
    {"type": "session_info", "id": "i1", "parentId": "a1", "timestamp": "2025-01-02T03:05:01.000Z", "name": "  First name  "},
    {"type": "session_info", "id": "i2", "parentId": "i1", "timestamp": "2025-01-02T03:05:02.000Z", "name": " Final name "},
    msg_entry("t1", "i2", "toolResult", [{"type": "text", "text": "late"}], "2025-01-02T09:00:00.000Z", 1735808400000, toolCallId="c", toolName="read", isError=False),
]


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A sessions folder: good sessions at several depths, broken files and other files."""
    root = tmp_path / "sessions"
    write_jsonl(root / "--work-proj--" / "good.jsonl", GOOD_ENTRIES)
    # v1 session (no ids, no version), CRLF line ends, a BOM, a malformed line and a truncated last line.
    v1 = [
        {"type": "session", "id": "s-v1", "timestamp": "2024-05-06T07:08:09.000Z", "cwd": "/old"},
        {"type": "message", "timestamp": "2024-05-06T07:08:10.000Z", "message": {"role": "user", "content": "plain string prompt", "timestamp": 1714979290000}},
    ]
    p = write_jsonl(root / "--old--" / "nested" / "deeper" / "v1.jsonl", v1, newline="\r\n", bom=True, trailer='{"type":"message","trunc')
    with open(p, "r+b") as f:  # a malformed line in the middle
        data = f.read()
        f.seek(0)
        f.write(data.replace(b"\r\n", b"\r\nnot json at all\r\n", 1))
    # Cleared name, no user text: first_user_message NA; modified falls back to header time.
    write_jsonl(
        root / "--work-proj--" / "cleared.jsonl",
        [
            header("s-cleared", ts="2025-03-01T00:00:00.000Z", parentSession="/x/parent.jsonl"),
            header("s-extra-header"),  # a second header line: skipped by the loader
            {"type": "session_info", "id": "n1", "parentId": None, "timestamp": "2025-03-01T00:00:01.000Z", "name": "named"},
            {"type": "session_info", "id": "n2", "parentId": "n1", "timestamp": "2025-03-01T00:00:02.000Z", "name": "   "},
            {"type": "model_change", "id": "m1", "parentId": "n2", "timestamp": "2025-03-01T00:00:03.000Z", "provider": "p", "modelId": "m"},
        ],
    )
    (root / "--work-proj--" / "empty.jsonl").write_bytes(b"")
    (root / "--work-proj--" / "blank.jsonl").write_text("\n  \n\n")
    write_jsonl(root / "--work-proj--" / "no-header.jsonl", [GOOD_ENTRIES[2], GOOD_ENTRIES[0]])
    (root / "--work-proj--" / "array.jsonl").write_text('[{"type":"session","id":"x"}]\n')
    (root / "--work-proj--" / "binary.jsonl").write_bytes(bytes(range(256)) * 4)
    (root / "--work-proj--" / "notes.txt").write_text(_line(header("s-not-jsonl")) + "\n")
    (root / "--work-proj--" / "sub.jsonl").mkdir()  # a folder named like a session file
    return root


def by_name(df: pd.DataFrame) -> dict[str, pd.Series]:
    return {Path(p).name: row for p, (_, row) in zip(df["path"], df.iterrows())}


def test_discover_walks_nested_folders_and_keeps_broken_files_as_rows(tree: Path) -> None:
    df = discover_sessions(tree)
    assert list(df.columns) == DISCOVER_COLUMNS
    names = sorted(Path(p).name for p in df["path"])
    assert names == sorted(["good.jsonl", "v1.jsonl", "cleared.jsonl", "empty.jsonl", "blank.jsonl", "no-header.jsonl", "array.jsonl", "binary.jsonl"])
    rows = by_name(df)
    for name in ("good.jsonl", "v1.jsonl", "cleared.jsonl"):
        assert pd.isna(rows[name]["error"]), rows[name]["error"]
    assert rows["empty.jsonl"]["error"] == "empty file"
    assert rows["blank.jsonl"]["error"] == "empty file"
    assert "line 1" in rows["no-header.jsonl"]["error"] and '"message"' in rows["no-header.jsonl"]["error"]
    assert "JSON array" in rows["array.jsonl"]["error"]
    assert "not a Pi session" in rows["binary.jsonl"]["error"]
    for name in ("empty.jsonl", "no-header.jsonl", "array.jsonl", "binary.jsonl"):
        assert pd.isna(rows[name]["session_id"]) and pd.isna(rows[name]["entry_count"])
        assert rows[name]["size_bytes"] == (tree / "--work-proj--" / name).stat().st_size


def test_discover_columns_follow_pi_session_info_rules(tree: Path) -> None:
    rows = by_name(discover_sessions(tree))
    good = rows["good.jsonl"]
    assert good["session_id"] == "s-good" and good["cwd"] == "/work/proj" and good["version"] == 3
    assert good["started"] == pd.Timestamp("2025-01-02T03:04:05Z")
    # The latest user/assistant activity (message timestamps); the later tool result does not count.
    assert good["modified"] == pd.Timestamp(1735787090000, unit="ms", tz="UTC")
    assert good["name"] == "Final name"
    # The image-only first user message has no text: the next one counts, parts joined by " ".
    assert good["first_user_message"] == "fix the bug ✨"
    assert good["entry_count"] == 6 and good["message_count"] == 4
    assert good["size_bytes"] == (tree / "--work-proj--" / "good.jsonl").stat().st_size
    assert pd.isna(good["parent_session"])

    v1 = rows["v1.jsonl"]
    assert v1["session_id"] == "s-v1" and v1["version"] == 1 and v1["cwd"] == "/old"
    assert v1["entry_count"] == 1  # the malformed and the truncated lines are skipped
    assert v1["first_user_message"] == "plain string prompt"
    assert v1["modified"] == pd.Timestamp(1714979290000, unit="ms", tz="UTC")

    cleared = rows["cleared.jsonl"]
    assert pd.isna(cleared["name"])  # a later blank name clears the earlier one
    assert pd.isna(cleared["first_user_message"])
    assert cleared["message_count"] == 0 and cleared["entry_count"] == 3
    assert cleared["modified"] == pd.Timestamp("2025-03-01T00:00:00Z")  # header time
    assert cleared["parent_session"] == "/x/parent.jsonl"


def test_counts_agree_with_the_loader(tree: Path) -> None:
    from pimem.core.session_manager import SessionFormatError
    from pimem.sessions.load import load_session

    for _, row in discover_sessions(tree).iterrows():
        try:
            session = load_session(row["path"])
        except SessionFormatError:
            assert not pd.isna(row["error"]), row["path"]
            continue
        assert pd.isna(row["error"])
        assert row["entry_count"] == len(session.entries), row["path"]
        assert row["message_count"] == sum(e.get("type") == "message" for e in session.entries)
        assert row["session_id"] == session.header["id"]
        assert (None if pd.isna(row["name"]) else row["name"]) == session.name


def test_discover_dtypes(tree: Path) -> None:
    df = discover_sessions(tree)
    assert str(df["started"].dtype) == "datetime64[ns, UTC]"
    assert str(df["modified"].dtype) == "datetime64[ns, UTC]"
    for col in ("entry_count", "message_count", "size_bytes", "version"):
        assert str(df[col].dtype) == "Int64", col
    assert isinstance(df["session_id"].dtype, pd.StringDtype)


def test_modified_falls_back_to_entry_time_then_file_mtime(tmp_path: Path) -> None:
    entry_time = write_jsonl(
        tmp_path / "a.jsonl",
        [header("a"), msg_entry("u", None, "user", "hi", "2025-02-03T04:05:06.789Z")],  # no message.timestamp
    )
    no_time = write_jsonl(tmp_path / "b.jsonl", [header("b", ts="not a date")])
    os.utime(no_time, (1_600_000_000, 1_600_000_000))
    rows = by_name(discover_sessions(tmp_path))
    assert rows["a.jsonl"]["modified"] == pd.Timestamp("2025-02-03T04:05:06.789Z")
    assert pd.isna(rows["b.jsonl"]["started"])
    assert rows["b.jsonl"]["modified"] == pd.Timestamp(1_600_000_000, unit="s", tz="UTC")
    assert entry_time.exists()


def test_missing_root_gives_empty_frame(tmp_path: Path) -> None:
    df = discover_sessions(tmp_path / "nowhere")
    assert len(df) == 0 and list(df.columns) == DISCOVER_COLUMNS


def test_parallel_scan_matches_serial(tree: Path) -> None:
    serial = discover_sessions(tree, workers=1)
    parallel = discover_sessions(tree, workers=2)
    pd.testing.assert_frame_equal(serial, parallel)


def test_default_root_honours_pi_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PI_CODING_AGENT_SESSION_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    assert default_sessions_dir() == tmp_path / "home" / ".pi" / "agent" / "sessions"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "")  # empty counts as unset, as in Pi
    assert default_sessions_dir() == tmp_path / "home" / ".pi" / "agent" / "sessions"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "~/custom-agent")
    assert default_sessions_dir() == tmp_path / "home" / "custom-agent" / "sessions"

    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    write_jsonl(agent / "sessions" / "--p--" / "one.jsonl", [header("env-session")])
    df = discover_sessions()
    assert list(df["session_id"]) == ["env-session"]

    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(tmp_path / "flat"))
    write_jsonl(tmp_path / "flat" / "two.jsonl", [header("flat-session")])
    assert list(discover_sessions()["session_id"]) == ["flat-session"]


def test_real_sessions_counts_match_the_loader(real_dir: Path) -> None:
    from pimem.sessions.load import load_session

    df = discover_sessions(real_dir)
    assert df["error"].isna().all()
    for _, row in df.iterrows():
        session = load_session(row["path"])
        assert row["entry_count"] == len(session.entries)
        assert row["message_count"] == sum(e["type"] == "message" for e in session.entries)
        assert row["session_id"] == session.header["id"]
        with open(row["path"], "rb") as f:
            written = json.loads(f.readline()).get("version", 1)  # v1 headers carry no version
        assert row["version"] == written


_LIST_ALL_JS = """
const [dist, dir] = process.argv.slice(1);
const { pathToFileURL } = await import("node:url");
const sm = await import(pathToFileURL(dist + "/core/session-manager.js").href);
const infos = await sm.SessionManager.listAll(dir);
process.stdout.write(JSON.stringify(infos.map((i) => ({
  path: i.path, id: i.id, cwd: i.cwd, name: i.name ?? null, parentSessionPath: i.parentSessionPath ?? null,
  created: i.created.getTime(), modified: i.modified.getTime(), messageCount: i.messageCount,
  firstMessage: i.firstMessage,
}))));
"""


@pytest.mark.oracle
def test_discovery_agrees_with_pi_list_all(tree: Path, oracle) -> None:
    """Pi's own SessionManager.listAll over each folder gives the same sessions and fields."""
    df = discover_sessions(tree)
    folders = sorted({str(Path(p).parent) for p in df["path"]})
    pi: dict[str, dict] = {}
    for folder in folders:
        proc = subprocess.run(
            [str(oracle.node), "--input-type=module", "-e", _LIST_ALL_JS, str(oracle.dist), folder],
            capture_output=True, text=True, timeout=120, check=True,
        )
        for info in json.loads(proc.stdout):
            pi[info["path"]] = info
    ours = df[df["error"].isna()]
    # Pi does not strip a byte-order mark, so it skips the BOM-prefixed v1 file; we read it.
    expected = {p for p in ours["path"] if not p.endswith("v1.jsonl")}
    assert set(pi) == expected
    for _, row in ours.iterrows():
        if row["path"] not in pi:
            continue
        info = pi[row["path"]]
        assert info["id"] == row["session_id"] and info["cwd"] == row["cwd"]
        assert info["name"] == (None if pd.isna(row["name"]) else row["name"])
        assert info["parentSessionPath"] == (None if pd.isna(row["parent_session"]) else row["parent_session"])
        assert info["created"] == row["started"].value // 1_000_000
        assert info["modified"] == row["modified"].value // 1_000_000
        assert info["messageCount"] == row["message_count"]
        first = row["first_user_message"]
        assert info["firstMessage"] == ("(no messages)" if pd.isna(first) else first)


@pytest.mark.oracle
def test_real_discovery_agrees_with_pi_list_all(real_dir: Path, oracle) -> None:
    # Pi lists one folder at a time; pimem walks the tree (pi-mono/ and pi-mono/history/).
    df = discover_sessions(real_dir)
    pi: dict[str, dict] = {}
    for folder in sorted({str(Path(p).parent) for p in df["path"]}):
        proc = subprocess.run(
            [str(oracle.node), "--input-type=module", "-e", _LIST_ALL_JS, str(oracle.dist), folder],
            capture_output=True, text=True, timeout=300, check=True,
        )
        pi.update({i["path"]: i for i in json.loads(proc.stdout)})
    assert set(pi) == set(df["path"])
    for _, row in df.iterrows():
        info = pi[row["path"]]
        assert info["modified"] == row["modified"].value // 1_000_000
        assert info["messageCount"] == row["message_count"]
        assert info["firstMessage"] == row["first_user_message"]


# --------------------------------------------------------------------------- corpus loading


def test_load_sessions_collects_errors_and_keeps_going(tree: Path) -> None:
    corpus = load_sessions(tree, progress=False, workers=1)
    assert isinstance(corpus, Corpus)
    loaded = sorted(s.header["id"] for s in corpus)
    assert loaded == ["s-cleared", "s-good", "s-v1"]
    assert len(corpus) == 3
    failed = {Path(p).name for p in corpus.errors["path"]}
    assert failed == {"empty.jsonl", "blank.jsonl", "no-header.jsonl", "array.jsonl", "binary.jsonl"}
    assert list(corpus.errors.columns) == ["path", "error_type", "message"]
    assert set(corpus.errors["error_type"]) == {"SessionFormatError"}
    for _, row in corpus.errors.iterrows():
        assert row["path"] in row["message"]  # the message names the file


def test_load_sessions_in_processes_matches_serial(tree: Path) -> None:
    serial = load_sessions(tree, progress=False, workers=1, seed=7)
    pooled = load_sessions(tree, progress=False, workers=2, seed=7)
    assert [s.header for s in serial] == [s.header for s in pooled]
    assert [s.entries for s in serial] == [s.entries for s in pooled]
    pd.testing.assert_frame_equal(serial.errors, pooled.errors)


def test_load_sessions_accepts_lists_of_files_and_folders(tree: Path, tmp_path: Path) -> None:
    good = tree / "--work-proj--" / "good.jsonl"
    corpus = load_sessions([good, tree / "--old--", tmp_path / "missing.jsonl"], progress=False)
    assert sorted(s.header["id"] for s in corpus) == ["s-good", "s-v1"]
    assert [Path(p).name for p in corpus.errors["path"]] == ["missing.jsonl"]


def test_load_sessions_shows_a_progress_bar(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    load_sessions(tree / "--old--", progress=True, workers=1)
    assert "loading sessions" in capsys.readouterr().err


def test_corpus_frames_concatenate_sessions(tree: Path) -> None:
    corpus = load_sessions(tree, progress=False)
    entries = corpus.entries_df()
    assert list(entries.columns[:2]) == ["session_id", "path"]
    assert isinstance(entries["session_id"].dtype, pd.CategoricalDtype)
    assert len(entries) == sum(len(s.entries) for s in corpus)
    counts = entries.groupby("session_id", observed=True).size().to_dict()
    assert counts == {s.header["id"]: len(s.entries) for s in corpus}
    assert isinstance(entries["type"].dtype, pd.CategoricalDtype)
    messages = corpus.messages_df()
    assert len(messages) == sum(e["type"] == "message" for s in corpus for e in s.entries)
    for name in ("tool_calls_df", "usage_df", "compactions_df"):
        frame = getattr(corpus, name)()
        assert list(frame.columns[:2]) == ["session_id", "path"], name


def test_empty_corpus_frames_have_columns() -> None:
    corpus = Corpus([])
    frame = corpus.tool_calls_df()
    assert len(frame) == 0 and "call_id" in frame.columns and "session_id" in frame.columns
    assert len(corpus.errors) == 0


def test_real_corpus(real_v3_paths: list[Path]) -> None:
    corpus = load_sessions(real_v3_paths, progress=False)
    assert len(corpus) == 2 and len(corpus.errors) == 0
    calls = corpus.tool_calls_df()
    blocks = sum(
        1
        for s in corpus
        for e in s.entries
        if e["type"] == "message" and e["message"]["role"] == "assistant"
        for b in e["message"]["content"]
        if b.get("type") == "toolCall"
    )
    assert len(calls) == blocks


# --------------------------------------------------------------------------- streaming scan against a whole-file reference


def whole_file_scan(path: str | os.PathLike) -> dict[str, Any]:
    """``scan_session_file`` as first written: the whole file read and split at once."""
    p = Path(path)
    try:
        stat = p.stat()
        with open(p, "rb") as f:
            data = f.read()
    except OSError as exc:
        return discover._error_row(p, None, f"cannot read file: {exc.strerror or exc}")
    size = stat.st_size
    if not data.strip():
        return discover._error_row(p, size, "empty file")
    if data.startswith(discover._BOM):
        data = data[len(discover._BOM):]

    lines = data.split(b"\n")
    header: dict[str, Any] | None = None
    entry_count = 0
    message_count = 0
    name: str | None = None
    first_message = ""
    last_activity: float | None = None

    for line_no, line in enumerate(lines, start=1):
        entry = discover._parse_line(line)
        if not entry:  # blank, malformed, or a falsy JSON value (Pi's ``if (entry)``)
            continue
        if header is None:
            problem = not_a_header(entry)
            if problem is not None:
                return discover._error_row(p, size, f"line {line_no}: {problem}")
            header = entry
            continue
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind == "session":  # a second header: Pi's loader skips it
            continue
        entry_count += 1
        if kind == "session_info":
            # Pi: ``entry.name?.trim() || undefined`` — the latest wins, an empty name clears it.
            raw = entry.get("name")
            name = raw.strip() or None if isinstance(raw, str) else None
            continue
        if kind != "message":
            continue
        message_count += 1
        message = entry.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) or "content" not in message:
            continue
        role = message["role"]
        if role != "user" and role != "assistant":
            continue
        stamp = message.get("timestamp")
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
            activity: float | None = float(stamp)
        else:
            activity = discover._iso_ms(entry.get("timestamp"))
        if activity is not None and not math.isnan(activity):
            last_activity = max(last_activity or 0.0, activity)
        if not first_message and role == "user":
            first_message = _extract_text_content(message)

    if header is None:
        return discover._error_row(p, size, "not a Pi session: no parseable JSON line")

    header_ms = discover._iso_ms(header.get("timestamp"))
    if last_activity is not None and last_activity > 0:
        modified_ms = last_activity
    elif header_ms is not None:
        modified_ms = header_ms
    else:
        modified_ms = stat.st_mtime * 1000.0
    version = header.get("version", 1)
    parent = header.get("parentSession")
    return {
        "path": str(p),
        "session_id": header["id"],
        "cwd": header["cwd"] if isinstance(header.get("cwd"), str) else "",
        "started_ms": header_ms,
        "modified_ms": modified_ms,
        "name": name,
        "entry_count": entry_count,
        "message_count": message_count,
        "size_bytes": size,
        "version": version if isinstance(version, int) and not isinstance(version, bool) else None,
        "first_user_message": first_message or None,
        "parent_session": parent if isinstance(parent, str) else None,
        "error": None,
    }


def _edge_files(tmp_path: Path) -> list[Path]:
    header = json.dumps({"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-02T03:04:05.000Z", "cwd": "/w"}).encode()
    user = json.dumps({"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-02T03:05:00.000Z",
                       "message": {"role": "user", "content": [{"type": "text", "text": "hi é"}], "timestamp": 1767323100000}}).encode()
    info = json.dumps({"type": "session_info", "id": "i", "parentId": "a", "timestamp": "2026-01-02T03:06:00.000Z", "name": "  named  "}).encode()
    big = json.dumps({"type": "message", "id": "b", "parentId": "a", "timestamp": "2026-01-02T03:07:00.000Z",
                      "message": {"role": "assistant", "content": [{"type": "text", "text": "x" * 3_000_000}], "timestamp": 1767323220000}}).encode()
    contents = {
        "plain": header + b"\n" + user + b"\n" + info + b"\n",
        "no-final-newline": header + b"\n" + user,
        "bom": b"\xef\xbb\xbf" + header + b"\n" + user + b"\n",
        "bom-only": b"\xef\xbb\xbf\n",
        "crlf": header + b"\r\n" + user + b"\r\n",
        "blank-and-broken": b"\n  \n" + header + b"\n{broken\n0\nnull\n[]\n\"s\"\n" + user + b"\n" + header + b"\n",
        "invalid-utf8": header + b"\n" + user.replace(b"hi", b"h\xff") + b"\n",
        "lone-surrogate": header + b"\n" + user.replace(b"hi", b"\\ud800") + b"\n",
        "whitespace-only": b" \n\t\n\r\n",
        "empty": b"",
        "falsy-then-header": b"0\n{}\n" + header + b"\n",
        "not-a-session": user + b"\n" + header + b"\n",
        "array-first": b"[1]\n" + header + b"\n",
        "malformed-only": b"{nope\n",
        "line-longer-than-the-buffer": header + b"\n" + big + b"\n" + info + b"\n",
    }
    paths = []
    for name, data in contents.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        paths.append(path)
    return paths


def test_streaming_scan_matches_the_whole_file_reference(tmp_path: Path, sample_paths: list[Path]) -> None:
    paths = [*_edge_files(tmp_path), *sample_paths, tmp_path / "missing.jsonl"]
    rows = [scan_session_file(p) for p in paths]
    assert rows == [whole_file_scan(p) for p in paths]
    by_name = {Path(r["path"]).stem: r for r in rows}
    assert by_name["empty"]["error"] == "empty file" and by_name["whitespace-only"]["error"] == "empty file"
    assert by_name["bom-only"]["error"] == "not a Pi session: no parseable JSON line"
    assert by_name["bom"]["session_id"] == "s1" and by_name["crlf"]["message_count"] == 1
    assert by_name["blank-and-broken"]["entry_count"] == 1
    assert by_name["line-longer-than-the-buffer"]["name"] == "named"


def test_streaming_scan_matches_the_whole_file_reference_on_real_sessions(real_dir: Path) -> None:
    paths = sorted(real_dir.glob("*.jsonl"))
    assert paths
    assert [scan_session_file(p) for p in paths] == [whole_file_scan(p) for p in paths]


def test_scan_memory_does_not_grow_with_the_file(tmp_path: Path, sample_paths: list[Path]) -> None:
    import tracemalloc

    lines = sample_paths[0].read_bytes().split(b"\n")
    body = b"\n".join(line for line in lines[1:] if line) + b"\n"
    copies = max(1, (16 * 1024 * 1024) // len(body))
    path = tmp_path / "long.jsonl"
    with open(path, "wb") as f:
        f.write(lines[0] + b"\n")
        for _ in range(copies):
            f.write(body)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        row = scan_session_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert row["error"] is None and row["size_bytes"] == size
    assert peak < size / 4, f"peak {peak} bytes while scanning a {size}-byte file"

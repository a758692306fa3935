"""Broken session files: clear errors naming file and line, or recorded warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pimem.core.session_manager import SessionFormatError, SessionWarning
from pimem.sessions.load import load_session

HEADER = {"type": "session", "version": 3, "id": "sess-1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"}


def entry(eid: str, parent: str | None, text: str = "hi", **extra) -> dict:
    e = {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1735689601000},
    }
    e.update(extra)
    return e


def write_lines(path: Path, lines: list[str | dict], *, newline: str = "\n", end: bool = True) -> Path:
    text = newline.join(json.dumps(x, ensure_ascii=False) if isinstance(x, dict) else x for x in lines)
    path.write_bytes((text + (newline if end else "")).encode("utf-8", "surrogatepass"))
    return path


def reasons(warnings: list[SessionWarning]) -> list[str]:
    return [w.reason for w in warnings]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_session(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "empty.jsonl"
    p.write_bytes(content)
    with pytest.raises(SessionFormatError, match=r"empty\.jsonl:1: empty file"):
        load_session(p)


def test_first_entry_not_header(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "s.jsonl", ["", "not json", entry("a1", None), HEADER])
    with pytest.raises(SessionFormatError) as info:
        load_session(p)
    assert "s.jsonl:3:" in str(info.value) and "not a session header" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_header_without_string_id(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "s.jsonl", [dict(HEADER, id=7), entry("a1", None)])
    with pytest.raises(SessionFormatError, match=r"s\.jsonl:1: .*string id"):
        load_session(p)


def test_json_array_instead_of_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "a.jsonl"
    p.write_text(json.dumps([HEADER, entry("a1", None)]))
    with pytest.raises(SessionFormatError, match=r"a\.jsonl:1: .*JSON array"):
        load_session(p)
    pretty = tmp_path / "pretty.jsonl"
    pretty.write_text(json.dumps([HEADER, entry("a1", None)], indent=2))
    with pytest.raises(SessionFormatError, match=r"pretty\.jsonl:1: .*JSON array, not JSON Lines"):
        load_session(pretty)


def test_pretty_printed_object(tmp_path: Path) -> None:
    p = tmp_path / "obj.jsonl"
    p.write_text(json.dumps(HEADER, indent=2))
    with pytest.raises(SessionFormatError, match=r"pretty-printed JSON object"):
        load_session(p)


def test_binary_garbage(tmp_path: Path) -> None:
    p = tmp_path / "bin.jsonl"
    p.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(SessionFormatError, match=r"bin\.jsonl:1: not a Pi session: binary data"):
        load_session(p)


def test_malformed_lines_skipped_with_line_numbers(tmp_path: Path) -> None:
    p = write_lines(
        tmp_path / "s.jsonl",
        [HEADER, entry("a1", None), "{broken", "", "   ", entry("a2", "a1"), "[1,2,", entry("a3", "a2")],
    )
    s = load_session(p)
    assert [e["id"] for e in s.entries] == ["a1", "a2", "a3"]
    malformed = [w for w in s.warnings if "malformed" in w.reason]
    assert [w.line for w in malformed] == [3, 7]
    assert all(w.file == str(p) for w in malformed)
    assert s.leaf_id == "a3" and [e["id"] for e in s.get_branch()] == ["a1", "a2", "a3"]


def test_truncated_last_line(tmp_path: Path) -> None:
    full = json.dumps(entry("a2", "a1"))
    p = write_lines(tmp_path / "s.jsonl", [HEADER, entry("a1", None), full[: len(full) // 2]], end=False)
    s = load_session(p)
    assert [e["id"] for e in s.entries] == ["a1"]
    assert [(w.line, w.reason.startswith("truncated last line")) for w in s.warnings] == [(3, True)]


def test_complete_last_line_without_newline_is_fine(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "s.jsonl", [HEADER, entry("a1", None)], end=False)
    s = load_session(p)
    assert s.warnings == [] and [e["id"] for e in s.entries] == ["a1"]


def test_non_object_lines(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "s.jsonl", [HEADER, "42", "null", '"text"', "[1]", entry("a1", None)])
    s = load_session(p)
    assert [e["id"] for e in s.entries] == ["a1"]
    assert [w.line for w in s.warnings] == [2, 3, 4, 5]
    assert all("not an object" in r for r in reasons(s.warnings))


def test_bom_and_crlf(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    body = "\r\n".join(json.dumps(x) for x in [HEADER, entry("a1", None), entry("a2", "a1")]) + "\r\n"
    p.write_bytes(b"\xef\xbb\xbf" + body.encode())
    s = load_session(p)
    assert s.header["id"] == "sess-1" and [e["id"] for e in s.entries] == ["a1", "a2"]
    assert any("byte order mark" in r for r in reasons(s.warnings))
    out = s.write(tmp_path / "out.jsonl")
    assert b"\r" not in out.read_bytes() and not out.read_bytes().startswith(b"\xef")


def test_invalid_utf8_replaced_like_node(tmp_path: Path) -> None:
    good = json.dumps(entry("a1", None, text="caf\u00e9"), ensure_ascii=False).encode()
    bad = good.replace("caf\u00e9".encode(), b"caf\xe9\xff")
    p = tmp_path / "s.jsonl"
    p.write_bytes(json.dumps(HEADER).encode() + b"\n" + bad + b"\n" + b"\xff\xfe{garbage\n")
    s = load_session(p)
    assert s.entries[0]["message"]["content"] == "caf\ufffd\ufffd"
    assert [(w.line, "UTF-8" in w.reason) for w in s.warnings][:1] == [(2, True)]
    assert any(w.line == 3 and "malformed" in w.reason for w in s.warnings)


def test_dangling_parent_and_duplicate_ids(tmp_path: Path) -> None:
    p = write_lines(
        tmp_path / "s.jsonl",
        [HEADER, entry("a1", None), entry("a2", "zz"), entry("a1", "a2", text="second a1"), entry("a3", "a1")],
    )
    s = load_session(p)
    assert len(s.entries) == 4  # all kept
    by_reason = {w.reason.split(" ")[0]: w for w in s.warnings}
    assert by_reason["duplicate"].line == 4 and by_reason["duplicate"].entry_id == "a1"
    assert by_reason["parentId"].line == 3 and by_reason["parentId"].entry_id == "a2"
    # the later a1 wins in the index (as Pi's Map.set): a3 -> a1(second) -> a2 (dangling) stops
    assert s.get_entry("a1")["message"]["content"] == "second a1"
    assert [e["id"] for e in s.get_branch()] == ["a2", "a1", "a3"]


def test_parent_cycle_detected_and_branch_terminates(tmp_path: Path) -> None:
    p = write_lines(
        tmp_path / "s.jsonl",
        [HEADER, entry("a1", "a3"), entry("a2", "a1"), entry("a3", "a2"), entry("b1", "b1")],
    )
    s = load_session(p)
    cycles = [w for w in s.warnings if "cycle" in w.reason]
    assert len(cycles) == 2
    assert {w.entry_id for w in cycles} == {"a1", "b1"}
    assert [e["id"] for e in s.get_branch("a3")] == ["a1", "a2", "a3"]
    assert [e["id"] for e in s.get_branch()] == ["b1"]
    assert s.render_tree()  # does not hang either


def test_unknown_types_and_missing_content(tmp_path: Path) -> None:
    weird = {"type": "hologram", "id": "h1", "parentId": "a1", "timestamp": "2025-01-01T00:00:02.000Z", "x": [1]}
    no_content = entry("a2", "h1")
    no_content["message"]["content"] = None
    no_msg = {"type": "message", "id": "a3", "parentId": "a2", "timestamp": "2025-01-01T00:00:03.000Z"}
    p = write_lines(tmp_path / "s.jsonl", [HEADER, entry("a1", None), weird, no_content, no_msg])
    s = load_session(p)
    assert s.get_entry("h1") == weird  # kept intact
    found = {(w.line, w.entry_id) for w in s.warnings}
    assert found == {(3, "h1"), (4, "a2"), (5, "a3")}
    assert any("hologram" in r for r in reasons(s.warnings))


def test_compaction_with_absent_first_kept(tmp_path: Path) -> None:
    comp = {
        "type": "compaction", "id": "c1", "parentId": "a1", "timestamp": "2025-01-01T00:00:02.000Z",
        "summary": "S", "firstKeptEntryId": "gone", "tokensBefore": 10,
    }
    p = write_lines(tmp_path / "s.jsonl", [HEADER, entry("a1", None), comp])
    s = load_session(p)
    assert [(w.line, w.entry_id) for w in s.warnings] == [(3, "c1")]
    assert "firstKeptEntryId" in s.warnings[0].reason and s.entries[-1] is s.get_entry("c1")


def test_extra_header_ignored(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "s.jsonl", [HEADER, entry("a1", None), dict(HEADER, id="other"), entry("a2", "a1")])
    s = load_session(p)
    assert [e["id"] for e in s.entries] == ["a1", "a2"]
    assert [w.line for w in s.warnings] == [3]


def test_many_malformed_lines_are_capped(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "s.jsonl", [HEADER] + ["{bad"] * 200 + [entry("a1", None)])
    s = load_session(p)
    assert len(s.warnings) == 51
    assert "150 more" in s.warnings[-1].reason


def test_very_long_line_loads(tmp_path: Path) -> None:
    big = "x" * (30 * 1024 * 1024)
    p = write_lines(tmp_path / "s.jsonl", [HEADER, entry("a1", None, text=big), entry("a2", "a1")])
    s = load_session(p)
    assert len(s.entries[0]["message"]["content"]) == len(big)
    assert s.leaf_id == "a2"


def test_source_file_never_written(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "s.jsonl", [HEADER, entry("a1", None), "{bad"], end=False)
    before = p.read_bytes()
    s = load_session(p)
    with pytest.raises(FileExistsError):
        s.write(p)
    assert p.read_bytes() == before


def test_odd_field_types_do_not_crash(tmp_path: Path) -> None:
    odd = [
        {"type": ["list"], "id": "o1", "parentId": ["x"], "timestamp": 5},
        {"type": "message", "id": "o2", "parentId": "o1", "message": {"role": ["r"], "content": None}},
        {"type": "label", "id": "o3", "parentId": "o2", "targetId": ["t"], "label": "L"},
        {"type": "compaction", "id": "o4", "parentId": "o3", "firstKeptEntryId": {"a": 1}},
        {"type": "message", "id": ["unhashable"], "parentId": "o4", "message": "text"},
    ]
    p = write_lines(tmp_path / "s.jsonl", [HEADER, *odd])
    s = load_session(p)
    assert len(s.entries) == 5 and len(s.warnings) >= 4
    assert s.leaf_id is None  # the last entry has no usable id
    assert [e["id"] for e in s.get_branch("o4")] == ["o1", "o2", "o3", "o4"]
    assert s.render_tree() and s._repr_html_()
    s.write(tmp_path / "copy.jsonl")
    assert (tmp_path / "copy.jsonl").read_bytes() == p.read_bytes().replace(b", ", b",").replace(b": ", b":")


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_block_reading_is_invisible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    import pimem.base.files as files_module

    lines = [HEADER, entry("a1", None, text="é😀" * 30), "", "{bad", entry("a2", "a1"), '{"trunc']
    p = write_lines(tmp_path / "s.jsonl", lines, end=False)
    expected = load_session(p)
    monkeypatch.setattr(files_module, "_READ_CHUNK", chunk)
    got = load_session(p)
    assert got.to_jsonl() == expected.to_jsonl()
    assert [(w.line, w.reason) for w in got.warnings] == [(w.line, w.reason) for w in expected.warnings]
    assert [w.line for w in got.warnings] == [4, 6] and "truncated" in got.warnings[-1].reason

"""``pimem import`` when sources would write one file: distinct names (with a warning), true counts,
and a file that cannot be written is an error row while the rest goes on."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from pimem.cli.main import main
from pimem.sessions.load import load_session

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "imports"
CLAUDE = FIXTURES / "claude-code-demo.jsonl"
CODEX = FIXTURES / "codex-demo.jsonl"


def run(argv: list[str], capsys) -> tuple[int, list[dict], str]:
    code = main([*argv, "--table", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else [], err


def _sessions(tmp_path: Path) -> dict[str, Path]:
    """Three transcripts that all map to ``x.jsonl``, each a different session."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    shutil.copy(CLAUDE, a / "x.jsonl")
    shutil.copy(CODEX, b / "x.jsonl")
    other = CLAUDE.read_text().replace("11111111-2222-4333-8444-555555555555", "99999999-2222-4333-8444-555555555555")
    (a / "x.jsonl.gz").write_bytes(gzip.compress(other.encode(), mtime=0))
    return {"a/x.jsonl": a / "x.jsonl", "b/x.jsonl": b / "x.jsonl", "a/x.jsonl.gz": a / "x.jsonl.gz"}


def test_sources_writing_one_file_get_distinct_names(tmp_path: Path, capsys) -> None:
    sources = _sessions(tmp_path)
    out = tmp_path / "out"
    code, rows, err = run(["import", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out)], capsys)
    assert code == 0 and "wrote 3 of 3 files" in err
    outputs = {r["source"]: r["output"] for r in rows}
    assert len(set(outputs.values())) == 3  # before: all three wrote out/x.jsonl, the last one won
    for source in sources.values():
        written = load_session(outputs[str(source)])
        assert written.id == load_session(source).id and written.source_format == "pi"
    assert sorted(Path(o).name for o in outputs.values()) == ["x-2.jsonl", "x-3.jsonl", "x.jsonl"]
    renamed = [line for line in err.splitlines() if "written as" in line]
    assert len(renamed) == 2 and all(line.startswith("pimem: warning: ") for line in renamed)
    assert f"{out / 'x.jsonl'} is {sources['a/x.jsonl']}'s" in err

    code, again, err = run(["import", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out)], capsys)
    assert {r["source"]: r["output"] for r in again} == outputs  # the same names on every run
    assert sorted(p.name for p in out.glob("*.jsonl")) == ["x-2.jsonl", "x-3.jsonl", "x.jsonl"]


def test_a_renamed_output_never_takes_another_sources_name(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(CLAUDE, folder / "x.jsonl")
    (folder / "x.jsonl.gz").write_bytes(gzip.compress(CODEX.read_bytes(), mtime=0))
    shutil.copy(CODEX, folder / "x-2.jsonl")
    (folder / "x-2.jsonl").write_text((folder / "x-2.jsonl").read_text().replace("0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000", "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0001"))
    code, rows, err = run(["import", str(folder), "-o", str(tmp_path / "out")], capsys)
    outputs = {Path(r["source"]).name: Path(r["output"]).name for r in rows}
    assert outputs == {"x.jsonl": "x.jsonl", "x.jsonl.gz": "x-3.jsonl", "x-2.jsonl": "x-2.jsonl"}
    assert code == 0 and "wrote 3 of 3 files" in err


def test_a_file_that_cannot_be_written_is_an_error_row(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(CLAUDE, folder / "cc.jsonl")
    shutil.copy(CODEX, folder / "cx.jsonl")
    out = tmp_path / "out"
    (out / "cc.jsonl").mkdir(parents=True)  # a folder where the file would go
    code, rows, err = run(["import", str(folder), "-o", str(out)], capsys)
    by_name = {Path(r["source"]).name: r for r in rows}
    assert by_name["cc.jsonl"]["output"] is None and f"cannot write {out / 'cc.jsonl'}" in by_name["cc.jsonl"]["error"]
    assert by_name["cx.jsonl"]["output"] == str(out / "cx.jsonl")
    assert code == 0 and "wrote 1 of 2 files" in err and "Traceback" not in err

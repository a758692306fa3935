"""Every ``-o`` (and ``--events``, ``--summary``) writes only where the user asked: an output in a folder that
does not exist is a clear error before any work, and no folder is made on the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from pimem.cli.main import main


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def _outputs(session: Path, missing: Path) -> list[list[str]]:
    """One command line per output option, each naming a place inside ``missing``."""
    return [
        ["drift", str(session), "-o", str(missing / "x.html")],
        ["replay", str(session), "--reserve", "2000", "--keep", "3000", "--window", "16000", "-o",
         str(missing / "r.jsonl")],
        ["replay", str(session), "--reserve", "2000", "--keep", "3000", "--window", "16000", "--events",
         str(missing / "e.csv")],
        ["sweep", str(session), "--reserve", "2000", "--keep", "3000", "-o", str(missing / "s.csv")],
        ["sweep", str(session), "--reserve", "2000", "--keep", "3000", "-o", str(missing.parent / "s.csv"),
         "--summary", str(missing / "t.csv")],
        ["study", str(session), "-o", str(missing / "study")],
        ["import", str(session), "-o", str(missing / "imported")],
        ["notebooks", "-o", str(missing / "nb")],
        ["advise", str(session), "--model", "anthropic/claude-sonnet-4-5", "-o", str(missing / "settings.json")],
    ]


@pytest.mark.parametrize("index", range(9))
def test_an_output_in_a_missing_folder_is_refused_and_nothing_is_made(samples_dir, tmp_path, capsys, index):
    missing = tmp_path / "nonexistent-dir"
    argv = _outputs(samples_dir / "auth-login-bug.jsonl", missing)[index]
    code, err = _run(argv, capsys)
    assert code == 2, err
    assert f"the folder {missing} does not exist" in err
    assert not missing.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written beside it either


def test_an_output_folder_named_is_made_when_its_parent_exists(samples_dir, tmp_path, capsys):
    code, err = _run(["notebooks", "-o", str(tmp_path / "nb")], capsys)
    assert code == 0, err
    assert any((tmp_path / "nb").glob("*.ipynb"))

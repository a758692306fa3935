"""Damaged transcripts: fields removed or given other JSON types, at any depth, in the synthetic
Claude Code and Codex transcripts. The importers never crash; every record is still accounted
for; the written file loads back in Pi's loader without a warning and projects at every leaf."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pimem.core.session_manager import build_session_context
from pimem.core.session_manager import load_session as load_pi_session
from pimem.errors import SessionFormatError
from pimem.sessions.load import load_session

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "imports"
VALUES = [None, True, 0, -1, 1.5, "", "REDACTED", [], {}, [1, "x"], {"a": 1}, "xxxxx"]
CASES = 120


def _mutate(value: object, rng: random.Random) -> None:
    if isinstance(value, dict) and value:
        key = rng.choice(list(value))
        roll = rng.random()
        if roll < 0.3:
            del value[key]
        elif roll < 0.6 and isinstance(value[key], (dict, list)) and value[key]:
            _mutate(value[key], rng)
        else:
            value[key] = rng.choice(VALUES)
    elif isinstance(value, list) and value:
        i = rng.randrange(len(value))
        if isinstance(value[i], (dict, list)) and rng.random() < 0.6:
            _mutate(value[i], rng)
        else:
            value[i] = rng.choice(VALUES)


@pytest.mark.fuzz
@pytest.mark.parametrize("name,fmt", [("claude-code-demo.jsonl", "claude-code"), ("codex-demo.jsonl", "codex")])
def test_damaged_records_never_crash_the_importer(tmp_path: Path, name: str, fmt: str) -> None:
    records = []
    for line in (FIXTURES / name).read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # the truncated last line
    imported = 0
    for seed in range(CASES):
        rng = random.Random(seed)
        damaged = json.loads(json.dumps(records))
        for _ in range(rng.randint(1, 6)):
            _mutate(rng.choice(damaged), rng)
        path = tmp_path / f"{seed}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in damaged))
        try:
            session = load_session(path, format=fmt)  # type: ignore[arg-type]
        except SessionFormatError as exc:
            assert f"{seed}.jsonl:" in str(exc)  # names the file
            continue
        imported += 1
        report = session.import_report
        assert report.n_records == report.n_imported + report.n_skipped, seed
        back = load_pi_session(session.write(tmp_path / f"{seed}.out.jsonl"))
        assert not back.warnings, (seed, [str(w) for w in back.warnings][:3])
        for leaf in back.leaves():
            build_session_context(back, leaf["id"])
    assert imported > CASES * 0.9

"""Committed oracle results (goldens) under ``tests/goldens/``: read and write.

One gzip JSON file per session: the session file's sha256, the requests (without path) and
Pi's results per request key. Sample sessions keep full hash-mode results; the real
sessions (which may not be copied) keep only a canonical digest of each result.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.oracle.install import PI_VERSION
from tests.oracle.plans import file_digest, first_difference, request_key

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "goldens"


def golden_path(session_path: Path | str, kind: str, release: str | None = None) -> Path:
    """``tests/goldens/<kind>/<stem>.json.gz`` for Pi 0.87.1, ``tests/goldens/pi-<release>/<kind>/…`` else."""
    base = GOLDEN_DIR if release is None else GOLDEN_DIR / f"pi-{release}"
    return base / kind / (Path(session_path).stem + ".json.gz")


def write_json_gz(target: Path, payload: dict[str, Any]) -> Path:
    """``payload`` as sorted ASCII JSON in gzip, reproducibly, written atomically (temp file + rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(payload, ensure_ascii=True, sort_keys=True, separators=(",", ":")).encode("ascii")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".golden")
    with os.fdopen(fd, "wb") as fh:
        # mtime=0 keeps the gzip bytes reproducible
        with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, compresslevel=9) as gz:
            gz.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    return target


def read_json_gz(target: Path) -> dict[str, Any] | None:
    """What :func:`write_json_gz` wrote, or None when there is no such file."""
    if not target.exists():
        return None
    with gzip.open(target, "rb") as fh:
        return json.loads(fh.read().decode("ascii"))


def write_goldens(session_path: Path | str, kind: str, payload: dict[str, Any], release: str | None = None) -> Path:
    """Write atomically (temp file + rename)."""
    return write_json_gz(golden_path(session_path, kind, release), payload)


def read_goldens(session_path: Path | str, kind: str, release: str | None = None) -> dict[str, Any] | None:
    return read_json_gz(golden_path(session_path, kind, release))


def load_session_goldens(session_path: Path | str, kind: str, release: str | None = None) -> dict[str, Any]:
    """Goldens for a session, failing clearly when absent or made from another file."""
    store = read_goldens(session_path, kind, release)
    regen = "regenerate with `python -m tests.oracle.make_goldens" + (f" --release {release}`" if release else "`")
    if store is None:
        where = golden_path(session_path, kind, release)
        pytest.fail(f"no goldens for {Path(session_path).name} ({where}); {regen}", pytrace=False)
    if store.get("file_sha256") != file_digest(session_path):
        pytest.fail(f"{Path(session_path).name} changed since its goldens were made; {regen}", pytrace=False)
    if store.get("pi_version") != (release or PI_VERSION):
        pytest.fail(f"goldens for {Path(session_path).name} were made with Pi {store.get('pi_version')}; {regen}", pytrace=False)
    return store


def generated_tree_problems(store: dict[str, Any], folder: Path, mirror: Any, counts: Any) -> list[str]:
    """Write the stored generated trees into ``folder`` and compare ``mirror``'s answer to every stored
    request with Pi's stored result (counted in ``counts``): one line per difference."""
    for name, text in store["trees"].items():
        (folder / name).write_text(text, encoding="utf-8")
    problems = []
    for item in store["requests"]:
        req = {k: v for k, v in item.items() if k != "result"}
        req["path"] = str(folder / item["path"])
        mine = mirror.run(req)
        counts[f"golden generated {req['op']} cases"] += len(mine) if isinstance(mine, list) else 1
        if mine != item["result"]:
            problems.append(f"{item['path']} {req['op']} {request_key(req)}: {first_difference(mine, item['result'])}")
    return problems

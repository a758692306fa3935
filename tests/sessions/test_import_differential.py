"""Imported sessions against Pi 0.87.1 itself: every imported file opens in Pi unchanged (same
header, entries, leaf and name), Pi's projection at every leaf and just after every compaction
equals pimem's, the entries per type agree with the import's own count, and replays of imported
sessions open in Pi too.

Node runs once for all files (one batch). Without Node the committed goldens
(``tests/goldens/imports/``: Pi's digests per imported file, made by
``python -m tests.sessions.test_import_differential``) are checked instead; they also pin the
imported file's bytes, so a change to an importer shows up as "regenerate".
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED_DIR
from tests.oracle.goldens import read_json_gz, write_json_gz
from tests.oracle.install import PI_VERSION

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "imports"
GOLDEN_DIR = Path(__file__).resolve().parent.parent / "goldens" / "imports"
DATASETS = SHARED_DIR / "datasets"


def source_files() -> list[Path]:
    """The synthetic transcripts, then every shared Claude Code and Codex file present."""
    files = sorted(FIXTURES.glob("*.jsonl"))
    for sub in ("claude-code", "codex"):
        root = DATASETS / sub
        if root.is_dir():
            files += sorted(p for p in root.rglob("*") if p.name.endswith((".jsonl", ".jsonl.gz")))
    return files


def label(path: Path) -> str:
    rel = path.relative_to(DATASETS) if DATASETS in path.parents else Path("fixtures") / path.name
    return str(rel).removesuffix(".gz").removesuffix(".jsonl")


def golden_path(path: Path) -> Path:
    return GOLDEN_DIR / (label(path).replace("/", "__") + ".json.gz")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Imported:
    """One source file imported, written as a Pi file and measured on pimem's side."""

    def __init__(self, source: Path, out_dir: Path) -> None:
        from pimem.sessions.load import load_session

        self.source = source
        self.label = label(source)
        session = load_session(source)
        self.report = session.import_report
        self.source_sha256 = _sha256(source.read_bytes())
        back, digest = self._written(session, out_dir)
        self.types: dict[str, int] = {}
        for e in back.entries:
            key = f"message:{e['message'].get('role')}" if e.get("type") == "message" else e.get("type")
            self.types[key] = self.types.get(key, 0) + 1
        leaves = [e["id"] for e in back.leaves()]
        after: list[str] = []
        for e in back.entries:
            if e.get("type") == "compaction":
                after.append(e["id"])
                after.extend(c["id"] for c in back.get_children(e["id"])[:1])
        self.compactions = sum(1 for e in back.entries if e.get("type") == "compaction")
        self.points = list(dict.fromkeys(leaves + after))
        self.projections = self._projections(back, digest)

    def _written(self, session: Any, out_dir: Path) -> tuple[Any, Any]:
        """Write ``session`` as a Pi file and read it back as Pi would: its digests, leaf and name; the
        session read back and the digester (it caches the digests of the entries)."""
        from pimem.core.session_manager import load_session as load_pi_session
        from tests.oracle.client import ListDigester, digest_value

        self.path = session.write(out_dir / (self.label.replace("/", "__") + ".jsonl"))
        self.sha256 = _sha256(self.path.read_bytes())
        back = load_pi_session(self.path)
        self.reload_warnings = [str(w) for w in back.warnings]
        digest = ListDigester()
        self.header = digest_value(back.header)
        self.entries = digest(back.entries)
        self.leaf_id = back.leaf_id
        self.name = back.name
        return back, digest

    def _projections(self, back: Any, digest: Any) -> dict[str, str]:
        """The digest of pimem's projection at every point."""
        from pimem.core.session_manager import build_session_projection

        return {p: digest(build_session_projection(back, p).messages) for p in self.points}

    def requests(self) -> list[dict[str, Any]]:
        path = str(self.path)
        return [
            {"op": "open_digest", "path": path},
            {"op": "project", "path": path, "leaves": self.points, "hash": True},
            {"op": "forget", "path": path},
        ]


def _replay_sources(imported: list[Imported]) -> list[Imported]:
    """A few imported sessions to replay: the fixtures, the smallest real Claude Code file with a
    compaction and the smallest Codex file (replays cost more than imports)."""
    chosen = [i for i in imported if i.label.startswith("fixtures/")]
    for prefix in ("claude-code/entireio-cli/", "codex/"):
        real = [i for i in imported if i.label.startswith(prefix) and i.compactions]
        if real:
            chosen.append(min(real, key=lambda i: i.path.stat().st_size))
    return chosen


REPLAY_WINDOW = 24000


def replay_window(path: Path) -> int:
    """The window to replay ``path`` with: 24,000, unless the session's calibrated per-request
    overhead (system prompt and tools) reaches it; a window at or below that overhead is refused
    (the provider would refuse every request), so such a session gets twice its overhead."""
    import math
    import warnings

    from pimem.core.incremental.caches import TokenCache
    from pimem.core.session_manager import load_session as load_pi_session
    from pimem.replays.tokens import make_token_source

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = load_pi_session(path)
        tokens = make_token_source("calibrated")
        tokens.start(session.get_branch(None), TokenCache())
    overhead = tokens.overhead or 0.0
    if overhead != overhead or overhead < REPLAY_WINDOW:
        return REPLAY_WINDOW
    return int(math.ceil(overhead * 2 / 1000) * 1000)


class Replayed(Imported):
    """A replay of an imported session (Pi's compaction on another agent's session), written."""

    def __init__(self, imported: Imported, out_dir: Path) -> None:  # noqa: D107
        from pimem.replays.engine import replay

        self.source = imported.source
        self.label = "replay/" + imported.label
        result = replay(imported.path, context_window=replay_window(imported.path), seed=1)
        self.source_sha256 = imported.source_sha256
        back, digest = self._written(result.session, out_dir)
        self.types = {}
        self.compactions = sum(1 for e in back.entries if e.get("type") == "compaction")
        self.points = [back.leaf_id] + [e["id"] for e in back.entries if e.get("type") == "compaction"]
        self.projections = self._projections(back, digest)
        self.report = None


def build_all(out_dir: Path) -> list[Imported]:
    imported = [Imported(p, out_dir) for p in source_files()]
    return imported + [Replayed(i, out_dir) for i in _replay_sources(imported)]


def pi_results(oracle: Any, items: list[Imported]) -> dict[str, dict[str, Any]]:
    """Pi's results for every item, from one Node process."""
    reqs = [r for item in items for r in item.requests()]
    results = oracle.run_batch(reqs)
    out = {}
    for k, item in enumerate(items):
        opened, projected = results[3 * k], results[3 * k + 1]
        out[item.label] = {
            "imported_sha256": item.sha256,
            "open": opened,
            "projections": {p["leafId"]: p.get("messages", {"throws": p.get("throws")}) for p in projected},
        }
    return out


def compare(item: Imported, pi: dict[str, Any]) -> int:
    """Assert pimem's side equals Pi's; returns the number of projections compared."""
    opened = pi["open"]
    assert opened["openError"] is None, f"{item.label}: Pi cannot open the import: {opened['openError']}"
    assert opened["rewritten"] is False, f"{item.label}: Pi rewrites the imported file on open"
    assert opened["header"] == item.header, f"{item.label}: header differs from Pi's"
    assert opened["entries"] == item.entries, f"{item.label}: entries differ from Pi's"
    assert opened["leafId"] == item.leaf_id and opened["name"] == item.name
    if item.report is not None:
        assert opened["types"] == item.report.entries_out == item.types
    bad = [p for p in item.points if pi["projections"].get(p) != item.projections[p]]
    assert not bad, f"{item.label}: projections differ from Pi's at {bad[:5]}"
    return len(item.points)


@pytest.fixture(scope="module")
def items(tmp_path_factory: pytest.TempPathFactory) -> list[Imported]:
    return build_all(tmp_path_factory.mktemp("imports"))


def test_every_record_counted_in_and_out(items: list[Imported]) -> None:
    for item in items:
        if item.report is None:
            continue
        r = item.report
        assert r.n_records == r.n_imported + r.n_skipped, item.label
        assert sum(r.entries_out.values()) == sum(item.types.values()), item.label
        assert not item.reload_warnings, (item.label, item.reload_warnings[:3])


@pytest.mark.oracle
def test_imports_and_replays_agree_with_pi(oracle: Any, items: list[Imported]) -> None:
    from tests.oracle.plugin import COUNTS

    results = pi_results(oracle, items)
    for item in items:
        n = compare(item, results[item.label])
        COUNTS["imported-file projections" if item.report else "replayed-import projections"] += n
        COUNTS["imported files opened" if item.report else "replayed imports opened"] += 1


def test_imports_agree_with_pi_goldens(items: list[Imported]) -> None:
    checked = 0
    for item in items:
        store = _read_golden(item.source)
        if store is None:
            pytest.fail(f"no goldens for {item.label}; run `python -m tests.sessions.test_import_differential`",
                        pytrace=False)
        assert store["pi_version"] == PI_VERSION and store["source_sha256"] == item.source_sha256
        pi = store["items"].get(item.label)
        assert pi is not None, f"goldens of {item.source.name} lack {item.label}"
        if pi["imported_sha256"] != item.sha256:
            pytest.fail(f"{item.label}: the import changed since its goldens were made; regenerate with "
                        "`python -m tests.sessions.test_import_differential`", pytrace=False)
        checked += compare(item, pi)
    assert checked > 0


def _read_golden(source: Path) -> dict[str, Any] | None:
    return read_json_gz(golden_path(source))


def write_goldens() -> None:
    """Run Pi over every import and replay and store its digests, one file per source."""
    from tests.oracle.client import Oracle

    Path(GOLDEN_DIR).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pimem-imports-") as tmp:
        items = build_all(Path(tmp))
        results = pi_results(Oracle(), items)
        by_source: dict[Path, list[Imported]] = {}
        for item in items:
            by_source.setdefault(item.source, []).append(item)
        for source, group in by_source.items():
            payload = {
                "pi_version": PI_VERSION,
                "source": label(source),
                "source_sha256": group[0].source_sha256,
                "items": {item.label: results[item.label] for item in group},
            }
            target = write_json_gz(golden_path(source), payload)
            print(target.name, len(group), file=sys.stderr)


if __name__ == "__main__":
    write_goldens()

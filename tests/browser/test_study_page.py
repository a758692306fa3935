"""The study page in a real Chromium: a small ``pimem study`` run's ``index.html`` and the pages it links
render at 1400 and 800 px with their figures, tables wider than the window scroll inside their box,
nothing else sticks out, no script error is logged, and nothing is fetched from anywhere but the study
folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.slow  # minutes: left out of scripts/test --fast

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "datasets" / "sessions" / "auth-login-bug.jsonl"

_CHECK = """() => {
  const inner = window.innerWidth;
  const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
  const boxOf = e => { for (let a = e.parentElement; a; a = a.parentElement) if (scrolls(a)) return a; return null; };
  const tables = [...document.querySelectorAll('table')].map(t => {
    const box = boxOf(t);
    let moved = null;
    if (box && box.scrollWidth > box.clientWidth + 1) { box.scrollLeft = 40; moved = box.scrollLeft; box.scrollLeft = 0; }
    return {wide: t.getBoundingClientRect().width > (t.parentElement.clientWidth + 1), box: !!box, moved: moved};
  });
  const over = [...document.body.querySelectorAll('*')]
    .filter(e => !boxOf(e) && e.getBoundingClientRect().right > inner + 1)
    .map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : ''));
  const images = [...document.images].map(i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0}));
  return {title: document.title, text: document.body.innerText.length, tables, over: over.slice(0, 10),
          images, links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))};
}"""


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("study") / "study"
    proc = subprocess.run([sys.executable, "-m", "pimem", "study", str(SESSION), "-o", str(out), "-q", "--workers", "1"],
                          cwd=out.parent, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "index.html").is_file()
    return out


def _visit(new_page, page_path: Path, width: int, study: Path) -> dict:
    page, log = new_page(width)
    page.goto(page_path.resolve().as_uri(), wait_until="load")
    found = page.evaluate(_CHECK)
    where = f"{page_path.relative_to(study)} at {width} px"
    assert found["title"] and found["text"] > 200, where
    assert all(i["ok"] for i in found["images"]), (where, [i for i in found["images"] if not i["ok"]])
    for t in found["tables"]:
        if t["wide"]:
            assert t["box"] and t["moved"], (where, "a table wider than its place does not scroll in a box")
    assert found["over"] == [], (where, found["over"])
    assert log.errors == [], (where, log.errors)
    outside = [u for u in log.requests if not (u.startswith("file://") and
               Path(unquote(urlsplit(u).path)).resolve().is_relative_to(study.resolve()))]
    assert outside == [], (where, outside)
    return found


@pytest.mark.parametrize("width", [1400, 800])
def test_the_study_page_and_its_pages_render_scroll_and_stay_offline(study: Path, new_page, width: int) -> None:
    found = _visit(new_page, study / "index.html", width, study)
    assert found["images"], "the study page shows no figure"
    pages = sorted({(study / unquote(urlsplit(h).path)).resolve() for h in found["links"]
                    if not urlsplit(h).scheme and urlsplit(h).path.endswith(".html")})
    assert pages, "the study page links no report"
    for p in pages:
        assert p.is_file() and p.is_relative_to(study.resolve()), p
        _visit(new_page, p, width, study)

"""Measure HTML pages in headless Chromium: does anything stick out to the right at a given width?

:func:`overflow` loads each page in an iframe of each width inside one wrapper page (one
Chromium run for all of them) and reports, per page and width, the document's scroll width
and the elements, outside horizontal scroll wrappers, whose right edge passes the viewport.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--allow-file-access-from-files",
         "--hide-scrollbars"]

_MEASURE = """
window.addEventListener('load', () => {
  const out = [];
  for (const frame of document.querySelectorAll('iframe')) {
    const doc = frame.contentDocument, win = frame.contentWindow;
    const inner = win.innerWidth;
    const over = [...doc.body.querySelectorAll('*')]
      .filter(e => !e.closest('.table-wrap') && e.getBoundingClientRect().right > inner + 1)
      .map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : ''));
    out.push({page: frame.dataset.page, width: +frame.dataset.width, inner: inner,
              scroll: doc.documentElement.scrollWidth, over: over.slice(0, 10)});
  }
  document.title = JSON.stringify(out);
});
"""


def chromium() -> str | None:
    """The Chromium executable, if one is installed."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def overflow(pages: Sequence[Path], widths: Sequence[int] = (1400, 800)) -> list[dict]:
    """One row per page and width: ``inner`` (viewport width), ``scroll`` (document scroll
    width) and ``over`` (elements outside a ``.table-wrap`` that pass the right edge)."""
    exe = chromium()
    if exe is None:
        raise RuntimeError("no Chromium installed")
    with tempfile.TemporaryDirectory() as tmp:
        frames = "".join(
            f"<iframe data-page='{html.escape(str(p))}' data-width='{w}'"
            f" src='{html.escape(Path(p).resolve().as_uri())}'"
            f" style='width:{w}px;height:900px;border:0;display:block'></iframe>"
            for p in pages for w in widths)
        wrapper = Path(tmp) / "wrapper.html"
        wrapper.write_text(f"<!DOCTYPE html><html><head><title>pending</title></head><body style='margin:0'>"
                           f"{frames}<script>{_MEASURE}</script></body></html>", encoding="utf-8")
        profile = Path(tmp) / "profile"
        proc = subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", "--window-size=1600,1000",
                               "--virtual-time-budget=20000", "--dump-dom", wrapper.as_uri()],
                              capture_output=True, text=True, timeout=180)
    match = re.search(r"<title>(.*?)</title>", proc.stdout, re.S)
    if not match or match.group(1) == "pending":
        raise RuntimeError(f"Chromium did not measure the pages: {proc.stderr[-500:]}")
    return json.loads(html.unescape(match.group(1)))

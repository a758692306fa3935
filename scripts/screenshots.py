"""Screenshots of a study's HTML pages in headless Chromium, for the documentation.

    .venv/bin/python scripts/screenshots.py STUDY_DIR docs/screenshots [--width 1400] [--part-height 1600]
        [--pages index.html reports/NAME.html ...]

Each page (``index.html``, ``reports/*.html``, or the ``--pages`` named) is rendered at ``--width`` pixels, its full
height measured, and the page cut into parts of ``--part-height`` pixels; every part is saved
as a 256-colour PNG (``<page>-<width>-<n>.png``). Needs Chromium (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import html
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("screenshots: no Chromium found (Debian: apt-get install chromium)")


def _run(exe: str, args: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                              timeout=300)


def page_height(exe: str, page: Path, width: int) -> int:
    """The page's full height at ``width`` (measured by a script in a copy of the page)."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / page.name
        text = page.read_text(encoding="utf-8")
        script = ("<script>window.addEventListener('load',()=>{document.title=JSON.stringify("
                  "{h:document.documentElement.scrollHeight})});</script>")
        probe.write_text(text.replace("</body>", script + "</body>"), encoding="utf-8")
        for sibling in page.parent.iterdir():  # images referenced by relative links
            if sibling.suffix == ".png":
                (Path(tmp) / sibling.name).symlink_to(sibling.resolve())
        proc = _run(exe, [f"--window-size={width},1000", "--virtual-time-budget=10000", "--dump-dom",
                          probe.as_uri()])
    match = re.search(r"<title>(\{.*?\})</title>", proc.stdout)
    if not match:
        raise RuntimeError(f"could not measure {page}: {proc.stderr[-300:]}")
    return int(json.loads(match.group(1).replace("&quot;", '"'))["h"])


def screenshot(exe: str, page: Path, width: int, height: int) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "shot.png"
        _run(exe, [f"--window-size={width},{height}", "--virtual-time-budget=10000", f"--screenshot={out}",
                   page.resolve().as_uri()])
        return out.read_bytes()


def save_parts(png: bytes, stem: str, out_dir: Path, part_height: int) -> list[Path]:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    cuts = list(range(0, image.height, part_height)) + [image.height]
    if len(cuts) > 2 and cuts[-1] - cuts[-2] < part_height // 4:  # a short tail joins the part before it
        del cuts[-2]
    saved = []
    for n, (top, bottom) in enumerate(zip(cuts, cuts[1:]), start=1):
        part = image.crop((0, top, image.width, bottom))
        target = out_dir / f"{stem}-{n}.png"
        part.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)
        saved.append(target)
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path, help="a study folder (pimem study -o …)")
    parser.add_argument("out", type=Path, help="folder for the PNG files")
    parser.add_argument("--width", type=int, default=1400, help="viewport width in pixels (default: 1400)")
    parser.add_argument("--part-height", type=int, default=1600, help="height of each saved part (default: 1600)")
    parser.add_argument("--max-parts", type=int, default=3, help="parts kept per page (default: 3)")
    parser.add_argument("--pages", nargs="+", default=None,
                        help="the pages to picture, relative to the study folder (default: the index and every report)")
    args = parser.parse_args(argv)
    exe = _chromium()
    if not args.out.parent.is_dir():
        sys.exit(f"screenshots: the folder {args.out.parent} does not exist")
    args.out.mkdir(exist_ok=True)
    pages = ([args.study / p for p in args.pages] if args.pages
             else [args.study / "index.html", *sorted((args.study / "reports").glob("*.html"))])
    record = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        title = re.search(r"<title>(.*?)</title>", text, re.S)
        record.append({"page": page.relative_to(args.study).as_posix(),
                       "title": html.unescape(title.group(1)) if title else "",
                       "back_link": "back to the study index" in text})
        height = page_height(exe, page, args.width)
        shown = min(height, args.part_height * args.max_parts)
        stem = f"study-index-{args.width}" if page.name == "index.html" else f"report-{page.stem}-{args.width}"
        for path in save_parts(screenshot(exe, page, args.width, shown), stem, args.out, args.part_height):
            print(f"{path}  {path.stat().st_size // 1024} KB  (page {height} px tall)")
    (args.out / "pages.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

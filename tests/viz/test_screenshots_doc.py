"""docs/screenshots: every picture is described in its README and every one described is there, each
at the width its name says (``scripts/screenshots.py`` names parts ``<page>-<width>-<n>.png``), and the
README's setting line matches the report the pictures were taken from (recorded in ``pages.json``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.image as mpimg

DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def test_the_screenshot_readme_and_the_pictures_agree() -> None:
    readme = (DOCS / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w.-]+\.png)`", readme))
    present = {p.name for p in DOCS.glob("*.png")}
    assert named == present
    for name in present:
        width = int(re.search(r"-(\d+)-\d+\.png$", name).group(1))
        assert mpimg.imread(DOCS / name).shape[1] == width, name


def test_the_readme_states_the_settings_of_the_pages_pictured() -> None:
    readme = (DOCS / "README.md").read_text(encoding="utf-8")
    pages = json.loads((DOCS / "pages.json").read_text(encoding="utf-8"))
    assert pages, "pages.json lists the pages the pictures were taken from"
    for page in pages:
        if page["page"].startswith("reports/"):
            # the report's own title names its replay setting, e.g. "(reserve 16,384, keep 20,000, window 200,000)"
            setting = re.search(r"\(reserve ([\d,]+), keep ([\d,]+), window ([\d,]+)\)", page["title"])
            assert setting, page
            reserve, keep, window = (f"{int(v.replace(',', '')):,}" for v in setting.groups())
            assert f"reserve {reserve}, keep {keep}, window {window}" in readme, page
        assert page["back_link"] == page["page"].startswith("reports/")

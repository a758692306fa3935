"""Odd inputs checked against the real releases: V8's ``Date`` parser and Pi's code on edge-case
sessions. ``python -m tests.oracle.odd_inputs`` rewrites the goldens (needs Node and the releases)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

GOLDENS = Path(__file__).resolve().parents[1] / "goldens" / "odd-inputs"
DATES_GOLDEN = GOLDENS / "dates.json"
TIME_ZONES = ("UTC", "America/New_York", "Asia/Kolkata")

_HAND = [
    "Sun, 01 Mar 2026 09:00:00 GMT", "March 1, 2026", "2026/03/01", "12/31/2025", "1 March 2026 10:00 UTC",
    " 2026-03-01T00:00:00Z", "2026-03-01T00:00:00Z ", " 2026-03-01", "2026-03-01 ", "\t2026-03-01T10:00:00.000Z\n",
    "2026-03-01T10:00:00.000Z", "2026-03-01", "Mar 1 2026 10:00:00 GMT+0100", "March 1", "1/2/3", "2026-02-31",
    "Tue Mar 03 2026 10:15:30 GMT+0000 (Coordinated Universal Time)", "Feb 30 2026", "10:00 PM March 1 2026",
    "12:30 am Jan 1 2026 EST", "2026-03-01T25:00:00Z", "Sunday, March 1, 2026 9:00 AM PST", "garbage", "",
    "2026-03-01 10:00", "2026-03-01T10:00", "2026-03-01T10:00:00+0530", "2026-03-01T10:00:00,5Z", "+002026-03-01",
    "-000001-01-01T00:00:00Z", "2026", "2026-03", "03/01/2026 13:45:10.123", "1 Mar 26", "1 Mar 99", "Mar 2026",
    "2026 Mar 1", "(comment) March 1 2026", "March 1 2026 (comment)", "2026-03-01T10:00:00 GMT", "Z", "UTC",
    "12:00:00 GMT+01:30 3/1/2026", "3.1.2026", "2026.03.01", "1-Mar-2026", "Mar-01-2026 10:00", "13/01/2026",
    "0/1/2026", "2/29/2025", "2/29/2024 24:00", "8.64e15", "Thu, 01 Jan 1970 00:00:00 GMT-0800",
    "January 32 2026", "Dec 25 2025 5:30 pm", "2026-03-01T10:00:00.123456789Z", "2026-03-01T10:00Z",
]


def date_strings() -> list[str]:
    """The hand-picked forms plus a deterministic grid of day names, dates, times and zones."""
    days = ["", "Sun, ", "Sunday ", "sun "]
    dates = ["01 Mar 2026", "March 1, 2026", "2026/03/01", "12/31/2025", "1 march 2026", "MAR 1 2026", "1/2/26"]
    times = ["", " 09:00", " 9:00:05", " 10:00 PM", " 12:00 am", " 23:59:59.9"]
    zones = ["", " GMT", " UTC", " Z", " EST", " GMT+0100", " +0530", " -08:00", " PDT"]
    grid = ["".join(p) for p in itertools.product(days, dates, times, zones)]
    return list(dict.fromkeys(_HAND + grid[::3]))


def node_dates(strings: list[str], tz: str) -> list[int | None]:
    """``new Date(s).getTime()`` in Node under ``TZ=tz`` (None for NaN)."""
    script = ("const s=JSON.parse(require('fs').readFileSync(0,'utf8'));"
              "process.stdout.write(JSON.stringify(s.map(x=>{const v=new Date(x).getTime();"
              "return Number.isNaN(v)?null:v;})))")
    proc = subprocess.run(["node", "-e", script], input=json.dumps(strings), capture_output=True, text=True,
                          env={**os.environ, "TZ": tz}, check=True)
    return json.loads(proc.stdout)


def make_goldens() -> dict[str, Any]:
    strings = date_strings()
    data = {"strings": strings, "by_time_zone": {tz: node_dates(strings, tz) for tz in TIME_ZONES}}
    GOLDENS.mkdir(parents=True, exist_ok=True)
    DATES_GOLDEN.write_text(json.dumps(data, ensure_ascii=True, indent=0) + "\n")
    return data


if __name__ == "__main__":
    d = make_goldens()
    print(f"{len(d['strings'])} date strings x {len(TIME_ZONES)} time zones -> {DATES_GOLDEN}")

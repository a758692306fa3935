"""Story 4: an antimeridian bug in a TypeScript GPX library, begun under session format v2 and
resumed seven weeks later in Pi 0.87.1 (short).

Ana's ride across the 180° meridian measures 38 320 km. The first part was recorded by an older Pi:
extension messages are ``message`` entries with role ``custom`` (v2's ``hookMessage`` after
migration). Resumed in Pi 0.87.1, the session gets ``system`` messages (all prompt sections and
``toolsAdded`` before the first prompt, then a ``project_context`` patch after ``/reload``),
``context_edit`` entries (a redaction of a tool result that printed a secret, and an omission of an
overloaded response before the retry), and a compaction that carries the system message.

The prompt sections and tool declarations come from ``datasets/pi-0.87.1-system-prompt.json``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from ..harness import Recorder, bash, edit, grep, load_fixture, read, step, write

NAME = "gpxkit-antimeridian"
CWD = "/home/ana/src/gpxkit"
FILES = load_fixture("gpxkit_antimeridian")
PI_ROOT = "/home/ana/.local/share/fnm/node-versions/v22.21.1/installation/lib/node_modules/@earendil-works/pi-coding-agent"
SYSTEM_PROMPT_FILE = Path(__file__).resolve().parents[2] / "pi-0.87.1-system-prompt.json"

# AGENTS.md as the project starts, and after the user's edit before ``/reload``
AGENTS_V1 = FILES["AGENTS.md"]
AGENTS_V2 = AGENTS_V1 + "- Use pnpm, not npm (`pnpm test`).\n- Never print secrets from .env; refer to keys by name.\n"


def record(seed: int) -> Recorder:
    """The session, recorded with ``seed``."""
    r = Recorder(NAME, CWD, FILES, seed, "2026-01-21T16:40:03.220Z", "claude-sonnet-4-5",
                 thinking="low", strict_tools=True)
    rng = r.rng
    prompt = json.loads(SYSTEM_PROMPT_FILE.read_text("utf-8"))

    def fill(text: str, agents: str) -> str:
        return text.replace("{CWD}", CWD).replace("{PI_ROOT}", PI_ROOT).replace("AGENTS_PLACEHOLDER", agents.rstrip("\n"))

    # --- the part recorded by an older Pi (session format v2; hookMessage became role `custom`) ---
    r.custom_role_message("todo-reminder", "Open TODOs in gpxkit: 2 (`/todos` lists them)", display=True)
    r.turn("A ride in Fiji shows 38 320 km instead of 12 km — the track crosses the 180° meridian. Fix the "
           "distance in src/distance.ts. Don't change the `Point` interface, other packages import it.",
           step(None, read("src/distance.ts"), read("test/distance.test.ts"),
                thinking="distance() uses the raw longitude difference. From 179.99 to -179.99 that is -359.98 "
                         "degrees instead of 0.02, and the equirectangular x term becomes about 2*pi*cos(lat): "
                         "roughly 38 000 km. The difference has to be wrapped into [-180, 180)."),
           step("Reproducing with the pair from the Fiji track:",
                bash("node -e \"import('./dist/distance.js').then(m => console.log(m.distance({lat:-16.8,lon:179.99},{lat:-16.8,lon:-179.99})))\"",
                     "38319589.61702657")),
           step("Confirmed: `distance()` in `src/distance.ts` uses the raw longitude difference, so 179.99 → "
                "-179.99 counts as -359.98° (38 320 km) instead of 0.02° (2.1 km). The fix is to wrap the difference "
                "into [-180, 180) before projecting."))
    r.custom_role_message("todo-reminder", "Reminder: TODO #2 `stats.ts: elevation gain` is still open.", display=True,
                          details={"todoId": 2})
    r.user("Also, the Garmin exports lon in 0..360 (180.01 instead of -179.99). Make sure that works too.")
    r.assistant(step("Wrapping the difference covers both: `-179.99 → 180.01` is a 360° step, which folds to 0. "
                     "I'll add `normalizeLon()` and leave `Point` untouched.",
                     edit("src/distance.ts", "const rad = (deg: number) => (deg * Math.PI) / 180;\n",
                          "const rad = (deg: number) => (deg * Math.PI) / 180;\n\n"
                          "/** Longitude (or a difference of two) folded into [-180, 180). Garmin exports use 0..360. */\n"
                          "export const normalizeLon = (lon: number) => ((((lon + 180) % 360) + 360) % 360) - 180;\n",
                          ("\tconst x = rad(b.lon - a.lon) * Math.cos(rad((a.lat + b.lat) / 2));\n",
                           "\tconst x = rad(normalizeLon(b.lon - a.lon)) * Math.cos(rad((a.lat + b.lat) / 2));\n"))))
    r.assistant(step(None, edit("test/distance.test.ts", "\t});\n});\n",
                                "\t});\n\tit(\"crosses the antimeridian, also with 0..360 longitudes\", () => {\n"
                                "\t\texpect(distance({ lat: -16.8, lon: 179.99 }, { lat: -16.8, lon: -179.99 }) / 1000).toBeCloseTo(2.13, 1);\n"
                                "\t\texpect(distance({ lat: -16.8, lon: -179.99 }, { lat: -16.8, lon: 180.01 })).toBeCloseTo(0, 3);\n"
                                "\t});\n});\n")))
    r.assistant(step(None, bash("npx vitest run", _gpx_vitest([("test/distance.test.ts", 3)], rng))))
    r.assistant(step("Fixed: `normalizeLon()` wraps the longitude difference into [-180, 180), so tracks across "
                     "the antimeridian measure 2.1 km per 0.02° step instead of 38 320 km, with -180..180 and 0..360 "
                     "longitudes alike; `Point` is unchanged. 3/3 tests pass."))

    # --- seven weeks later, the same session resumed in Pi 0.87.1 ---
    r.clock += 7 * 24 * 3600 * 1000 - 3600 * 1000 * 5
    r.system_message({name: fill(text, AGENTS_V1) for name, text in prompt["sections"].items()},
                     tools_added=prompt["toolsAdded"])
    r.user("Back to gpxkit. Add elevation gain to `stats()` (TODO #2), and check that .env.example lists every "
           "key the code reads.", think=(2000, 9000))
    r.assistant(step(None, read("src/stats.ts"), bash("cat .env && cat .env.example", FILES[".env"] + FILES[".env.example"].rstrip("\n")),
                     grep("process\\.env", "src")))
    leaked = r.session.get_branch()[-2]
    assert leaked["message"]["role"] == "toolResult" and "MAPBOX_TOKEN=pk." in leaked["message"]["content"][0]["text"]
    r.context_edit(leaked["id"], {"content": "MAPBOX_TOKEN=[redacted by redact-secrets]\nTILE_STYLE=outdoors-v12\nMAPBOX_TOKEN="})
    r.assistant(step("`.env.example` lacks `TILE_STYLE`; the code reads neither key directly yet. Adding it, then the "
                     "elevation gain.",
                     edit(".env.example", "MAPBOX_TOKEN=\n", "MAPBOX_TOKEN=\nTILE_STYLE=outdoors-v12\n"),
                     edit("src/stats.ts", "\tdurationMs: number | null;\n}\n",
                          "\tdurationMs: number | null;\n\t/** Sum of positive elevation steps, metres (null without elevation). */\n"
                          "\televationGainM: number | null;\n}\n\n"
                          "function elevationGain(points: Point[]): number | null {\n"
                          "\tif (!points.some((p) => p.ele !== undefined)) return null;\n\tlet gain = 0;\n"
                          "\tfor (let i = 1; i < points.length; i++) {\n\t\tconst a = points[i - 1].ele;\n\t\tconst b = points[i].ele;\n"
                          "\t\tif (a !== undefined && b !== undefined && b > a) gain += b - a;\n\t}\n\treturn gain;\n}\n",
                          ("\t\tdurationMs: first !== undefined && last !== undefined ? last - first : null,\n",
                           "\t\tdurationMs: first !== undefined && last !== undefined ? last - first : null,\n"
                           "\t\televationGainM: elevationGain(points),\n"))))
    r.assistant(step(None), stop="error",
                error='529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    failed = r.leaf
    r.tick(2000, 2400)
    r.context_edit(failed, None)
    r.assistant(step(None, write("test/stats.test.ts",
                                 "import { describe, expect, it } from \"vitest\";\nimport { stats } from \"../src/stats.js\";\n\n"
                                 "describe(\"stats\", () => {\n\tit(\"sums only climbs\", () => {\n"
                                 "\t\tconst s = stats([{ lat: 0, lon: 0, ele: 100 }, { lat: 0, lon: 0.001, ele: 130 }, { lat: 0, lon: 0.002, ele: 110 }, { lat: 0, lon: 0.003, ele: 125 }]);\n"
                                 "\t\texpect(s.elevationGainM).toBe(45);\n\t});\n\tit(\"is null without elevation\", () => {\n"
                                 "\t\texpect(stats([{ lat: 0, lon: 0 }]).elevationGainM).toBeNull();\n\t});\n});\n")))
    r.assistant(step(None, bash("npx vitest run", _gpx_vitest([("test/distance.test.ts", 3), ("test/stats.test.ts", 2)], rng))))
    r.assistant(step("Done: `stats()` returns `elevationGainM` (climbs only, `null` without elevation data); "
                     "`.env.example` now lists `TILE_STYLE` next to `MAPBOX_TOKEN`. 5/5 tests pass."))

    # the user edits AGENTS.md and runs /reload: the prompt's project context changes
    r.project.files["AGENTS.md"] = AGENTS_V2
    r.tick(60000, 180000)
    r.system_message({"project_context": fill(prompt["sections"]["project_context"], AGENTS_V2)})
    r.user("I updated AGENTS.md. Run the tests the way it says now.", think=(2000, 9000))
    r.assistant(step(None, bash("pnpm test", "> gpxkit@0.4.1 test " + CWD + "\n> vitest run\n\n" +
                                _gpx_vitest([("test/distance.test.ts", 3), ("test/stats.test.ts", 2)], rng))))
    r.assistant(step("With pnpm: 5/5 pass."))
    r.compact(keep_recent_tokens=300)
    r.user("Bump to 0.5.0 and write the changelog line.", think=(5000, 20000))
    r.assistant(step(None, edit("package.json", "\"version\": \"0.4.1\"", "\"version\": \"0.5.0\""),
                     write("CHANGELOG.md", "# Changelog\n\n## 0.5.0\n- `stats()` reports `elevationGainM`.\n"
                                           "- Distances across the antimeridian with 0..360 longitudes (`normalizeLon`).\n")))
    r.assistant(step("0.5.0: `package.json` bumped, `CHANGELOG.md` written."))
    return r


# --------------------------------------------------------------------------------------
# Scripted tool outputs
# --------------------------------------------------------------------------------------


def _gpx_vitest(tests: list[tuple[str, int]], rng: random.Random, failure: str = "") -> str:
    """Text output of ``vitest run`` for ``(file, number of tests)`` pairs (``failure``: one file fails)."""
    files = "\n".join(f" {'❯' if failure and f == 'test/distance.test.ts' else '✓'} {f} ({n} tests) {rng.randint(3, 30)}ms"
                      for f, n in tests)
    total = sum(n for _, n in tests)
    head = f" RUN  v2.1.2 {CWD}\n\n{files}\n"
    if failure:
        return (head + f"\n{failure}\n\n Test Files  1 failed | {len(tests) - 1} passed ({len(tests)})\n"
                f"      Tests  1 failed | {total - 1} passed ({total})")
    return head + f"\n Test Files  {len(tests)} passed ({len(tests)})\n      Tests  {total} passed ({total})"

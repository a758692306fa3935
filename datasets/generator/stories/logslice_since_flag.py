"""Story 3: a CLI flag and a config migration in a stdlib-only Python project (long, tool-heavy).

Kenji asks for ``logslice --since`` (durations and ISO timestamps), with three rules that recur to the
end: standard library only, ``--after`` unchanged, run ``pytest -q`` before claiming anything. Naive
timestamps turn out to need a decision (local time, never UTC). A ``dateparser`` dead end is
abandoned with ``/tree`` (a branch summary with custom instructions). Then the config moves from
``logslice.ini`` to ``logslice.toml`` (idempotent, ``.bak`` backup, never overwrite), followed by a
manual ``/compact`` with custom instructions, a ``defaults.since`` key, the docs, an end-to-end run
that Pi truncates, seconds as a unit, a review, a fast path for large logs, on-call recipes and a
release. Many tool results are longer than compaction's serialization keeps.
"""

from __future__ import annotations

import difflib
import json
import random
import re
from typing import Any

from pimem.base.js import parse_iso_ms, to_iso

from ..harness import Recorder, bash, bash_truncated, edit, grep, load_fixture, ls, read, step, write

NAME = "logslice-since-flag"
CWD = "/home/kenji/work/logslice"
FILES = load_fixture("logslice_since_flag")


def record(seed: int) -> Recorder:
    """The session, recorded with ``seed``."""
    r = Recorder(NAME, CWD, FILES, seed, "2026-03-10T01:12:40.551Z", "claude-opus-4-5",
                 thinking="medium", strict_tools=True)
    rng = r.rng
    r.project.files["README.md"] = _logslice_readme()
    r.project.files["samples/checkout.log.jsonl"] = _logslice_sample(rng, "checkout-api", 420, naive=False)
    r.project.files["samples/billing.log.jsonl"] = _logslice_sample(rng, "billing", 260, naive=True)
    suites = {f: list(ts) for f, ts in TEST_SUITE.items()}

    def tests(verbose: bool = False, failures: dict[str, str] | None = None, cov: bool = False) -> str:
        return pytest_report(suites, rng, verbose=verbose, failures=failures, cov=cov)

    def add_tests(path: str, names: list[str]) -> None:
        suites.setdefault(path, []).extend(names)

    since_help = ("only records newer than WHEN: a duration back from now (15m, 2h, 3d, 1w) or an "
                  "ISO-8601 timestamp")
    since_error = "invalid --since value: {v!r} (use 15m, 2h, 3d, 1w or an ISO-8601 timestamp)"

    # 1. the request, and reading the code base
    r.turn(
        "I want a `--since` flag for logslice: `logslice --since 2h app.log.jsonl` should keep only records from "
        "the last two hours. It must accept relative durations (`15m`, `2h`, `3d`, `1w`) and absolute ISO-8601 "
        "timestamps.\n\nGround rules for the whole job: standard library only — no new dependencies, logslice "
        "ships as a single pipx package. Keep `--after` working exactly as it does now, the on-call runbooks use "
        "it. And run `pytest -q` before you tell me anything is done.",
        step("I'll look at the layout, the README and the code paths that handle time first.", ls(),
             ls("src/logslice"), ls("tests"),
             thinking="A --since flag: parse a duration or a timestamp, turn it into an absolute lower bound and "
                      "reuse the existing time_between filter that --after uses. Need to see how --after is parsed "
                      "and what parse_timestamp does with naive timestamps."),
        step(None, read("README.md"), read("src/logslice/cli.py")),
        step(None, read("src/logslice/parse.py"), read("src/logslice/filters.py")),
        step(None, grep("after|before|parse_timestamp", "src"), grep("--after", "tests")),
        step("Baseline test run before changing anything:", bash("pytest -v", tests(verbose=True))),
        step(None, read("samples/billing.log.jsonl", 1, 40),
             thinking="The billing samples have timestamps without an offset (2026-03-09T23:02:11.482 style). "
                      "parse_timestamp returns naive datetimes for those. --since computed from "
                      "datetime.now(timezone.utc) is aware; comparing naive < aware raises TypeError. --after "
                      "with a Z timestamp would hit the same thing on billing logs, so it is a latent bug."),
        step("Here is how I'd do it:\n\n"
             "- `parse.py`: add `parse_duration()` (`15m`, `2h`, `3d`, `1w`) and `resolve_since(value, now)`, which "
             "returns `now - duration` or falls back to `parse_timestamp()`.\n"
             "- `cli.py`: a `--since WHEN` option whose type is `resolve_since`; it feeds the same "
             "`FilterSpec.after` that `--after` fills, so the filtering code is shared and `--after` is unchanged.\n"
             "- Tests in `tests/test_parse.py` and `tests/test_cli.py`.\n\n"
             "One thing to decide: `samples/billing.log.jsonl` has timestamps **without an offset** "
             "(`2026-03-09T23:02:11.482`). `parse_timestamp()` returns naive datetimes for those, and comparing a "
             "naive datetime with the aware one `--since` produces raises `TypeError: can't compare offset-naive "
             "and offset-aware datetimes`. How should naive timestamps be read — UTC, or local time?"),
    )
    r.turn(
        "Naive timestamps are local time of the box that wrote them (billing runs in Tokyo, same as the machines "
        "we run logslice on). Don't guess UTC. Go ahead, and put the duration parsing in parse.py next to "
        "parse_timestamp.",
        step("Adding `parse_duration()` and `resolve_since()` to `src/logslice/parse.py`.",
             edit("src/logslice/parse.py", "import json\n", "import json\nimport re\n",
                  ("from datetime import datetime, timezone\n", "from datetime import datetime, timedelta, timezone\n"))),
        step(None, edit("src/logslice/parse.py",
                        "def normalize_level(value: Any) -> str | None:",
                        "_DURATION_RE = re.compile(r\"^(\\d+)([mhdw])$\")\n"
                        "_UNIT_SECONDS = {\"m\": 60, \"h\": 3600, \"d\": 86400, \"w\": 604800}\n\n\n"
                        "def parse_duration(text: str) -> timedelta | None:\n"
                        "    \"\"\"``15m``, ``2h``, ``3d``, ``1w`` as a timedelta; anything else is None.\"\"\"\n"
                        "    m = _DURATION_RE.match(text.strip().lower())\n    if not m:\n        return None\n"
                        "    return timedelta(seconds=int(m.group(1)) * _UNIT_SECONDS[m.group(2)])\n\n\n"
                        "def resolve_since(value: str, now: datetime | None = None) -> datetime | None:\n"
                        "    \"\"\"A ``--since`` value: a duration back from ``now`` or an ISO-8601 timestamp.\"\"\"\n"
                        "    delta = parse_duration(value)\n    if delta is not None:\n"
                        "        return (now or datetime.now(timezone.utc)) - delta\n"
                        "    return parse_timestamp(value)\n\n\n"
                        "def normalize_level(value: Any) -> str | None:")),
        step("Now the naive-timestamp rule in `src/logslice/filters.py`: naive means local time of the machine.",
             edit("src/logslice/filters.py",
                  "def time_between(after: datetime | None, before: datetime | None) -> Predicate:\n"
                  "    \"\"\"Records with ``after <= ts < before``; records without a timestamp never match.\"\"\"\n\n"
                  "    def pred(rec: Record) -> bool:\n        if rec.ts is None:\n            return False\n"
                  "        if after is not None and rec.ts < after:\n            return False\n"
                  "        if before is not None and rec.ts >= before:\n            return False\n        return True\n",
                  "def _aware(ts: datetime) -> datetime:\n"
                  "    \"\"\"Naive timestamps are local time of the machine that wrote them (never assumed UTC).\"\"\"\n"
                  "    return ts if ts.tzinfo is not None else ts.astimezone()\n\n\n"
                  "def time_between(after: datetime | None, before: datetime | None) -> Predicate:\n"
                  "    \"\"\"Records with ``after <= ts < before``; records without a timestamp never match.\"\"\"\n"
                  "    after = _aware(after) if after is not None else None\n"
                  "    before = _aware(before) if before is not None else None\n\n"
                  "    def pred(rec: Record) -> bool:\n        if rec.ts is None:\n            return False\n"
                  "        ts = _aware(rec.ts)\n"
                  "        if after is not None and ts < after:\n            return False\n"
                  "        if before is not None and ts >= before:\n            return False\n        return True\n")),
        step("And the option itself in `src/logslice/cli.py`; `--after` keeps its parser and help text.",
             edit("src/logslice/cli.py",
                  "from .parse import LEVELS, LogParseError, iter_records, parse_timestamp\n",
                  "from .parse import LEVELS, LogParseError, iter_records, parse_timestamp, resolve_since\n",
                  ("def _field_arg(value: str) -> tuple[str, str]:",
                   "def _since_arg(value: str) -> datetime:\n    ts = resolve_since(value)\n    if ts is None:\n"
                   "        raise argparse.ArgumentTypeError(\n"
                   f"            f\"{since_error.replace('{v!r}', '{value!r}')}\")\n    return ts\n\n\n"
                   "def _field_arg(value: str) -> tuple[str, str]:"),
                  ("    p.add_argument(\"--before\", type=_timestamp_arg,",
                   "    p.add_argument(\"--since\", type=_since_arg, metavar=\"WHEN\",\n"
                   f"                   help=\"{since_help}\")\n"
                   "    p.add_argument(\"--before\", type=_timestamp_arg,"))),
        step(None, read("src/logslice/cli.py", 70, 40),
             thinking="main() builds FilterSpec(after=args.after ...). --since should fill the same field. If both "
                      "are given, better to refuse than silently pick one."),
        step("If both `--since` and `--after` are given I'll refuse with exit code 2 rather than silently pick one.",
             edit("src/logslice/cli.py",
                  "    spec = FilterSpec(\n        min_level=args.level or cfg.level,\n        after=args.after,\n",
                  "    if args.since is not None and args.after is not None:\n"
                  "        print(\"logslice: --since and --after are the same filter; give only one\", file=sys.stderr)\n"
                  "        return 2\n"
                  "    spec = FilterSpec(\n        min_level=args.level or cfg.level,\n"
                  "        after=args.since if args.since is not None else args.after,\n")),
        step("Tests for the parser:", read("tests/test_parse.py")),
        step(None, edit("tests/test_parse.py",
                        "from logslice.parse import LogParseError, Record, iter_records, normalize_level, parse_timestamp\n",
                        "from logslice.parse import (LogParseError, Record, iter_records, normalize_level, parse_duration,\n"
                        "                            parse_timestamp, resolve_since)\n",
                        ("def test_record_message_keys():",
                         "NOW = datetime(2026, 3, 10, 1, 0, tzinfo=UTC)\n\n\n"
                         "@pytest.mark.parametrize(\"text, minutes\", [(\"15m\", 15), (\"2h\", 120), (\"3d\", 4320), (\"1w\", 10080),\n"
                         "                                           (\" 2H \", 120)], ids=[\"15m\", \"2h\", \"3d\", \"1w\", \"spaces-upper\"])\n"
                         "def test_parse_duration(text, minutes):\n    assert parse_duration(text) == timedelta(minutes=minutes)\n\n\n"
                         "@pytest.mark.parametrize(\"text\", [\"\", \"2\", \"h\", \"-2h\", \"2 hours\", \"1.5h\"])\n"
                         "def test_parse_duration_rejects(text):\n    assert parse_duration(text) is None\n\n\n"
                         "def test_resolve_since_relative():\n    assert resolve_since(\"2h\", now=NOW) == datetime(2026, 3, 9, 23, 0, tzinfo=UTC)\n\n\n"
                         "def test_resolve_since_absolute():\n    assert resolve_since(\"2026-03-09T14:00:00Z\", now=NOW) == datetime(2026, 3, 9, 14, tzinfo=UTC)\n\n\n"
                         "def test_resolve_since_garbage():\n    assert resolve_since(\"last friday\", now=NOW) is None\n\n\n"
                         "def test_record_message_keys():"))),
    )
    add_tests("tests/test_parse.py", [f"test_parse_duration[{c}]" for c in ("15m", "2h", "3d", "1w", "spaces-upper")]
              + [f"test_parse_duration_rejects[{c}]" for c in ("", "2", "h", "-2h", "2 hours", "1.5h")]
              + ["test_resolve_since_relative", "test_resolve_since_absolute", "test_resolve_since_garbage"])
    r.assistant(step("And for the filter with naive timestamps:", read("tests/test_filters.py")))
    r.assistant(step(None, edit("tests/test_filters.py", "def test_field_equals_stringifies():",
                                "def test_time_between_naive_record_is_local_time():\n"
                                "    local = datetime(2026, 3, 9, 23, 30)  # naive: local wall clock\n"
                                "    after = local.astimezone() - timedelta(minutes=5)\n"
                                "    assert time_between(after.astimezone(UTC), None)(rec(ts=local))\n\n\n"
                                "def test_time_between_naive_bound_is_local_time():\n"
                                "    bound = datetime(2026, 3, 9, 23, 30)\n"
                                "    assert not time_between(bound, None)(rec(ts=bound.astimezone() - timedelta(seconds=1)))\n\n\n"
                                "def test_field_equals_stringifies():")))
    naive_fail = ("    def test_time_between_naive_record_is_local_time():\n"
                  "        local = datetime(2026, 3, 9, 23, 30)  # naive: local wall clock\n"
                  ">       after = local.astimezone() - timedelta(minutes=5)\n"
                  "E       NameError: name 'timedelta' is not defined\n\ntests/test_filters.py:38: NameError")
    add_tests("tests/test_filters.py", ["test_time_between_naive_record_is_local_time",
                                        "test_time_between_naive_bound_is_local_time"])
    r.assistant(step(None, bash("pytest -q", tests(failures={
        "test_time_between_naive_record_is_local_time": naive_fail,
        "test_time_between_naive_bound_is_local_time": naive_fail.replace("local = datetime(2026, 3, 9, 23, 30)  # naive: local wall clock\n>       after = local.astimezone() - timedelta(minutes=5)",
                                                                          "bound = datetime(2026, 3, 9, 23, 30)\n>       assert not time_between(bound, None)(rec(ts=bound.astimezone() - timedelta(seconds=1)))").replace(":38:", ":44:"),
    }), exit_code=1)))
    r.assistant(step("Missing import in the test module.", edit("tests/test_filters.py", "from datetime import datetime, timezone\n",
                                                                  "from datetime import datetime, timedelta, timezone\n")))
    r.assistant(step(None, bash("pytest -q", tests())))
    r.assistant(step("Now CLI tests: `--since` relative (with a fixed clock), absolute, the error text, and the "
                     "`--since` + `--after` conflict.", read("tests/test_cli.py")))
    r.assistant(step(None, edit("tests/test_cli.py", "def test_before_filter(capsys, logfile):",
                                "def test_since_absolute(capsys, logfile):\n"
                                "    assert run(capsys, \"--since\", \"2026-03-09T14:05:00Z\", str(logfile))[1] == [LOG[2][\"msg\"], LOG[3][\"msg\"]]\n\n\n"
                                "def test_since_relative(capsys, logfile, monkeypatch):\n"
                                "    import logslice.parse as parse\n\n"
                                "    fixed = parse.datetime(2026, 3, 9, 14, 10, tzinfo=parse.timezone.utc)\n"
                                "    monkeypatch.setattr(parse, \"datetime\", type(\"FixedNow\", (parse.datetime,), {\"now\": classmethod(lambda cls, tz=None: fixed)}))\n"
                                "    assert run(capsys, \"--since\", \"5m\", str(logfile))[1] == [LOG[3][\"msg\"]]\n\n\n"
                                "def test_since_rejects_garbage(capsys, logfile):\n"
                                "    with pytest.raises(SystemExit):\n        main([\"--since\", \"yesterday\", str(logfile)])\n"
                                "    assert \"invalid --since value: 'yesterday'\" in capsys.readouterr().err\n\n\n"
                                "def test_since_and_after_conflict(capsys, logfile):\n"
                                "    code, _, err = run(capsys, \"--since\", \"2h\", \"--after\", \"2026-03-09T14:00:00Z\", str(logfile))\n"
                                "    assert code == 2 and \"give only one\" in err\n\n\n"
                                "def test_before_filter(capsys, logfile):")))
    add_tests("tests/test_cli.py", ["test_since_absolute", "test_since_relative", "test_since_rejects_garbage",
                                    "test_since_and_after_conflict"])
    r.assistant(step(None, bash("pytest -v", tests(verbose=True))))
    r.assistant(step(None, bash("logslice --since 2026-03-09T14:30:00Z -l warn samples/checkout.log.jsonl samples/billing.log.jsonl | head -20",
                                _logslice_table(r, ["samples/checkout.log.jsonl", "samples/billing.log.jsonl"], "warn", 19,
                                                since="2026-03-09T14:30:00Z"))))
    done_since = r.assistant(step(
        "`--since` works and all tests pass.\n\n- `src/logslice/parse.py`: `parse_duration()` (`15m`, `2h`, `3d`, `1w`) "
        "and `resolve_since()`.\n- `src/logslice/filters.py`: naive timestamps are compared as **local time** of the "
        "machine (`_aware()`), for records and for bounds, so `samples/billing.log.jsonl` no longer raises "
        "`TypeError: can't compare offset-naive and offset-aware datetimes`.\n- `src/logslice/cli.py`: `--since WHEN`; "
        "`--after` is unchanged; giving both exits with code 2.\n- Tests: durations, rejects, relative/absolute "
        "`--since`, naive timestamps, the conflict."))
    r.label(done_since, "since-flag")

    # 2. a dead end: natural-language dates through a new dependency (abandoned with /tree)
    r.turn("Could --since also take things like 'yesterday 18:00' or 'last friday'? On-call people type those.",
           step("The robust way is the `dateparser` package, which understands those phrases in many languages.",
                bash("pip install dateparser", "Collecting dateparser\n  Downloading dateparser-1.2.1-py3-none-any.whl (295 kB)\n"
                     "Collecting regex!=2019.02.19,!=2021.8.27,>=2015.06.24\n  Downloading regex-2024.11.6-cp312-cp312-manylinux_2_17_x86_64.whl (796 kB)\n"
                     "Collecting tzlocal>=0.2\n  Downloading tzlocal-5.2-py3-none-any.whl (17 kB)\n"
                     "Installing collected packages: tzlocal, regex, dateparser\nSuccessfully installed dateparser-1.2.1 regex-2024.11.6 tzlocal-5.2")),
           step(None, edit("src/logslice/parse.py",
                           "    delta = parse_duration(value)\n    if delta is not None:\n"
                           "        return (now or datetime.now(timezone.utc)) - delta\n    return parse_timestamp(value)\n",
                           "    delta = parse_duration(value)\n    if delta is not None:\n"
                           "        return (now or datetime.now(timezone.utc)) - delta\n    ts = parse_timestamp(value)\n"
                           "    if ts is None:\n        import dateparser\n\n"
                           "        ts = dateparser.parse(value, settings={\"RELATIVE_BASE\": now, \"RETURN_AS_TIMEZONE_AWARE\": True})\n"
                           "    return ts\n"),
                edit("pyproject.toml", "dependencies = []", "dependencies = [\"dateparser>=1.2\"]")),
           step(None, bash("pytest -q", tests(failures={"test_resolve_since_garbage": (
               "    def test_resolve_since_garbage():\n>       assert resolve_since(\"last friday\", now=NOW) is None\n"
               "E       AssertionError: assert datetime.datetime(2026, 3, 6, 1, 0, tzinfo=<StaticTzInfo 'UTC'>) is None\n"
               "E        +  where datetime.datetime(2026, 3, 6, 1, 0, tzinfo=<StaticTzInfo 'UTC'>) = resolve_since('last friday', now=datetime.datetime(2026, 3, 10, 1, 0, tzinfo=datetime.timezone.utc))\n\n"
               "tests/test_parse.py:77: AssertionError")}), exit_code=1)),
           step("That failure is expected: `last friday` now resolves. I'd change that test to assert the date. "
                "Note this adds `dateparser` (plus `regex` and `tzlocal`) as a dependency."))
    r.user("No — stdlib only, I said that at the start. Undo all of that, we won't do natural-language dates.")
    r.assistant(step("Understood: no `dateparser`. Reverting both edits and uninstalling it.",
                     edit("src/logslice/parse.py",
                          "    ts = parse_timestamp(value)\n    if ts is None:\n        import dateparser\n\n"
                          "        ts = dateparser.parse(value, settings={\"RELATIVE_BASE\": now, \"RETURN_AS_TIMEZONE_AWARE\": True})\n"
                          "    return ts\n",
                          "    return parse_timestamp(value)\n"),
                     edit("pyproject.toml", "dependencies = [\"dateparser>=1.2\"]", "dependencies = []"),
                     bash("pip uninstall -y dateparser regex tzlocal",
                          "Found existing installation: dateparser 1.2.1\nUninstalling dateparser-1.2.1:\n  Successfully uninstalled dateparser-1.2.1\n"
                          "Found existing installation: regex 2024.11.6\nUninstalling regex-2024.11.6:\n  Successfully uninstalled regex-2024.11.6\n"
                          "Found existing installation: tzlocal 5.2\nUninstalling tzlocal-5.2:\n  Successfully uninstalled tzlocal-5.2")))
    r.assistant(step("Reverted: `src/logslice/parse.py` and `pyproject.toml` are back to the stdlib-only `--since`, "
                     "and `dateparser` is uninstalled. Natural-language dates are out of scope."))
    r.label(r.leaf, "dateparser-dead-end")
    r.navigate(done_since, custom_instructions="Record that natural-language dates were rejected: stdlib only.")

    # 3. the config migration: INI (v1) -> TOML (v2) with a migrate subcommand
    r.turn(
        "Next job. The config moves from `~/.config/logslice/logslice.ini` to `logslice.toml` with "
        "`schema_version = 2`, read with `tomllib`. Add `logslice config migrate` which converts the INI. Rules: "
        "the migration must be idempotent (running it twice changes nothing), keep a backup at "
        "`logslice.ini.bak`, and never overwrite an existing `logslice.toml`. Old INI files must keep loading for "
        "one more release, with a DeprecationWarning. Still stdlib only, so we write the TOML ourselves (no tomli-w).",
        step("Reading the config code, its docs and tests.", read("src/logslice/config.py"), read("docs/config.md"),
             read("tests/test_config.py"),
             thinking="tomllib can read but not write. Our schema is tiny: strings, a bool, a list of strings, a "
                      "table of string aliases. A small writer with proper string escaping is enough. Plan: "
                      "config.py loads toml first (schema_version check), falls back to ini with "
                      "DeprecationWarning; migrate.py does ini -> toml with backup and no-overwrite."),
        step(None, grep("load_config|DEFAULT_PATH|config_dir", "src"), grep("config", "tests", ignore_case=True)),
        step("Plan:\n\n1. `src/logslice/migrate.py`: `ini_to_toml(cfg)` renders a `Config` as TOML; `migrate(dir)` "
             "writes `logslice.toml`, copies the INI to `logslice.ini.bak`, refuses to overwrite, and is a no-op "
             "when already migrated.\n2. `config.py`: `load_config()` prefers `logslice.toml` (requires "
             "`schema_version = 2`), falls back to the INI with a `DeprecationWarning`.\n3. `cli.py`: a `config "
             "migrate` subcommand.\n\nStarting with the writer.",
             write("src/logslice/migrate.py",
                   "\"\"\"Config format migration: ``logslice.ini`` (v1) to ``logslice.toml`` (v2).\"\"\"\n\n"
                   "from __future__ import annotations\n\nimport shutil\nfrom pathlib import Path\n\n"
                   "from .config import Config, load_ini\n\nSCHEMA_VERSION = 2\n\n\n"
                   "def _toml_str(value: str) -> str:\n    return '\"' + value.replace('\\\\', '\\\\\\\\').replace('\"', '\\\\\"') + '\"'\n\n\n"
                   "def ini_to_toml(cfg: Config) -> str:\n    \"\"\"A v2 TOML document for ``cfg``.\"\"\"\n"
                   "    lines = [f\"schema_version = {SCHEMA_VERSION}\", \"\", \"[defaults]\"]\n"
                   "    lines.append(f\"format = {_toml_str(cfg.format)}\")\n"
                   "    if cfg.level:\n        lines.append(f\"level = {_toml_str(cfg.level)}\")\n"
                   "    lines.append(f\"color = {'true' if cfg.color else 'false'}\")\n"
                   "    lines.append(f\"fields = {', '.join(cfg.fields)}\")\n"
                   "    if cfg.aliases:\n        lines += [\"\", \"[aliases]\"]\n"
                   "        lines += [f\"{name} = {_toml_str(value)}\" for name, value in sorted(cfg.aliases.items())]\n"
                   "    return \"\\n\".join(lines) + \"\\n\"\n\n\n"
                   "class MigrationError(RuntimeError):\n    \"\"\"The migration refused to run (the message says why).\"\"\"\n\n\n"
                   "def migrate(config_dir: Path) -> str:\n    \"\"\"Convert ``logslice.ini`` in ``config_dir``; returns what was done.\"\"\"\n"
                   "    ini, toml, bak = (config_dir / n for n in (\"logslice.ini\", \"logslice.toml\", \"logslice.ini.bak\"))\n"
                   "    if not ini.exists():\n        return \"nothing to migrate: no logslice.ini\"\n"
                   "    text = ini_to_toml(load_ini(ini))\n"
                   "    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n        fh.write(text)\n"
                   "    shutil.copy2(ini, bak)\n    return f\"wrote {toml.name}, backup {bak.name}\"\n")),
    )
    r.assistant(step("`migrate.py` imports `load_ini`; splitting `load_config()` accordingly in `src/logslice/config.py`.",
                     edit("src/logslice/config.py",
                          "def load_config(path: Path | None = None) -> Config:\n    \"\"\"Read the INI config; a missing file gives the defaults.\"\"\"\n"
                          "    path = path or DEFAULT_PATH\n    cfg = Config()\n    if not path.exists():\n        return cfg\n",
                          "def load_ini(path: Path) -> Config:\n    \"\"\"Read a v1 INI config; a missing file gives the defaults.\"\"\"\n"
                          "    cfg = Config()\n    if not path.exists():\n        return cfg\n")))
    r.assistant(step(None, edit("src/logslice/config.py",
                                "import configparser\nimport os\n",
                                "import configparser\nimport os\nimport tomllib\nimport warnings\n",
                                ("DEFAULT_PATH = config_dir() / \"logslice.ini\"\n",
                                 "DEFAULT_PATH = config_dir() / \"logslice.toml\"\nLEGACY_PATH = config_dir() / \"logslice.ini\"\n"))))
    r.assistant(step("Now the v2 loader and the new `load_config()` that prefers TOML:",
                     edit("src/logslice/config.py", "    cfg.source = path\n    return cfg\n",
                          "    cfg.source = path\n    return cfg\n\n\n"
                          "def load_toml(path: Path) -> Config:\n    \"\"\"Read a v2 TOML config (``schema_version = 2``).\"\"\"\n"
                          "    try:\n        data = tomllib.loads(path.read_text(encoding=\"utf-8\"))\n"
                          "    except tomllib.TOMLDecodeError as exc:\n        raise ConfigError(f\"{path}: {exc}\") from None\n"
                          "    if data.get(\"schema_version\") != 2:\n"
                          "        raise ConfigError(f\"{path}: schema_version must be 2, not {data.get('schema_version')!r}\")\n"
                          "    d = data.get(\"defaults\", {})\n    cfg = Config()\n"
                          "    if d.get(\"format\", cfg.format) not in FORMATS:\n"
                          "        raise ConfigError(f\"{path}: format must be one of {', '.join(FORMATS)}, not {d['format']!r}\")\n"
                          "    cfg.format = d.get(\"format\", cfg.format)\n    cfg.level = d.get(\"level\")\n"
                          "    cfg.color = bool(d.get(\"color\", cfg.color))\n    cfg.fields = list(d.get(\"fields\", cfg.fields))\n"
                          "    cfg.aliases = dict(data.get(\"aliases\", {}))\n    cfg.source = path\n    return cfg\n\n\n"
                          "def load_config(path: Path | None = None) -> Config:\n"
                          "    \"\"\"The config: ``path`` if given, else ``logslice.toml``, else the legacy ``logslice.ini``.\"\"\"\n"
                          "    if path is not None:\n        return load_toml(path) if path.suffix == \".toml\" else load_ini(path)\n"
                          "    if DEFAULT_PATH.exists():\n        return load_toml(DEFAULT_PATH)\n"
                          "    if LEGACY_PATH.exists():\n"
                          "        warnings.warn(f\"{LEGACY_PATH} is deprecated; run `logslice config migrate`\", DeprecationWarning, stacklevel=2)\n"
                          "        return load_ini(LEGACY_PATH)\n    return Config()\n")))
    r.assistant(step(None, read("src/logslice/config.py")))
    r.assistant(step("Tests for the migration, including running it twice and the no-overwrite rule:",
                     write("tests/test_migrate.py",
                           "import tomllib\n\nimport pytest\n\nfrom logslice.config import load_config, load_toml\n"
                           "from logslice.migrate import migrate\n\nINI = \"\"\"[logslice]\nformat = json\nlevel = warn\ncolor = no\n"
                           "fields = ts, level, service, msg\n\n[aliases]\ncheckout = service=checkout-api\n"
                           "payments = service=payments\n\"\"\"\n\n\n"
                           "def test_migrate_writes_toml_and_backup(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n    migrate(config_home)\n"
                           "    data = tomllib.loads((config_home / \"logslice.toml\").read_text())\n"
                           "    assert data[\"schema_version\"] == 2\n    assert data[\"defaults\"][\"fields\"] == [\"ts\", \"level\", \"service\", \"msg\"]\n"
                           "    assert (config_home / \"logslice.ini.bak\").read_text() == INI\n\n\n"
                           "def test_migrated_config_loads_the_same(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n    before = load_config(config_home / \"logslice.ini\")\n"
                           "    migrate(config_home)\n    after = load_toml(config_home / \"logslice.toml\")\n"
                           "    assert (after.format, after.level, after.color, after.fields, after.aliases) == \\\n"
                           "        (before.format, before.level, before.color, before.fields, before.aliases)\n\n\n"
                           "def test_migrate_twice_is_a_no_op(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n    migrate(config_home)\n"
                           "    first = (config_home / \"logslice.toml\").read_bytes()\n    migrate(config_home)\n"
                           "    assert (config_home / \"logslice.toml\").read_bytes() == first\n\n\n"
                           "def test_migrate_never_overwrites_existing_toml(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n"
                           "    (config_home / \"logslice.toml\").write_text(\"schema_version = 2\\n# hand-written\\n\")\n"
                           "    migrate(config_home)\n"
                           "    assert \"hand-written\" in (config_home / \"logslice.toml\").read_text()\n\n\n"
                           "def test_windows_path_alias_survives(config_home):\n"
                           "    (config_home / \"logslice.ini\").write_text(\"[aliases]\\nwin = path=C:\\\\logs\\\\app\\n\")\n"
                           "    migrate(config_home)\n"
                           "    assert load_toml(config_home / \"logslice.toml\").aliases == {\"win\": \"path=C:\\\\logs\\\\app\"}\n\n\n"
                           "def test_legacy_ini_warns(config_home):\n    (config_home / \"logslice.ini\").write_text(INI)\n"
                           "    import importlib\n\n    import logslice.config as config\n\n    importlib.reload(config)\n"
                           "    with pytest.warns(DeprecationWarning, match=\"logslice config migrate\"):\n"
                           "        assert config.load_config().format == \"json\"\n")))
    add_tests("tests/test_migrate.py", ["test_migrate_writes_toml_and_backup", "test_migrated_config_loads_the_same",
                                        "test_migrate_twice_is_a_no_op", "test_migrate_never_overwrites_existing_toml",
                                        "test_windows_path_alias_survives", "test_legacy_ini_warns"])
    toml_fail = ("    def test_migrate_writes_toml_and_backup(config_home):\n"
                 "        (config_home / \"logslice.ini\").write_text(INI)\n        migrate(config_home)\n"
                 ">       data = tomllib.loads((config_home / \"logslice.toml\").read_text())\n\n"
                 "tests/test_migrate.py:17: \n_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n"
                 "/usr/lib/python3.12/tomllib/_parser.py:143: in loads\n    pos = key_value_rule(src, pos, out, header, parse_float)\n"
                 "E   tomllib.TOMLDecodeError: Invalid value (at line 6, column 10)")
    exists_fail = ("    def test_migrate_twice_is_a_no_op(config_home):\n        (config_home / \"logslice.ini\").write_text(INI)\n"
                   "        migrate(config_home)\n        first = (config_home / \"logslice.toml\").read_bytes()\n"
                   ">       migrate(config_home)\n\ntests/test_migrate.py:31: \n"
                   "src/logslice/migrate.py:38: in migrate\n    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n"
                   "E   FileExistsError: [Errno 17] File exists: '/tmp/pytest-of-kenji/pytest-41/test_migrate_twice_is_a_no_op0/logslice/logslice.toml'")
    r.assistant(step(None, bash("pytest -q tests/test_migrate.py tests/test_config.py", pytest_report(
        {"tests/test_migrate.py": suites["tests/test_migrate.py"], "tests/test_config.py": suites["tests/test_config.py"]},
        rng, failures={"test_migrate_writes_toml_and_backup": toml_fail,
                       "test_migrated_config_loads_the_same": toml_fail.replace("test_migrate_writes_toml_and_backup", "test_migrated_config_loads_the_same").replace(":17:", ":24:"),
                       "test_migrate_twice_is_a_no_op": exists_fail,
                       "test_migrate_never_overwrites_existing_toml": exists_fail.replace("test_migrate_twice_is_a_no_op", "test_migrate_never_overwrites_existing_toml").replace(":31:", ":38:"),
                       "test_windows_path_alias_survives": toml_fail.replace("test_migrate_writes_toml_and_backup", "test_windows_path_alias_survives").replace("line 6", "line 5").replace(":17:", ":44:")}),
        exit_code=1),
        thinking="Two bugs. 1) fields written as a bare comma list: TOML needs an array of strings. "
                 "2) open('x') raises when logslice.toml exists; the rules say: already migrated -> no-op, and "
                 "never overwrite. Check existence first and return a message instead of raising."))
    r.assistant(step("Two bugs: `fields` is written as a bare list (TOML needs `[\"ts\", \"level\"]`), and "
                     "`open(\"x\")` raises `FileExistsError` instead of treating an existing `logslice.toml` as "
                     "already migrated. Fixing both:",
                     edit("src/logslice/migrate.py",
                          "    lines.append(f\"fields = {', '.join(cfg.fields)}\")\n",
                          "    lines.append(f\"fields = [{', '.join(_toml_str(f) for f in cfg.fields)}]\")\n",
                          ("    text = ini_to_toml(load_ini(ini))\n    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n",
                           "    if toml.exists():\n        return f\"already migrated: {toml.name} exists (left untouched)\"\n"
                           "    text = ini_to_toml(load_ini(ini))\n    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n"))))
    r.assistant(step(None, bash("pytest -q", tests())))
    r.assistant(step("Green. Now the `config migrate` subcommand. argparse with an optional positional subcommand "
                     "would clash with the `files` positional, so I'll dispatch on `argv[:2] == ['config', 'migrate']` "
                     "before building the filter parser.", read("src/logslice/cli.py", 80)))
    r.assistant(step(None, edit("src/logslice/cli.py",
                                "def main(argv: Sequence[str] | None = None) -> int:\n    args = build_parser().parse_args(argv)\n",
                                "def config_main(argv: Sequence[str]) -> int:\n"
                                "    \"\"\"``logslice config migrate [--dir DIR]``.\"\"\"\n"
                                "    p = argparse.ArgumentParser(prog=\"logslice config\")\n"
                                "    p.add_argument(\"action\", choices=[\"migrate\"])\n"
                                "    p.add_argument(\"--dir\", type=Path, default=config_dir(), help=\"config folder\")\n"
                                "    args = p.parse_args(argv)\n    print(f\"logslice: {migrate(args.dir)}\")\n    return 0\n\n\n"
                                "def main(argv: Sequence[str] | None = None) -> int:\n"
                                "    argv = list(sys.argv[1:] if argv is None else argv)\n"
                                "    if argv[:1] == [\"config\"]:\n        return config_main(argv[1:])\n"
                                "    args = build_parser().parse_args(argv)\n",
                                ("from .config import FORMATS, ConfigError, load_config\n",
                                 "from .config import FORMATS, ConfigError, config_dir, load_config\n"),
                                ("from .filters import FilterSpec, apply\n",
                                 "from .filters import FilterSpec, apply\nfrom .migrate import migrate\n"))))
    r.assistant(step(None, edit("tests/test_cli.py", "def test_stdin_default(capsys, monkeypatch):",
                                "def test_config_migrate_subcommand(capsys, config_home):\n"
                                "    (config_home / \"logslice.ini\").write_text(\"[logslice]\\nformat = json\\n\")\n"
                                "    assert main([\"config\", \"migrate\", \"--dir\", str(config_home)]) == 0\n"
                                "    assert \"wrote logslice.toml, backup logslice.ini.bak\" in capsys.readouterr().out\n"
                                "    assert main([\"config\", \"migrate\", \"--dir\", str(config_home)]) == 0\n"
                                "    assert \"already migrated\" in capsys.readouterr().out\n\n\n"
                                "def test_stdin_default(capsys, monkeypatch):")))
    add_tests("tests/test_cli.py", ["test_config_migrate_subcommand"])
    r.assistant(step(None, bash("pytest -v", tests(verbose=True))))
    r.assistant(step(None, bash("logslice config migrate --dir /tmp/lsmig && cat /tmp/lsmig/logslice.toml",
                                "logslice: wrote logslice.toml, backup logslice.ini.bak\nschema_version = 2\n\n[defaults]\n"
                                "format = \"table\"\nlevel = \"info\"\ncolor = true\nfields = [\"ts\", \"level\", \"service\", \"msg\"]\n\n"
                                "[aliases]\ncheckout = \"service=checkout-api\"\npayments = \"service=payments\"")))
    r.assistant(step("The migration is in place and all tests pass:\n\n- `src/logslice/migrate.py`: `ini_to_toml()` "
                     "(strings escaped, `fields` as a TOML array) and `migrate()`: writes `logslice.toml`, keeps "
                     "`logslice.ini.bak`, never overwrites an existing `logslice.toml`, and a second run is a no-op "
                     "(`already migrated`).\n- `src/logslice/config.py`: `load_config()` prefers `logslice.toml` "
                     "(`schema_version = 2`), falls back to `logslice.ini` with a `DeprecationWarning`.\n"
                     "- `logslice config migrate [--dir DIR]`.\n\nDecided to write TOML by hand instead of adding "
                     "tomli-w, per the stdlib-only rule."))
    r.compact(keep_recent_tokens=9000,
              custom_instructions="Keep the user's rules verbatim (stdlib only; --after unchanged; naive timestamps "
                                  "are local time; migration idempotent, .bak backup, never overwrite logslice.toml).")

    # 4. config defaults for --since, docs, precedence
    r.turn(
        "Good. Two follow-ups: allow `since = \"2h\"` under `[defaults]` in logslice.toml (the CLI flag wins, as "
        "always), and update README.md and docs/config.md — the docs still only describe the INI.",
        step(None, read("src/logslice/config.py", 1, 60), read("src/logslice/cli.py", 95, 40)),
        step("Adding `since` to `Config` and the TOML loader (INI files never had it, so v1 stays as it was).",
             edit("src/logslice/config.py",
                  "    aliases: dict[str, str] = field(default_factory=dict)\n    source: Path | None = None\n",
                  "    aliases: dict[str, str] = field(default_factory=dict)\n    since: str | None = None\n"
                  "    source: Path | None = None\n",
                  ("    cfg.aliases = dict(data.get(\"aliases\", {}))\n    cfg.source = path\n",
                   "    cfg.aliases = dict(data.get(\"aliases\", {}))\n    cfg.since = d.get(\"since\")\n"
                   "    if cfg.since is not None and resolve_since(cfg.since) is None:\n"
                   "        raise ConfigError(f\"{path}: defaults.since: {since_error_text(cfg.since)}\")\n"
                   "    cfg.source = path\n"))),
        step("The loader refers to `since_error_text()`, which I'm adding next to `resolve_since()` in "
             "`parse.py`; `cli.py` will use it too so the message is the same everywhere.",
             edit("src/logslice/parse.py",
                  "def normalize_level(value: Any) -> str | None:",
                  "def since_error_text(value: str) -> str:\n"
                  f"    return f\"{since_error.replace('{v!r}', '{value!r}')}\"\n\n\n"
                  "def normalize_level(value: Any) -> str | None:"),
             edit("src/logslice/config.py", "from pathlib import Path\n",
                  "from pathlib import Path\n\nfrom .parse import resolve_since, since_error_text\n")),
        step(None, edit("src/logslice/cli.py",
                        "        raise argparse.ArgumentTypeError(\n"
                        f"            f\"{since_error.replace('{v!r}', '{value!r}')}\")\n",
                        "        raise argparse.ArgumentTypeError(since_error_text(value))\n",
                        ("from .parse import LEVELS, LogParseError, iter_records, parse_timestamp, resolve_since\n",
                         "from .parse import LEVELS, LogParseError, iter_records, parse_timestamp, resolve_since, since_error_text\n"))),
        step("Precedence in `main()`: `--since` or `--after` from the command line, else `defaults.since`.",
             edit("src/logslice/cli.py",
                  "        after=args.since if args.since is not None else args.after,\n",
                  "        after=(args.since if args.since is not None else args.after if args.after is not None\n"
                  "               else resolve_since(cfg.since) if cfg.since else None),\n")),
        step(None, edit("tests/test_cli.py", "def test_stdin_default(capsys, monkeypatch):",
                        "def test_since_from_config_and_flag_wins(capsys, logfile, config_home):\n"
                        "    toml = config_home / \"logslice.toml\"\n"
                        "    toml.write_text('schema_version = 2\\n[defaults]\\nsince = \"2026-03-09T14:05:00Z\"\\nformat = \"json\"\\n')\n"
                        "    main([\"--config\", str(toml), str(logfile)])\n"
                        "    assert len(capsys.readouterr().out.splitlines()) == 2\n"
                        "    main([\"--config\", str(toml), \"--after\", \"2026-03-09T14:00:00Z\", str(logfile)])\n"
                        "    assert len(capsys.readouterr().out.splitlines()) == 4\n\n\n"
                        "def test_stdin_default(capsys, monkeypatch):"),
             edit("tests/test_migrate.py", "def test_legacy_ini_warns(config_home):",
                  "def test_bad_since_in_toml_names_file(config_home):\n"
                  "    (config_home / \"logslice.toml\").write_text('schema_version = 2\\n[defaults]\\nsince = \"soon\"\\n')\n"
                  "    with pytest.raises(ConfigError, match=\"logslice.toml: defaults.since: invalid --since value: 'soon'\"):\n"
                  "        load_toml(config_home / \"logslice.toml\")\n\n\n"
                  "def test_legacy_ini_warns(config_home):",
                  ("from logslice.config import load_config, load_toml\n",
                   "from logslice.config import ConfigError, load_config, load_toml\n"))),
    )
    add_tests("tests/test_cli.py", ["test_since_from_config_and_flag_wins"])
    add_tests("tests/test_migrate.py", ["test_bad_since_in_toml_names_file"])
    r.assistant(step(None, bash("pytest -q", tests())))
    r.assistant(step("Tests pass. Now the docs.", read("docs/config.md"), read("README.md")))
    r.assistant(step(None, write("docs/config.md",
                                 "# Configuration\n\nlogslice reads `~/.config/logslice/logslice.toml` (or "
                                 "`$XDG_CONFIG_HOME/logslice/logslice.toml`, or the file given with `--config`). "
                                 "Every key is optional.\n\n```toml\nschema_version = 2\n\n[defaults]\nformat = \"table\"   "
                                 "# table | json | logfmt\nlevel = \"info\"     # minimum level when --level is not given\n"
                                 "color = true\nfields = [\"ts\", \"level\", \"service\", \"msg\"]\nsince = \"2h\"       "
                                 "# default for --since: 15m, 2h, 3d, 1w or an ISO-8601 timestamp\n\n[aliases]\n"
                                 "# logslice -a checkout  ==  logslice -f service=checkout-api\ncheckout = \"service=checkout-api\"\n"
                                 "payments = \"service=payments\"\n```\n\n## Precedence\n\nCommand-line flags win over the "
                                 "config file, which wins over the built-in defaults. `--since` and `--after` are the same "
                                 "filter (give only one); either replaces `defaults.since`.\n\n## Timestamps without an offset\n\n"
                                 "They are local time of the machine that wrote them, never assumed to be UTC.\n\n"
                                 "## Migrating from logslice.ini (format v1)\n\n    logslice config migrate\n\n"
                                 "writes `logslice.toml`, keeps the old file as `logslice.ini.bak`, never overwrites an "
                                 "existing `logslice.toml`, and does nothing when run again. Until 1.8, a `logslice.ini` "
                                 "without a `logslice.toml` still loads, with a `DeprecationWarning`.\n\n## Format history\n\n"
                                 "| version | file | since |\n| --- | --- | --- |\n| 1 | `logslice.ini` | 1.0 (deprecated in 1.7) |\n"
                                 "| 2 | `logslice.toml` | 1.7 |\n")))
    r.assistant(step(None, edit("README.md",
                                "| `--before TS` | only records before TS (ISO-8601) |",
                                f"| `--since WHEN` | {since_help}; same filter as `--after` |\n"
                                "| `--before TS` | only records before TS (ISO-8601) |",
                                ("| `--config PATH` | config file to use instead of `~/.config/logslice/logslice.ini` |",
                                 "| `--config PATH` | config file to use instead of `~/.config/logslice/logslice.toml` |\n"
                                 "| `config migrate` | convert `logslice.ini` to `logslice.toml` (see docs/config.md) |"),
                                ("they are written (the `billing` service logs local time without an offset; see",
                                 "local time of the machine that wrote them (the `billing` service logs Tokyo time "
                                 "without an offset; see"))))
    r.assistant(step(None, grep("logslice.ini", ".")))
    r.assistant(step("`src/logslice/cli.py` still names the INI in its epilog; fixing that one.",
                     edit("src/logslice/cli.py",
                          "        epilog=\"Files default to standard input. Config: ~/.config/logslice/logslice.ini\",\n",
                          "        epilog=\"Files default to standard input. Config: ~/.config/logslice/logslice.toml\",\n")))

    # 5. end to end on the samples (a long, truncated run), coverage, a user-run command
    r.turn(
        "Run it end to end on both sample logs with --since, table output, and show me the coverage report.",
        step(None, bash_truncated("logslice --since 2026-03-09T14:00:00Z samples/checkout.log.jsonl samples/billing.log.jsonl",
                                  _logslice_table(r, ["samples/checkout.log.jsonl", "samples/billing.log.jsonl"], None, 10000,
                                                  since="2026-03-09T14:00:00Z"),
                                  "/tmp/pi-bash-3f9a61c0be7d2e45.log", keep_lines=120)),
        step(None, bash("pytest -v --cov=logslice --cov-report=term", tests(verbose=True, cov=True))),
        step(None, read("samples/checkout.log.jsonl", 400, 21)),
        step("End to end: both files print in one table, one after the other; billing's offset-less timestamps "
             "are read as local (Tokyo) time, so `--since` cuts both services at the same instant. The full output went to `/tmp/pi-bash-3f9a61c0be7d2e45.log` "
             "(Pi kept the last 120 lines). Coverage is in the report above; every test passes."),
    )
    r.user_bash("git status --short", " M README.md\n M docs/config.md\n M src/logslice/cli.py\n M src/logslice/config.py\n"
                " M src/logslice/filters.py\n M src/logslice/parse.py\n M tests/test_cli.py\n M tests/test_filters.py\n"
                " M tests/test_parse.py\n?? src/logslice/migrate.py\n?? tests/test_migrate.py")
    r.user_bash("logslice --since 90s samples/checkout.log.jsonl",
                "usage: logslice [-h] [-l {trace,debug,info,warn,error,fatal}] [--after TS] [--since WHEN] [--before TS]\n"
                "                [-f KEY=VALUE] [-g REGEX] [-s SERVICE] [-a ALIAS] [-o {table,json,logfmt}]\n"
                "                [--fields FIELDS] [-c] [-n N] [--strict] [--no-color] [--config PATH] [--version]\n"
                "                [files ...]\n"
                f"logslice: error: argument --since: {since_error.format(v='90s')}", 2)

    # 6. seconds: the on-call case above
    r.turn(
        "See above — on-call will type `--since 90s`. Support seconds too. And the error message lists the units, "
        "so keep it accurate.",
        step(None, grep("_DURATION_RE|_UNIT_SECONDS|15m, 2h", ".")),
        step("Adding `s` to the duration units and to every place that lists them.",
             edit("src/logslice/parse.py",
                  "_DURATION_RE = re.compile(r\"^(\\d+)([mhdw])$\")\n_UNIT_SECONDS = {\"m\": 60,",
                  "_DURATION_RE = re.compile(r\"^(\\d+)([smhdw])$\")\n_UNIT_SECONDS = {\"s\": 1, \"m\": 60,",
                  ("    \"\"\"``15m``, ``2h``, ``3d``, ``1w`` as a timedelta; anything else is None.\"\"\"\n",
                   "    \"\"\"``90s``, ``15m``, ``2h``, ``3d``, ``1w`` as a timedelta; anything else is None.\"\"\"\n"))),
        step(None, edit("src/logslice/parse.py", "(use 15m, 2h, 3d, 1w or", "(use 90s, 15m, 2h, 3d, 1w or"),
             edit("src/logslice/cli.py", "a duration back from now (15m, 2h, 3d, 1w)", "a duration back from now (90s, 15m, 2h, 3d, 1w)"),
             edit("README.md", "a duration back from now (15m, 2h, 3d, 1w)", "a duration back from now (90s, 15m, 2h, 3d, 1w)"),
             edit("docs/config.md", "# default for --since: 15m, 2h", "# default for --since: 90s, 15m, 2h")),
        step(None, edit("tests/test_parse.py",
                        "[(\"15m\", 15), (\"2h\", 120),",
                        "[(\"90s\", 1.5), (\"15m\", 15), (\"2h\", 120),",
                        ("ids=[\"15m\", \"2h\", \"3d\", \"1w\", \"spaces-upper\"])", "ids=[\"90s\", \"15m\", \"2h\", \"3d\", \"1w\", \"spaces-upper\"])")),
             edit("tests/test_cli.py", "    assert \"invalid --since value: 'yesterday'\" in capsys.readouterr().err\n",
                  "    err = capsys.readouterr().err\n    assert \"invalid --since value: 'yesterday' (use 90s, 15m, 2h, 3d, 1w\" in err\n")),
    )
    suites["tests/test_parse.py"].insert(suites["tests/test_parse.py"].index("test_parse_duration[15m]"), "test_parse_duration[90s]")
    r.assistant(step(None, bash("pytest -q", tests())))
    r.assistant(step(None, bash("logslice --since 90s -c samples/checkout.log.jsonl", "0")))
    r.assistant(step("`--since 90s` works (0 records: the samples are from 2026-03-09, more than 90 s ago). Units are "
                     "now `s m h d w` everywhere: `parse.py`, the `--since` help, the error text, README.md and "
                     "docs/config.md. All tests pass."))

    # 6b. review of the whole diff before committing
    def git_diff() -> str:
        out = []
        for path in sorted(FILES):
            old, new = FILES[path], r.project.files.get(path, "")
            if old == new:
                continue
            body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=3))
            idx = f"{rng.getrandbits(28):07x}..{rng.getrandbits(28):07x}"
            out.append(f"diff --git a/{path} b/{path}\nindex {idx} 100644\n{body}")
        return "".join(out).rstrip("\n")

    r.turn(
        "Before I commit: review the whole diff as if you were a strict reviewer. Read every changed file in "
        "full, not just the hunks, and tell me what you would block on.",
        step(None, bash("git diff", git_diff())),
        step(None, read("src/logslice/parse.py"), read("src/logslice/filters.py")),
        step(None, read("src/logslice/config.py"), read("src/logslice/migrate.py")),
        step(None, read("src/logslice/cli.py")),
        step(None, read("tests/test_migrate.py"), read("tests/test_cli.py", 1, 60),
             thinking="Review findings: (1) MigrationError in migrate.py is defined but never raised. (2) --before "
                      "with a naive timestamp goes through _aware too, good. (3) load_config(path) with a .toml "
                      "path works, an .ini path gives no DeprecationWarning: fine since it was explicit. (4) "
                      "migrate() copies the INI after writing the TOML: if copy2 fails, the TOML exists and a "
                      "second run says already migrated without a backup. Order should be backup first."),
        step("Review — two things I would block on, one nit:\n\n"
             "1. **Backup order** in `src/logslice/migrate.py`: `migrate()` writes `logslice.toml` before copying "
             "`logslice.ini.bak`. If the copy fails (full disk, permissions), the next run says *already "
             "migrated* and there is never a backup. Copy first, then write.\n"
             "2. **Dead code**: `MigrationError` is defined and never raised.\n"
             "3. Nit: `tests/test_cli.py::test_since_relative` patches `logslice.parse.datetime`; it works but an "
             "injectable `now` would be cleaner. I'd leave it.\n\n"
             "Everything else matches your rules: stdlib only, `--after` untouched, naive = local time, idempotent "
             "migration that never overwrites `logslice.toml`."),
    )
    add_tests("tests/test_migrate.py", ["test_failed_backup_leaves_no_toml"])
    r.turn("Fix 1 and 2, leave 3.",
           step(None, edit("src/logslice/migrate.py",
                           "    text = ini_to_toml(load_ini(ini))\n    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n"
                           "        fh.write(text)\n    shutil.copy2(ini, bak)\n",
                           "    text = ini_to_toml(load_ini(ini))\n    shutil.copy2(ini, bak)  # backup first: a failed copy must not look migrated\n"
                           "    with toml.open(\"x\", encoding=\"utf-8\") as fh:\n        fh.write(text)\n",
                           ("class MigrationError(RuntimeError):\n    \"\"\"The migration refused to run (the message says why).\"\"\"\n\n\n", ""))),
           step(None, edit("tests/test_migrate.py", "def test_legacy_ini_warns(config_home):",
                           "def test_failed_backup_leaves_no_toml(config_home, monkeypatch):\n"
                           "    (config_home / \"logslice.ini\").write_text(INI)\n\n    def boom(*_a, **_k):\n"
                           "        raise OSError(28, \"No space left on device\")\n\n"
                           "    monkeypatch.setattr(\"shutil.copy2\", boom)\n    with pytest.raises(OSError):\n"
                           "        migrate(config_home)\n    assert not (config_home / \"logslice.toml\").exists()\n\n\n"
                           "def test_legacy_ini_warns(config_home):")),
           step(None, bash("pytest -v", tests(verbose=True))),
           step("Both fixed: the backup is copied before `logslice.toml` is written (new test "
                "`test_failed_backup_leaves_no_toml`), and `MigrationError` is gone. All tests pass."))

    # 6c. speed: a fast path for --since on large files
    profile = ["         48391907 function calls (48391790 primitive calls) in 41.187 seconds", "",
               "   Ordered by: cumulative time", "   List reduced from 211 to 40 due to restriction <40>", "",
               "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)"]
    rows = [("1", "0.000", "0.000", "41.187", "41.187", "{built-in method builtins.exec}"),
            ("1", "0.000", "0.000", "41.187", "41.187", "cli.py:104(main)"),
            ("1", "1.902", "1.902", "41.160", "41.160", "{built-in method builtins.sum}"),
            ("6912451", "2.311", "0.000", "39.258", "0.000", "cli.py:132(records)"),
            ("6912452", "3.044", "0.000", "36.947", "0.000", "filters.py:93(<genexpr>)"),
            ("6912452", "4.418", "0.000", "31.876", "0.000", "parse.py:96(iter_records)"),
            ("6912451", "1.127", "0.000", "19.554", "0.000", "__init__.py:299(loads)"),
            ("6912451", "2.032", "0.000", "18.427", "0.000", "decoder.py:332(decode)"),
            ("6912451", "14.969", "0.000", "14.969", "0.000", "decoder.py:343(raw_decode)"),
            ("6912451", "2.566", "0.000", "5.873", "0.000", "parse.py:49(parse_timestamp)"),
            ("6912451", "2.189", "0.000", "2.189", "0.000", "{built-in method fromisoformat}"),
            ("6912451", "1.688", "0.000", "3.914", "0.000", "filters.py:84(<lambda>)"),
            ("6912451", "1.230", "0.000", "2.226", "0.000", "filters.py:41(pred)"),
            ("13824902", "1.061", "0.000", "1.061", "0.000", "filters.py:33(_aware)"),
            ("6912451", "0.905", "0.000", "0.905", "0.000", "{method 'strip' of 'str' objects}")]
    for row in rows:
        profile.append(f"{row[0]:>9} {row[1]:>8} {row[2]:>8} {row[3]:>8} {row[4]:>8} {row[5]}")
    for k in range(25):
        profile.append(f"{rng.randint(1, 90000):>9} {rng.uniform(0, .2):8.3f} {0:8.3f} {rng.uniform(0, .3):8.3f} {0:8.3f} "
                       f"{rng.choice(['re', 'enum', 'argparse', 'gettext', 'typing', 'dataclasses'])}.py:{rng.randint(20, 900)}"
                       f"({rng.choice(['_compile', '__call__', 'parse_args', '_get_values', 'translation', 'inner'])})")
    r.turn(
        "On-call complains: `logslice --since 15m` on the 1.8 GB prod checkout log takes about 41 s. Make the "
        "common case fast. Still stdlib only, and the output must stay byte-identical.",
        step(None, bash("python -m cProfile -s cumtime -m logslice.cli --since 15m -c /var/log/checkout/app.log.jsonl 2>&1 | head -45",
                        "0\n" + "\n".join(profile)),
             thinking="json.loads is 19.5 of 41 s, and every one of the 6.9 M lines is parsed even though nearly all "
                      "are older than the bound. Can't binary-search (order not guaranteed, stdin). A textual fast "
                      "path: if a line starts with {\"ts\": \"...\" (top-level first key, unambiguous) parse only "
                      "that timestamp; if older than the bound, skip json.loads. Other lines take the slow path, so "
                      "results stay identical. Careful: --strict must still validate every line."),
        step("`json.loads` on all 6.9 M lines dominates. Checkout writes `ts` as the **first** key, so a line "
             "starting with `{\"ts\": \"…\"` can be judged by its timestamp alone; anything else takes the normal "
             "path. Under `--strict` every line must still be validated, so the fast path is off there.",
             read("src/logslice/parse.py", 85)),
        step(None, edit("src/logslice/parse.py",
                        "def iter_records(stream: TextIO, *, strict: bool = False) -> Iterator[Record]:\n"
                        "    \"\"\"Records of a JSON-lines stream; bad lines are skipped unless ``strict``.\"\"\"\n"
                        "    for lineno, line in enumerate(stream, 1):\n        line = line.strip()\n"
                        "        if not line:\n            continue\n",
                        "_LEADING_TS = re.compile(r'^\\{\\s*\"ts\"\\s*:\\s*\"([^\"]+)\"')\n\n\n"
                        "def iter_records(stream: TextIO, *, strict: bool = False, skip_before: datetime | None = None) -> Iterator[Record]:\n"
                        "    \"\"\"Records of a JSON-lines stream; bad lines are skipped unless ``strict``.\n\n"
                        "    ``skip_before`` (aware) lets lines whose *first* key is an older ``ts`` be dropped without\n"
                        "    decoding them; it is ignored with ``strict``, which must see every line.\n    \"\"\"\n"
                        "    fast = skip_before is not None\n"
                        "    for lineno, line in enumerate(stream, 1):\n        line = line.strip()\n"
                        "        if not line:\n            continue\n"
                        "        if fast:\n            m = _LEADING_TS.match(line)\n            if m:\n"
                        "                ts = parse_timestamp(m.group(1))\n"
                        "                if ts is not None and (ts if ts.tzinfo else ts.astimezone()) < skip_before:\n"
                        "                    continue\n")),
        step(None, edit("src/logslice/cli.py",
                        "            for rec in apply(iter_records(stream, strict=args.strict), spec):\n",
                        "            skip = spec.after.astimezone() if spec.after is not None else None\n"
                        "            for rec in apply(iter_records(stream, strict=args.strict, skip_before=skip), spec):\n")),
        step("A benchmark script so the numbers are reproducible:",
             write("bench/since_bench.py",
                   "\"\"\"Time `logslice --since` on a synthetic log: python bench/since_bench.py [N_LINES].\"\"\"\n\n"
                   "import json\nimport subprocess\nimport sys\nimport tempfile\nimport time\n"
                   "from datetime import datetime, timedelta, timezone\n\n"
                   "n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000\n"
                   "start = datetime(2026, 3, 9, tzinfo=timezone.utc)\n"
                   "with tempfile.NamedTemporaryFile(\"w\", suffix=\".jsonl\", delete=False) as fh:\n"
                   "    for i in range(n):\n"
                   "        ts = (start + timedelta(milliseconds=40 * i)).isoformat().replace(\"+00:00\", \"Z\")\n"
                   "        fh.write(json.dumps({\"ts\": ts, \"level\": \"info\", \"service\": \"checkout-api\", \"msg\": f\"GET /v2/cart 200\", \"i\": i}) + \"\\n\")\n"
                   "since = (start + timedelta(milliseconds=40 * (n - 1000))).isoformat()\n"
                   "t0 = time.perf_counter()\n"
                   "out = subprocess.run([sys.executable, \"-m\", \"logslice.cli\", \"--since\", since, \"-c\", fh.name],\n"
                   "                     capture_output=True, text=True, check=True).stdout.strip()\n"
                   "print(f\"{n} lines, {out} kept, {time.perf_counter() - t0:.2f}s\")\n")),
        step(None, bash("git stash -q && python bench/since_bench.py 2000000; git stash pop -q && python bench/since_bench.py 2000000",
                        "2000000 lines, 1000 kept, 11.84s\n2000000 lines, 1000 kept, 2.71s")),
        step("4.4× faster on 2 M lines (11.84 s → 2.71 s), same count. Tests for the fast path: identical output "
             "with and without it, and `--strict` still sees bad old lines.",
             edit("tests/test_parse.py", "def test_record_message_keys():",
                  "def test_skip_before_gives_the_same_records():\n"
                  "    lines = ['{\"ts\": \"2026-03-09T14:00:00Z\", \"msg\": \"old\"}', '{\"msg\": \"no ts\"}',\n"
                  "             '{\"level\": \"info\", \"ts\": \"2026-03-09T13:00:00Z\"}', '{\"ts\": \"2026-03-09T15:00:00Z\", \"msg\": \"new\"}']\n"
                  "    text = \"\".join(line + \"\\n\" for line in lines)\n"
                  "    bound = datetime(2026, 3, 9, 14, 30, tzinfo=UTC)\n"
                  "    slow = [r.lineno for r in iter_records(io.StringIO(text)) if r.ts is None or r.ts >= bound]\n"
                  "    fast = [r.lineno for r in iter_records(io.StringIO(text), skip_before=bound) if r.ts is None or r.ts >= bound]\n"
                  "    assert fast == slow == [2, 4]\n\n\n"
                  "def test_strict_ignores_skip_before():\n"
                  "    text = '{\"ts\": \"2026-03-09T14:00:00Z\", oops\\n'\n"
                  "    with pytest.raises(LogParseError, match=\"line 1\"):\n"
                  "        list(iter_records(io.StringIO(text), strict=True, skip_before=datetime(2026, 3, 10, tzinfo=UTC)))\n\n\n"
                  "def test_record_message_keys():")),
    )
    add_tests("tests/test_parse.py", ["test_skip_before_gives_the_same_records", "test_strict_ignores_skip_before"])
    strict_fail = ("    def test_strict_ignores_skip_before():\n"
                   "        text = '{\"ts\": \"2026-03-09T14:00:00Z\", oops\\n'\n"
                   "        with pytest.raises(LogParseError, match=\"line 1\"):\n"
                   ">           list(iter_records(io.StringIO(text), strict=True, skip_before=datetime(2026, 3, 10, tzinfo=UTC)))\n"
                   "E           Failed: DID NOT RAISE <class 'logslice.parse.LogParseError'>\n\ntests/test_parse.py:113: Failed")
    r.assistant(step(None, bash("pytest -q tests/test_parse.py", pytest_report({"tests/test_parse.py": suites["tests/test_parse.py"]}, rng,
                                                                               failures={"test_strict_ignores_skip_before": strict_fail}), exit_code=1)))
    r.assistant(step("I meant to switch the fast path off under `--strict` and then left it out of the code: the bad "
                     "old line was skipped unvalidated. Fixing:",
                     edit("src/logslice/parse.py", "    fast = skip_before is not None\n",
                          "    fast = skip_before is not None and not strict\n")))
    r.assistant(step(None, bash("pytest -v", tests(verbose=True))))
    r.assistant(step("All green, including `test_skip_before_gives_the_same_records` and "
                     "`test_strict_ignores_skip_before`. Summary of the speed-up:\n\n"
                     "- `iter_records(..., skip_before=...)` in `src/logslice/parse.py`: a line whose first key is "
                     "`ts` and whose timestamp is older than the bound is dropped without `json.loads`; everything "
                     "else takes the old path, so output is identical. Off under `--strict`.\n"
                     "- `bench/since_bench.py`: 2 M lines, 11.84 s → 2.71 s.\n\nStill no dependencies."))

    # 6d. on-call recipes, each one run against the samples
    def sample_recs(paths: list[str]) -> list[dict[str, Any]]:
        out = []
        for p in paths:
            out += [json.loads(line) for line in r.project.files[p].splitlines()]
        return out

    checkout = sample_recs(["samples/checkout.log.jsonl"])
    declined = next(rec for rec in checkout if rec["msg"].endswith("card_declined"))
    order = str(declined["order"])
    both = ["samples/checkout.log.jsonl", "samples/billing.log.jsonl"]
    recipes = [
        ("Errors since a given instant, both services",
         "logslice --since 2026-03-09T14:30:00Z -l error samples/*.jsonl",
         _logslice_table(r, both, "error", 10000, since="2026-03-09T14:30:00Z")),
        (f"Everything about one order ({order})",
         f"logslice -g '\\b{order}\\b' samples/checkout.log.jsonl",
         _logslice_table(r, ["samples/checkout.log.jsonl"], None, 10000, grep=order)),
        ("Billing ledger deadlocks since 23:00 Tokyo time (billing logs local time without an offset)",
         "logslice -s billing -g deadlock --since 2026-03-09T23:00:00 samples/billing.log.jsonl",
         _logslice_table(r, ["samples/billing.log.jsonl"], None, 10000, since="2026-03-09T14:00:00Z", grep="deadlock")),
        ("Records per service and level",
         "for s in checkout-api billing; do for l in warn error; do printf '%-13s %-6s ' $s $l; logslice -c -s $s -l $l samples/*.jsonl; done; done",
         "\n".join(f"{s:<13} {lv:<6} {sum(1 for rec in sample_recs(both) if rec['service'] == s and _lvl(rec['level']) >= _lvl(lv))}"
                   for s in ("checkout-api", "billing") for lv in ("warn", "error"))),
        ("Most frequent warnings (JSON output into jq)",
         "logslice -l warn -o json samples/checkout.log.jsonl | jq -r '.msg | gsub(\"[0-9]+\"; \"N\")' | sort | uniq -c | sort -rn",
         _warning_counts(checkout)),
    ]
    r.user("Write docs/oncall.md with copy-paste recipes for on-call: errors since an instant, one order's trail, "
           "billing deadlocks since a Tokyo wall-clock time, counts per service, and jq over JSON output. Run every "
           "recipe against the samples and paste the real output, no invented examples.")
    r.assistant(step("I'll run each recipe first, then write the page from the real outputs.", ls("samples"),
                     grep("card_declined", "samples/checkout.log.jsonl")))
    for title, cmd, output in recipes:
        r.assistant(step(None, bash(cmd, output)))
    page = ["# On-call recipes", "", "Every example below was run against `samples/` with logslice 1.7. Timestamps "
            "without an offset (billing) are local time of the machine that wrote them.", ""]
    for title, cmd, output in recipes:
        lines = output.split("\n")
        shown = "\n".join(lines[:12] + (["…"] if len(lines) > 12 else []))
        page += [f"## {title}", "", "```console", f"$ {cmd}", shown, "```", ""]
    r.assistant(step(None, write("docs/oncall.md", "\n".join(page))))
    r.assistant(step(None, read("docs/oncall.md"), edit("README.md", "## Runbooks\n", "## Runbooks\n\nSee also docs/oncall.md.\n")))
    r.assistant(step(None, bash("pytest -v", tests(verbose=True))))
    r.assistant(step(f"`docs/oncall.md` has five recipes, each with the output it really printed on the samples "
                     f"(order {order}'s trail, billing deadlocks after 23:00 Tokyo = 14:00Z, …). README.md links it. "
                     "Tests still pass."))

    # 7. release notes
    r.turn("Write the CHANGELOG entry for 1.7.0 and bump the version.",
           step(None, read("CHANGELOG.md"), grep("1\\.6\\.2", ".")),
           step(None, edit("src/logslice/__init__.py", "__version__ = \"1.6.2\"", "__version__ = \"1.7.0\""),
                edit("pyproject.toml", "version = \"1.6.2\"", "version = \"1.7.0\""),
                edit("CHANGELOG.md", "# Changelog\n\n",
                     "# Changelog\n\n## 1.7.0\n- `--since WHEN`: a duration back from now (`90s`, `15m`, `2h`, `3d`, `1w`) "
                     "or an ISO-8601 timestamp. Same filter as `--after`, which is unchanged.\n"
                     "- Timestamps without an offset are local time of the machine that wrote them (they used to "
                     "crash time filters with `TypeError`).\n- Config moves to `logslice.toml` (`schema_version = 2`); "
                     "`logslice config migrate` converts `logslice.ini` (backup `logslice.ini.bak`, idempotent, never "
                     "overwrites). `logslice.ini` is deprecated and still loads until 1.8.\n"
                     "- `defaults.since` in the config.\n\n")),
           step(None, bash("pytest -q", tests())),
           step(None, read("pyproject.toml"), bash("python -m build 2>&1 | tail -3",
                "adding 'logslice-1.7.0.dist-info/RECORD'\nremoving build/bdist.linux-x86_64/wheel\n"
                "Successfully built logslice-1.7.0.tar.gz and logslice-1.7.0-py3-none-any.whl")),
           step("Version 1.7.0: `src/logslice/__init__.py`, `pyproject.toml` and `CHANGELOG.md` updated; all tests "
                "pass. Still no runtime dependencies (`dependencies = []`)."))
    r.session_info("logslice 1.7: --since and logslice.toml")
    r.label(r.leaf, "release-1.7.0")
    return r


# --------------------------------------------------------------------------------------
# Files added to the project at the start, its test suite, and scripted tool outputs
# --------------------------------------------------------------------------------------


def _logslice_readme() -> str:
    """The project's README.md (its flags table is built from a list)."""
    flags = [
        ("-l, --level LEVEL", "minimum level to show (trace, debug, info, warn, error, fatal)"),
        ("--after TS", "only records at or after TS (ISO-8601, e.g. `2026-03-09T14:00:00Z`)"),
        ("--before TS", "only records before TS (ISO-8601)"),
        ("-f, --field KEY=VALUE", "only records whose field KEY equals VALUE; repeatable"),
        ("-g, --grep REGEX", "only records whose message matches REGEX"),
        ("-s, --service NAME", "only these services; repeatable"),
        ("-a, --alias NAME", "apply a filter alias from the `[aliases]` config section"),
        ("-o, --format FMT", "`table` (default), `json` or `logfmt`"),
        ("--fields A,B,C", "columns of the table format"),
        ("-c, --count", "print only the number of matching records"),
        ("-n, --limit N", "stop after N records"),
        ("--strict", "fail on lines that are not JSON objects"),
        ("--no-color", "no ANSI colours"),
        ("--config PATH", "config file to use instead of `~/.config/logslice/logslice.ini`"),
    ]
    out = ["# logslice", "", "Slice and filter structured (JSON-lines) logs from the command line. Pure standard",
           "library, Python 3.11+.", "", "```console",
           "$ logslice --level warn --after 2026-03-09T14:00:00Z -s checkout-api logs/*.jsonl",
           "TS                             LEVEL  SERVICE       MSG",
           "2026-03-09T14:02:11.482+00:00  WARN   checkout-api  payment provider slow (1840 ms)",
           "2026-03-09T14:05:37.009+00:00  ERROR  checkout-api  order 88412 failed: card_declined", "```", "",
           "## Install", "", "    pipx install logslice", "", "## Flags", "", "| flag | meaning |", "| --- | --- |"]
    out += [f"| `{f}` | {m} |" for f, m in flags]
    out += ["", "## Timestamps", "",
            "Records are matched on the first of `ts`, `time`, `timestamp`, `@timestamp`. ISO-8601 strings",
            "and epoch seconds or milliseconds are understood. Timestamps without an offset are taken as",
            "they are written (the `billing` service logs local time without an offset; see",
            "`samples/billing.log.jsonl`).", "",
            "## Levels", "", "Level keys: `level`, `lvl`, `severity`. Aliases: `warning` → `warn`, `err` → `error`,",
            "`critical`/`crit` → `fatal`; numeric pino levels 10–60.", "",
            "## Runbooks", "", "The on-call runbooks (`ops/runbooks/*.md` in the infra repo) call",
            "`logslice --after <ts>`; keep that flag working.", "",
            "## Development", "", "    python -m venv .venv && .venv/bin/pip install -e '.[dev]'", "    pytest -q", ""]
    return "\n".join(out)


def _logslice_sample(rng: random.Random, service: str, n: int, naive: bool) -> str:
    """A JSON-lines log of one service (ISO timestamps; ``naive`` ones carry no offset)."""
    msgs = {
        "checkout-api": [("info", "order {o} created", {"order": 0}), ("info", "GET /v2/cart 200", {"duration_ms": 0}),
                         ("warn", "payment provider slow ({d} ms)", {"duration_ms": 0}),
                         ("error", "order {o} failed: card_declined", {"order": 0}),
                         ("debug", "cache hit cart:{o}", {}), ("info", "POST /v2/checkout 201", {"duration_ms": 0})],
        "billing": [("info", "invoice {o} issued", {"invoice": 0}), ("info", "nightly sync batch {b} done", {"batch": 0}),
                    ("warning", "retrying ledger write ({b}/5)", {"attempt": 0}),
                    ("err", "ledger write failed: deadlock detected", {"sqlstate": "40P01"}),
                    ("debug", "fx rate EUR/JPY {r}", {})],
    }[service]
    t = 1773064800.0 + rng.randint(0, 600)  # 2026-03-09T14:00:00Z
    lines = []
    for i in range(n):
        t += rng.uniform(0.2, 9.0)
        level, template, extra = rng.choice(msgs)
        o, d, b = rng.randint(80000, 99999), rng.randint(40, 2400), rng.randint(1, 5)
        msg = template.format(o=o, d=d, b=b, r=round(rng.uniform(160, 170), 2))
        ms = int(t * 1000)
        if naive:
            stamp = to_iso(ms + 3600000 * 9)[:-1]  # Asia/Tokyo wall clock, no offset
        else:
            stamp = to_iso(ms)
        rec = {"ts": stamp, "level": level, "service": service, "msg": msg}
        for k in extra:
            rec[k] = {"order": o, "duration_ms": d, "invoice": f"INV-{o}", "batch": b, "attempt": b}.get(k, extra[k])
        rec["trace_id"] = "".join(rng.choice("0123456789abcdef") for _ in range(16))
        lines.append(json.dumps(rec, ensure_ascii=False))
    return "\n".join(lines) + "\n"


# the test suite of the project, by file: (test id, passes)
TEST_SUITE: dict[str, list[str]] = {
    "tests/test_parse.py": (
        [f"test_parse_timestamp_iso[{c}]" for c in ("utc-z", "offset-plus", "offset-minus", "no-offset", "date-only",
                                                   "fraction-ms", "fraction-us")]
        + [f"test_parse_timestamp_epoch[{c}]" for c in ("seconds", "millis", "float")]
        + ["test_parse_timestamp_rejects_garbage", "test_parse_timestamp_bool_is_none"]
        + [f"test_normalize_level[{c}]" for c in ("INFO", "warning", "err", "crit", "30", "dbg", "nonsense")]
        + ["test_iter_records_skips_bad_lines", "test_iter_records_strict_raises_with_line_number",
           "test_iter_records_picks_first_timestamp_key", "test_record_message_keys"]
    ),
    "tests/test_filters.py": (
        [f"test_level_at_least[{c}]" for c in ("info-info", "info-warn", "warn-info", "none")]
        + ["test_time_between_after_inclusive", "test_time_between_before_exclusive", "test_time_between_no_ts",
           "test_field_equals_stringifies", "test_message_matches_regex", "test_service_in",
           "test_build_predicate_ands_everything", "test_apply_is_lazy"]
    ),
    "tests/test_output.py": (
        ["test_table_aligns_columns", "test_table_truncates_long_values", "test_table_colours_levels",
         "test_table_no_colour", "test_json_passes_raw_lines", "test_logfmt_quotes_spaces",
         "test_logfmt_escapes_quotes", "test_logfmt_empty_value"]
    ),
    "tests/test_config.py": (
        ["test_missing_config_gives_defaults", "test_reads_format_and_level", "test_color_boolean_words",
         "test_fields_list", "test_aliases_section", "test_bad_format_names_file", "test_xdg_config_home"]
    ),
    "tests/test_cli.py": (
        ["test_version", "test_level_filter", "test_after_filter", "test_before_filter", "test_field_filter",
         "test_alias_from_config", "test_unknown_alias_lists_known", "test_count", "test_limit",
         "test_strict_reports_line", "test_format_from_config", "test_flag_beats_config", "test_stdin_default"]
    ),
}


def pytest_report(suites: dict[str, list[str]], rng: random.Random, *, verbose: bool = False,
                  failures: dict[str, str] | None = None, cov: bool = False) -> str:
    """Text of a pytest run over ``suites`` (``failures``: test id -> its failure section)."""
    failures = failures or {}
    ids = [(f, t) for f, ts in suites.items() for t in ts]
    total = len(ids)
    lines: list[str] = []
    if verbose:
        lines += ["============================= test session starts ==============================",
                  "platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0 -- /home/kenji/work/logslice/.venv/bin/python",
                  "cachedir: .pytest_cache", "rootdir: /home/kenji/work/logslice", "configfile: pyproject.toml",
                  "testpaths: tests"]
        if cov:
            lines.append("plugins: cov-5.0.0")
        lines += [f"collected {total} items", ""]
        for k, (f, t) in enumerate(ids, 1):
            status = "FAILED" if t in failures else "PASSED"
            left = f"{f}::{t} {status}"
            pct = f"[{round(100 * k / total):3d}%]"
            lines.append(left.ljust(80 - len(pct)) + pct if len(left) < 79 - len(pct) else f"{left} {pct}")
    else:
        dots = "".join("F" if t in failures else "." for _, t in ids)
        for i in range(0, len(dots), 70):
            chunk = dots[i : i + 70]
            end = i + 70 >= len(dots)
            pct = f"[{round(100 * min(i + 70, total) / total):3d}%]"
            lines.append(chunk.ljust(74) + pct if end else chunk + " " * 4 + pct)
    if failures:
        lines += ["", "=================================== FAILURES ==================================="]
        for t, text in failures.items():
            lines += [f"_{' ' + t + ' '}".center(80, "_"), "", text, ""]
    if cov:
        lines += ["", "---------- coverage: platform linux, python 3.12.3-final-0 -----------",
                  "Name                         Stmts   Miss  Cover", "------------------------------------------------"]
        for mod in ("__init__", "cli", "config", "filters", "migrate", "output", "parse"):
            st = rng.randint(8, 160)
            miss = rng.randint(0, max(1, st // 9))
            lines.append(f"src/logslice/{mod}.py".ljust(29) + f"{st:5d}  {miss:5d}  {round(100 * (st - miss) / st):4d}%")
        lines.append("------------------------------------------------")
    if failures:
        lines += ["=========================== short test summary info ============================"]
        for f, t in ids:
            if t in failures:
                last = [ln for ln in failures[t].split("\n") if ln.startswith("E ")]
                lines.append(f"FAILED {f}::{t} - {last[0][2:].strip() if last else 'AssertionError'}")
    secs = f"{rng.uniform(0.3, 1.4):.2f}s"
    summary = (f"{len(failures)} failed, " if failures else "") + f"{total - len(failures)} passed in {secs}"
    lines.append(f" {summary} ".center(80, "=") if verbose or failures else summary)
    return "\n".join(lines)


def _warning_counts(records: list[dict[str, Any]]) -> str:
    """``uniq -c | sort -rn`` of the warn-or-worse messages with digits folded to N."""
    counts: dict[str, int] = {}
    for rec in records:
        if _lvl(rec["level"]) >= _lvl("warn"):
            key = re.sub(r"[0-9]+", "N", rec["msg"])
            counts[key] = counts.get(key, 0) + 1
    return "\n".join(f"{n:>7} {m}" for m, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _lvl(level: str) -> int:
    order = ["trace", "debug", "info", "warn", "error", "fatal"]
    return order.index({"warning": "warn", "err": "error"}.get(level, level))


def _logslice_table(r: Recorder, paths: list[str], min_level: str | None, limit: int, since: str | None = None,
                    grep: str | None = None) -> str:
    """What ``logslice`` prints (table, no colour) for the project's sample files, file after file.

    Timestamps without an offset are local time of the machine (Asia/Tokyo, +09:00)."""
    order = ["trace", "debug", "info", "warn", "error", "fatal"]
    alias = {"warning": "warn", "err": "error"}
    rows = []
    for p in paths:
        for line in r.project.files[p].splitlines():
            rec = json.loads(line)
            level = alias.get(rec["level"], rec["level"])
            if min_level and order.index(level) < order.index(min_level):
                continue
            ts = rec["ts"]
            aware = ts if ts.endswith("Z") else ts + "+09:00"
            if since is not None and parse_iso_ms(aware) < parse_iso_ms(since):
                continue
            if grep is not None and grep not in rec["msg"]:
                continue
            shown = ts.replace("Z", "+00:00")
            rows.append((shown, level.upper(), rec["service"], rec["msg"]))
    rows = rows[:limit]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(["TS", "LEVEL", "SERVICE", "MSG"])]
    out = ["  ".join(h.ljust(w) for h, w in zip(["TS", "LEVEL", "SERVICE", "MSG"], widths)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(out)

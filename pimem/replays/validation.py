"""How well each token source predicts what a provider counted, checked on real compactions out of sample.

A replay's numbers (compactions, refusals, cost at a window) follow from the size it gives each
request after it compacted differently from the recording. Ground truth no replay can fake is the
usage recorded right after a *real* compaction: the request was sent with a context the recording
had not sent before. For every real compaction in a corpus :func:`validate` fits the calibration on
the requests before it only, predicts the requests after it from the context actually sent, and
compares with the recorded input (``input + cacheRead + cacheWrite``):

* ``calibrated``: what a replay computes (:meth:`~pimem.replays.calibration.Calibration.simulate`): the
  last request before the compaction shifted by what changed, ``E`` (Pi's usage-free chars/4 estimate
  of the request) converted by the fit of :mod:`pimem.replays.calibration`; ``calibrated-fit`` is the
  fitted line ``overhead + slope · E`` itself;
* ``calibrated+profile``: the same plus what the agent adds right after a compaction, fitted on the
  *other* sessions' compactions of the same agent (:func:`agent_profiles`; Claude Code re-attaches the
  files it read last, which the transcript does not show);
* ``anchored``, ``anchored+profile``: the overhead measured by the session's first request (it holds
  little else) and the median rate of the last 10 requests above it
  (:func:`~pimem.replays.tokens.anchored_model`);
* ``+files`` (``calibrated+files``, ``anchored+files``, ``latest+files``): plus, at the source's rate,
  what Claude Code attaches after compacting, which its transcript does not show
  (:class:`~pimem.replays.reattach.Reattacher`: the 5 files touched last, each read again whole
  unless above 5,000 tokens, the todo list, the plan file, the skills invoked; a file's characters a
  token learnt on the other sessions' reads; 0 for Pi and Codex), on every request after the
  compaction. ``anchored+files`` is what a replay of a Claude Code session computes after a
  compaction it made (:class:`~pimem.replays.tokens.AfterCompaction`); ``anchored+files-only`` leaves
  out all but the files; ``anchored+files+profile`` adds the other sessions' median residual;
* candidates that convert by what the text is or use the session's history, each against
  ``anchored+files`` (:func:`sources_head_to_head`): ``anchored-tiktoken+files`` (the anchored model on
  cl100k_base counts; what is attached as chars/4, its text not all in the recording);
  ``anchored+files+summary-rate``, ``-ratio``,
  ``-tiktoken`` (the summary apart from the rest, at a rate per estimated token, a share of the
  session's rate, or a rate per cl100k_base token, learnt on the other sessions by
  :func:`agent_profiles`); ``anchored+files+previous`` and ``-ratio`` (plus the median residual, or
  divided by 1 + the median error, of the session's previous compaction on its requests 1-3, known
  before this one; none for a first compaction); ``anchored+files+carried`` (the rate net of the files
  an earlier compaction re-attached, which the requests since carried); ``anchored+files-thinking``
  (thinking blocks left out of the estimates);
* ``latest``, ``latest+files``: the overhead the last 10 requests carried above the fitted rate (where
  the first request's may have drifted), plus the fitted rate times the estimate;
* ``chars``, ``tiktoken``: the fit's overhead plus ``E`` or the cl100k_base count of the projected
  messages (what every request carries is no part of either count);
* ``chars-bare``, ``tiktoken-bare``: the bare counts (the sources before they carried the overhead);
* ``estimate``: Pi's own ``estimateProjectedContextTokens`` of the recorded file at that request
  (recorded usage included). On the recording it anchors on the usage the provider returned for the
  request before, so from the second request on it is close; the first request after a compaction
  has no usage to anchor on. In a replay the same arithmetic reads usage of the *uncompacted*
  recording (stale after a replayed compaction), which no real compaction can score.

:func:`validation_table` gives per agent and source the median ``|error|``, its 90th percentile and
the median signed error (bias), with n; errors are ``predicted / recorded − 1``. A compaction whose
session has fewer than :data:`~pimem.replays.calibration.MIN_POINTS` requests before it cannot be
scored and is counted, not guessed. Copies of one compaction (checkpoint files that repeat a session)
count once: the copy with the most requests after it is kept.

:func:`interval_coverage` turns the out-of-sample errors into prediction intervals for request
sizes (quantiles of the other sessions' errors) and checks how often they cover the held-out truth;
:func:`replay_intervals` propagates them into a replay's counts, refusals and cost.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import warnings
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from pimem.core.compaction.compaction import get_assistant_usage
from pimem.core.incremental.caches import TokenCache
from pimem.core.incremental.tracker import ContextTracker
from pimem.errors import ConfigurationError
from pimem.replays.calibration import MIN_POINTS, fit_calibration
from pimem.replays.cost import replay_cost
from pimem.replays.engine import replay
from pimem.replays.reattach import READ_CHARS_PER_TOKEN, Reattacher, Reattachment, read_chars_per_token
from pimem.replays.recording import input_tokens, usage_tokens
from pimem.replays.tokens import RECENT_REQUESTS, anchored_model, modelled_sizes_scaled, partial_recording
from pimem.sessions.load import load_session
from pimem.text.tokenizers import TiktokenCounter

__all__ = ["corpus_files", "request_sizes", "validate", "validation_table", "agent_profiles", "sources_head_to_head",
           "interval_coverage", "source_spread_coverage", "replay_intervals", "SOURCES", "AGENTS", "EARLY", "CorpusFile"]

AGENTS = ("pi", "claude-code", "codex")
SOURCES = ("calibrated", "calibrated+profile", "calibrated-fit", "calibrated+files", "anchored", "anchored+profile",
           "anchored+files", "anchored+files+profile", "anchored+files-only", "anchored-tiktoken+files",
           "anchored+files+summary-rate", "anchored+files+summary-ratio", "anchored+files+summary-tiktoken",
           "anchored+files+previous", "anchored+files+previous-ratio", "anchored+files+carried",
           "anchored+files-thinking", "latest", "latest+files", "chars", "tiktoken", "estimate", "chars-bare",
           "tiktoken-bare")
EARLY = (1, 2, 3)  # the requests right after a compaction: where a replay's sizes matter first
LATER = 10


@dataclasses.dataclass(frozen=True)
class CorpusFile:
    """One session file of a corpus and the agent that wrote it."""

    agent: str
    path: Path


def corpus_files(shared_dir: str | Path) -> list[CorpusFile]:
    """The real sessions under ``<shared_dir>/datasets``: Pi (``pi-mono``, the ``.v1`` copies left
    out), Claude Code (``claude-code``, gzip'd or not) and Codex (``codex``)."""
    root = Path(shared_dir) / "datasets"
    files: list[CorpusFile] = []
    for path in sorted((root / "pi-mono").rglob("*.jsonl")):
        if not path.name.endswith(".v1.jsonl"):
            files.append(CorpusFile("pi", path))
    for agent in ("claude-code", "codex"):
        for path in sorted((root / agent).rglob("*")):
            if path.name.endswith((".jsonl", ".jsonl.gz")):
                files.append(CorpusFile(agent, path))
    return files


def request_sizes(path_entries: Sequence[dict], *, tiktoken: bool = True) -> pd.DataFrame:
    """One row per recorded request (an assistant message with valid usage) along ``path_entries``.

    Columns: ``step`` (index on the path), ``recorded`` (the provider's input count), ``estimate``
    (Pi's usage-free estimate of the context sent), ``counted`` (cl100k_base tokens of the projected
    messages; NaN without ``tiktoken``), ``pi_estimate`` (Pi's ``estimateProjectedContextTokens``,
    recorded usage included), ``compaction`` (how many compactions precede it on the path),
    ``since`` (its number among the requests since the latest compaction, from 1; 0 before any),
    ``summary_estimate`` and ``summary_counted`` (the latest compaction's summary message as sent,
    chars/4 and cl100k_base; 0 before any) and ``thinking`` (chars/4 of the thinking blocks sent).
    """
    counter = TiktokenCounter() if tiktoken else None
    cache = TokenCache()
    tracker = ContextTracker(cache=cache, counter=counter)
    thinking: dict[int, tuple[dict, float]] = {}
    rows = []
    compactions = 0
    since = 0
    for step, entry in enumerate(path_entries):
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "assistant" and get_assistant_usage(message) is not None:
            since += compactions > 0
            summary = tracker.projection.messages[0] if tracker.latest_compaction is not None else None
            rows.append((step, float(input_tokens(message)), float(tracker.usage_free_estimate()),
                         float(tracker.counted_total) if counter is not None else math.nan,
                         float(tracker.context_estimate(usage_tokens).tokens), compactions, since,
                         float(cache.estimate(summary)) if summary is not None else 0.0,
                         (float(counter(summary)) if summary is not None else 0.0) if counter is not None else math.nan,
                         sum(_thinking_tokens(m, thinking) for m in tracker.projection.messages)))
        if entry.get("type") == "compaction":
            compactions += 1
            since = 0
        if tracker.path:
            tracker.append(entry)
        else:  # the root may name a parent that is not in the file
            tracker.reset([entry])
    return pd.DataFrame(rows, columns=["step", "recorded", "estimate", "counted", "pi_estimate", "compaction", "since",
                                       "summary_estimate", "summary_counted", "thinking"])


def _thinking_tokens(message: dict, memo: dict[int, tuple[dict, float]]) -> float:
    """chars/4 of an assistant message's thinking blocks (memoized by identity)."""
    hit = memo.get(id(message))
    if hit is None or hit[0] is not message:
        content = message.get("content") if message.get("role") == "assistant" else None
        chars = sum(len(b["thinking"]) for b in content if isinstance(b, dict) and b.get("type") == "thinking"
                    and isinstance(b.get("thinking"), str)) if isinstance(content, list) else 0
        hit = memo[id(message)] = (message, chars / 4)
    return hit[1]


def _predictions(before: pd.DataFrame, after: pd.DataFrame, files: float = 0.0, files_only: float = 0.0
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None:
    """Each source's prediction of the requests ``after`` from the requests ``before``, and for the
    sources completed out of sample (:func:`agent_profiles`) what their learnt factor multiplies.
    ``files``: chars/4 of what is attached after the compaction, ``files_only`` of its files alone;
    ``before["carried"]``: what was attached at the compaction each earlier request followed (0 before any)."""
    fit = fit_calibration(before["estimate"].tolist(), before["recorded"].tolist())
    if fit.points < MIN_POINTS:
        return None
    e, t = after["estimate"].to_numpy(), after["counted"].to_numpy()
    summary, summary_counted = after["summary_estimate"].to_numpy(), after["summary_counted"].to_numpy()
    recorded = before["recorded"].tolist()
    # what a replay computes: the last request the recording sent before, shifted by what changed
    last = before.iloc[-1]
    calibrated = np.array([fit.simulate(last["recorded"], last["estimate"], x)[0] for x in e])
    # the overhead the session's first request measured (it holds little else), the recent rate above it
    overhead, rate = anchored_model(before["estimate"].tolist(), recorded, fit.slope)
    anchored = overhead + rate * e
    with_files = anchored + rate * files
    # the overhead the last requests carried above the fitted rate
    latest = float(np.median((before["recorded"] - fit.slope * before["estimate"]).tail(RECENT_REQUESTS))) + fit.slope * e
    # the same anchored model on cl100k_base counts
    if np.isfinite(before["counted"].to_numpy()).all() and np.isfinite(t).all():
        fit_t = fit_calibration(before["counted"].tolist(), recorded)
        overhead_t, rate_t = anchored_model(before["counted"].tolist(), recorded, fit_t.slope)
        tiktoken = overhead_t + rate_t * (t + files)  # the attached text is not all in the recording: chars/4
    else:
        tiktoken = np.full(len(e), np.nan)
    # the requests since an earlier compaction carried its re-attached files: the rate is net of them
    overhead_c, rate_c = anchored_model((before["estimate"] + before["carried"]).tolist(), recorded, fit.slope)
    # the thinking blocks left out of the estimates
    bare = before["estimate"] - before["thinking"]
    overhead_b, rate_b = anchored_model(bare.tolist(), recorded,
                                        fit_calibration(bare.tolist(), recorded).slope)
    # the summary apart from the rest: its rate is learnt on the other sessions (the basis says of what)
    rest = overhead + rate * (e - summary + files)
    predictions = {
        "calibrated": calibrated, "calibrated+profile": calibrated, "calibrated-fit": fit.overhead + fit.slope * e,
        "calibrated+files": calibrated + fit.slope * files, "anchored": anchored, "anchored+profile": anchored,
        "anchored+files": with_files, "anchored+files+profile": with_files,
        "anchored+files-only": anchored + rate * files_only,
        "anchored+files+summary-rate": rest, "anchored+files+summary-ratio": rest,
        "anchored+files+summary-tiktoken": rest if np.isfinite(summary_counted).all() else np.full(len(e), np.nan),
        "anchored+files+previous": with_files,
        "anchored+files+previous-ratio": with_files, "anchored+files+carried": overhead_c + rate_c * (e + files),
        "anchored+files-thinking": overhead_b + rate_b * (e - after["thinking"].to_numpy() + files),
        "anchored-tiktoken+files": tiktoken, "latest": latest, "latest+files": latest + fit.slope * files,
        "chars": fit.overhead + e, "tiktoken": fit.overhead + t, "estimate": after["pi_estimate"].to_numpy(),
        "chars-bare": e, "tiktoken-bare": t}
    bases = {"anchored+files+summary-rate": summary, "anchored+files+summary-ratio": rate * summary,
             "anchored+files+summary-tiktoken": summary_counted}
    return predictions, bases


def _compaction_key(entry: dict) -> str:
    summary = entry.get("summary")
    text = summary if isinstance(summary, str) else repr(summary)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclasses.dataclass
class _Recorded:
    """What :func:`validate` keeps of one corpus file with compactions."""

    item: CorpusFile
    session: str
    problem: str | None
    compactions: list[dict]
    sizes: pd.DataFrame
    reattached: list[Reattachment]
    read_ratios: list[float]


def _recorded(item: CorpusFile, partial: str, tiktoken: bool = True) -> _Recorded | None:
    session = _load(item.path)
    path_entries = session.get_branch(None)
    at = [i for i, e in enumerate(path_entries) if e.get("type") == "compaction"]
    if not at:
        return None
    problem = partial_recording(path_entries) if partial != "keep" else None
    if problem and partial == "refuse":
        return None
    claude_code = item.agent == "claude-code"
    # what Claude Code attaches after each compaction; Pi and Codex nothing
    attacher = Reattacher(path_entries)
    reattached = [attacher.at(i) if claude_code else Reattachment(()) for i in at]
    return _Recorded(item, str((session.header or {}).get("id")), problem, [path_entries[i] for i in at],
                     request_sizes(path_entries, tiktoken=tiktoken), reattached,
                     read_chars_per_token(path_entries) if claude_code else [])


def _load(path: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_session(path)


def validate(files: Iterable[CorpusFile], *, ks: Sequence[int] = (*EARLY, LATER), tiktoken: bool = True,
             partial: str = "restrict", chars_per_token: float | None = None) -> pd.DataFrame:
    """The out-of-sample error of every source on every request ``k`` (in ``ks``) after every real compaction.

    One row per (compaction, k, source): ``agent``, ``file``, ``session`` (the header's id: copies of a
    session share it), ``compaction`` (a key of the summary), ``k``, ``source``, ``predicted``,
    ``recorded``, ``error`` (``predicted / recorded − 1``), ``fit_points`` and ``chars_per_token`` (what a
    file Claude Code reads was counted at; NaN for the other agents). ``partial``: what to do
    with a partial recording (:func:`~pimem.replays.tokens.partial_recording`): ``"restrict"`` fits only
    on the requests after its first compaction (the file holds all they sent), ``"refuse"`` scores none
    of its compactions, ``"keep"`` treats it as whole. The ``+profile`` sources are filled in by
    :func:`agent_profiles`. ``chars_per_token``: the characters a token of a file Claude Code reads
    (:data:`~pimem.replays.reattach.READ_CHARS_PER_TOKEN`); by default learnt on the other sessions' reads
    (:func:`~pimem.replays.reattach.read_chars_per_token`).
    """
    if partial not in ("restrict", "refuse", "keep"):
        raise ConfigurationError(f"partial must be 'restrict', 'refuse' or 'keep', not {partial!r}")
    recorded_files = [_recorded(item, partial, tiktoken) for item in files]
    # Claude Code's characters per token of a file it reads, learnt with the session held out
    ratios = {r.session: r.read_ratios for r in recorded_files if r is not None and r.read_ratios}
    rows: list[dict[str, Any]] = []
    for rec in recorded_files:
        if rec is None:
            continue
        item, sizes = rec.item, rec.sizes
        others = [x for session, values in ratios.items() if session != rec.session for x in values]
        per_token = (chars_per_token if chars_per_token is not None
                     else float(np.median(others)) if others else READ_CHARS_PER_TOKEN)
        attached = [r.tokens(per_token) for r in rec.reattached]
        files_only = [r.file_tokens(per_token) for r in rec.reattached]
        sizes["carried"] = [attached[c - 1] if c else 0.0 for c in sizes["compaction"]]
        previous: tuple[float, float] | None = None  # the previous compaction's error on requests 1-3
        for c, entry in enumerate(rec.compactions, start=1):
            before = sizes[sizes["compaction"] < c]
            if rec.problem:
                before = before[before["compaction"] >= 1]
            after = sizes[(sizes["compaction"] == c) & sizes["since"].isin(list(ks))]
            made = _predictions(before, after, attached[c - 1], files_only[c - 1]) if len(after) else None
            base = {"agent": item.agent, "file": str(item.path), "session": rec.session,
                    "compaction": _compaction_key(entry), "fit_points": len(before), "partial": rec.problem,
                    "requests_after": int((sizes["compaction"] == c).sum()),
                    "chars_per_token": per_token if item.agent == "claude-code" else np.nan}
            if made is None:
                previous = None
                rows.append({**base, "k": np.nan, "source": None, "predicted": np.nan, "recorded": np.nan,
                             "error": np.nan, "basis": np.nan})
                continue
            predicted, bases = made
            if previous is not None:  # known before this compaction: the error after the one before
                predicted["anchored+files+previous"] = predicted["anchored+files"] + previous[0]
                predicted["anchored+files+previous-ratio"] = predicted["anchored+files"] / (1 + previous[1])
            early = after["since"].isin(list(EARLY)).to_numpy()
            plain, truth = predicted["anchored+files"][early], after["recorded"].to_numpy()[early]
            previous = ((float(np.median(truth - plain)), float(np.median(plain / truth - 1))) if early.any()
                        else None)
            for source, values in predicted.items():
                basis = bases.get(source, np.full(len(values), np.nan))
                for k, p, r, b in zip(after["since"], values, after["recorded"], basis):
                    rows.append({**base, "k": int(k), "source": source, "predicted": float(p), "recorded": float(r),
                                 "error": float(p) / float(r) - 1 if r > 0 else np.nan, "basis": float(b)})
    frame = pd.DataFrame(rows, columns=["agent", "file", "session", "compaction", "fit_points", "partial",
                                        "requests_after", "chars_per_token", "k", "source", "predicted", "recorded",
                                        "error", "basis"])
    if frame.empty:
        return frame
    # copies of one compaction (checkpoints of one session) count once: the copy that saw most after it
    best = frame.sort_values("requests_after", ascending=False).drop_duplicates(["agent", "compaction"])
    frame = frame.merge(best[["agent", "compaction", "file"]], on=["agent", "compaction", "file"])
    return agent_profiles(frame)


def agent_profiles(frame: pd.DataFrame, *, ks: Sequence[int] = EARLY) -> pd.DataFrame:
    """Fill the sources completed out of sample, one session held out at a time, from the *other*
    sessions of the same agent:

    * ``calibrated+profile``, ``anchored+profile``, ``anchored+files+profile``: the prediction plus
      ``m`` tokens, ``m`` the median of ``recorded − predicted`` over the requests ``ks`` after their
      compactions (none: ``m = 0``); what an agent adds right after compacting. Later requests keep
      the plain prediction;
    * the sources with a ``basis`` (the ``+summary-`` ones): the prediction plus ``m · basis`` on
      every request, ``m`` the median of ``(recorded − predicted) / basis`` over the requests ``ks``
      (none: NaN, unscored): the summary converted at a rate learnt on the other sessions.
    """
    out = frame.copy()
    early = frame["k"].isin(list(ks))
    for base in ("calibrated", "anchored", "anchored+files"):
        plain = frame[(frame["source"] == base) & early]
        added = plain["recorded"] - plain["predicted"]
        rows = (out["source"] == f"{base}+profile") & early
        for (agent, session), index in out[rows].groupby(["agent", "session"]).groups.items():
            others = added[(plain["agent"] == agent) & (plain["session"] != session)]
            m = float(others.median()) if len(others) else 0.0
            out.loc[index, "predicted"] = out.loc[index, "predicted"] + m
        out.loc[rows, "error"] = out.loc[rows, "predicted"] / out.loc[rows, "recorded"] - 1
    learnt = frame["basis"].notna() if "basis" in frame else pd.Series(False, index=frame.index)
    for source in frame.loc[learnt, "source"].unique():
        rows = learnt & (frame["source"] == source)
        pool = frame[rows & early & (frame["basis"] > 0)]
        factor = (pool["recorded"] - pool["predicted"]) / pool["basis"]
        for (agent, session), index in out[rows].groupby(["agent", "session"]).groups.items():
            others = factor[(pool["agent"] == agent) & (pool["session"] != session)]
            m = float(others.median()) if len(others) else math.nan
            out.loc[index, "predicted"] = out.loc[index, "predicted"] + m * out.loc[index, "basis"]
        out.loc[rows, "error"] = out.loc[rows, "predicted"] / out.loc[rows, "recorded"] - 1
    return out


def validation_table(frame: pd.DataFrame, *, ks: Sequence[int] = EARLY, by: Sequence[str] = ("agent", "source"),
                     sources: Sequence[str] | None = None) -> pd.DataFrame:
    """Per agent and source: ``n`` (requests), ``compactions``, ``sessions``, ``median_abs_error``,
    ``p90_abs_error`` and ``median_bias`` over the requests ``ks`` after the compactions."""
    scored = frame[frame["source"].notna() & frame["k"].isin(list(ks)) & frame["error"].notna()]
    if sources is not None:
        scored = scored[scored["source"].isin(list(sources))]
    rows = []
    for key, group in scored.groupby(list(by), sort=True):
        err = group["error"]
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "n": len(group),
                     "compactions": group["compaction"].nunique(), "sessions": group["session"].nunique(),
                     "median_abs_error": float(err.abs().median()), "p90_abs_error": float(err.abs().quantile(0.9)),
                     "median_bias": float(err.median())})
    return pd.DataFrame(rows)


def sources_head_to_head(frame: pd.DataFrame, reference: str, sources: Sequence[str] | None = None, *,
                    ks: Sequence[int] = EARLY) -> pd.DataFrame:
    """Each source against ``reference`` on the same requests ``ks``, per agent: ``n``, ``sessions``,
    the change of the median ``|error|`` and of its 90th percentile (source − reference), and on how
    many requests and sessions (by their median ``|error|``) the source is closer or further."""
    scored = frame[frame["source"].notna() & frame["k"].isin(list(ks))]
    wide = scored.pivot_table(index=["agent", "session", "compaction", "k"], columns="source", values="error")
    names = [s for s in (sources if sources is not None else wide.columns) if s != reference and s in wide.columns]
    rows = []
    for agent, group in wide.groupby(level="agent"):
        for source in names:
            both = group[[reference, source]].dropna().abs()
            if both.empty:
                continue
            ref, new = both[reference], both[source]
            per_session = both.groupby(level="session").median()
            rows.append({"agent": agent, "source": source, "n": len(both),
                         "sessions": both.index.get_level_values("session").nunique(),
                         "median_change": float(new.median() - ref.median()),
                         "p90_change": float(new.quantile(0.9) - ref.quantile(0.9)),
                         "requests_closer": int((new < ref).sum()), "requests_further": int((new > ref).sum()),
                         "sessions_closer": int((per_session[source] < per_session[reference]).sum()),
                         "sessions_further": int((per_session[source] > per_session[reference]).sum())})
    return pd.DataFrame(rows)


def source_spread_coverage(frame: pd.DataFrame, sources: Sequence[str] = ("calibrated", "chars", "tiktoken"), *,
                           ks: Sequence[int] = EARLY) -> pd.DataFrame:
    """How often the spread across ``sources`` (lowest to highest prediction of a request) holds its
    recorded size, per agent: ``n``, ``coverage`` and the median ``width`` (highest / lowest). The
    spread says how much the choice of source matters; it is no prediction interval."""
    scored = frame[frame["source"].isin(list(sources)) & frame["k"].isin(list(ks)) & frame["predicted"].notna()]
    wide = scored.pivot_table(index=["agent", "compaction", "k"], columns="source", values="predicted")
    truth = scored.groupby(["agent", "compaction", "k"])["recorded"].first()
    wide = wide.dropna()
    low, high = wide.min(axis=1), wide.max(axis=1)
    inside = (truth.loc[wide.index] >= low) & (truth.loc[wide.index] <= high)
    rows = []
    for agent in sorted(set(wide.index.get_level_values("agent"))):
        mask = wide.index.get_level_values("agent") == agent
        rows.append({"agent": agent, "n": int(mask.sum()), "coverage": float(inside[mask].mean()),
                     "width": float((high[mask] / low[mask]).median())})
    return pd.DataFrame(rows)


_NOMINAL_LEVELS = (0.8, 0.825, 0.85, 0.875, 0.9, 0.925, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0)


def _covered(values: np.ndarray, held: np.ndarray, nominal: float) -> np.ndarray:
    lo, hi = np.quantile(values, [(1 - nominal) / 2, (1 + nominal) / 2])
    return (held >= lo) & (held <= hi)


def _nominal_for(by_session: dict[str, np.ndarray], level: float) -> float:
    """The smallest nominal level whose interval, built from all sessions but one, covers at least
    ``level`` of the held-out session's truths, pooled over the sessions of ``by_session``."""
    names = list(by_session)
    for nominal in _NOMINAL_LEVELS:
        if nominal < level:
            continue
        hit = total = 0
        for name in names:
            others = np.concatenate([by_session[o] for o in names if o != name])
            if len(others) < 5:
                continue
            hit += int(_covered(others, by_session[name], nominal).sum())
            total += len(by_session[name])
        if total and hit / total >= level:
            return nominal
    return 1.0


def interval_coverage(frame: pd.DataFrame, *, level: float = 0.9, source: str = "calibrated+profile",
                      ks: Sequence[int] = EARLY) -> pd.DataFrame:
    """How often a ``level`` prediction interval for a request's size covers the recorded size, per agent.

    The interval of a request after a compaction of session ``s`` is its prediction times ``1 + q``,
    ``q`` quantiles of ``recorded / predicted − 1`` over the *other* sessions of the agent. Errors are
    shared within a session, so the pooled quantiles at the stated level cover a new session less
    often than stated; the quantiles' nominal level is chosen, without ``s``, as the smallest that
    covers ``level`` of each left-out session among the others (nested, one session held out at a
    time). Columns: ``agent``, ``n``, ``sessions``, ``coverage`` (of the held-out truths), ``holds``
    (coverage ≥ level), ``nominal`` (the median nominal level chosen), ``low``/``high`` (the
    interval's quantiles over all sessions at that level).
    """
    scored = frame[(frame["source"] == source) & frame["k"].isin(list(ks)) & frame["error"].notna()]
    rows = []
    for agent, group in scored.groupby("agent"):
        by_session = {str(name): (g["recorded"] / g["predicted"] - 1).to_numpy()
                      for name, g in group.groupby("session")}
        covered = counted = 0
        chosen = []
        for name, held in by_session.items():
            rest = {o: v for o, v in by_session.items() if o != name}
            others = np.concatenate(list(rest.values())) if rest else np.array([])
            if len(others) < 5 or len(rest) < 3:
                continue
            nominal = _nominal_for(rest, level)
            chosen.append(nominal)
            covered += int(_covered(others, held, nominal).sum())
            counted += len(held)
        coverage = covered / counted if counted else math.nan
        nominal = float(np.median(chosen)) if chosen else math.nan
        everything = np.concatenate(list(by_session.values()))
        lo, hi = (np.quantile(everything, [(1 - nominal) / 2, (1 + nominal) / 2]) if chosen
                  else (math.nan, math.nan))
        rows.append({"agent": agent, "n": counted, "sessions": len(by_session), "coverage": coverage,
                     "holds": bool(counted and coverage >= level), "nominal": nominal,
                     "low": float(lo), "high": float(hi)})
    return pd.DataFrame(rows)


def replay_intervals(session: Any, errors: Sequence[float], *, draws: int = 40, level: float = 0.9, seed: int = 0,
                     **replay_args: Any) -> pd.DataFrame:
    """Compactions, refusals and cost of a calibrated replay with a ``level`` prediction interval.

    Every modelled request size (a request whose context differs from the recording's) is scaled by
    ``1 + e``, one ``e`` per replay drawn from ``errors`` (the out-of-sample ``recorded / predicted −
    1`` of the agent's requests after real compactions, :func:`validate`, of the source its replay uses
    there: ``calibrated`` for Pi, ``anchored+files`` for Claude Code): the error of a session's
    sizes is shared by its requests. Returns one row per metric: ``value`` (the unscaled replay),
    ``low``, ``high`` (the quantiles over the ``draws`` replays) and ``draws``.
    """
    values = [float(e) for e in errors if isinstance(e, (int, float)) and math.isfinite(e) and e > -1]
    if not values:
        raise ConfigurationError("replay_intervals needs at least one finite error above -1")
    rng = np.random.default_rng(seed)

    def measures(scale: float) -> dict[str, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with modelled_sizes_scaled(scale):
                result = replay(session, token_source="calibrated", **replay_args)
            cost = replay_cost(result).get("cost_total", math.nan)
        events = result.events
        return {"compactions": float((events["kind"] == "compaction").sum()),
                "refusals": float(result.calls["refused"].sum()), "cost_total": float(cost)}

    base = measures(1.0)
    sampled = [measures(1 + float(e)) for e in rng.choice(values, size=draws, replace=True)]
    lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
    rows = []
    for metric, value in base.items():
        column = np.array([s[metric] for s in sampled], dtype=float)
        # quantiles at observed values (a count stays a count), widened rather than narrowed
        rows.append({"metric": metric, "value": value, "low": float(np.nanquantile(column, lo_q, method="lower")),
                     "high": float(np.nanquantile(column, hi_q, method="higher")), "draws": draws})
    return pd.DataFrame(rows)

"""Interactive explorers (ipywidgets) for JupyterLab, testable headless.

Each explorer is a class whose controls are attributes (set their ``value`` and the outputs
follow), whose outputs are ``HTML``/``Textarea`` widgets with readable ``value``, and whose
``update()`` recomputes the outputs. Display one by putting it last in a cell (or
``display(explorer.widget)``).

* :class:`SessionExplorer` — pick a leaf; the projected context and its token breakdown.
* :class:`CompactionPlayground` — reserveTokens, keepRecentTokens and the context window: the
  cut point, what is summarized and kept, and the exact summary requests Pi would send.
* :class:`ReplayBrowser` — step through a replay; the context at each step and its events.

:func:`summary_requests` gives the requests ``compact()`` would send for a preparation,
without calling a model.
"""

from __future__ import annotations

from typing import Any, Sequence

import ipywidgets as W
import pandas as pd

from pimem.core.compaction.compaction import (
    CompactionPreparation,
    CompactionSettings,
    ModelInfo,
    SummarizationError,
    compact,
    estimate_projected_context_tokens,
    estimate_tokens,
    prepare_compaction,
    should_compact,
)
from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.core.session_manager import build_session_path, build_session_projection
from pimem.base.tables import format_number, frame
from pimem.core.settings_manager import lookup_model
from pimem.sessions.load import as_session
from pimem.text.messages import message_preview
from pimem.viz.data import entry_preview, projection_table
from pimem.viz.figures import STATUS_COLORS
from pimem.viz.templating import render

__all__ = ["summary_requests", "format_request", "SessionExplorer", "CompactionPlayground", "ReplayBrowser"]


# --------------------------------------------------------------------------- summary requests


class _RecordingSummarizer:
    """Records every request and answers with a placeholder (no model is called)."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        return SummaryResponse(text="(summary)", usage=None, stop_reason="stop")


def summary_requests(
    preparation: CompactionPreparation,
    *,
    model: ModelInfo,
    custom_instructions: str | None = None,
    thinking_level: str | None = None,
    session_id: str = "",
) -> list[SummaryRequest]:
    """The summary requests :func:`pimem.core.compaction.compaction.compact` sends for ``preparation``, in order.

    Runs ``compact`` itself with a summarizer that records the requests and returns a
    placeholder, so the requests are exactly Pi's (history request, then the turn-prefix
    request for a split turn). ``session_id`` fixes the routing id (Pi sends a fresh one).
    """
    recorder = _RecordingSummarizer()
    try:
        compact(preparation, recorder, model=model, custom_instructions=custom_instructions,
                thinking_level=thinking_level, session_id=session_id)
    except SummarizationError:
        pass  # raised after the requests were made (e.g. no first kept id): they stand
    return recorder.requests


def format_request(request: SummaryRequest) -> str:
    """A request as plain text: its parameters, the system prompt, then the user message."""
    return (
        f"kind: {request.kind}\nmaxTokens: {request.max_tokens}\nreasoning: {request.reasoning}\n"
        f"cacheRetention: {request.cache_retention}\nmodel: {request.model}\n\n"
        f"=== system prompt ===\n{request.system_prompt}\n\n=== user message ===\n{request.prompt}"
    )


# --------------------------------------------------------------------------- helpers


def _model_for(session: Any, leaf_id: str | None) -> ModelInfo:
    current = build_session_projection(session, leaf_id).model or {}
    info = lookup_model(current.get("provider"), current.get("modelId"))
    return info if info is not None else ModelInfo(context_window=200000, max_tokens=32000)


def _cell(value: Any) -> str:
    return "" if value is None else format_number(value)


def _table(df: pd.DataFrame, colors: Sequence[str] | None = None, max_rows: int = 400) -> str:
    """A small HTML table, every cell escaped and numbers formatted, in a box that scrolls
    sideways when the table is wider than the output; an optional left colour strip per row."""
    rows = [[_cell(v) for v in row] for row in df.head(max_rows).itertuples(index=False)]
    return render("widgets.html.j2", kind="table", columns=[str(c) for c in df.columns], rows=rows,
                  colors=list(colors) if colors is not None else None, more=max(len(df) - max_rows, 0))


def _count(value: Any) -> str:
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "–"


def _kv(items: Sequence[tuple[str, Any]]) -> str:
    """Name–value pairs as a small HTML table, every text escaped."""
    return render("widgets.html.j2", kind="kv", items=[(str(k), v) for k, v in items])


class _Explorer:
    widget: W.Widget

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


# --------------------------------------------------------------------------- session explorer


class SessionExplorer(_Explorer):
    """Pick a leaf (``leaf`` dropdown): the projected context (``table``) and its token
    breakdown (``breakdown``)."""

    def __init__(self, session: Any, *, preview_width: int = 90) -> None:
        self.session = as_session(session)
        self.preview_width = preview_width
        options: list[tuple[str, str]] = []
        seen: set[str] = set()
        current = self.session.get_entry(self.session.leaf_id) if self.session.leaf_id else None
        for leaf in [current] if current else []:
            options.append((f"current leaf {leaf['id']}", leaf["id"]))
            seen.add(leaf["id"])
        for leaf in self.session.leaves():
            lid = leaf["id"] if isinstance(leaf, dict) else leaf
            if lid not in seen:
                options.append((f"leaf {lid}", lid))
                seen.add(lid)
        for target, label in self.session.labels.items():  # current labels: an empty label clears one
            if target not in seen and self.session.get_entry(target) is not None:
                options.append((f"label {label!r} ({target})", target))
                seen.add(target)
        self.leaf = W.Dropdown(options=options, description="leaf", layout=W.Layout(width="420px"))
        self.show_all = W.Checkbox(value=False, description="show entries not in context")
        self.breakdown = W.HTML()
        self.table = W.HTML()
        self.widget = W.VBox([W.HBox([self.leaf, self.show_all]), self.breakdown, self.table])
        self.leaf.observe(lambda _: self.update(), names="value")
        self.show_all.observe(lambda _: self.update(), names="value")
        self.update()

    def projection(self) -> pd.DataFrame:
        """The projection table at the selected leaf (:func:`pimem.viz.projection_table`)."""
        return projection_table(self.session, self.leaf.value, preview_width=self.preview_width)

    def update(self) -> None:
        """Recompute the table and breakdown for the selected leaf."""
        leaf = self.leaf.value
        table = self.projection()
        projection = build_session_projection(self.session, leaf)
        path = build_session_path(self.session, leaf)
        pi_estimate = estimate_projected_context_tokens(projection, path)
        in_ctx = table[table["in_context"]]
        by_kind = in_ctx.groupby("kind")["tokens"].sum().sort_values(ascending=False)
        by_status = table.groupby("status", observed=True)["tokens"].agg(["count", "sum"])
        items: list[tuple[str, Any]] = [
            ("leaf", leaf),
            ("path entries", len(table)),
            ("context messages", len(projection.messages)),
            ("estimated tokens in context (chars/4)", f"{int(in_ctx['tokens'].sum()):,}"),
            ("Pi's context estimate (usage + trailing)", f"{pi_estimate.tokens:,}"),
        ]
        items += [(f"status: {s}", f"{int(r['count'])} entries, {int(r['sum']):,} tokens") for s, r in by_status.iterrows()]
        items += [(f"in context: {k}", f"{int(v):,} tokens") for k, v in by_kind.items()]
        self.breakdown.value = _kv(items)
        shown = table if self.show_all.value else table[table["status"].astype(str) != "not in context"]
        cols = shown[["position", "entry_id", "kind", "status", "tokens", "preview"]]
        self.table.value = _table(cols, [STATUS_COLORS[str(s)] for s in shown["status"]])


# --------------------------------------------------------------------------- compaction playground


class CompactionPlayground(_Explorer):
    """Sliders ``reserve``, ``keep`` and ``window``: Pi's decision, cut point, what is summarized
    and kept (``summary``, ``entries``), and the exact summary requests (``request``)."""

    def __init__(self, session: Any, leaf_id: str | None = None, *, model: ModelInfo | None = None,
                 reserve_tokens: int = 16384, keep_recent_tokens: int = 20000, context_window: int | None = None,
                 custom_instructions: str | None = None) -> None:
        self.session = as_session(session)
        self.leaf_id = leaf_id if leaf_id is not None else self.session.leaf_id
        self.model = model or _model_for(self.session, self.leaf_id)
        self.path = build_session_path(self.session, self.leaf_id)
        self.custom_instructions = custom_instructions
        total = sum(int(t) for t in projection_table(self.session, self.leaf_id)["tokens"])
        window = context_window or self.model.context_window or 200000
        top = max(window, 2 * total, 1000)
        style = {"description_width": "140px"}
        layout = W.Layout(width="560px")
        self.reserve = W.IntSlider(value=reserve_tokens, min=0, max=max(top, reserve_tokens), step=256,
                                   description="reserveTokens", style=style, layout=layout, continuous_update=False)
        self.keep = W.IntSlider(value=keep_recent_tokens, min=0, max=max(2 * total, keep_recent_tokens, 1000), step=250,
                                description="keepRecentTokens", style=style, layout=layout, continuous_update=False)
        self.window = W.IntSlider(value=window, min=1000, max=top, step=1000, description="context window",
                                  style=style, layout=layout, continuous_update=False)
        self.summary = W.HTML()
        self.entries = W.HTML()
        self.request = W.Textarea(layout=W.Layout(width="100%", height="360px"))
        self.requests: list[SummaryRequest] = []
        self.preparation: CompactionPreparation | None = None
        tabs = W.Tab(children=[self.entries, self.request])
        tabs.set_title(0, "summarized / kept")
        tabs.set_title(1, "summary request")
        self.widget = W.VBox([self.reserve, self.keep, self.window, self.summary, tabs])
        for control in (self.reserve, self.keep, self.window):
            control.observe(lambda _: self.update(), names="value")
        self.update()

    @property
    def settings(self) -> CompactionSettings:
        """The compaction settings the sliders stand at."""
        return CompactionSettings(reserve_tokens=self.reserve.value, keep_recent_tokens=self.keep.value)

    def update(self) -> None:
        """Recompute the decision, the cut and the requests from the slider values."""
        import dataclasses

        settings = self.settings
        model = dataclasses.replace(self.model, context_window=self.window.value)
        projection = build_session_projection(self.session, self.leaf_id)
        tokens = estimate_projected_context_tokens(projection, self.path).tokens
        threshold = self.window.value - settings.reserve_tokens
        decision = should_compact(tokens, self.window.value, settings)
        prep = prepare_compaction(self.path, settings)
        self.preparation = prep
        position = {e.get("id"): i for i, e in enumerate(self.path)}
        items: list[tuple[str, Any]] = [
            ("context tokens (Pi's estimate)", f"{tokens:,}"),
            ("threshold = window − reserve", f"{threshold:,}"),
            ("Pi would compact now", "yes" if decision else "no"),
        ]
        if prep is None:
            items.append(("cut point", "nothing to summarize (path ends in a compaction, or all of it is kept)"))
            self.requests = []
            self.request.value = "(no summary request: nothing to summarize)"
            self.entries.value = "<i>nothing to summarize</i>"
        else:
            fk = prep.first_kept_entry_id
            tok_sum = sum(estimate_tokens(m) for m in prep.messages_to_summarize)
            tok_prefix = sum(estimate_tokens(m) for m in prep.turn_prefix_messages)
            items += [
                ("first kept entry", f"{fk} (path position {position.get(fk)})"),
                ("split turn", "yes" if prep.is_split_turn else "no"),
                ("messages summarized", f"{len(prep.messages_to_summarize)} ({tok_sum:,} tokens)"),
                ("turn prefix messages", f"{len(prep.turn_prefix_messages)} ({tok_prefix:,} tokens)"),
                ("updates previous summary", "yes" if prep.previous_summary else "no"),
                ("tokensBefore", f"{prep.tokens_before:,}"),
            ]
            self.requests = summary_requests(prep, model=model, custom_instructions=self.custom_instructions,
                                             thinking_level=projection.thinking_level, session_id="playground")
            self.request.value = "\n\n".join(
                f"##### request {i + 1} of {len(self.requests)}\n{format_request(r)}" for i, r in enumerate(self.requests))
            self.entries.value = self._entries_html(prep, projection)
        self.summary.value = _kv(items)

    def _entries_html(self, prep: CompactionPreparation, projection: Any) -> str:
        summarized = {id(m) for m in prep.messages_to_summarize}
        prefix = {id(m) for m in prep.turn_prefix_messages}
        rows, colors = [], []
        for p in projection.entries:
            e = p.source_entry
            if not p.messages:
                continue
            if e.get("type") == "compaction":
                part, color = "previous summary", STATUS_COLORS["summary"]
            elif any(id(m) in summarized for m in p.messages):
                part, color = "summarized", STATUS_COLORS["summarized"]
            elif any(id(m) in prefix for m in p.messages):
                part, color = "turn prefix (split turn)", "#f4d35e"
            else:
                part, color = "kept", STATUS_COLORS["kept"]
            rows.append({"entry_id": e.get("id"), "part": part,
                         "tokens": sum(estimate_tokens(m) for m in p.messages), "preview": entry_preview(e, 90)})
            colors.append(color)
        return _table(frame(rows, columns=["entry_id", "part", "tokens", "preview"]), colors)


# --------------------------------------------------------------------------- replay browser


class ReplayBrowser(_Explorer):
    """Step through a :class:`~pimem.replays.engine.ReplayResult` (``step`` slider, ``play``): the entry
    replayed and the events at that step (``info``), the context then (``context``)."""

    def __init__(self, result: Any, *, llm: bool = False, preview_width: int = 100) -> None:
        self.result = result
        self.llm = llm
        self.preview_width = preview_width
        self._n_steps = int(result.summary().get("entries", 0))
        n = self._n_steps
        self.step = W.IntSlider(value=max(n - 1, 0), min=0, max=max(n - 1, 0), description="step",
                                layout=W.Layout(width="600px"), continuous_update=False)
        self.play = W.Play(value=self.step.value, min=0, max=max(n - 1, 0), interval=400)
        W.jslink((self.play, "value"), (self.step, "value"))
        self.next_compaction = W.Button(description="next compaction")
        self.next_compaction.on_click(lambda _: self.go_to_next_compaction())
        self.info = W.HTML()
        self.context = W.HTML()
        self.widget = W.VBox([W.HBox([self.play, self.step, self.next_compaction]), self.info, self.context])
        self.step.observe(lambda _: self.update(), names="value")
        self.update()

    @property
    def n_steps(self) -> int:
        """Number of steps (entries of the recorded path)."""
        return self._n_steps

    def go_to_next_compaction(self) -> None:
        """Move the slider to the next step with a compaction event (wraps to the first)."""
        ev = self.result.events
        steps = sorted(set(int(s) for s in ev.loc[ev["kind"] == "compaction", "step"])) if len(ev) else []
        later = [s for s in steps if s > self.step.value]
        if later or steps:
            self.step.value = (later or steps)[0]

    def update(self) -> None:
        """Show the events and the context at the selected step."""
        step = self.step.value
        ev = self.result.events
        at = ev[ev["step"] == step] if len(ev) else ev
        messages = self.result.context_at(step, llm=self.llm) if self.n_steps else []
        tokens = [estimate_tokens(m) for m in messages]
        items: list[tuple[str, Any]] = [("step", f"{step} of {max(self.n_steps - 1, 0)}"),
                                        ("context messages", len(messages)),
                                        ("estimated context tokens (chars/4)", f"{sum(tokens):,}")]
        if len(at):
            entry_id = at["entry_id"].iloc[0]
            items.append(("entry", entry_id))
        for _, r in at.iterrows():
            if r["kind"] == "check":
                items.append((f"check {r['check']}", f"{r['context_tokens']:,.0f} tokens vs threshold "
                                                      f"{r['threshold']:,.0f} → {'compact' if r['should_compact'] else 'no'}"))
            else:
                detail = (f"{r['reason']}: first kept {r['first_kept_entry_id']}, "
                          f"{_count(r['messages_summarized'])} messages summarized, "
                          f"summary {_count(r['summary_tokens'])} tokens")
                if r.get("error"):
                    detail += f", error: {r['error']}"
                items.append((str(r["kind"]), detail))
        self.info.value = _kv(items)
        rows = [{"#": i, "role": m.get("role"), "tokens": t, "preview": message_preview(m, self.preview_width)}
                for i, (m, t) in enumerate(zip(messages, tokens))]
        self.context.value = _table(frame(rows, columns=["#", "role", "tokens", "preview"]))

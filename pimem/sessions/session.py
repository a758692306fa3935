"""The session researchers hold: Pi's session (:mod:`pimem.core.session_manager`) with a text tree,
an HTML view for Jupyter and its DataFrame views.

``pimem.Session`` is this class, and every loader of :mod:`pimem.sessions.load` returns one; the
faithful core's ``Session`` underneath knows only what Pi's ``SessionManager`` does.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, overload

from pimem.base.js import parse_iso_ms
from pimem.core import session_manager as core
from pimem.text.messages import message_preview

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from pimem.errors import ColumnError

__all__ = ["Session"]


class Session(core.Session):
    """A Pi session (:class:`pimem.core.session_manager.Session`) with a text tree, an HTML view
    and DataFrame views (:mod:`pimem.sessions.frames`).

    Load one with :func:`pimem.load_session`; the constructor takes what a file holds.

    Args:
        header: the header line (``{"type": "session", ...}``).
        entries: the entries after the header, in file order.
        path: the file the session was read from (``write`` overwrites it only with ``overwrite_source=True``).
        warnings: what loading recorded.
        rng: the random source of new entry ids (seed it for reproducible ids).
    """

    # -- display ------------------------------------------------------------------------------

    def render_tree(self, *, width: int = 60, collapse: int = 6) -> str:
        """A compact text tree: ``*`` marks the active path, ``[C]`` compactions, ``[B]`` branch
        summaries, ``{label}`` labels; linear runs longer than ``collapse`` are shortened."""
        return "\n".join(text for text, _ in self._tree_lines(width, collapse))

    def _repr_html_(self) -> str:
        rows = []
        for text, active in self._tree_lines(60, 6):
            escaped = html.escape(text)
            rows.append(f"<b>{escaped}</b>" if active else escaped)
        title = html.escape(
            f"Session {self.id} — {len(self.entries)} entries, leaf {self.leaf_id}"
            + (f", name {self.name!r}" if self.name else "")
            + (f", {len(self.warnings)} warnings" if self.warnings else "")
        )
        return f"<div><div>{title}</div><pre style='line-height:1.25'>{chr(10).join(rows)}</pre></div>"

    def _tree_lines(self, width: int, collapse: int) -> list[tuple[str, bool]]:
        active = {id(e) for e in self.get_branch()}
        children: dict[Any, list[dict]] = {}
        roots: list[dict] = []
        # the entry each id names (the last one with that id, as Pi's index keeps it)
        by_id = {e["id"]: e for e in self.entries if isinstance(e.get("id"), str)}
        for entry in by_id.values():
            parent = entry.get("parentId")
            if parent.__class__ is not str or parent == entry.get("id") or parent not in by_id:
                roots.append(entry)
            else:
                children.setdefault(parent, []).append(entry)

        def order(nodes: list[dict]) -> list[dict]:
            return sorted(nodes, key=lambda e: parse_iso_ms(e.get("timestamp")) or 0)

        lines: list[tuple[str, bool]] = []
        visited: set[int] = set()
        # stack items: (entry, prefix for this line, prefix for its children, connector)
        stack: list[tuple[dict, str, str]] = [(r, "", "") for r in reversed(order(roots))]
        while stack:
            entry, lead, child_lead = stack.pop()
            run = [entry]
            # follow a linear chain
            while True:
                tail = run[-1]
                if id(tail) in visited:
                    break
                visited.add(id(tail))
                kids = children.get(tail.get("id"), [])
                if len(kids) != 1 or id(kids[0]) in visited:
                    break
                run.append(kids[0])
            shown = self._collapse(run, collapse)
            for i, item in enumerate(shown):
                pre = lead if i == 0 else child_lead
                if isinstance(item, int):
                    lines.append((f"{pre}  ... {item} more entries ...", False))
                else:
                    lines.append((pre + self._node_text(item, width, id(item) in active), id(item) in active))
            tail = run[-1]
            kids = [k for k in order(children.get(tail.get("id"), [])) if id(k) not in visited]
            if len(kids) > 1 or (kids and len(children.get(tail.get("id"), [])) > 1):
                for j, kid in reversed(list(enumerate(kids))):
                    last = j == len(kids) - 1
                    stack.append(
                        (kid, child_lead + ("`-" if last else "|-"), child_lead + ("  " if last else "| "))
                    )
        return lines

    def _collapse(self, run: list[dict], collapse: int) -> list[Any]:
        if collapse <= 0 or len(run) <= collapse:
            return list(run)
        keep_head = max(collapse // 2, 1)
        keep_tail = max(collapse - keep_head - 1, 1)
        out: list[Any] = []
        hidden = 0
        for i, entry in enumerate(run):
            special = (
                entry.get("type") in ("compaction", "branch_summary")
                or self.get_label(entry.get("id")) is not None
            )
            if i < keep_head or i >= len(run) - keep_tail or special:
                if hidden:
                    out.append(hidden)
                    hidden = 0
                out.append(entry)
            else:
                hidden += 1
        if hidden:
            out.append(hidden)
        return out

    def _node_text(self, entry: dict, width: int, active: bool) -> str:
        etype = entry.get("type")
        mark = "*" if active else " "
        kind = str(etype)
        preview = ""
        tag = ""
        if etype == "message":
            message = entry["message"] if isinstance(entry.get("message"), dict) else {}
            kind = str(message.get("role"))
            preview = message_preview(message, 0)
        elif etype == "compaction":
            tag = "[C] "
            preview = f"kept from {entry.get('firstKeptEntryId')}: {entry.get('summary') or ''}"
        elif etype == "branch_summary":
            tag = "[B] "
            preview = f"from {entry.get('fromId')}: {entry.get('summary') or ''}"
        elif etype == "custom_message":
            preview = message_preview({"role": "custom", "content": entry.get("content")}, 0)
        elif etype == "label":
            preview = f"{entry.get('targetId')} = {entry.get('label')!r}"
        elif etype == "session_info":
            preview = str(entry.get("name"))
        elif etype == "model_change":
            preview = f"{entry.get('provider')}/{entry.get('modelId')}"
        elif etype == "thinking_level_change":
            preview = str(entry.get("thinkingLevel"))
        elif etype == "custom":
            preview = str(entry.get("customType"))
        preview = " ".join(preview.split())
        if width and len(preview) > width:
            preview = preview[: width - 3] + "..."
        label = self.get_label(entry.get("id"))
        label_text = f" {{{label}}}" if label is not None else ""
        leaf = " <- leaf" if entry.get("id") == self.leaf_id and self.leaf_id is not None else ""
        return f"{mark}{entry.get('id')} {tag}{kind}{label_text}: {preview}{leaf}"

    # -- DataFrame views (pimem.sessions.frames; pandas loads with the first one asked for) -----

    @overload
    def entries_df(self, columns: Iterable[str] | None = None, *, strict: Literal[True] = True) -> pd.DataFrame: ...
    @overload
    def entries_df(self, columns: Iterable[str] | None = None, *,
            strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
    def entries_df(self, columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
        """One row per entry (see :func:`pimem.sessions.frames.entries_df`; ``strict=False`` returns ``(DataFrame, errors)``)."""
        from pimem.sessions import frames

        return frames.entries_df(self, columns, strict=strict)  # type: ignore[call-overload]

    @overload
    def messages_df(self, columns: Iterable[str] | None = None, *, strict: Literal[True] = True) -> pd.DataFrame: ...
    @overload
    def messages_df(self, columns: Iterable[str] | None = None, *,
            strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
    def messages_df(self, columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
        """One row per message (see :func:`pimem.sessions.frames.messages_df`; ``strict=False`` returns ``(DataFrame, errors)``)."""
        from pimem.sessions import frames

        return frames.messages_df(self, columns, strict=strict)  # type: ignore[call-overload]

    @overload
    def tool_calls_df(self, columns: Iterable[str] | None = None, *, strict: Literal[True] = True) -> pd.DataFrame: ...
    @overload
    def tool_calls_df(self, columns: Iterable[str] | None = None, *,
            strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
    def tool_calls_df(self, columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
        """One row per tool call (see :func:`pimem.sessions.frames.tool_calls_df`; ``strict=False`` returns ``(DataFrame, errors)``)."""
        from pimem.sessions import frames

        return frames.tool_calls_df(self, columns, strict=strict)  # type: ignore[call-overload]

    @overload
    def usage_df(self, columns: Iterable[str] | None = None, *, strict: Literal[True] = True) -> pd.DataFrame: ...
    @overload
    def usage_df(self, columns: Iterable[str] | None = None, *,
            strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
    def usage_df(self, columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
        """One row per assistant usage record (see :func:`pimem.sessions.frames.usage_df`; ``strict=False`` returns ``(DataFrame, errors)``)."""
        from pimem.sessions import frames

        return frames.usage_df(self, columns, strict=strict)  # type: ignore[call-overload]

    @overload
    def compactions_df(self, columns: Iterable[str] | None = None, *, strict: Literal[True] = True) -> pd.DataFrame: ...
    @overload
    def compactions_df(self, columns: Iterable[str] | None = None, *,
            strict: Literal[False]) -> tuple[pd.DataFrame, list[ColumnError]]: ...
    def compactions_df(self, columns: Iterable[str] | None = None, *, strict: bool = True) -> Any:
        """One row per compaction (see :func:`pimem.sessions.frames.compactions_df`; ``strict=False`` returns ``(DataFrame, errors)``)."""
        from pimem.sessions import frames

        return frames.compactions_df(self, columns, strict=strict)  # type: ignore[call-overload]

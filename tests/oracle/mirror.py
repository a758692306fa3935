"""pimem's answer to each oracle request, in exactly the shape driver.mjs gives Pi's answer.

``Mirror().run(request)`` computes with pimem what the driver computes with Pi, so a
differential test is ``mirror.run(req) == oracle.run_batch([req])[0]`` after
:func:`normalize`, and a golden test compares the same mirror output with stored oracle
results. Only hash-mode requests are mirrored (digests of ``JSON.stringify`` text).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from tests.oracle.client import (
    Failure,
    ListDigester,
    digest_value,
    js_stringify,
)
from tests.support.summarizers import OracleSummarizer

_UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def _plain(value: Any) -> Any:
    """JSON data as JSON.stringify would print it, parsed back (undefined fields dropped)."""
    return json.loads(js_stringify(value))


def _guard(items: Any, key: str, fn: Callable[[Any], Any]) -> list[Any]:
    """Map with a guard: an item on which pimem raises becomes {key: item, throws: message}."""
    out = []
    for item in items:
        try:
            out.append(fn(item))
        except Exception as exc:  # compared as "throws" with Pi's crash on the same item
            out.append({key: item.get("id") if key == "id" else item, "throws": f"{type(exc).__name__}: {exc}"})
    return out


def normalize(op: str, result: Any) -> Any:
    """Make results comparable: file-op sets are unordered on the Python side; a crash on an
    item compares equal to a crash on the same item whatever the message."""
    if isinstance(result, list):
        for row in result:
            if isinstance(row, dict) and "throws" in row:
                row["throws"] = True
        result_rows = [r for r in result if not (isinstance(r, dict) and "throws" in r)]
    else:
        result_rows = result
    if op in ("prepare",):
        for leaf in result_rows:
            for prep in leaf["preparations"]:
                if prep is not None:
                    prep["fileOps"] = {k: sorted(v) for k, v in prep["fileOps"].items()}
    elif op == "branch":
        for case in result_rows:
            for b in case["budgets"]:
                b["fileOps"] = {k: sorted(v) for k, v in b["fileOps"].items()}
    return result


class LoadedSession:
    """A session as pimem loads it: header, entries, index, tips."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.session = None
        try:
            from pimem.core.session_manager import load_session
        except ImportError:  # foundation not there yet: parse v3 lines directly
            from pimem.base.js import loads_line

            lines = [loads_line(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
            self.header = lines[0]
            self.entries = [e for e in lines[1:] if isinstance(e, dict)]
        else:
            self.session = load_session(self.path)
            self.header = self.session.header
            self.entries = self.session.entries
        self.by_id = {e.get("id"): e for e in self.entries}
        parents = {e.get("parentId") for e in self.entries}
        self.tips = [e["id"] for e in self.entries if e.get("id") not in parents]

    def leaves(self, spec: Any) -> list[Any]:
        if spec is None:
            return [None]
        if spec == "all":
            return [e.get("id") for e in self.entries]
        if spec == "tips":
            return list(self.tips)
        return list(spec)


class _TreeView:
    """get_entry/get_branch over parsed entries, used only until pimem.session exists."""

    def __init__(self, s: LoadedSession) -> None:
        self._s = s

    def get_entry(self, entry_id: Any) -> dict | None:
        return self._s.by_id.get(entry_id)

    def get_branch(self, leaf_id: Any = None) -> list[dict]:
        path = []
        cur = self._s.by_id.get(leaf_id)
        while cur is not None:
            path.append(cur)
            cur = self._s.by_id.get(cur.get("parentId")) if cur.get("parentId") else None
        return path[::-1]


def implementation(release: str | None = None) -> SimpleNamespace:
    """pimem's functions for a Pi release: ``pimem.core`` for 0.87.1 (None), else its versioned module."""
    if release is None:
        from pimem.core.compaction import branch_summarization as branch
        from pimem.core.compaction import compaction, utils

        return SimpleNamespace(
            prepare_compaction=compaction.prepare_compaction,
            serialize_conversation=utils.serialize_conversation,
            compact=compaction.compact,
            prepare_branch_entries=branch.prepare_branch_entries,
            generate_branch_summary=branch.generate_branch_summary,
            branch_options=lambda req: {},
        )
    if release == "1.6.0":
        from pimem.releases import pi_1_6_0 as m

        return SimpleNamespace(
            prepare_compaction=m.prepare_compaction,
            serialize_conversation=m.serialize_conversation,
            compact=m.compact,
            prepare_branch_entries=m.prepare_branch_entries,
            generate_branch_summary=m.generate_branch_summary,
            branch_options=lambda req: {"thinking_level": req.get("thinkingLevel")},
        )
    raise ValueError(f"no mirror for Pi {release}")


class Mirror:
    """Computes pimem's side of each oracle op (for Pi 0.87.1, or another ``release``)."""

    def __init__(self, release: str | None = None) -> None:
        self._sessions: dict[str, LoadedSession] = {}
        self.digest_list = ListDigester()
        self.impl = implementation(release)

    def session(self, path: str | Path) -> LoadedSession:
        key = str(path)
        s = self._sessions.get(key)
        if s is None:
            s = self._sessions[key] = LoadedSession(Path(path))
        return s

    def run(self, request: dict[str, Any]) -> Any:
        op = request["op"]
        fn: Callable[[dict[str, Any]], Any] = getattr(self, "op_" + op)
        return normalize(op, _plain(fn(request)))

    # -- ops ---------------------------------------------------------------------------------
    def op_info(self, req: dict[str, Any]) -> Any:
        s = self.session(req["path"])
        return {"tips": s.tips, "entryCount": len(s.entries), "header": s.header}

    def op_project(self, req: dict[str, Any]) -> Any:
        from pimem.core.messages import convert_to_llm
        from pimem.core.pi_ai import get_current_system_message
        from pimem.core.session_manager import build_session_projection

        s = self.session(req["path"])
        dl = self.digest_list
        def one(item: Any) -> Any:
            leaf = item
            p = build_session_projection(s.entries, leaf)
            return (
                {
                    "leafId": leaf,
                    "messages": dl(p.messages),
                    "thinkingLevel": p.thinking_level,
                    "model": p.model,
                    "entryIds": digest_value([[e.source_entry.get("id"), len(e.messages)] for e in p.entries]),
                    "llm": dl(convert_to_llm(p.messages)),
                    "currentSystem": digest_value(get_current_system_message(p.messages)),
                    "messageCount": len(p.messages),
                }
            )
        return _guard(s.leaves(req.get("leaves")), 'leafId', one)

    def op_entry_messages(self, req: dict[str, Any]) -> Any:
        from pimem.core.compaction.compaction import estimate_tokens
        from pimem.core.session_manager import session_entry_to_context_messages

        s = self.session(req["path"])
        def one(item: Any) -> Any:
            e = item
            msgs = session_entry_to_context_messages(e)
            return ({"id": e.get("id"), "messages": self.digest_list(msgs), "estimates": [estimate_tokens(m) for m in msgs]})
        return _guard(s.entries, 'id', one)

    @staticmethod
    def _estimate_json(est: Any) -> dict[str, Any]:
        return {
            "tokens": est.tokens,
            "usageTokens": est.usage_tokens,
            "trailingTokens": est.trailing_tokens,
            "lastUsageIndex": est.last_usage_index,
        }

    def op_estimate(self, req: dict[str, Any]) -> Any:
        from pimem.core.compaction.compaction import (
            estimate_context_tokens,
            estimate_projected_context_tokens,
            estimate_tokens,
        )
        from pimem.core.session_manager import (
            build_session_path,
            build_session_projection,
        )

        s = self.session(req["path"])
        def one(item: Any) -> Any:
            leaf = item
            p = build_session_projection(s.entries, leaf)
            return (
                {
                    "leafId": leaf,
                    "perMessage": [estimate_tokens(m) for m in p.messages],
                    "context": self._estimate_json(estimate_context_tokens(p.messages)),
                    "projected": self._estimate_json(
                        estimate_projected_context_tokens(p, build_session_path(s.entries, leaf))
                    ),
                }
            )
        return _guard(s.leaves(req.get("leaves")), 'leafId', one)

    def op_cut_points(self, req: dict[str, Any]) -> Any:
        from pimem.core.compaction.compaction import (
            find_cut_point,
            find_turn_start_index,
        )
        from pimem.core.session_manager import build_session_path

        s = self.session(req["path"])
        def one(item: Any) -> Any:
            leaf = item
            path = build_session_path(s.entries, leaf)
            last = -1
            for i, e in enumerate(path):
                if e.get("type") == "compaction":
                    last = i
            starts = req.get("starts") or [0, last + 1]
            cuts = {}
            for start in dict.fromkeys(starts):
                row = []
                for keep in req["keeps"]:
                    c = find_cut_point(path, start, len(path), keep)
                    row.append([c.first_kept_entry_index, c.turn_start_index, c.is_split_turn])
                cuts[str(start)] = row
            turn_starts = [find_turn_start_index(path, i, 0) for i in range(len(path))] if req.get("turnStarts") else None
            return ({"leafId": leaf, "pathLength": len(path), "cuts": cuts, "turnStarts": turn_starts})
        return _guard(s.leaves(req.get("leaves")), 'leafId', one)

    def _preparation(self, prep: Any, serialize: bool) -> Any:
        from pimem.core.compaction.utils import compute_file_lists
        from pimem.core.messages import convert_to_llm

        serialize_conversation = self.impl.serialize_conversation
        if prep is None:
            return None
        fo = prep.file_ops
        row: dict[str, Any] = {
            "firstKeptEntryId": prep.first_kept_entry_id,
            "messagesToSummarize": self.digest_list(prep.messages_to_summarize),
            "turnPrefixMessages": self.digest_list(prep.turn_prefix_messages),
            "isSplitTurn": prep.is_split_turn,
            "tokensBefore": prep.tokens_before,
            "previousSummary": digest_value(prep.previous_summary),
            "fileOps": {"read": list(fo.read), "written": list(fo.written), "edited": list(fo.edited)},
            "counts": [len(prep.messages_to_summarize), len(prep.turn_prefix_messages)],
        }
        if serialize:
            read_files, modified_files = compute_file_lists(fo)
            row["serialized"] = digest_value(serialize_conversation(convert_to_llm(prep.messages_to_summarize)))
            row["serializedTurnPrefix"] = digest_value(serialize_conversation(convert_to_llm(prep.turn_prefix_messages)))
            row["fileLists"] = {"readFiles": read_files, "modifiedFiles": modified_files}
        return row

    @staticmethod
    def _settings(d: dict[str, Any]) -> Any:
        from pimem.core.compaction.compaction import CompactionSettings

        return CompactionSettings(
            enabled=d.get("enabled", True), reserve_tokens=d["reserveTokens"], keep_recent_tokens=d["keepRecentTokens"]
        )

    def op_prepare(self, req: dict[str, Any]) -> Any:
        from pimem.core.session_manager import build_session_path

        prepare_compaction = self.impl.prepare_compaction

        s = self.session(req["path"])
        settings = [self._settings(d) for d in req["settings"]]
        def one(item: Any) -> Any:
            leaf = item
            path = build_session_path(s.entries, leaf)
            return (
                {
                    "leafId": leaf,
                    "preparations": [
                        self._preparation(prepare_compaction(path, st), bool(req.get("serialize"))) for st in settings
                    ],
                }
            )
        return _guard(s.leaves(req.get("leaves")), 'leafId', one)

    def op_serialize(self, req: dict[str, Any]) -> Any:
        from pimem.core.messages import convert_to_llm
        from pimem.core.session_manager import build_session_path

        prepare_compaction = self.impl.prepare_compaction
        serialize_conversation = self.impl.serialize_conversation

        if req.get("messages") is not None:
            return serialize_conversation(convert_to_llm(req["messages"]))
        s = self.session(req["path"])
        settings = [self._settings(d) for d in req["settings"]]
        def one(item: Any) -> Any:
            leaf = item
            path = build_session_path(s.entries, leaf)
            texts = []
            for st in settings:
                prep = prepare_compaction(path, st)
                texts.append(
                    None
                    if prep is None
                    else [
                        digest_value(serialize_conversation(convert_to_llm(prep.messages_to_summarize))),
                        digest_value(serialize_conversation(convert_to_llm(prep.turn_prefix_messages))),
                    ]
                )
            return ({"leafId": leaf, "texts": texts})
        return _guard(s.leaves(req.get("leaves")), 'leafId', one)

    @staticmethod
    def _model(m: dict[str, Any] | None) -> Any:
        from pimem.core.compaction.compaction import ModelInfo

        m = m or {}
        return ModelInfo(
            context_window=m.get("contextWindow", 200000),
            max_tokens=m.get("maxTokens", 32000),
            reasoning=m.get("reasoning", False),
        )

    @staticmethod
    def _fail(d: dict[str, Any] | None) -> Failure | None:
        if not d:
            return None
        return Failure(
            kind=d.get("kind"),
            stop_reason=d.get("stopReason"),
            error_message=d.get("errorMessage"),
            tool_call=bool(d.get("toolCall")),
            empty_text=bool(d.get("emptyText")),
        )

    @staticmethod
    def _requests_json(requests: list[Any], hash_prompts: bool) -> list[dict[str, Any]]:
        return [
            {
                "kind": r.kind,
                "systemRole": "system",
                "systemPrompt": r.system_prompt,
                "userRole": "user",
                "userBlocks": 1,
                "extraMessages": 0,
                "prompt": digest_value(r.prompt) if hash_prompts else r.prompt,
                "maxTokens": r.max_tokens,
                "reasoning": r.reasoning,
                "cacheRetention": r.cache_retention,
                "sessionIdIsUuid": bool(_UUID7.match(r.session_id or "")),
                "modelId": "oracle-model",
            }
            for r in requests
        ]

    def op_compact(self, req: dict[str, Any]) -> Any:
        from pimem.core.session_manager import build_session_path

        compact, prepare_compaction = self.impl.compact, self.impl.prepare_compaction

        s = self.session(req["path"])
        settings = self._settings(req["settings"])
        def one(item: Any) -> Any:
            leaf = item
            path = build_session_path(s.entries, leaf)
            prep = prepare_compaction(path, settings)
            if prep is None:
                return ({"leafId": leaf, "prepared": False})
            summarizer = OracleSummarizer(fail=self._fail(req.get("fail")))
            result = error = None
            try:
                r = compact(
                    prep,
                    summarizer,
                    model=self._model(req.get("model")),
                    custom_instructions=req.get("customInstructions"),
                    thinking_level=req.get("thinkingLevel"),
                )
                result = {
                    "summary": r.summary,
                    "firstKeptEntryId": r.first_kept_entry_id,
                    "tokensBefore": r.tokens_before,
                    "usage": r.usage,
                    "details": r.details,
                }
            except Exception as exc:  # Pi throws an Error with a message; pimem raises
                from pimem.core.compaction.compaction import SummarizationError

                if not isinstance(exc, SummarizationError):
                    raise
                error = str(exc)
            return (
                {
                    "leafId": leaf,
                    "prepared": True,
                    "requests": self._requests_json(summarizer.requests, bool(req.get("hash"))),
                    "result": result,
                    "error": error,
                }
            )
        return _guard(s.leaves(req.get("leaves")), 'leafId', one)

    def op_branch(self, req: dict[str, Any]) -> Any:
        from pimem.core.compaction.branch_summarization import collect_entries_for_branch_summary

        generate_branch_summary = self.impl.generate_branch_summary
        prepare_branch_entries = self.impl.prepare_branch_entries

        s = self.session(req["path"])
        tree = s.session if s.session is not None else _TreeView(s)
        hash_ = bool(req.get("hash"))
        def one(item: Any) -> Any:
            old_leaf, target = item
            entries, ancestor = collect_entries_for_branch_summary(tree, old_leaf, target)
            budgets = []
            for budget in req.get("budgets") or [0]:
                bp = prepare_branch_entries(entries, budget)
                fo = bp.file_ops
                budgets.append(
                    {
                        "budget": budget,
                        "messages": self.digest_list(bp.messages) if hash_ else bp.messages,
                        "count": len(bp.messages),
                        "fileOps": {"read": list(fo.read), "written": list(fo.written), "edited": list(fo.edited)},
                        "totalTokens": bp.total_tokens,
                    }
                )
            summary = None
            requests: list[dict[str, Any]] = []
            if req.get("summarize", True) is not False:
                summarizer = OracleSummarizer(fail=self._fail(req.get("fail")))
                r = generate_branch_summary(
                    entries,
                    summarizer,
                    model=self._model(req.get("model")),
                    reserve_tokens=req.get("reserveTokens", 16384),
                    custom_instructions=req.get("customInstructions"),
                    replace_instructions=bool(req.get("replaceInstructions")),
                    **self.impl.branch_options(req),
                )
                result: dict[str, Any] = {}
                if r.aborted:
                    result["aborted"] = True
                elif r.error is not None:
                    result["error"] = r.error
                else:
                    result["summary"] = r.summary
                    if r.usage is not None:
                        result["usage"] = r.usage
                    if r.read_files is not None:
                        result["readFiles"] = r.read_files
                    if r.modified_files is not None:
                        result["modifiedFiles"] = r.modified_files
                summary = {"result": result, "error": None}
                requests = self._requests_json(summarizer.requests, hash_)
            return (
                {
                    "oldLeafId": old_leaf,
                    "targetId": target,
                    "entryIds": [e.get("id") for e in entries],
                    "commonAncestorId": ancestor,
                    "budgets": budgets,
                    "summary": summary,
                    "requests": requests,
                }
            )
        return _guard(req["pairs"], 'pair', one)

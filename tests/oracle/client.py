"""Python side of the oracle: run batches of requests through Pi's code in one Node process.

Also the digests both sides agree on (``digest_value``/``digest_list``) and the canned summary
answer the driver's recording stream function gives (``canned_text``, ``canned_usage``), from
which ``tests.support.summarizers.OracleSummarizer`` answers exactly as the oracle does.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from tests.oracle.install import (
    PI_VERSION,
    is_installed,
    is_release_installed,
    node_path,
    oracle_dir,
    pi_dist,
    release_dist,
)

DRIVER = Path(__file__).with_name("driver.mjs")


class OracleUnavailable(RuntimeError):
    """Node or the pinned Pi release is not installed."""


class OracleError(RuntimeError):
    """The driver failed on a request."""


# ------------------------------------------------------------------------------------------
# Digests (must match driver.mjs: sha256 of JSON.stringify text; lists as joined digests)
# ------------------------------------------------------------------------------------------
def sha256_text(text: str) -> str:
    """sha256 hex of a string's UTF-8 bytes as Node hashes it: surrogate pairs joined, lone
    surrogates replaced by U+FFFD."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace").encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def js_stringify(value: Any) -> str:
    from pimem.base.js import js_stringify as _js_stringify

    return _js_stringify(value)


def digest_value(value: Any) -> str:
    """sha256 of ``JSON.stringify(value)``; None stands for both null and undefined."""
    return sha256_text(js_stringify(value))


class ListDigester:
    """Digest lists of (mostly shared) message dicts, caching element digests by identity."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Any, str]] = {}

    def element(self, value: Any) -> str:
        if not isinstance(value, (dict, list)):
            return digest_value(value)
        hit = self._cache.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        d = digest_value(value)
        self._cache[id(value)] = (value, d)  # keep the object alive so its id stays unique
        return d

    def __call__(self, values: Iterable[Any]) -> str:
        return sha256_text(",".join(self.element(v) for v in values))


def digest_list(values: Iterable[Any]) -> str:
    """The driver's list digest: sha256 of the comma-joined digests of each element."""
    return sha256_text(",".join(digest_value(v) for v in values))


# ------------------------------------------------------------------------------------------
# The canned summary answer (mirror of cannedReply in shared.mjs)
# ------------------------------------------------------------------------------------------
def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def canned_text(prompt: str) -> str:
    """``"SUMMARY:" + sha256(prompt)[:16]`` — the oracle's deterministic summary text."""
    return "SUMMARY:" + sha256_text(prompt)[:16]


def canned_usage(kind: str, prompt: str) -> dict[str, Any]:
    """The usage dict the oracle reports for a request (input = prompt length in UTF-16 units)."""
    inp = utf16_len(prompt)
    out = 100 + (1 if kind == "turn_prefix" else 0)
    return {
        "input": inp,
        "output": out,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": inp + out,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


@dataclass
class Failure:
    """A failure the canned model injects: for requests of ``kind`` (None = all)."""

    kind: str | None = None
    stop_reason: str | None = None
    error_message: str | None = None
    tool_call: bool = False
    empty_text: bool = False

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "toolCall": self.tool_call, "emptyText": self.empty_text}
        if self.stop_reason is not None:
            d["stopReason"] = self.stop_reason
        if self.error_message is not None:
            d["errorMessage"] = self.error_message
        return d


# ------------------------------------------------------------------------------------------
# The client
# ------------------------------------------------------------------------------------------
def _settings_json(settings: Any) -> dict[str, Any]:
    if isinstance(settings, dict):
        return settings
    return {
        "enabled": bool(getattr(settings, "enabled", True)),
        "reserveTokens": int(settings.reserve_tokens),
        "keepRecentTokens": int(settings.keep_recent_tokens),
    }


class Oracle:
    """Runs Pi's own functions in Node, one process per batch of requests.

    ``release`` picks another installed Pi release (``"1.6.0"``; see ``OTHER_RELEASES``) instead of
    the pinned 0.87.1; it runs on the same Node.
    """

    def __init__(
        self, root: Path | None = None, *, timeout: float = 1800.0, release: str | None = None,
        driver: str | None = None,
    ) -> None:
        self.root = root or oracle_dir()
        self.driver = DRIVER if driver is None else DRIVER.with_name(driver)
        self.timeout = timeout
        self.batches_run = 0
        self.requests_run = 0
        self.version = release or PI_VERSION
        if not is_installed(self.root):
            raise OracleUnavailable(
                f"the Pi oracle is not installed in {self.root}; run `python -m tests.oracle.install`"
            )
        if release is not None and not is_release_installed(release, self.root):
            raise OracleUnavailable(
                f"Pi {release} is not installed in {self.root}; run `python -m tests.oracle.install`"
            )
        self.node = node_path(self.root)
        self.dist = pi_dist(self.root) if release is None else release_dist(release, self.root)

    # -- batches -----------------------------------------------------------------------------
    def run_batch(self, requests: Sequence[dict[str, Any]]) -> list[Any]:
        """Run many requests in one Node process; returns their results in order."""
        if not requests:
            return []
        with tempfile.TemporaryDirectory(prefix="pimem-oracle-") as tmp:
            req_path = Path(tmp) / "requests.json"
            res_path = Path(tmp) / "results.json"
            # ensure_ascii escapes lone surrogates as \\uXXXX, which JSON.parse restores.
            req_path.write_text(json.dumps({"requests": list(requests)}, ensure_ascii=True), encoding="ascii")
            proc = subprocess.run(
                [str(self.node), str(self.driver), str(self.dist), str(req_path), str(res_path)],
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env={**os.environ, "NODE_NO_WARNINGS": "1"},
            )
            if proc.returncode != 0 or not res_path.exists():
                raise OracleError(f"oracle driver failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
            text = res_path.read_text(encoding="utf-8")
            try:
                results = json.loads(text)["results"]
            except RecursionError:  # a result nested deeper than the recursive parser goes
                from pimem.base.js import loads_deep

                results = loads_deep(text)["results"]
        self.batches_run += 1
        self.requests_run += len(requests)
        out = []
        for req, res in zip(requests, results):
            if not res["ok"]:
                raise OracleError(f"oracle op {req.get('op')!r} failed on {req.get('path', '')}:\n{res['error']}")
            out.append(res["result"])
        return out

    def run(self, op: str, cases: Sequence[dict[str, Any]] | None = None, **args: Any) -> Any:
        """``run(op, [case, ...])`` → list of results, or ``run(op, **args)`` → one result."""
        if cases is None:
            return self.run_batch([{"op": op, **args}])[0]
        return self.run_batch([{"op": op, **case} for case in cases])

    # -- helpers -----------------------------------------------------------------------------
    def load(self, path: Path | str) -> dict[str, Any]:
        """Pi's loadEntriesFromFile + migration, and SessionManager.open on a private copy."""
        return self.run("load", path=str(path))

    def load_entries(self, path: Path | str) -> list[dict[str, Any]]:
        """The migrated entries (header excluded) as Pi reads them."""
        res = self.load(path)
        return [e for e in res["migrated"] if e.get("type") != "session"]

    def info(self, path: Path | str) -> dict[str, Any]:
        return self.run("info", path=str(path))

    def build_context(self, path: Path | str, leaf_id: str | None = None) -> dict[str, Any]:
        """buildSessionProjection for one leaf: messages, thinkingLevel, model, llm, ..."""
        leaves = None if leaf_id is None else [leaf_id]
        return self.run("project", path=str(path), leaves=leaves)[0]

    def prepare_compaction(self, path: Path | str, leaf_id: str | None, settings: Any) -> dict[str, Any] | None:
        leaves = None if leaf_id is None else [leaf_id]
        res = self.run("prepare", path=str(path), leaves=leaves, settings=[_settings_json(settings)], serialize=True)
        return res[0]["preparations"][0]

    def compact_requests(
        self,
        path: Path | str,
        leaf_id: str | None,
        settings: Any,
        *,
        model: dict[str, Any] | None = None,
        thinking_level: str | None = None,
        custom_instructions: str | None = None,
        fail: Failure | None = None,
    ) -> dict[str, Any]:
        """Pi's compact() with the recording stream: the requests and the result or error."""
        leaves = None if leaf_id is None else [leaf_id]
        return self.run(
            "compact",
            path=str(path),
            leaves=leaves,
            settings=_settings_json(settings),
            model=model,
            thinkingLevel=thinking_level,
            customInstructions=custom_instructions,
            fail=fail.to_json() if fail else None,
        )[0]

    def navigate_tree(self, path: Path | str, cases: Sequence[dict[str, Any]], *, hash: bool = False) -> list[dict[str, Any]]:
        """Pi's own ``AgentSession.navigateTree`` per case (the ``navigate_tree`` op in driver.mjs).

        A case: ``targetId``, optional ``oldLeafId``, ``summarize``, ``customInstructions``,
        ``replaceInstructions``, ``label``, ``reserveTokens``, ``model`` (driver model fields),
        ``fail`` (a :class:`Failure` as JSON), ``hook`` (what a ``session_before_tree`` handler
        returns; ``None`` = a handler that returns nothing; absent = no handler).
        """
        return self.run("navigate_tree", path=str(path), navigations=list(cases), hash=hash)


def try_oracle() -> Oracle | None:
    """An Oracle when installed, else None."""
    try:
        return Oracle()
    except OracleUnavailable:
        return None

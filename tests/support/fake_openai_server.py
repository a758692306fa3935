"""A small OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

Runs in a background thread (``with FakeOpenAIServer() as server:``) and answers
``POST /v1/chat/completions``. Each request consumes the next scripted :class:`Reply` (``server.script``),
or gets the default answer (a valid summary in Pi's template, produced by ``responder``). The server
counts hits, records every request (path, lowercase headers, parsed body) and tracks how many requests
are in flight at once. Replies can be: normal answers, reasoning content, tool calls, a ``finish_reason``
of ``length``, an HTTP error with headers (``429`` + ``Retry-After``), a raw (malformed) body, or a
response held until an event is set (for timeouts and concurrency checks), an HTML page, or an answer
trickled one byte at a time (each read is quick, the whole answer is slow).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (a deadline or a size cap doing its job) is expected here: the
    error is kept on ``errors`` instead of printed as a traceback."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.errors: list[BaseException] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if exc is not None:
            self.errors.append(exc)


@dataclass
class Reply:
    """One scripted answer."""

    content: str | None = None
    status: int = 200
    finish_reason: str = "stop"
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: bytes | None = None
    hold: threading.Event | None = None  # wait for this event before answering
    hold_timeout: float = 10.0
    error_message: str = "scripted error"
    content_type: str = "application/json"
    trickle: str | None = None  # "headers": the whole answer, or "body": the body only, one byte at a time
    trickle_every: float = 0.05  # seconds between two bytes (never more than a client's read timeout)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


def default_responder(body: dict[str, Any]) -> str:
    """A deterministic, template-shaped answer derived from the request."""
    prompt = ""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            prompt = content if isinstance(content, str) else json.dumps(content)
    if prompt.startswith("# Conversation\n"):  # Pi's turn-prefix request
        return (f"## Original Request\nA request of {len(prompt)} characters.\n\n## Progress So Far\n- (none)\n\n"
                "## Context Needed to Continue\n- (none)")
    return (f"## Goal\n- Summarize {len(prompt)} characters.\n\n## Constraints & Preferences\n- (none)\n\n"
            "## Progress\n### Done\n- [x] (none)\n\n### In Progress\n- [ ] (none)\n\n### Blocked\n- (none)\n\n"
            "## Key Decisions\n- (none)\n\n## Next Steps\n1. Continue.\n\n## Critical Context\n- (none)")


class FakeOpenAIServer:
    """An OpenAI-compatible server on ``127.0.0.1`` (port chosen by the OS) running in a thread."""

    def __init__(self, responder: Callable[[dict[str, Any]], str] = default_responder) -> None:
        self.responder = responder
        self.replies: deque[Reply] = deque()
        self.requests: list[RecordedRequest] = []
        self.hits = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.cond = threading.Condition()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._holds: list[threading.Event] = []
        self._stopping = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:  # noqa: N802
                server._handle(self)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/").endswith("/models"):
                    server._send(self, 200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
                else:
                    server._send(self, 404, {"error": {"message": "not found"}})

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for event in self._holds:
            event.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- scripting and inspection ------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request takes the next one, then default answers follow."""
        with self.cond:
            for reply in replies:
                if reply.hold is not None:
                    self._holds.append(reply.hold)
                self.replies.append(reply)

    def wait_for(self, predicate: Callable[[FakeOpenAIServer], bool], timeout: float = 10.0) -> bool:
        """Block until ``predicate(server)`` holds (checked on every state change)."""
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self), timeout=timeout)

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    # -- request handling --------------------------------------------------------------------------

    def _send(self, handler: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None,
              raw: bytes | None = None, reply: Reply | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        trickle = reply.trickle if reply is not None else None
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", reply.content_type if reply is not None else "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                handler.send_header(k, v)
            if trickle == "headers":  # hold back the status line and headers too
                head = b"".join(handler._headers_buffer) + b"\r\n"  # type: ignore[attr-defined]
                handler._headers_buffer = []  # type: ignore[attr-defined]
                self._trickle(handler, head + data, reply.trickle_every)
                return
            handler.end_headers()
            if trickle == "body":
                handler.wfile.flush()
                self._trickle(handler, data, reply.trickle_every)
                return
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def _trickle(self, handler: BaseHTTPRequestHandler, data: bytes, every: float) -> None:
        """Send ``data`` one byte at a time until done, the client leaves or the server stops."""
        for i in range(len(data)):
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()
            if self._stopping.wait(every):
                return

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw or b"null")
        except json.JSONDecodeError:
            body = None
        with self.cond:
            self.hits += 1
            self.requests.append(RecordedRequest(handler.path, {k.lower(): v for k, v in handler.headers.items()},
                                                 body, raw))
            reply = self.replies.popleft() if self.replies else Reply()
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.cond.notify_all()
        try:
            if reply.hold is not None:
                reply.hold.wait(reply.hold_timeout)
            if not handler.path.rstrip("/").endswith("/chat/completions"):
                self._send(handler, 404, {"error": {"message": f"unknown path {handler.path}"}})
                return
            if reply.raw_body is not None:
                self._send(handler, reply.status, None, reply.headers, raw=reply.raw_body, reply=reply)
                return
            if reply.status != 200:
                self._send(handler, reply.status,
                           {"error": {"message": reply.error_message, "type": "server_error", "code": reply.status}},
                           reply.headers)
                return
            content = reply.content if reply.content is not None else self.responder(body or {})
            if reply.tool_calls is not None and reply.content is None:
                content = None
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if reply.reasoning is not None:
                message["reasoning_content"] = reply.reasoning
            if reply.tool_calls is not None:
                message["tool_calls"] = reply.tool_calls
            prompt_chars = len(json.dumps(body)) if body is not None else 0
            usage = reply.usage or {
                "prompt_tokens": prompt_chars // 4,
                "completion_tokens": len(content or "") // 4,
                "total_tokens": prompt_chars // 4 + len(content or "") // 4,
            }
            payload = {
                "id": f"chatcmpl-{self.hits}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": (body or {}).get("model", "fake-model"),
                "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
                "usage": usage,
            }
            self._send(handler, 200, payload, reply.headers, reply=reply)
        finally:
            with self.cond:
                self.in_flight -= 1
                self.cond.notify_all()


API_KEY = "sk-test-SECRETKEY-0123456789abcdefXYZ"  # distinctive: a test can look for it in what pimem prints


def openai_summarizer(server: FakeOpenAIServer, model: str = "local-model", **options: Any) -> Any:
    """pimem's OpenAI-compatible summarizer asking ``server`` with :data:`API_KEY`; it retries fast
    (1 ms backoff) and times out after 5 s unless ``options`` say otherwise."""
    from pimem.summarizers.openai_compat import OpenAISummarizer

    options.setdefault("api_key", API_KEY)
    options.setdefault("backoff_base", 0.001)
    options.setdefault("timeout", 5.0)
    return OpenAISummarizer(model, base_url=server.base_url, **options)

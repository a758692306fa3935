"""Summaries from OpenAI or any OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio, OpenRouter).

One request becomes one chat completion: a system message (Pi's summarization system prompt) and a
user message (the prompt text). Mapping, following Pi's ``openai-completions`` provider:

* ``max_tokens`` is sent as ``max_completion_tokens`` for OpenAI reasoning models (names starting with
  ``o1``/``o3``/``o4``/``gpt-5``, optionally behind a ``provider/`` prefix) and as ``max_tokens``
  otherwise; ``use_max_completion_tokens`` overrides the choice.
* ``reasoning_effort`` comes from the request's thinking level: ``minimal``/``low``/``medium``/``high``
  pass through, ``xhigh`` becomes ``high`` (``reasoning_map`` overrides), ``off``/None send nothing.
* The fresh routing id (``request.session_id``) goes where Pi puts it: the ``x-session-affinity`` and
  ``x-client-request-id`` headers (``x-session-id`` for OpenRouter). It never enters the body.
* Caching is never requested: no ``prompt_cache_key``/``prompt_cache_retention``; ``store=false`` on
  api.openai.com as Pi does.
* ``finish_reason`` ``stop`` → ``"stop"``; ``length`` → ``"length"`` (a failure in Pi); ``tool_calls`` →
  ``called_tool`` (a failure); an empty answer is returned with ``stop_reason="error"``.
* Usage maps to Pi's shape like Pi does: ``input = prompt_tokens - cached``, ``cacheRead = cached``,
  ``output = completion_tokens``, ``reasoning`` from the completion details, cost zero.

Retries: 429, 408, 409, 5xx, timeouts and connection errors are retried up to ``max_retries`` times with
exponential backoff and full jitter (``backoff_base * 2**attempt``, capped by ``backoff_max``), waiting
instead for ``retry-after-ms`` / ``Retry-After`` when the server sends one (capped by
``max_retry_after``). Other errors (400, 401, malformed bodies) fail at once. Failures return a response
with ``stop_reason="error"`` and an ``error_message`` that never contains the key.

Limits, so that no server can stall or flood a replay:

* ``timeout``: seconds without any data (connect, each read) before an attempt fails.
* ``deadline``: seconds for the whole request, every attempt and wait included; a server that
  trickles its answer a byte at a time never trips ``timeout`` but always trips this.
* ``max_response_bytes``: a longer answer is refused (a summary is a few kilobytes).
* A ``200`` whose body is an HTML page (a web server or proxy at the base URL, not the API) or not JSON
  at all is an error that says so.
* Circuit breaker: after ``breaker_threshold`` requests in a row failed (retries spent, deadline,
  refused answers), requests fail at once without reaching the server for ``breaker_cooldown``
  seconds; then one request is let through, and its success closes the circuit.

``timeout``, ``max_retries`` and ``deadline`` default to ``PIMEM_TIMEOUT``, ``PIMEM_RETRIES`` and
``PIMEM_DEADLINE`` when those are set (``PIMEM_DEADLINE=none`` for no deadline).

Requests run on the ``openai.AsyncOpenAI`` client; the synchronous :meth:`OpenAISummarizer.complete`
hands them to an event loop that runs in a background thread of its process (so it also works
where a loop is already running, as in Jupyter).

The API key comes from the argument, else ``OPENAI_API_KEY``, else ``PIMEM_API_KEY``; a local server with
no key gets a placeholder. The key is never logged, never shown by ``repr`` and never part of
``identity()`` (what caches key on). Credentials in the base URL (``http://user:pass@host/v1``) are
held the same way: ``base_url``, ``repr``, ``identity()``, errors and logs show the URL without them. A pickled summarizer carries no key read from the
environment (the receiving process reads its own environment); a key passed as ``api_key`` does
travel with it, so prefer the environment for clusters that may spill tasks to disk.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any

import openai

from pimem.base.js import js_stringify
from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.core.messages import convert_to_llm
from pimem.errors import ConfigurationError
from pimem.summarizers.options import (
    DEFAULT_DEADLINE,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    ENV_DEADLINE,
    client_options_from_env,
)
from pimem.summarizers.chat_format import chat_messages

__all__ = ["OpenAISummarizer", "AsyncOpenAISummarizer", "DEFAULT_REASONING_MAP", "redact"]

log = logging.getLogger(__name__)

DEFAULT_REASONING_MAP: dict[str, str | None] = {
    "off": None,
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
}
_REASONING_MODEL = re.compile(r"^(?:[\w.-]+/)?(?:o1|o3|o4|gpt-5)(?:[-.:]|$)", re.IGNORECASE)
_RETRY_STATUS = {408, 409, 429}
_NO_KEY = "pimem-no-key"

class _RefusedAnswer(Exception):
    """A 200 answer that cannot be a chat completion (HTML, not JSON, too large)."""


class _DeadlineExceeded(Exception):
    pass


# One event loop per process, in a background thread, runs the requests of synchronous callers.
_LOOP_LOCK = threading.Lock()
_LOOP: tuple[int, asyncio.AbstractEventLoop] | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP[0] != os.getpid():  # a forked child starts its own
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="pimem-openai", daemon=True).start()
            _LOOP = (os.getpid(), loop)
        return _LOOP[1]


def _run_sync(coro: Any) -> Any:
    """Run ``coro`` on the background loop and wait for it (cancelled if the wait is interrupted)."""
    future = asyncio.run_coroutine_threadsafe(coro, _background_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


def _post_args(params: Mapping[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """Arguments of ``client.post`` for a chat completion with ``params`` (as ``create`` takes them),
    answered as a stream so that the body can be read with a size cap.

    The body is the bytes Pi's client sends: ``JSON.stringify`` of the request, so text with lone
    UTF-16 surrogates (which JSON.parse keeps in Pi's sessions) goes out as ``\\udXXX`` escapes
    instead of failing to encode.
    """
    from openai._constants import RAW_RESPONSE_HEADER
    from openai.types.chat import ChatCompletion

    body = {k: v for k, v in params.items() if k != "extra_body"}
    body.update(params.get("extra_body") or {})
    return {"path": "/chat/completions", "cast_to": ChatCompletion,
            "options": {"headers": {**headers, RAW_RESPONSE_HEADER: "stream"}},
            "content": js_stringify(body).encode("utf-8")}


class _Secret:
    """Holds a secret (a key, a URL's ``user:password``); prints as ``'***'``.

    A secret read from the environment is not pickled: the receiving process reads the
    environment again (worker processes inherit it), from the names in ``env`` (the first set
    one wins). Only a secret passed as an argument travels with a pickled summarizer, since a
    worker has no other way to get it.
    """

    __slots__ = ("value", "env", "default")

    def __init__(self, value: Any, env: tuple[str, ...] = (), default: Any = None) -> None:
        self.value = value
        self.env = tuple(env)
        self.default = default

    @property
    def from_env(self) -> bool:
        return bool(self.env)

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__

    def __getstate__(self) -> dict[str, Any]:
        if self.env:
            return {"env": self.env, "default": self.default}
        return {"value": self.value, "env": (), "default": self.default}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.env = tuple(state.get("env") or ())
        self.default = state.get("default")
        if self.env:
            self.value = next((os.environ[n] for n in self.env if os.environ.get(n)), self.default)
        else:
            self.value = state.get("value")


class _UrlCredentials(_Secret):
    """The ``user:password`` of a base URL; read again from the URL in the environment after unpickling."""

    __slots__ = ()

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if self.env:
            self.value = split_credentials(self.value)[1] if self.value else None


#: Where a key comes from when none is given, in order.
KEY_ENV = ("OPENAI_API_KEY", "PIMEM_API_KEY")
_TOKEN_CHAR = r"A-Za-z0-9_\-"


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` (and its long prefixes) replaced by ``***``.

    A short secret (under 8 characters) is replaced only where it stands as a whole token, so
    that a key like ``ab`` does not mangle every word holding those letters."""
    if not secret or secret == _NO_KEY:
        return text
    if len(secret) < 8:
        return re.sub(rf"(?<![{_TOKEN_CHAR}]){re.escape(secret)}(?![{_TOKEN_CHAR}])", "***", text)
    text = text.replace(secret, "***")
    if len(secret) > 12:  # servers often echo a truncated key ("sk-abc…xyz")
        text = text.replace(secret[:12], "***")
        text = text.replace(secret[-6:], "***")
    return text


def split_credentials(url: str | None) -> tuple[str | None, str | None]:
    """``(url without user:password, "user:password" or None)``: the credentials of a base URL
    (``http://user:pass@host/v1``) are a secret, never shown, logged, cached or pickled."""
    if not url:
        return url, None
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url, None
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=host)), userinfo


def _with_credentials(url: str | None, userinfo: str | None) -> str | None:
    if not url or not userinfo:
        return url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))


def _resolve_key(api_key: str | None) -> str:
    return api_key or next((os.environ[n] for n in KEY_ENV if os.environ.get(n)), None) or _NO_KEY


def _zero_cost() -> dict[str, float]:
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}


def map_usage(raw: Any) -> dict[str, Any] | None:
    """An OpenAI ``usage`` object → Pi's usage dict (as Pi's ``parseChunkUsage``)."""
    if raw is None:
        return None
    data = raw if isinstance(raw, Mapping) else raw.model_dump()
    prompt = data.get("prompt_tokens") or 0
    details = data.get("prompt_tokens_details") or {}
    cache_read = details.get("cached_tokens") or data.get("prompt_cache_hit_tokens") or data.get("cached_tokens") or 0
    cache_write = details.get("cache_write_tokens") or 0
    completion = data.get("completion_tokens") or 0
    reasoning = (data.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    input_tokens = max(0, prompt - cache_read - cache_write)
    return {
        "input": input_tokens,
        "output": completion,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "reasoning": reasoning,
        "totalTokens": input_tokens + completion + cache_read + cache_write,
        "cost": _zero_cost(),
    }


def _retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class OpenAISummarizer:
    """A summarizer backed by a chat-completions endpoint (see the module docstring for the mapping).

    Args:
        model: the model's name at the endpoint.
        base_url: the endpoint (default: ``OPENAI_BASE_URL``, else OpenAI's); credentials in it are kept secret.
        api_key: the key (default: the first of ``key_env`` that is set; a placeholder without one).
        timeout: seconds without any data before an attempt fails (default: ``PIMEM_TIMEOUT``, else 120).
        max_retries: retries of a retryable failure (default: ``PIMEM_RETRIES``, else 4).
        deadline: seconds for the whole request, retries included; None: no deadline; ``"env"``:
            ``PIMEM_DEADLINE``, else 600.
        max_response_bytes: a longer answer is refused.
        breaker_threshold: failed requests in a row that open the circuit breaker.
        breaker_cooldown: seconds the open breaker fails requests at once.
        backoff_base: the first retry's wait bound in seconds (doubled each attempt, full jitter).
        backoff_max: the longest wait between retries.
        max_retry_after: the longest server-requested (``Retry-After``) wait honoured.
        use_max_completion_tokens: send ``max_completion_tokens`` instead of ``max_tokens``
            (None: for OpenAI reasoning models only).
        reasoning_map: Pi thinking level → ``reasoning_effort`` (default: :data:`DEFAULT_REASONING_MAP`).
        extra_body: fields added to every request body.
        headers: headers added to every request.
        temperature: the sampling temperature (None: the server's default).
        key_env: the environment variables read for the key, in order.
        url_env: the environment variables the base URL's credentials are read again from after
            unpickling (default: ``OPENAI_BASE_URL`` when ``base_url`` is not given).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        deadline: float | None | str = "env",
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        breaker_threshold: int = 5,
        breaker_cooldown: float = 60.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 120.0,
        use_max_completion_tokens: bool | None = None,
        reasoning_map: Mapping[str, str | None] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        temperature: float | None = None,
        key_env: Sequence[str] = KEY_ENV,
        url_env: Sequence[str] | None = None,
    ) -> None:
        self.model = model
        url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.base_url, userinfo = split_credentials(url)
        if url_env is None:
            url_env = () if base_url else ("OPENAI_BASE_URL",)
        self._userinfo = _UrlCredentials(userinfo, env=tuple(url_env) if userinfo else ())
        key = api_key or next((os.environ[n] for n in key_env if os.environ.get(n)), None) or _NO_KEY
        self._key = _Secret(key, env=() if api_key else tuple(key_env), default=_NO_KEY)
        env = client_options_from_env()
        self.timeout = timeout if timeout is not None else env.get("timeout", DEFAULT_TIMEOUT)
        self.max_retries = max_retries if max_retries is not None else env.get("max_retries", DEFAULT_RETRIES)
        if isinstance(deadline, str) and deadline != "env":
            raise ConfigurationError(f"deadline must be a number of seconds, None or 'env', not {deadline!r}")
        self.deadline: float | None = env.get("deadline", DEFAULT_DEADLINE) if isinstance(deadline, str) else deadline
        if self.deadline is not None and not self.deadline > 0:
            raise ConfigurationError(f"deadline must be a positive number of seconds or None, not {deadline!r}")
        self.max_response_bytes = max_response_bytes
        self.breaker_threshold = breaker_threshold
        self.breaker_cooldown = breaker_cooldown
        self._failures_in_a_row = 0
        self._open_until = 0.0
        self._last_failure = ""
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self.use_max_completion_tokens = use_max_completion_tokens
        self.reasoning_map = dict(DEFAULT_REASONING_MAP if reasoning_map is None else reasoning_map)
        self.extra_body = dict(extra_body or {})
        self.headers = dict(headers or {})
        self.temperature = temperature
        self._async_clients: dict[tuple[int, int], Any] = {}
        self._lock = threading.Lock()

    # -- identity, repr, pickling -----------------------------------------------------------------

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def identity(self) -> dict[str, Any]:
        """What determines the answers (never the key): class, model, endpoint and request options."""
        return {
            "class": "OpenAISummarizer",
            "model": self.model,
            "base_url": self.base_url or "https://api.openai.com/v1",
            "max_tokens_field": self._max_tokens_field(),
            "reasoning_map": self.reasoning_map,
            "extra_body": self.extra_body,
            "temperature": self.temperature,
        }

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_async_clients"] = {}
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- request building ------------------------------------------------------------------------

    def _is_openai(self) -> bool:
        return self.base_url is None or "api.openai.com" in self.base_url

    def _max_tokens_field(self) -> str:
        use_mct = self.use_max_completion_tokens
        if use_mct is None:
            use_mct = bool(_REASONING_MODEL.match(self.model))
        return "max_completion_tokens" if use_mct else "max_tokens"

    def build_params(self, request: SummaryRequest) -> tuple[dict[str, Any], dict[str, str]]:
        """The chat-completion keyword arguments and extra headers for ``request``."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": request.system_prompt},
                {"role": "user", "content": request.prompt},
            ],
        }
        conversation = getattr(request, "messages", None)
        if conversation:  # a request made of the conversation itself (Pi 0.13.2): no system prompt
            chat = chat_messages(convert_to_llm(list(conversation)), request.system_prompt)
            params["messages"] = chat if request.system_prompt else chat[1:]
        if request.max_tokens:
            params[self._max_tokens_field()] = request.max_tokens
        if request.reasoning:
            effort = self.reasoning_map.get(request.reasoning, request.reasoning)
            if effort:
                params["reasoning_effort"] = effort
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self._is_openai():
            params["store"] = False
        headers = dict(self.headers)
        if request.session_id:
            if self.base_url and "openrouter" in self.base_url:
                headers["x-session-id"] = request.session_id
            else:
                headers["x-session-affinity"] = request.session_id
                headers["x-client-request-id"] = request.session_id
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params, headers

    # -- responses --------------------------------------------------------------------------------

    def _to_response(self, completion: Any, latency: float) -> SummaryResponse:
        choices = getattr(completion, "choices", None)
        if not choices:
            return self._error("the server answered without choices", latency)
        choice = choices[0]
        message = choice.message
        text = (message.content or "") if message is not None else ""
        tool_calls = getattr(message, "tool_calls", None) if message is not None else None
        finish = choice.finish_reason
        usage = map_usage(getattr(completion, "usage", None))
        extra: dict[str, Any] = {"finish_reason": finish, "model": getattr(completion, "model", None)}
        reasoning_text = None
        if message is not None:
            reasoning_text = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
        if reasoning_text:
            extra["reasoning"] = reasoning_text
        if tool_calls or finish in ("tool_calls", "function_call"):
            return SummaryResponse(text=text, usage=usage, stop_reason="toolUse", called_tool=True,
                                   error_message="Summarization attempted to call a tool",
                                   latency_s=latency, extra=extra)
        if finish == "length":
            return SummaryResponse(text=text, usage=usage, stop_reason="length",
                                   error_message="generation hit the token cap and the summary is incomplete",
                                   latency_s=latency, extra=extra)
        if not text.strip():
            return SummaryResponse(text="", usage=usage, stop_reason="error",
                                   error_message="the model returned an empty summary", latency_s=latency,
                                   extra=extra)
        return SummaryResponse(text=text, usage=usage, stop_reason="stop", latency_s=latency, extra=extra)

    def _scrub(self, text: str) -> str:
        """``text`` without the key or the base URL's credentials."""
        text = redact(text, self._key.value)
        userinfo = self._userinfo.value
        if userinfo:
            text = text.replace(f"{userinfo}@", "***@")
            password = userinfo.partition(":")[2]
            if password:
                text = redact(text, password)
        return text

    def _error(self, message: str, latency: float, **extra: Any) -> SummaryResponse:
        return SummaryResponse(text="", usage=None, stop_reason="error",
                               error_message=self._scrub(message), latency_s=latency, extra=extra)

    def _retry_delay(self, attempt: int, exc: Exception | None) -> float:
        headers = getattr(getattr(exc, "response", None), "headers", None)
        after = _retry_after_seconds(headers)
        if after is not None:
            return min(after, self.max_retry_after)
        return random.uniform(0, min(self.backoff_max, self.backoff_base * (2**attempt)))

    def _next_delay(self, exc: Exception, attempts: int) -> float | None:
        """Seconds to wait before retrying after ``attempts`` failed tries, or None: give up."""
        if not (isinstance(exc, openai.OpenAIError) and self._retryable(exc) and attempts < self.max_retries):
            return None
        delay = self._retry_delay(attempts, exc)
        log.info("summary request failed (%s); retry %d in %.2f s", self._scrub(self._describe(exc)),
                 attempts + 1, delay)
        return delay

    # -- circuit breaker ----------------------------------------------------------------------------

    def _breaker_refusal(self) -> str | None:
        """The error to answer with at once while the circuit is open, else None (ask the server)."""
        with self._lock:
            if self._failures_in_a_row < self.breaker_threshold:
                return None
            now = time.monotonic()
            if now >= self._open_until:  # half open: let this one request through
                self._open_until = now + self.breaker_cooldown
                return None
            wait = self._open_until - now
            return (f"circuit open: the last {self._failures_in_a_row} requests to {self.base_url or 'OpenAI'} "
                    f"failed (last: {self._last_failure}); not asking again for {wait:.0f} s")

    def _record(self, failure: str | None) -> None:
        with self._lock:
            if failure is None:
                self._failures_in_a_row = 0
                return
            self._failures_in_a_row += 1
            self._last_failure = failure
            if self._failures_in_a_row >= self.breaker_threshold:
                self._open_until = time.monotonic() + self.breaker_cooldown

    @staticmethod
    def _retryable(exc: Exception) -> bool:
        if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
            return True
        if isinstance(exc, openai.APIStatusError):
            return exc.status_code in _RETRY_STATUS or exc.status_code >= 500
        return False

    def _describe(self, exc: Exception) -> str:
        if isinstance(exc, openai.APIStatusError):
            return f"HTTP {exc.status_code}: {exc.message}"
        if isinstance(exc, openai.APITimeoutError):
            return f"request timed out after {self.timeout} s"
        if isinstance(exc, _RefusedAnswer):
            return str(exc)
        if isinstance(exc, _DeadlineExceeded):
            return (f"no complete answer within the {self.deadline:g} s deadline for the whole request (a server "
                    f"sending its answer too slowly?); raise it with --deadline or {ENV_DEADLINE}")
        return f"{type(exc).__name__}: {exc}"

    # -- requests ---------------------------------------------------------------------------------

    def _client_for_loop(self) -> openai.AsyncOpenAI:
        """This summarizer's client on the running event loop (clients never cross loops or processes)."""
        key = (os.getpid(), id(asyncio.get_running_loop()))
        client = self._async_clients.get(key)
        if client is None:
            client = openai.AsyncOpenAI(api_key=self._key.value,
                                        base_url=_with_credentials(self.base_url, self._userinfo.value),
                                        timeout=self.timeout, max_retries=0)
            self._async_clients[key] = client
        return client

    async def _attempt(self, client: openai.AsyncOpenAI, params: dict[str, Any],
                       headers: dict[str, str]) -> Any:
        """One HTTP exchange; the body is read with a size cap and checked before it is parsed."""
        from openai.types.chat import ChatCompletion

        raw = await client.post(**_post_args(params, headers))
        try:
            content_type = raw.headers.get("content-type", "")
            chunks: list[bytes] = []
            size = 0
            async for chunk in raw.iter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise _RefusedAnswer(f"the server's answer is longer than {self.max_response_bytes} bytes "
                                         "(a summary is a few kilobytes); refused")
                chunks.append(chunk)
        finally:
            await raw.close()
        body = b"".join(chunks)
        snippet = body[:120].decode("utf-8", "replace").strip()
        if "html" in content_type.lower() or body.lstrip()[:1] == b"<":
            raise _RefusedAnswer(f"the server answered HTTP {raw.status_code} with an HTML page, not JSON "
                                 f"({snippet!r}); is the base URL that of the API (it usually ends in /v1)?")
        try:
            data = json.loads(body)
        except ValueError:
            raise _RefusedAnswer(f"the server answered HTTP {raw.status_code} with a body that is not JSON: "
                                 f"{snippet!r}") from None
        if not isinstance(data, dict):
            raise _RefusedAnswer(f"the server answered with JSON that is not an object: {snippet!r}")
        return ChatCompletion.construct(**data)

    async def _complete_with(self, client: openai.AsyncOpenAI, request: SummaryRequest) -> SummaryResponse:
        """Ask with bounded retries, within the deadline and the circuit breaker."""
        refusal = self._breaker_refusal()
        if refusal is not None:
            return self._error(refusal, 0.0, attempts=0, circuit_open=True)
        params, headers = self.build_params(request)
        start = time.perf_counter()
        ends = None if self.deadline is None else time.monotonic() + self.deadline
        attempts = 0
        while True:
            try:
                remaining = None if ends is None else ends - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise _DeadlineExceeded
                try:
                    async with asyncio.timeout(remaining):
                        completion = await self._attempt(client, params, headers)
                except TimeoutError:
                    raise _DeadlineExceeded from None
                response = self._to_response(completion, time.perf_counter() - start)
                response.extra["attempts"] = attempts + 1
                self._record(None)
                return response
            except Exception as exc:  # noqa: BLE001 - every failure becomes an error response
                delay = self._next_delay(exc, attempts)
                if delay is not None and ends is not None and time.monotonic() + delay >= ends:
                    exc, delay = _DeadlineExceeded(), None  # waiting would pass the deadline
                if delay is None:
                    message = self._scrub(self._describe(exc))
                    self._record(message)
                    return self._error(message, time.perf_counter() - start, attempts=attempts + 1)
                attempts += 1
                await asyncio.sleep(delay)

    async def acomplete(self, request: SummaryRequest) -> SummaryResponse:
        """Answer one request on the running event loop."""
        return await self._complete_with(self._client_for_loop(), request)

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        """Ask the model once (with bounded retries) and map the answer to Pi's terms."""
        return _run_sync(self.acomplete(request))


class AsyncOpenAISummarizer(OpenAISummarizer):
    """The same mapping with ``openai.AsyncOpenAI``; at most ``concurrency`` requests in flight.

    ``await acomplete(request)`` answers one request; ``complete_many(requests)`` answers many
    concurrently and returns responses in input order (``await acomplete_many`` from a running
    loop). ``complete`` works synchronously too, for use wherever a plain summarizer is expected.

    Args:
        model: the model's name at the endpoint.
        base_url: the endpoint (as for :class:`OpenAISummarizer`).
        api_key: the key (as for :class:`OpenAISummarizer`).
        concurrency: the most requests in flight at once (at least 1).
        kwargs: the other options of :class:`OpenAISummarizer`.
    """

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 concurrency: int = 8, **kwargs: Any) -> None:
        super().__init__(model, base_url, api_key, **kwargs)
        if concurrency < 1:
            raise ConfigurationError("concurrency must be at least 1")
        self.concurrency = concurrency
        self._semaphores: dict[tuple[int, int], asyncio.Semaphore] = {}
        self.max_in_flight = 0
        self._in_flight = 0

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_semaphores"] = {}
        return state

    async def acomplete(self, request: SummaryRequest) -> SummaryResponse:
        """Answer one request asynchronously, within the concurrency bound."""
        client = self._client_for_loop()
        key = (os.getpid(), id(asyncio.get_running_loop()))
        semaphore = self._semaphores.setdefault(key, asyncio.Semaphore(self.concurrency))
        async with semaphore:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            try:
                return await self._complete_with(client, request)
            finally:
                self._in_flight -= 1

    async def acomplete_many(self, requests: Iterable[SummaryRequest]) -> list[SummaryResponse]:
        """Answer many requests concurrently (bounded), in input order."""
        try:
            return list(await asyncio.gather(*(self.acomplete(r) for r in requests)))
        finally:
            await self._close_loop_client()

    async def _close_loop_client(self) -> None:
        key = (os.getpid(), id(asyncio.get_running_loop()))
        client = self._async_clients.pop(key, None)
        self._semaphores.pop(key, None)
        if client is not None:
            await client.close()

    def complete_many(self, requests: Iterable[SummaryRequest]) -> list[SummaryResponse]:
        """Synchronous entry point: run :meth:`acomplete_many` in a fresh event loop."""
        return asyncio.run(self.acomplete_many(list(requests)))

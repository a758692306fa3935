"""Summaries from the local instruct model (:mod:`pimem.summarizers.local_server`) through its OpenAI-compatible server.

:class:`LocalModelSummarizer` is an :class:`~pimem.summarizers.openai_compat.OpenAISummarizer` with the
request options fixed for reproducible, bounded answers:

* deterministic: ``temperature=0`` and a fixed ``seed``;
* bounded: ``max_tokens`` is Pi's request value capped at ``max_tokens_cap`` (default 1024; a 0.5B
  model that has not finished by then is repeating itself) and generation stops at the chat
  template's end markers (``stop``). An answer cut by the cap ends with ``finish_reason="length"``,
  which Pi treats as a failed summary, and so does the replay;
* the identity (what caches and recordings key on) names the weights' sha256 instead of the
  server's address, so an answer cached against one port is reused on another.

Long spans: the prompt is never truncated — Pi does not truncate summarization prompts either. A
prompt longer than the server's context (``n_ctx``, default 32,768 tokens, the model's own window)
is refused by the server; the answer is an error response naming the context size, and the
compaction fails as it would in Pi with a model whose window is too small.

``local_summarizer()`` gives the preset: this summarizer on the running server (``pimem model
start``), behind the on-disk cache.
"""

from __future__ import annotations

import re
from typing import Any

from pimem.core.llm import SummaryRequest, SummaryResponse
from pimem.errors import ConfigurationError
from pimem.summarizers import local_server as localmodel
from pimem.summarizers.cached import CachedSummarizer
from pimem.summarizers.openai_compat import OpenAISummarizer

__all__ = ["LocalModelSummarizer", "local_summarizer", "STOP_SEQUENCES", "DEFAULT_MAX_TOKENS_CAP"]

STOP_SEQUENCES = ("<|im_end|>", "<|im_start|>", "<|endoftext|>")
DEFAULT_MAX_TOKENS_CAP = 1024


class LocalModelSummarizer(OpenAISummarizer):
    """The local model behind ``base_url`` (default: the server ``pimem model start`` runs)."""

    def __init__(self, base_url: str | None = None, *, max_tokens_cap: int = DEFAULT_MAX_TOKENS_CAP, seed: int = 0,
                 stop: tuple[str, ...] = STOP_SEQUENCES, timeout: float = 900.0, max_retries: int = 1,
                 **kwargs: Any) -> None:
        n_ctx = None
        if base_url is None:
            state = localmodel.running_server()
            if state is None:
                raise ConfigurationError("no local model server is running; start one with `pimem model start` "
                                         "(after `pimem model install`)")
            base_url, n_ctx = state["base_url"], state.get("n_ctx")
        if max_tokens_cap < 1:
            raise ConfigurationError("max_tokens_cap must be at least 1")
        super().__init__(localmodel.MODEL_ALIAS, base_url, api_key="local", timeout=timeout, max_retries=max_retries,
                         temperature=0.0, use_max_completion_tokens=False, **kwargs)
        self.max_tokens_cap = max_tokens_cap
        self.seed = seed
        self.stop = tuple(stop)
        self.n_ctx = n_ctx
        self.sha256 = localmodel.MODEL_SHA256

    def __repr__(self) -> str:
        return f"LocalModelSummarizer(base_url={self.base_url!r}, max_tokens_cap={self.max_tokens_cap})"

    def identity(self) -> dict[str, Any]:
        """Model, weights digest and request options; never the server's address."""
        identity = super().identity()
        identity.update({"class": "LocalModelSummarizer", "base_url": "local", "sha256": self.sha256,
                         "max_tokens_cap": self.max_tokens_cap, "seed": self.seed, "stop": list(self.stop)})
        return identity

    def parameters(self) -> dict[str, Any]:
        """The request options, as recorded with a dataset's provenance."""
        return {"temperature": self.temperature, "seed": self.seed, "max_tokens_cap": self.max_tokens_cap,
                "stop": list(self.stop)}

    def build_params(self, request: SummaryRequest) -> tuple[dict[str, Any], dict[str, str]]:
        params, headers = super().build_params(request)
        params["max_tokens"] = min(request.max_tokens or self.max_tokens_cap, self.max_tokens_cap)
        params["seed"] = self.seed
        params["stop"] = list(self.stop)
        return params, headers

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        response = super().complete(request)
        message = response.error_message or ""
        if response.stop_reason == "error" and re.search(r"context (window|length|size)", message):
            where = f" (n_ctx={self.n_ctx})" if self.n_ctx else ""
            response.error_message = (f"the summarization prompt does not fit the local model's context{where}; "
                                      f"Pi does not truncate it, so the compaction fails: {message}")
        return response


def local_summarizer(cache_path: Any = None, **kwargs: Any) -> Any:
    """The preset: :class:`LocalModelSummarizer` on the running server, behind the on-disk cache."""
    return CachedSummarizer(LocalModelSummarizer(**kwargs), cache_path)

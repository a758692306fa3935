"""The local model's server process: llama.cpp's own OpenAI-compatible HTTP server (``llama-server``),
from the prebuilt ``xllamacpp`` wheel (manylinux, CPU; ``pip install 'pimem[local]'``), serving one GGUF
file on 127.0.0.1. ``pimem model start`` runs it as
``python -m pimem.summarizers.llama_server --model FILE --port N ...``.

Requests are served one at a time (one slot holding the whole ``n_ctx``) and each is computed from an
empty context (no prompt cache), so that temperature 0 gives the same answer to the same request
whatever was asked before. Sampling defaults are llama.cpp's, with a repetition penalty of 1.1 over the
last 64 tokens (llama-cpp-python's server default, kept from the first recordings).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

__all__ = ["main", "server_params"]

REPEAT_PENALTY = 1.1
REPEAT_LAST_N = 64


def server_params(model: str, alias: str, host: str, port: int, n_ctx: int, threads: int) -> object:
    """``xllamacpp.CommonParams`` for one model on ``host:port``."""
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = model
    p.model_alias = {alias}
    p.hostnames = [host]
    p.port = port
    p.n_ctx = n_ctx
    p.n_parallel = 1
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.cache_prompt = False
    p.ui = False
    p.offline = True  # never reach for a model hub
    p.sampling.penalty_repeat = REPEAT_PENALTY
    p.sampling.penalty_last_n = REPEAT_LAST_N
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pimem.summarizers.llama_server",
                                     description="Serve a GGUF model with llama.cpp's OpenAI-compatible server.")
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--model_alias", default="local", help="the model id the API reports")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n_ctx", type=int, default=32768)
    parser.add_argument("--n_threads", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        import xllamacpp
    except ImportError:
        print("llama_server: xllamacpp is not installed; run `pimem model install` or "
              "`pip install 'pimem[local]'`", file=sys.stderr)
        return 2
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    params = server_params(args.model, args.model_alias, args.host, args.port, args.n_ctx, args.n_threads)
    try:
        server = xllamacpp.Server(params)  # loads the model and listens; its threads serve from here on
    except Exception as exc:  # noqa: BLE001 - one line in the log, the exit code says it failed
        print(f"llama_server: could not start: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"llama_server: serving {args.model_alias} at {server.listening_address}/v1", file=sys.stderr, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    print("llama_server: stopping", file=sys.stderr, flush=True)
    sys.stderr.flush()
    os._exit(0)  # the server's native threads hold no state worth a slower interpreter shutdown


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Run llama.cpp's HTTP server (from the ``xllamacpp`` wheel) as a manageable subprocess.

Why: ``xllamacpp.Server`` starts llama.cpp's real server inside the calling Python process,
which a test cannot kill or isolate. This module gives it a process of its own with a
command line, so ``launch()`` can start, watch and tear it down like any other engine:

    python -m pytest_goodput.engines.llamacpp_server --model tiny.gguf --port {port} \
        --parallel 8 --threads 1 --metrics

It prints the base URL (``http://HOST:PORT/v1``) as its first stdout line, so ``--port 0``
works with ``launch(..., url_from_stdout=True)``; llama.cpp's own log goes to stderr.
``--write-tiny-model [SIZE]`` writes the random test model first when the file does not
exist (``tiny``, the default, or ``deep``: ``tinyllama.SIZES``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any, Optional, Sequence

from pytest_goodput.engines.tinyllama import SIZES, write_tiny_llama

#: HTTP worker threads. llama.cpp's HTTP server gives each connection a thread of a fixed pool
#: and keeps an idle keep-alive connection on it for 5 s; its default pool (slots + 2) is
#: smaller than the connections the load generator opens before a run (64 for an open loop,
#: one per user for a closed one), so the connections beyond the pool wait their turn in 5 s
#: steps (measured: 35 s before the first request).
#: Idle threads cost nothing but address space.
DEFAULT_HTTP_THREADS = 96


def _xllamacpp() -> Any:
    """The optional ``xllamacpp`` (pytest-goodput[llamacpp]), imported here only."""
    import xllamacpp

    return xllamacpp


def build_params(args: argparse.Namespace) -> Any:
    """Map our flags onto ``xllamacpp.CommonParams`` (names follow llama-server's flags)."""
    p = _xllamacpp().CommonParams()
    p.model.path = args.model
    p.hostnames = [args.host]
    p.port = args.port
    p.n_parallel = args.parallel
    p.cont_batching = not args.no_cont_batching
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.endpoint_metrics = args.metrics
    p.warmup = False
    if args.ctx_size is not None:
        p.n_ctx = args.ctx_size
    if args.alias:
        p.model_alias = {args.alias}  # a set of names
    if args.threads_http is not None:
        p.n_threads_http = args.threads_http
    return p


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m pytest_goodput.engines.llamacpp_server",
        description="llama.cpp's HTTP server (xllamacpp) in a process of its own.",
    )
    ap.add_argument("--model", "-m", required=True, help="GGUF file")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    ap.add_argument("--parallel", "-np", type=int, default=8, help="slots (concurrent sequences)")
    ap.add_argument("--threads", "-t", type=int, default=1, help="CPU threads for compute")
    ap.add_argument(
        "--threads-http", type=int, default=DEFAULT_HTTP_THREADS,
        help=f"HTTP threads, one per open connection (default {DEFAULT_HTTP_THREADS}); "
        "more than the client's connections",
    )
    ap.add_argument("--ctx-size", "-c", type=int, default=None, help="total context (all slots)")
    ap.add_argument("--no-cont-batching", action="store_true")
    ap.add_argument("--metrics", action="store_true", help="serve Prometheus /metrics")
    ap.add_argument("--alias", default=None, help="model name reported by /v1/models")
    ap.add_argument(
        "--write-tiny-model", nargs="?", const="tiny", default=None, choices=sorted(SIZES),
        metavar="SIZE",
        help="write the random test model to --model first if the file does not exist: "
        "tiny (the default, 0.5 MB, ~0.3 ms a token) or deep (42 MB, ~12 ms a token)",
    )
    return ap.parse_args(argv)


def write_model(path: str, size: str) -> None:
    """The random model of ``size`` at ``path``, written under another name and renamed: a
    server stopped mid-write leaves no half-written file for the next start to serve."""
    part = f"{path}.{os.getpid()}.part"
    try:
        write_tiny_llama(part, **SIZES[size])
        os.replace(part, path)
    finally:
        if os.path.exists(part):
            os.unlink(part)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.write_tiny_model and not os.path.exists(args.model):
        write_model(args.model, args.write_tiny_model)
    xllamacpp = _xllamacpp()

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server = xllamacpp.Server(build_params(args))
    except RuntimeError as e:  # llama.cpp has logged the reason (e.g. "couldn't bind") to stderr
        print(f"llamacpp_server: could not start: {e}", file=sys.stderr, flush=True)
        return 1
    addr = str(server.listening_address).rstrip("/")
    print(addr + "/v1", flush=True)
    while not stop.wait(0.5):
        pass
    del server  # stops the HTTP server and frees the model
    return 0


if __name__ == "__main__":
    sys.exit(main())

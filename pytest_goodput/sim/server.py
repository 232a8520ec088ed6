"""The simulator as an OpenAI-compatible HTTP server (starlette + uvicorn, own process).

One asyncio task steps :class:`EngineModel` at absolute deadlines (``perf_counter`` is the
virtual clock, so late wake-ups never accumulate drift) and hands emitted tokens to
per-request streams. Per-token work is a counter bump, a future wake-up and a
pre-encoded byte concatenation, so the server is not the bottleneck at test-suite rates.

What the bodies mean and how responses are spelled lives in :mod:`.openai`; this module is
the scheduling, fault injection and HTTP plumbing around it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import socket
import sys
import time
from typing import Any, Optional

import uvicorn
try:  # a dependency on POSIX; asyncio's own loop elsewhere
    import uvloop
except ImportError:  # pragma: no cover - Windows
    uvloop = None
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pytest_goodput.sim import openai, vision
from pytest_goodput.sim.metrics_endpoint import metrics_registry
from pytest_goodput.sim.degrade import degrade_schedule
from pytest_goodput.sim.model import EngineModel, RequestTooLong, draw_output_length
from pytest_goodput.sim.clock import EngineClock
from pytest_goodput.sim.profile import SimProfile, SimProfileError, build_parser, profile_from_env_and_args
from pytest_goodput.sim.outputs import text_offset

_VOCAB = (
    "the of and to in is was for on that with as by at from it an be this are or which "
    "river stone light cloud north field glass paper market garden signal orbit copper "
    "quiet rapid amber silver window bridge forest engine harbor lantern meadow velvet "
    "summit canyon ember falcon glacier horizon island jungle kernel lumen marble nectar"
).split()
_TEXT_LEN = 997  # prime: generated text does not repeat with short periods
_CLOCK = time.perf_counter
#: Event-loop timers (libuv, epoll) have 1 ms granularity: wake this early, then sleep exactly.
_TIMER_SLACK = 0.0015


class _InjectedDrop(Exception):
    """Raised inside a stream to cut the connection (fault injection, not a bug)."""


class _DropFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info
        return not (exc and exc[0] is _InjectedDrop)


class _Stream:
    """Tokens the engine has produced for one request, and the wake-up of its writer."""

    __slots__ = ("ready", "finished", "waiter", "intended", "written", "groups")

    def __init__(self) -> None:
        self.ready = 0
        self.finished = False
        self.waiter: Optional[asyncio.Future[None]] = None
        self.intended: list[float] = []
        self.written: list[float] = []
        self.groups: dict[int, int] = {}  # first token -> end of a step's several tokens: one chunk

    def wake(self, *_: Any) -> None:
        w = self.waiter
        if w is not None:
            self.waiter = None
            if not w.done():
                w.set_result(None)


class SimEngine:
    """Owns the model, the stepping task, the fault RNG and the trace file."""

    def __init__(self, profile: SimProfile, trace_path: Optional[str] = None) -> None:
        self.profile = profile = profile.launched()  # launch_cv: this launch's own level
        self.model = EngineModel(profile, degrade_schedule(profile))
        self.clock = EngineClock(profile.per_request_metrics)  # the engine's own stamps (vLLM's)
        self.streams: dict[str, _Stream] = {}
        self._wake = asyncio.Event()
        self._task: Optional[asyncio.Task[None]] = None
        self._counter = 0
        self._tag = os.urandom(4).hex()
        rng = random.Random(profile.seed)
        self.words = [(" " + rng.choice(_VOCAB)).encode() for _ in range(_TEXT_LEN)]
        self._trace = open(trace_path, "a", encoding="utf-8") if trace_path else None
        self.errors_injected = 0
        self.refused = 0
        self.drops = 0
        self.stalls = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._trace is not None:
            self._trace.close()

    async def _run(self) -> None:
        model, streams, trace, clock = self.model, self.streams, self._trace is not None, self.clock
        vnow = _CLOCK()
        while True:
            if not model.has_work:
                self._wake.clear()
                await self._wake.wait()
                vnow = max(vnow, _CLOCK())
            res = model.step(vnow)
            deadline = vnow + res.duration_s
            # always yield once so writers flush the last step's tokens, then wake a little
            # early (loop timers tick in whole ms) and finish the wait precisely
            await asyncio.sleep(max(0.0, deadline - _CLOCK() - _TIMER_SLACK))
            delay = deadline - _CLOCK()
            if delay > 0:
                time.sleep(delay)
            for rid, n, done in res.emitted:
                st = streams.get(rid)
                if st is None:
                    continue
                clock.emitted(rid, n, done, deadline, res.duration_s)
                if n > 1:  # speculative decoding: the step's tokens travel in one chunk
                    st.groups[st.ready] = st.ready + n
                st.ready += n
                if done:
                    st.finished = True
                if trace:
                    st.intended.append(deadline)
                st.wake()
            vnow = deadline

    def admit(self, prompt: str, prompt_tokens: int, body: dict[str, Any], default_max: int,
              chat: bool = False, image_tokens: int = 0) -> tuple[Optional[tuple[int, str]], dict[str, Any]]:
        """Apply faults and queue the request; returns (error, plan) with error (status, msg).

        Chat requests of a reasoning profile generate ``reasoning_tokens`` tokens of reasoning
        (``openai.reasoning_length``) before their ``out_len`` answer tokens (``total`` in all).
        """
        p = self.profile
        self._counter += 1
        rng = random.Random((p.seed << 32) ^ self._counter)
        if p.error_rate and rng.random() < p.error_rate:
            self.errors_injected += 1
            return (p.error_status, "injected error"), {}
        if p.max_queue is not None and self.model.num_waiting >= p.max_queue:
            self.refused += 1
            return (p.queue_full_status, "waiting queue is full"), {}
        max_tokens, min_tokens = openai.token_limits(body, default_max)
        bad = openai.limits_error(prompt_tokens, max_tokens, p.num_blocks * p.block_size)
        if bad is not None:
            return (400, bad), {}
        out_len = draw_output_length(rng, max_tokens, min(min_tokens, max_tokens), p.eos_prob,
                                     bool(body.get("ignore_eos", False)))
        reasoning, bad = openai.reasoning_length(body, p.reasoning_tokens) if chat else (0, None)
        if bad is not None:
            return (400, bad), {}
        total = reasoning + out_len
        rid = f"{self._tag}{self._counter:x}"
        hashes = None
        if p.prefix_caching:
            words, bs, h, hashes = prompt.split(), p.block_size, 0, []
            for i in range(len(words) // bs):
                h = hash((h, *words[i * bs:(i + 1) * bs]))
                hashes.append(h)
        try:
            seq = self.model.add_request(rid, prompt_tokens, total, block_hashes=hashes,
                                         image_tokens=image_tokens)
        except RequestTooLong as err:
            return (400, str(err)), {}
        self.streams[rid] = _Stream()
        self.clock.arrived(rid, _CLOCK())
        self._wake.set()
        plan = {
            "rid": rid, "out_len": out_len, "max_tokens": max_tokens, "seq": seq,
            "reasoning": reasoning, "total": total,
            "offset": text_offset(prompt, _TEXT_LEN, p.output_drift),
            "stall_at": rng.randrange(1, total) if total > 1 and rng.random() < p.stall_prob
            else None,
            "drop_at": rng.randrange(1, total) if total > 1 and rng.random() < p.drop_prob
            else None,
        }
        return None, plan

    def finish(self, rid: str) -> None:
        """Forget a request; abort it in the model if the client left early."""
        st = self.streams.pop(rid, None)
        self.model.abort(rid)
        self.clock.forget(rid)
        if st is not None and self._trace is not None and st.written:
            n = len(st.written)
            self._trace.write(json.dumps({"id": rid, "intended": st.intended[:n],
                                          "written": st.written}) + "\n")
            self._trace.flush()

    def cached(self, plan: dict[str, Any]) -> Optional[int]:  # prefix-cache hits; None: off
        return plan["seq"].cached_tokens if self.profile.prefix_caching else None

    def text(self, offset: int, n: int) -> str:
        w = self.words
        return b"".join(w[(offset + i) % _TEXT_LEN] for i in range(n)).decode()


def _error(status: int, message: str) -> Any:
    return JSONResponse(openai.error_body(status, message), status_code=status)


class _SSE:
    """ASGI response streaming one chunk per token (several per write when behind)."""

    def __init__(self, engine: SimEngine, plan: dict[str, Any], chat: bool, prompt_tokens: int,
                 usage: bool, model_name: str) -> None:
        self.e, self.plan, self.chat, self.usage = engine, plan, chat, usage
        self.prompt_tokens = prompt_tokens
        self.enc = openai.ChunkEncoder(plan["rid"], chat, model_name,
                                       openai.finish_reason(plan["out_len"], plan["max_tokens"]),
                                       engine.profile.reasoning_field)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        e, plan, st = self.e, self.plan, self.e.streams[self.plan["rid"]]
        disc = asyncio.ensure_future(receive())
        disc.add_done_callback(st.wake)
        loop = asyncio.get_running_loop()
        await send({"type": "http.response.start", "status": 200, "headers": openai.SSE_HEADERS})
        try:
            if self.chat:
                await send({"type": "http.response.body", "more_body": True, "body": self.enc.role})
            sent, total, words, off = 0, plan["total"], e.words, plan["offset"]
            reasoning, enc = plan["reasoning"], self.enc
            stall_at, drop_at, written = plan["stall_at"], plan["drop_at"], st.written
            trace = e._trace is not None
            while True:
                if disc.done():
                    return
                ready = st.ready
                if ready == sent:
                    if st.finished:
                        break
                    st.waiter = loop.create_future()
                    await st.waiter
                    continue
                if stall_at is not None and ready > stall_at:
                    ready = stall_at  # write up to the stall point, then pause once
                    if ready == sent:
                        stall_at = None
                        e.stalls += 1
                        await asyncio.sleep(e.profile.stall_ms / 1000.0)
                        continue
                if drop_at is not None and ready > drop_at:
                    ready = drop_at
                buf = enc.chunks(words, off, sent, ready, total, reasoning, st.groups)
                if buf:
                    if trace:
                        now = _CLOCK()
                        written.extend(now for _ in buf)
                    await send({"type": "http.response.body", "body": b"".join(buf), "more_body": True})
                sent = ready
                if drop_at is not None and sent == drop_at:
                    e.drops += 1
                    raise _InjectedDrop()
            tail = enc.usage_chunk(self.prompt_tokens, total, reasoning, e.cached(plan),
                                   e.clock.metrics(plan["rid"])) if self.usage else b""
            await send({"type": "http.response.body", "body": tail + openai.DONE, "more_body": False})
        finally:
            disc.remove_done_callback(st.wake)
            disc.cancel()
            e.finish(plan["rid"])


def build_app(engine: SimEngine) -> Any:
    """The starlette application serving the OpenAI-compatible routes and /metrics."""

    name = engine.profile.model_name
    registry = metrics_registry(engine)

    async def generate(request: Any, chat: bool) -> Any:
        try:
            body, prompt, n_prompt = openai.parse_request(await request.body(), chat)
            n_image = vision.image_tokens(body) if chat else 0  # counted in the prompt
        except ValueError as err:
            return _error(400, str(err))
        n_prompt += n_image
        err, plan = engine.admit(prompt, n_prompt, body, openai.default_max_tokens(chat), chat, n_image)
        if err is not None:
            return _error(*err)
        if body.get("stream"):
            opts = body.get("stream_options") or {}
            return _SSE(engine, plan, chat, n_prompt, bool(opts.get("include_usage")), name)
        rid, st = plan["rid"], engine.streams[plan["rid"]]
        try:
            while not st.finished:
                st.waiter = asyncio.get_running_loop().create_future()
                await st.waiter
            metrics = engine.clock.metrics(rid)
        finally:
            engine.finish(rid)
        n, r = plan["out_len"], plan["reasoning"]
        return JSONResponse(openai.completion_body(
            rid, chat, name, engine.text(plan["offset"] + r, n), n_prompt, n + r,
            openai.finish_reason(n, plan["max_tokens"]), engine.text(plan["offset"], r), r,
            engine.profile.reasoning_field, engine.cached(plan), metrics))

    async def completions(request: Any) -> Any:
        return await generate(request, chat=False)

    async def chat(request: Any) -> Any:
        return await generate(request, chat=True)

    async def models(_: Any) -> Any:
        return JSONResponse(openai.models_body(name))

    async def health(_: Any) -> Any:
        return Response(status_code=200)

    async def metrics(_: Any) -> Any:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return Starlette(routes=[
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models), Route("/health", health), Route("/metrics", metrics),
    ])


async def _serve(profile: SimProfile, host: str, port: int, trace: Optional[str]) -> None:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))  # before the engine starts: a busy port leaves nothing running
    except OSError:
        sock.close()
        raise
    engine = SimEngine(profile, trace)
    engine.start()
    config = uvicorn.Config(build_app(engine), log_level="warning", access_log=False,
                            lifespan="off", loop="none", http="httptools", backlog=1024,
                            proxy_headers=False)
    server = uvicorn.Server(config)
    logging.getLogger("uvicorn.error").addFilter(_DropFilter())
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.005)
    if server.started:
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        sys.stdout.write(f"http://{shown}:{bound}/v1\n")
        sys.stdout.flush()
    try:
        await task
    finally:
        await engine.stop()


def main(argv: Optional[list[str]] = None) -> int:
    """``pytest-goodput sim``: serve until SIGINT/SIGTERM; first stdout line is the base URL."""
    args = vars(build_parser().parse_args(argv))
    host, port, trace = args.pop("host"), args.pop("port"), args.pop("trace")
    try:
        profile = profile_from_env_and_args(args)
    except SimProfileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    loop = asyncio.new_event_loop() if uvloop is None else uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_serve(profile, host, port, trace))
    except KeyboardInterrupt:
        pass
    except OSError as err:  # the port is taken, the host is not ours: one line, not a traceback
        print(f"error: cannot listen on {host}:{port}: {err.strerror or err}", file=sys.stderr)
        return 2
    finally:
        loop.close()
    return 0

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

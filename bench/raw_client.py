"""A raw asyncio streaming client: the yardstick for what reading on one event loop costs.

One ``asyncio.Protocol`` per keep-alive connection, the request's bytes built before the run,
one ``transport.write`` per request with its send stamp right before it, and per read only
``(perf_counter(), bytes)`` appended in ``data_received``; a response ends at the chunked
terminator. Everything else (dechunking, finding the first token and the response id)
happens after the run. No retries, no limits, no self-check: it measures the floor this
machine puts under any client, not a product. Used by ``bench/client_scale.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Optional

ID = re.compile(rb'"id":\s*"([^"]+)"')
TEXT = re.compile(rb'"text":\s*"[^"]')
#: A response not ended by then is given up (its connection closed).
EXCHANGE_TIMEOUT_S = 30.0


@dataclass
class Exchange:
    scheduled_at: float
    sent_at: float = 0.0
    reads: list[tuple[float, bytes]] = field(default_factory=list)
    end_at: float = 0.0

    def first_token(self) -> tuple[Optional[str], Optional[float]]:
        """(response id, read time of the first read holding generated text)."""
        rid = None
        for t, data in self.reads:
            if rid is None and (m := ID.search(data)):
                rid = m.group(1).decode()
            if TEXT.search(data):
                if rid is None and (m := ID.search(data)):
                    rid = m.group(1).decode()
                return rid, t
        return rid, None

    def chunks(self) -> int:
        return sum(d.count(b"data: {") for _, d in self.reads)


class Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.ex: Optional[Exchange] = None
        self.done: Optional[asyncio.Future[None]] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        ex = self.ex
        if ex is None:
            return
        ex.reads.append((time.perf_counter(), data))
        tail = data if len(data) >= 5 or len(ex.reads) < 2 else ex.reads[-2][1][-5:] + data
        if tail.endswith(b"0\r\n\r\n"):  # the chunked terminator, even split over two reads
            ex.end_at = ex.reads[-1][0]
            self.ex = None
            if self.done is not None and not self.done.done():
                self.done.set_result(None)

    async def exchange(self, request: bytes, ex: Exchange) -> Exchange:
        self.ex, self.done = ex, asyncio.get_running_loop().create_future()
        ex.sent_at = time.perf_counter()
        assert self.transport is not None
        self.transport.write(request)
        try:
            await asyncio.wait_for(self.done, EXCHANGE_TIMEOUT_S)
        except asyncio.TimeoutError:  # counted as a request without a first token, never a hang
            self.ex = None
            self.transport.close()
        return ex


def request_bytes(host: str, port: int, model: str, max_tokens: int, prompt: str = "x " * 16) -> bytes:
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
                       "ignore_eos": True, "min_tokens": max_tokens}).encode()
    return (f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def _connect(host: str, port: int) -> Conn:
    _, proto = await asyncio.get_running_loop().create_connection(Conn, host, port)
    return proto


async def closed_loop(host: str, port: int, streams: int, requests: int, max_tokens: int) -> list[Exchange]:
    """``streams`` users, each sending its next request when its last one ended."""
    conns = await asyncio.gather(*(_connect(host, port) for _ in range(streams)))
    req = request_bytes(host, port, "ref-model", max_tokens)
    left = [requests]
    out: list[Exchange] = []

    async def user(c: Conn) -> None:
        while left[0] > 0:
            left[0] -= 1
            out.append(await c.exchange(req, Exchange(time.perf_counter())))

    await asyncio.gather(*(user(c) for c in conns))
    for c in conns:
        assert c.transport is not None
        c.transport.close()
    return out


async def open_loop(host: str, port: int, offsets: list[float], max_tokens: int, warm: int = 64) -> list[Exchange]:
    """One request at each offset (seconds from the start), on idle connections (new ones on demand)."""
    idle = list(await asyncio.gather(*(_connect(host, port) for _ in range(warm))))
    req = request_bytes(host, port, "ref-model", max_tokens)
    out: list[Exchange] = []
    tasks = []
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter() + 0.05

    async def one(at: float) -> None:
        c = idle.pop() if idle else await _connect(host, port)
        out.append(await c.exchange(req, Exchange(at)))
        if c.transport is not None and not c.transport.is_closing():
            idle.append(c)

    for off in offsets:
        at = t0 + off
        delay = at - time.perf_counter()
        if delay > 0:  # no spinning: its CPU per request stays the work's own
            await asyncio.sleep(delay)
        tasks.append(loop.create_task(one(at)))
    await asyncio.gather(*tasks)
    for c in idle:
        if c.transport is not None:
            c.transport.close()
    return out

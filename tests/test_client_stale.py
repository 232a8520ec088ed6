"""A keep-alive connection the server closed while idle is retried on a fresh one."""

from __future__ import annotations

import asyncio
import json
from time import perf_counter

from pytest_goodput.load.client import OpenAIClient, run
from pytest_goodput.measure.exchange import RequestPlan
from pytest_goodput.measure.record import to_record

EVENTS = [
    {"id": "cmpl-1", "choices": [{"index": 0, "text": "hi"}]},
    {"id": "cmpl-1", "choices": [{"index": 0, "text": " there", "finish_reason": "length"}],
     "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
]
BODY = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in EVENTS) + b"data: [DONE]\n\n"


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, served: list) -> None:
    """Answers the first request on every connection, then closes it on the next one."""
    first = True
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        if not first:  # the idle-close race: the request is read but never answered
            writer.close()
            return
        first = False
        served.append(1)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
        await writer.drain()


def test_stale_keepalive_connection_is_retried():
    async def main():
        served: list = []
        server = await asyncio.start_server(lambda r, w: _serve(r, w, served), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            async with OpenAIClient(f"http://127.0.0.1:{port}", "m", max_connections=1) as client:
                exchanges = []
                for i in range(3):
                    exchanges.append(await client.send(RequestPlan(i, "p", 1, 2, perf_counter())))
        return served, exchanges

    served, exchanges = run(main())
    records = [to_record(ex, stream=True, api="completions", min_output_tokens=2) for ex in exchanges]
    assert [r.ok for r in records] == [True, True, True], [r.error_detail for r in records]
    assert len(served) == 3 and all(r.output_tokens == 2 for r in records)


def test_llamacpp_style_closed_connection_counts_as_stale():
    """llama.cpp closes the connection after each stream while announcing keep-alive: the
    next write fails with errno None, caused by a ConnectionResetError; it is resent."""
    import aiohttp

    from pytest_goodput.load.client import OpenAIClient

    exc = aiohttp.ClientOSError(None, "Can not write request body")
    exc.__cause__ = aiohttp.ClientConnectionResetError("Cannot write to closing transport")
    assert OpenAIClient._stale(exc)
    assert not OpenAIClient._stale(aiohttp.ClientOSError(None, "other"))

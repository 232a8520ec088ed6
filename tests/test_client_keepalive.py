"""Connection reuse is learned: a server that closes each connection after its response gets a
new connection per request (no request raced against the close), one that keeps them alive
gets its connections reused.

llama.cpp's server is of the first kind for streams: it announces keep-alive, then ends the
connection after every stream. A request written to such a connection as the close is on
its way is lost, and the client cannot tell it from one the server read and dropped.
"""

from __future__ import annotations

import asyncio
import json
from time import perf_counter

from refserver import read_request

from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.client.http import OpenAIClient
from pytest_goodput.measure.records.exchange import RequestPlan
from pytest_goodput.measure.records.record import to_record

EVENTS = [
    {"id": "cmpl-1", "choices": [{"index": 0, "text": "hi"}]},
    {"id": "cmpl-1", "choices": [{"index": 0, "text": " there", "finish_reason": "length"}],
     "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
]
BODY = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in EVENTS) + b"data: [DONE]\n\n"
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nKeep-Alive: timeout=5, max=100\r\n"
            b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)


def _drive(close_after_response: bool, users: int, per_user: int) -> tuple[list, dict]:
    """``users`` closed-loop users send ``per_user`` requests each; returns records and counts."""
    counts = {"connections": 0, "requests": 0, "probes": 0}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts["connections"] += 1
        while method := await read_request(reader):
            counts["requests" if method == b"POST" else "probes"] += 1
            writer.write(RESPONSE)
            await writer.drain()
            if close_after_response:  # announced keep-alive, closes anyway
                break
        writer.close()

    async def main() -> list:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            async with OpenAIClient(f"http://127.0.0.1:{port}", "m", max_connections=users) as client:
                async def user(u: int) -> list:
                    return [await client.send(RequestPlan(u * per_user + i, "p", 1, 2, perf_counter()))
                            for i in range(per_user)]
                done = await asyncio.gather(*(user(u) for u in range(users)))
                reuses = client.reuses_connections
        counts["reuses"] = reuses
        return [ex for exs in done for ex in exs]

    exchanges = run(main())
    records = [to_record(ex, stream=True, api="completions", min_output_tokens=2) for ex in exchanges]
    return records, counts


def test_server_closing_after_each_response_gets_a_new_connection_per_request() -> None:
    records, counts = _drive(close_after_response=True, users=4, per_user=15)
    failed = [(r.error_kind, r.error_detail) for r in records if not r.ok]
    assert failed == [] and len(records) == 60
    assert sum(r.retries for r in records) == 0  # no request was ever written to a closing connection
    assert counts["requests"] == counts["connections"] == 60
    assert counts["reuses"] is False


def test_server_keeping_connections_alive_has_them_reused() -> None:
    records, counts = _drive(close_after_response=False, users=2, per_user=10)
    assert all(r.ok for r in records) and len(records) == 20
    assert counts["requests"] == 20 and counts["connections"] == 2
    assert counts["reuses"] is True and counts["probes"] == 1  # learned from one GET on a used connection

"""A kept-alive connection the server drops after reading a request: a failure, not a retry.

(A connection the server had closed *before* the request was written is resent on a fresh
one: ``test_faults_connection.py``.)"""

from __future__ import annotations

import asyncio
import json
from time import perf_counter

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


def test_request_read_then_dropped_on_a_kept_alive_connection_fails_and_is_not_resent():
    """The server reads the second request on a connection and closes it without answering.
    That request reached the server: resending it would hide the loss (and re-stamp its send
    time), so it is a transport failure. The third request opens a new connection."""
    async def main():
        served: list = []
        server = await asyncio.start_server(lambda r, w: _serve(r, w, served), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            async with OpenAIClient(f"http://127.0.0.1:{port}", "m", max_connections=1) as client:
                client._keep_alive.known = True  # learned already (a probe would meet the drop)
                exchanges = []
                for i in range(3):
                    exchanges.append(await client.send(RequestPlan(i, "p", 1, 2, perf_counter())))
        return served, exchanges

    served, exchanges = run(main())
    records = [to_record(ex, stream=True, api="completions", min_output_tokens=2) for ex in exchanges]
    assert [r.ok for r in records] == [True, False, True], [r.error_detail for r in records]
    assert records[1].error_kind == "transport" and records[1].sent_at is not None
    assert len(served) == 2 and [r.retries for r in records] == [0, 0, 0]

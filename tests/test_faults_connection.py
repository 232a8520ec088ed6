"""Connection reuse against servers that close or drop: resend only what never left the client."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from faultserver import serve_in_thread  # noqa: E402

from pytest_goodput.load.client.event_loop import run  # noqa: E402
from pytest_goodput.load.client.http import OpenAIClient  # noqa: E402
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan  # noqa: E402
from pytest_goodput.measure.records.record import to_record  # noqa: E402


def plan(i: int) -> RequestPlan:
    return RequestPlan(i, "p", 1, 3, time.perf_counter())


def send_sequentially(url: str, n: int, **kw: Any) -> list[RawExchange]:
    async def go() -> list[RawExchange]:
        async with OpenAIClient(url, "fault-model", **kw) as c:
            return [await c.send(plan(i)) for i in range(n)]

    return run(go())


def records(exchanges: list[RawExchange]) -> list[Any]:
    return [to_record(ex, stream=True, api="completions", min_output_tokens=3) for ex in exchanges]


def test_a_request_the_server_read_and_dropped_is_a_transport_failure_not_resent():
    """An engine that drops one request in three after reading it: one in three fails."""
    with serve_in_thread(drop_every=3) as srv:
        exs = send_sequentially(srv.url, 9, max_connections=1, timeout_s=10)
        dropped = srv.dropped
    recs = records(exs)
    assert [r.ok for r in recs] == [True, True, False] * 3, [r.error_detail for r in recs]
    assert {r.error_kind for r in recs if not r.ok} == {"transport"}
    assert dropped == 3 and all(ex.retries == 0 for ex in exs)


def test_connection_close_is_honoured():
    """The server says "Connection: close" and then reads nothing more on that connection:
    reusing it would hang until the timeout."""
    with serve_in_thread(connection_close=True) as srv:
        exs = send_sequentially(srv.url, 3, max_connections=1, timeout_s=2)
        connections = srv.connections
    recs = records(exs)
    assert all(r.ok for r in recs), [r.error_detail for r in recs]
    assert connections == 3 and all(r.retries == 0 for r in recs)


def test_write_on_a_connection_the_server_closed_is_resent_once_and_counted(monkeypatch):
    """llama.cpp's case: keep-alive announced, connection closed after the stream; the next
    request's write fails ("Can not write request body"). It never reached the server: it is
    sent again on a fresh connection, and the retry is counted, not failed.

    To make the race certain, a hook holds each reused connection, once acquired, until the
    client has seen the server close it; the write then meets a closed transport. (Left to
    itself the client learns from the first close not to reuse connections to this server,
    ``test_client_keepalive.py``; that learning is switched off here.)
    """
    async def trust_keep_alive(self: OpenAIClient) -> None:
        return None

    monkeypatch.setattr(OpenAIClient, "_learn_keep_alive", trust_keep_alive)
    monkeypatch.setattr(OpenAIClient, "_server_closes", lambda self: None)

    async def wait_for_close(session: Any, ctx: Any, params: Any) -> None:
        for _ in range(500):  # bounded: 5 s
            if not any(p.is_connected() for p in session.connector._acquired):
                return
            await asyncio.sleep(0.01)

    class HeldTraceConfig(aiohttp.TraceConfig):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            self.on_connection_reuseconn.append(wait_for_close)

    monkeypatch.setattr(aiohttp, "TraceConfig", HeldTraceConfig)
    with serve_in_thread(close_after=True) as srv:
        exs = send_sequentially(srv.url, 4, max_connections=1, timeout_s=10)
        completions = srv.completions
    recs = records(exs)
    assert all(r.ok for r in recs), [r.error_detail for r in recs]
    # 0 on a new connection; 1 reuses it, finds it closed, goes again on a fresh one; 2 finds
    # the pool empty and connects; 3 reuses that one, like 1
    assert [r.retries for r in recs] == [0, 1, 0, 1]
    assert completions == 4  # each request reached the server exactly once


def written(status: int | None = None, reads: list | None = None, sent: bool = True) -> RawExchange:
    return RawExchange(plan(0), 1.0 if sent else None, None, status, reads or [])


@pytest.mark.parametrize(
    ("exc", "unsent"),
    [
        (aiohttp.ClientOSError(None, "Can not write request body for http://h/v1/completions"), True),
        (aiohttp.ClientConnectionError("Failed to send bytes into the underlying connection x"), True),
        (aiohttp.ServerDisconnectedError(), False),  # written, then dropped: the server may have read it
        (aiohttp.ClientOSError(104, "Connection reset by peer"), False),
        (aiohttp.ClientPayloadError("Response payload is not completed"), False),
    ],
)
def test_after_the_write_only_a_failed_write_counts_as_unsent(exc, unsent):
    assert OpenAIClient._unsent(exc, written()) is unsent


def test_write_failure_caused_by_a_closing_transport_is_unsent():
    exc = aiohttp.ClientOSError(None, "other words")
    exc.__cause__ = ConnectionResetError("Cannot write to closing transport")
    assert OpenAIClient._unsent(exc, written())


def test_a_connection_found_closed_before_the_write_is_unsent_but_not_after_a_read():
    assert OpenAIClient._unsent(aiohttp.ServerDisconnectedError(), written(sent=False))
    assert not OpenAIClient._unsent(aiohttp.ServerDisconnectedError(), written(sent=False, status=200))
    assert not OpenAIClient._unsent(aiohttp.ServerDisconnectedError(), written(sent=False, reads=[(1.0, b"x")]))
    refused = aiohttp.ClientConnectorError(None, ConnectionRefusedError(111, "refused"))
    assert not OpenAIClient._unsent(refused, written(sent=False))  # a fresh connect fails alike

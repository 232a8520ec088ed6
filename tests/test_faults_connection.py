"""Connection reuse against servers that close or drop: resend only what never left the client."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from faultserver import serve_in_thread  # noqa: E402

from pytest_goodput.load.client.event_loop import run  # noqa: E402
from pytest_goodput.load.client.connection import RequestNotWritten  # noqa: E402
from pytest_goodput.load.client.http import OpenAIClient  # noqa: E402
from pytest_goodput.load.client.connection_pool import ConnectError, ConnectTimeout, Pool  # noqa: E402
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
    request meets a connection the server has ended. It never reached the server: it is sent
    again on a fresh connection, and the retry is counted, not failed.

    To make the race certain, the pool here hands out a pooled connection without looking
    whether the server ended it (as when the close arrives just after it was taken), and each
    request after the first is due 0.2 s later, so the close has arrived before its write.
    (Left to itself the client learns from the first close not to reuse connections to this
    server, ``test_client_keepalive.py``; that learning is switched off here.)
    """
    def take_unchecked(self: Pool) -> Any:
        if not self.idle:
            return None
        conn = self.idle.pop()
        conn.idle = False
        return conn

    def release_unchecked(self: Pool, conn: Any, reuse: bool) -> None:
        if reuse:
            conn.idle = True
            self.idle.append(conn)
        else:
            self._close(conn)

    monkeypatch.setattr(OpenAIClient, "_server_closes", lambda self: None)
    monkeypatch.setattr(Pool, "take_idle", take_unchecked)
    monkeypatch.setattr(Pool, "release", release_unchecked)
    monkeypatch.setattr(Pool, "lost", lambda self, conn: None)

    async def go(url: str) -> list[RawExchange]:
        async with OpenAIClient(url, "fault-model", max_connections=1, timeout_s=10) as c:
            c._keep_alive.known = True  # as if learned
            return [await c.send(RequestPlan(i, "p", 1, 3, time.perf_counter() + (0.2 if i else 0.0)))
                    for i in range(4)]

    with serve_in_thread(close_after=True) as srv:
        exs = run(go(srv.url))
        completions = srv.completions
    recs = records(exs)
    assert all(r.ok for r in recs), [r.error_detail for r in recs]
    # 0 on a new connection; 1 reuses it, finds it closed, goes again on a fresh one (not
    # pooled after); 2 finds the pool empty and connects; 3 reuses that one, like 1
    assert [r.retries for r in recs] == [0, 1, 0, 1]
    assert completions == 4  # each request reached the server exactly once


def written(status: int | None = None, reads: list | None = None, sent: bool = True) -> RawExchange:
    return RawExchange(plan(0), 1.0 if sent else None, None, status, reads or [])


@pytest.mark.parametrize(
    ("exc", "unsent"),
    [
        (RequestNotWritten("the server closed the connection before the request was written"), True),
        (ConnectionError("server disconnected"), False),  # written, then dropped: the server may have read it
        (ConnectionResetError(104, "Connection reset by peer"), False),
        (ConnectError("cannot connect to 127.0.0.1:1: ConnectionRefusedError"), False),  # a fresh one fails alike
        (ConnectTimeout("no connection within 10 s"), False),
    ],
)
def test_only_a_request_the_connection_never_took_counts_as_unsent(exc, unsent):
    assert OpenAIClient._unsent(exc, written(sent=False)) is unsent


def test_a_connection_found_closed_is_unsent_but_not_after_a_status_or_a_read():
    exc = RequestNotWritten("closed")
    assert not OpenAIClient._unsent(exc, written(sent=False, status=200))
    assert not OpenAIClient._unsent(exc, written(sent=False, reads=[(1.0, b"x")]))

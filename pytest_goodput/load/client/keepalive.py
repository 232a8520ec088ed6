"""Whether the server keeps a connection after a streamed response, learned from the first one.

llama.cpp's server ends the connection after every stream though it announces keep-alive; a
request written to such a connection as that close is on the way is lost, and the client
cannot tell it from one the server read and dropped. So a connection is reused only once the
server was seen keeping one: the first connection back after a complete response is probed
with ``GET /models`` (no tokens generated). Answered on that connection, the server keeps
connections after a stream; ended instead (a close, a reset, the probe found the connection
closed), it does not, and every request gets a new connection from then on. Neither within
:data:`CLOSE_WATCH_S`: it keeps them unless a close was seen (the rule before the probe).

Until it is known, the senders of complete responses wait for the verdict before their next
request: one round trip with the probe, where a bare watch for the close cost each of them
up to 50 ms, which a closed loop's users starting together all paid at once as send lag.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from pytest_goodput.load.client.connection import Connection, ResponseTooLarge
from pytest_goodput.load.client.connection_pool import Pool
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan

#: Longest wait after a response for the probe's answer or the server's close.
CLOSE_WATCH_S = 0.05
#: Bytes a bodiless request's answer may hold (a model list).
GET_BYTES = 1 << 20


async def get_on(conn: Connection, head: bytes, timeout_s: float) -> tuple[RawExchange, Optional[BaseException]]:
    """One bodiless request (``head`` whole) on ``conn``: its exchange and what failed it."""
    ex = RawExchange(RequestPlan(-1, "", None, 0, 0.0), None, None, None)
    loop = asyncio.get_running_loop()
    waiter = conn.arm(ex, GET_BYTES)
    timer = loop.call_later(timeout_s, conn.expire)
    try:
        conn.write(head, b"")
        await waiter
    except (OSError, asyncio.TimeoutError, ResponseTooLarge) as exc:
        return ex, exc
    finally:
        timer.cancel()
    return ex, None


class KeepAlive:
    """What is known of the server's keep-alive (``known``: None until learned)."""

    def __init__(self, pool: Pool, probe_head: bytes) -> None:
        self.pool, self.probe_head = pool, probe_head
        self.known: Optional[bool] = None
        self._learned: Optional[asyncio.Future[None]] = None
        self._task: Any = None

    @property
    def reuses(self) -> bool:
        """False once the server was seen closing a connection after a complete response."""
        return self.known is not False

    def server_closes(self) -> None:
        self.known = False
        self._settle()

    def probe(self, conn: Connection) -> bool:
        """Learn from ``conn``, whose response just ended, unless known or being learned;
        True when the probe took ``conn`` (it goes back to the pool after)."""
        if self.known is not None or self._learned is not None:
            return False
        loop = asyncio.get_running_loop()
        self._learned = loop.create_future()
        self._task = loop.create_task(self._probe(conn))
        return True

    async def wait(self) -> None:
        """Return once the server's keep-alive is known (at once when it is)."""
        if self.known is None and self._learned is not None:
            await asyncio.shield(self._learned)  # one sender cancelled leaves the others waiting

    async def _probe(self, conn: Connection) -> None:
        answered = False
        try:
            ex, failure = await get_on(conn, self.probe_head, CLOSE_WATCH_S)
            answered = failure is None and conn.keep
            if self.known is None:
                if answered:
                    self.known = True
                elif isinstance(failure, asyncio.TimeoutError) or failure is None:
                    self.known = not conn.peer_eof  # no answer, or not a reusable one: as seen
                else:
                    self.known = False  # ended instead of answered
        finally:
            self.pool.release(conn, answered and self.known is True)
            self._settle()

    def _settle(self) -> None:
        if self._learned is not None and not self._learned.done():
            self._learned.set_result(None)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._settle()


__all__ = ["CLOSE_WATCH_S", "GET_BYTES", "KeepAlive", "get_on"]

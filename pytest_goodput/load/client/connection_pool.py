"""The client's keep-alive connection pool: at most ``limit`` connections open or opening,
requests queued (first come, first served) for a free one.

A request's wait here is client-side delay: it comes before ``sent_at`` is stamped, so it
shows as send lag, never as latency. A connection handed back goes straight to the first
waiting request (no loop turn in between); one the server ended while idle leaves the pool
at once. Connects are bounded (:data:`CONNECTS_AT_ONCE`) so that a thousand users starting
together do not put a thousand connects into one loop turn. The host is resolved by the
first connect and its address reused (a DNS lookup per connect costs a thread hop).
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl as ssl_module
from collections import deque
from typing import Callable, Optional

from pytest_goodput.load.client.connection import Connection

#: Connects in flight at once; more wait their turn (each still counts against the limit).
CONNECTS_AT_ONCE = 64


class ConnectTimeout(ConnectionError):
    """No connection within the connect timeout."""


class ConnectError(ConnectionError):
    """A connect failed (a fresh connection would fail alike: never a resend)."""


def _expire(fut: "asyncio.Future[Optional[Connection]]") -> None:
    if not fut.done():
        fut.set_exception(asyncio.TimeoutError())


class Pool:
    """Connections to one ``host:port``; ``factory`` makes a connection's protocol."""

    def __init__(self, host: str, port: int, *, limit: int, factory: Callable[[], Connection],
                 connect_timeout_s: float, ssl: Optional[ssl_module.SSLContext] = None) -> None:
        self.host, self.port, self.limit = host, port, limit
        self.factory, self.connect_timeout_s, self.ssl = factory, connect_timeout_s, ssl
        self.idle: list[Connection] = []
        self.open = 0  # connections open or opening: the limit counts these
        self._waiters: deque[asyncio.Future[Optional[Connection]]] = deque()
        self._address = host if _is_ip(host) else None
        self._connects = asyncio.Semaphore(CONNECTS_AT_ONCE)

    def take_idle(self) -> Optional[Connection]:
        """A pooled connection ready for a request, without waiting (None: there is none)."""
        idle = self.idle
        while idle:
            conn = idle.pop()
            if conn.usable:
                conn.idle = False
                return conn
            self._close(conn)
        return None

    async def acquire(self, fresh: bool, deadline: float) -> Connection:
        """A connection (``fresh``: a new one), waiting for a free slot until ``deadline``
        (loop time; then ``asyncio.TimeoutError``)."""
        if not fresh:
            conn = self.take_idle()
            if conn is not None:
                return conn
        elif self.open >= self.limit and self.idle and not self._waiters:
            self._close(self.idle.pop())  # a slot for the fresh connection
        if self.open < self.limit and not self._waiters:
            self.open += 1
            return await self._connect(deadline)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Optional[Connection]] = loop.create_future()
        self._waiters.append(fut)
        timer = loop.call_at(deadline, _expire, fut)
        try:
            got = await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._hand_back(fut.result())
            raise
        finally:
            timer.cancel()
        if got is not None and not fresh and got.usable:
            return got
        if got is not None:
            got.close()  # its slot is this request's
        return await self._connect(deadline)

    def release(self, conn: Connection, reuse: bool) -> None:
        """Give ``conn`` back after its exchange: pooled when ``reuse`` and still usable."""
        if reuse and conn.usable:
            self._hand_back(conn)
        else:
            self._close(conn)

    def lost(self, conn: Connection) -> None:
        """A pooled connection was ended (by the server or by a failure): it leaves the pool."""
        if conn.idle:
            conn.idle = False
            try:
                self.idle.remove(conn)
            except ValueError:  # pragma: no cover - taken in the same turn
                return
            self._free_slot()

    def close_all(self) -> None:
        for conn in self.idle:
            conn.idle = False
            conn.close()
        self.idle.clear()
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.cancel()

    def _hand_back(self, conn: Connection) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(conn)
                return
        conn.idle = True
        self.idle.append(conn)

    def _close(self, conn: Connection) -> None:
        conn.idle = False
        conn.close()
        self._free_slot()

    def _free_slot(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot passes to it
                return
        self.open -= 1

    async def _connect(self, deadline: float) -> Connection:
        """A new connection in a slot already counted; the slot is freed if it fails."""
        loop = asyncio.get_running_loop()
        try:
            budget = min(self.connect_timeout_s, deadline - loop.time())
            async with self._connects:
                host = self._address or self.host
                try:
                    transport, conn = await asyncio.wait_for(loop.create_connection(
                        self.factory, host, self.port, ssl=self.ssl,
                        server_hostname=self.host if self.ssl else None), max(budget, 0.0))
                except asyncio.TimeoutError:
                    if budget < self.connect_timeout_s:
                        raise  # the request's own deadline came first
                    raise ConnectTimeout(f"no connection within {self.connect_timeout_s:g} s") from None
                except OSError as exc:  # refused, unreachable, TLS: the detail names the address
                    raise ConnectError(f"cannot connect to {self.host}:{self.port}: {type(exc).__name__}: {exc}") from exc
            if self._address is None:
                peer = transport.get_extra_info("peername")
                if peer:
                    self._address = str(peer[0])
            return conn
        except BaseException:
            self._free_slot()
            raise


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


__all__ = ["CONNECTS_AT_ONCE", "ConnectError", "ConnectTimeout", "Pool"]

"""One keep-alive HTTP/1.1 connection of the client: the protocol that stamps every read,
parses the response as it arrives and wakes the sender once, when the response ends or fails.

The response is parsed by httptools (llhttp, in C) inside ``data_received``, so the time of
a read is taken when the loop hands the bytes over, not when a reading task next gets its
turn, and no task runs per read: the body's bytes of one read (de-chunked) are kept as one
``(time, bytes)`` on the exchange directly. With many streams a burst of reads would wake
as many tasks one after another; stamping in the task charged that queue to the server.
SSE splitting and JSON decoding happen after the run (``measure/records/record.py``).

``keep_wire`` (packet capture, ``docs/capture.md``): each response's raw bytes are kept in
a :class:`Wire` with the connection's addresses and the bytes it delivered before, begun
when the connection is armed for a request just before its bytes are written (HTTP/1.1
without pipelining, so every byte after it belongs to this response).
"""

from __future__ import annotations

import asyncio
from time import perf_counter
from typing import Any, Callable, Optional

from httptools import HttpParserError, HttpResponseParser

from pytest_goodput.measure.records.exchange import RawExchange, Wire

#: Bytes of an error response (HTTP status >= 400) kept for the record's excerpt.
ERROR_BODY_LIMIT = 64 * 1024
#: Each read of a response counts this much against its byte limit besides its bytes, for its
#: time stamp and bookkeeping.
READ_OVERHEAD = 128
#: Bytes of a body handed to the transport at once; the next piece waits until it drained.
WRITE_PIECE = 256 * 1024


class RequestNotWritten(ConnectionError):
    """The connection was found closed before any byte of the request was written: the server
    cannot have read it, so it may be sent again (``OpenAIClient._unsent``)."""


class ResponseTooLarge(Exception):
    """The response went over its byte limit; reading stopped (a ``malformed_stream``)."""


class Connection(asyncio.Protocol):
    """One connection: at most one exchange at a time (``arm``), its waiter woken once."""

    def __init__(self, on_server_close: Callable[[], None], on_lost: Callable[["Connection"], None],
                 keep_wire: bool = False, secret: Optional[bytes] = None) -> None:
        self.transport: Any = None
        self.parser = HttpResponseParser(self)
        self._feed = self.parser.feed_data
        self.read_at = 0.0  # perf_counter of the last read
        self.peer_eof = False  # the server ended the connection
        self.lost = False
        self.idle = False  # in the pool after a complete response
        self.keep = False  # the last response left the connection reusable
        self.requests = 0  # requests it carried
        self._on_server_close, self._on_lost = on_server_close, on_lost
        self._secret = secret
        self._ex: Optional[RawExchange] = None
        self._waiter: Optional[asyncio.Future[None]] = None
        self._pieces: list[bytes] = []
        self._budget = 0
        self._limit = 0
        self._status = 0
        self._framed = False  # Content-Length or chunked: the body does not end at the close
        self._complete = False
        self._reusable = False
        self._drained: Optional[asyncio.Future[None]] = None
        self.keep_wire = keep_wire
        self.wire: Optional[Wire] = None
        self.delivered = 0
        self.ends: tuple[tuple[str, int], tuple[str, int]] = (("", 0), ("", 0))

    # -- the transport's callbacks ------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self.keep_wire:
            local, remote = transport.get_extra_info("sockname"), transport.get_extra_info("peername")
            if local and remote:
                self.ends = ((str(local[0]), int(local[1])), (str(remote[0]), int(remote[1])))

    def data_received(self, data: bytes, clock: Callable[[], float] = perf_counter) -> None:
        t = self.read_at = clock()
        if self.keep_wire:
            self.delivered += len(data)
            if self.wire is not None:
                self.wire.chunks.append(data)
        ex = self._ex
        if ex is None:  # bytes nobody asked for: the connection cannot be trusted any more
            self.keep = False
            self.transport.close()
            return
        pieces = self._pieces
        try:
            self._feed(data)
        except HttpParserError as exc:
            pieces.clear()
            return self._fail(ConnectionError(f"malformed HTTP response: {exc}"))
        if pieces:
            chunk = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            pieces.clear()
            if self._status >= 400:
                return self._error_read(t, chunk, ex)
            ex.reads.append((t, chunk))
            self._budget -= len(chunk) + READ_OVERHEAD
            if self._budget < 0:
                return self._fail(ResponseTooLarge(
                    f"response over {self._limit} bytes for {ex.plan.max_tokens} requested tokens: reading stopped"))
        if self._complete:
            self._finish(t if ex.reads and self._status < 400 else perf_counter())

    def eof_received(self) -> Optional[bool]:
        self.peer_eof = True
        if self.idle:
            self._on_server_close()
        return False

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.lost = True
        self.keep = False
        if self._ex is not None:
            if exc is None and self._status and not self._framed and not self._complete:
                self._finish(perf_counter())  # a body delimited by the connection's close
            else:
                detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
                self._fail(ConnectionError(f"server disconnected{detail}"))
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._on_lost(self)

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # -- httptools' callbacks ---------------------------------------------------------

    def on_header(self, name: bytes, _value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_headers_complete(self) -> None:
        status = self._status = self.parser.get_status_code()
        ex = self._ex
        if ex is not None:
            ex.status = status
            if status >= 400:
                self._budget = ERROR_BODY_LIMIT
            elif self.wire is not None:
                ex.wire = self.wire

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)

    def on_message_complete(self) -> None:
        self._complete = True
        self._reusable = self.parser.should_keep_alive()  # llhttp forgets it after this call

    # -- the sender's side --------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """Open, and the server has not ended it."""
        return not (self.lost or self.peer_eof or self.transport is None or self.transport.is_closing())

    def arm(self, ex: RawExchange, limit: int) -> "asyncio.Future[None]":
        """Make ``ex`` the connection's exchange; the future ends with its response."""
        self._ex, self._limit, self._budget = ex, limit, limit
        self._status, self._framed, self._complete, self.keep = 0, False, False, False
        self.idle = False
        self.requests += 1
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        if self.keep_wire:
            self.wire = Wire(self.ends[0], self.ends[1], self.delivered, armed_at=perf_counter())
        return waiter

    def write(self, head: bytes, body: bytes) -> Optional[Any]:
        """Stamp ``sent_at`` and write the request; a coroutine to await when the body is
        larger than :data:`WRITE_PIECE` (the rest is written as the transport drains).

        Raises :class:`RequestNotWritten` when the server had ended the connection first."""
        ex = self._ex
        if ex is None or not self.usable:
            self._ex = self._waiter = None
            raise RequestNotWritten("the server closed the connection before the request was written")
        if len(body) <= WRITE_PIECE:
            data = head + body
            if ex.sent_at is None:
                ex.sent_at = perf_counter()
            self.transport.write(data)
            return None
        if ex.sent_at is None:
            ex.sent_at = perf_counter()
        self.transport.write(head)
        return self._write_pieces(memoryview(body))

    async def _write_pieces(self, view: memoryview) -> None:
        for at in range(0, len(view), WRITE_PIECE):
            if self._drained is not None:
                await self._drained
            if self.lost:
                raise ConnectionError("server disconnected while the request was written")
            self.transport.write(view[at:at + WRITE_PIECE])

    def disarm(self) -> None:
        """The sender gave up on the exchange (cancelled, or its write failed): nothing more
        is kept or reported for it."""
        waiter = self._waiter
        self._ex = self._waiter = None
        self.wire = None
        if waiter is not None and not waiter.done():
            waiter.cancel()

    def expire(self) -> None:
        """The exchange ran out of time: fail it and close the connection."""
        self._fail(asyncio.TimeoutError())

    def close(self) -> None:
        self.keep = False
        if self.transport is not None:
            self.transport.close()

    def _error_read(self, t: float, chunk: bytes, ex: RawExchange) -> None:
        if self._secret:
            chunk = chunk.replace(self._secret, b"***")
        ex.reads.append((t, chunk))
        self._budget -= len(chunk)
        if self._budget <= 0 or self._complete:  # the excerpt is enough: reading stops
            self._finish(perf_counter(), keep=None if self._complete else False)

    def _finish(self, end_at: float, keep: Optional[bool] = None) -> None:
        ex, waiter = self._ex, self._waiter
        self._ex = self._waiter = None
        self.wire = None
        self.keep = (self._complete and self._reusable and not self.lost) if keep is None else keep
        if ex is not None:
            ex.end_at = end_at
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        waiter = self._waiter
        self._ex = self._waiter = None
        self.wire = None
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


__all__ = ["ERROR_BODY_LIMIT", "READ_OVERHEAD", "WRITE_PIECE", "Connection", "RequestNotWritten",
           "ResponseTooLarge"]

"""The client's connections: when each read arrived, when the request was written, and
whether the server closes connections after a response.

These hook into aiohttp (its connection protocol and its trace hooks), so they live apart
from the request logic in :mod:`pytest_goodput.load.client.http`.
"""

from __future__ import annotations

import asyncio
import functools
from time import perf_counter
from typing import Any, Callable, Optional

from pytest_goodput.measure.records.exchange import Wire

try:  # aiohttp internals; without them reads are stamped in the reading task instead
    from aiohttp.client_proto import ResponseHandler
except ImportError:  # pragma: no cover
    ResponseHandler = None


def install_protocol(
    connector: Any, loop: asyncio.AbstractEventLoop, on_closed_after_response: Callable[[], None],
    keep_wire: bool = False,
) -> None:
    """Make ``connector`` build connections whose protocol stamps every socket read.

    The stamp is taken in ``data_received`` — when the loop hands the bytes over — not
    when the reading task next runs. With many streams a burst of reads wakes many tasks
    whose turns come one after another; stamping in the task would charge that queue to
    the server. Falls back silently (reads stamped in the task) if aiohttp's internals
    differ from the version this was written against.

    The protocol also calls ``on_closed_after_response`` when the server ends a connection
    that has gone back to the pool after a response (``should_close`` is read by the
    connector exactly then), which ``OpenAIClient`` uses to stop reusing connections to a
    server that closes them after a response.

    ``keep_wire`` (packet capture, ``docs/capture.md``): each response's raw bytes are kept
    in a :class:`Wire` with the connection's addresses and the bytes it delivered before,
    begun when aiohttp sets the connection up for a request (``set_response_params``, just
    before the request is written; HTTP/1.1 without pipelining, so every byte after it
    belongs to this response).
    """
    if ResponseHandler is None:  # pragma: no cover
        return
    if not hasattr(connector, "_factory"):  # pragma: no cover
        return

    class StampedResponseHandler(ResponseHandler):  # type: ignore[misc,valid-type]
        read_at = 0.0
        released = False  # went back to the pool after a response
        peer_eof = False  # the server ended the connection

        def data_received(self, data: bytes) -> None:
            self.read_at = perf_counter()
            super().data_received(data)

        def eof_received(self) -> None:
            self.peer_eof = True
            if self.released:
                on_closed_after_response()
            super().eof_received()

        @property
        def should_close(self) -> bool:
            # read by the connector exactly when it takes the connection back after a response
            self.released = True
            if self.peer_eof:
                on_closed_after_response()
            return ResponseHandler.should_close.fget(self)  # type: ignore[attr-defined,no-any-return]

    class WireResponseHandler(StampedResponseHandler):
        wire: Optional[Wire] = None
        delivered = 0
        ends: tuple[tuple[str, int], tuple[str, int]] = (("", 0), ("", 0))

        def connection_made(self, transport: Any) -> None:
            local, remote = transport.get_extra_info("sockname"), transport.get_extra_info("peername")
            if local and remote:
                self.ends = ((str(local[0]), int(local[1])), (str(remote[0]), int(remote[1])))
            super().connection_made(transport)

        def set_response_params(self, *args: Any, **kwargs: Any) -> None:
            self.wire = Wire(self.ends[0], self.ends[1], self.delivered, armed_at=perf_counter())
            super().set_response_params(*args, **kwargs)

        def data_received(self, data: bytes) -> None:
            self.delivered += len(data)
            if self.wire is not None:
                self.wire.chunks.append(data)
            super().data_received(data)

    connector._factory = functools.partial(
        WireResponseHandler if keep_wire else StampedResponseHandler, loop=loop)


async def stamp_sent(_session: Any, ctx: Any, _params: Any) -> None:
    """aiohttp trace hook, fired just before the request body is written to the socket."""
    ex = ctx.trace_request_ctx
    if ex is not None and ex.sent_at is None:
        ex.sent_at = perf_counter()


__all__ = ["install_protocol", "stamp_sent"]

"""A TCP proxy on 127.0.0.1 that holds every client-to-server read for ``delay_s`` (tests only).

Plants a client/network-side delay in front of an engine: each request reaches the engine
``delay_s`` later than the client sent it, so our TTFT grows by about that much while the
engine's own clock (its histograms, its per-request metrics) does not move.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Iterator

from refserver import run_in_thread


class DelayProxy:
    """Forwards 127.0.0.1:<port> to ``target`` (host, port); upstream data waits ``delay_s``."""

    def __init__(self, target: tuple[str, int], delay_s: float) -> None:
        self.target, self.delay_s = target, delay_s
        self.port = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, delay_s: float) -> None:
        try:
            while data := await src.read(65536):
                if delay_s:
                    await asyncio.sleep(delay_s)
                dst.write(data)
                await dst.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            dst.close()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_w, self.delay_s), self._pipe(up_r, writer, 0.0))


@contextlib.contextmanager
def delay_proxy(base_url: str, delay_s: float) -> Iterator[str]:
    """``base_url`` (``http://127.0.0.1:<port>/v1``) behind the proxy: the proxy's base URL."""
    host_port = base_url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    with run_in_thread(DelayProxy((host, int(port)), delay_s), "delay proxy") as proxy:
        yield f"http://127.0.0.1:{proxy.port}/v1"

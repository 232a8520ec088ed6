"""A misbehaving OpenAI-compatible server for the client's fault tests (127.0.0.1 only).

Raw asyncio streams, so each fault is exactly what the wire shows. Options are set per
server (``FaultServer(**opts)``) and may be overridden per request with a ``"fault"``
object in the JSON body (the client's ``extra_body``); see ``DEFAULTS``. Every wait is
bounded (``HOLD_S``), and ``serve_in_thread`` stops the server when its block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Iterator

from refserver import run_in_thread

HOLD_S = 5.0  # longest the server waits for a request or holds a connection open

DEFAULTS: dict[str, Any] = {
    "chunks": 3,  # content chunks streamed
    "chunk_text": "tok",  # text of each content chunk
    "usage": "chunks",  # usage.completion_tokens: "chunks" (= chunks), None (no usage), or any JSON value
    "status": 200,  # >= 400: answer at once with this status and an OpenAI error body
    "drop_every": 0,  # k > 0: read every k-th completion request, then close without answering
    "close_after": False,  # close the connection right after each response (keep-alive announced)
    "connection_close": False,  # answer with "Connection: close", then read nothing more
    "flood_bytes": 0,  # > 0: stream content events until this many bytes (or the client leaves)
    "line_bytes": 0,  # > 0: one "data:" line this long, then a normal stream
    "raw_event": None,  # a payload sent as one extra event before the content
    "reset_mid_stream": False,  # send the head and one chunk, then drop the connection
    "stall_s": 0.0,  # > 0: send the head and one chunk, then stall this long (at most HOLD_S)
    "no_done": False,  # end the stream without "data: [DONE]" (Content-Length still correct)
    "split_bytes": 0,  # > 0: write the stream in pieces this small, each on its own
    "html": False,  # answer 200 with an HTML page (a proxy's login or error page)
    "half_headers": False,  # send part of the response head, then close
}


class FaultServer:
    """State and counters of one fault server."""

    def __init__(self, **opts: Any) -> None:
        unknown = set(opts) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown faultserver options: {sorted(unknown)}")
        self.opts = {**DEFAULTS, **opts}
        self.port = 0
        self.connections = 0  # TCP connections accepted
        self.completions = 0  # completion requests read in full
        self.dropped = 0  # of which read and then dropped without an answer
        self.closed_after = 0  # connections closed right after a response
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection is to be closed."""
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HOLD_S)
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        length = next((int(x.split(":", 1)[1]) for x in lines if x.lower().startswith("content-length")), 0)
        body = await asyncio.wait_for(reader.readexactly(length), HOLD_S) if length else b""
        if path.endswith("/models"):
            data = json.dumps({"object": "list", "data": [{"id": "fault-model"}]}).encode()
            writer.write(_head(200, "application/json", len(data), close=False) + data)
            await writer.drain()
            return True
        self.completions += 1
        opts = {**self.opts, **(json.loads(body or b"{}").get("fault") or {})}
        if opts["drop_every"] and self.completions % opts["drop_every"] == 0:
            self.dropped += 1  # the request was read: dropping it is the server's failure
            return False
        if opts["status"] >= 400:
            data = json.dumps({"error": {"message": "fault server error", "code": opts["status"]}}).encode()
            writer.write(_head(opts["status"], "application/json", len(data), close=False) + data)
            await writer.drain()
            return True
        if opts["flood_bytes"]:
            await _flood(writer, opts["flood_bytes"])
            return False
        if opts["half_headers"]:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/ev")
            await writer.drain()
            return False
        if opts["html"]:
            page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
            writer.write(_head(200, "text/html", len(page), close=False) + page)
            await writer.drain()
            return True
        data = _stream(opts)
        head = _head(200, "text/event-stream", len(data), close=opts["connection_close"])
        if opts["reset_mid_stream"] or opts["stall_s"]:
            first = data.index(b"\n\n") + 2
            writer.write(head + data[:first])
            await writer.drain()
            if opts["reset_mid_stream"]:
                writer.transport.abort()  # RST, not a clean close
                return False
            await asyncio.sleep(min(float(opts["stall_s"]), HOLD_S))
            return False
        if opts["split_bytes"]:
            writer.write(head)
            step = int(opts["split_bytes"])
            for i in range(0, len(data), step):
                writer.write(data[i:i + step])
                await writer.drain()
                await asyncio.sleep(0)
        else:
            writer.write(head + data)
        await writer.drain()
        if opts["connection_close"]:
            await asyncio.sleep(HOLD_S)  # keep the socket open, read nothing: reuse would hang
            return False
        if opts["close_after"]:
            self.closed_after += 1
            return False
        return True


def _head(status: int, ctype: str, length: int | None, *, close: bool) -> bytes:
    out = [f"HTTP/1.1 {status} X", f"Content-Type: {ctype}",
           "Connection: close" if close else "Connection: keep-alive"]
    if length is not None:
        out.append(f"Content-Length: {length}")
    return ("\r\n".join(out) + "\r\n\r\n").encode()


def _event(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def _chunk(text: str) -> dict:
    return {"id": "cmpl-fault", "choices": [{"index": 0, "text": text}]}


def _stream(opts: dict) -> bytes:
    parts = []
    if opts["line_bytes"]:
        parts.append(b"data: " + b"x" * opts["line_bytes"] + b"\n\n")
    if opts["raw_event"] is not None:
        parts.append(_event(opts["raw_event"].encode()))
    parts += [_event(_chunk(opts["chunk_text"])) for _ in range(opts["chunks"])]
    usage = opts["chunks"] if opts["usage"] == "chunks" else opts["usage"]
    if usage is not None:
        parts.append(_event({"id": "cmpl-fault", "choices": [],
                             "usage": {"prompt_tokens": 1, "completion_tokens": usage}}))
    if not opts["no_done"]:
        parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


async def _flood(writer: asyncio.StreamWriter, limit: int) -> None:
    """Content events until ``limit`` bytes, the client leaves, or ``HOLD_S`` passes."""
    writer.write(_head(200, "text/event-stream", None, close=True))
    event = _event(_chunk("flood " * 200))
    sent = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HOLD_S
    while sent < limit and loop.time() < deadline:
        writer.write(event * 16)
        sent += 16 * len(event)
        await asyncio.wait_for(writer.drain(), HOLD_S)


@contextlib.contextmanager
def serve_in_thread(**opts: Any) -> Iterator[FaultServer]:
    """Run a :class:`FaultServer` on its own event loop in a daemon thread."""
    with run_in_thread(FaultServer(**opts), "fault server") as srv:
        yield srv

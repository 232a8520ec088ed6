"""A timing-exact OpenAI-compatible reference server for client tests and benchmarks.

Raw asyncio protocol (no framework between the timer and the socket). Per response id it
logs the SHA-256 of the request body (``body_sha256``), the ``perf_counter()`` time the
request was fully read (``read_at``), every write
(``writes``, stamped just before the bytes go to the kernel) and the write that
completed each content chunk (``token_writes``).
``perf_counter`` is CLOCK_MONOTONIC on Linux, so times compare across processes.

Chunk j of a stream is written at the absolute deadline ``read_at + ttft + j * itl``
(never chained sleeps). Defaults can be overridden per request with a ``"refserver"``
object in the JSON body (pass it via the client's ``extra_body``); see ``DEFAULTS``.

Run as a separate process (what the benchmark does)::

    python tests/refserver.py --port 0 --ttft-ms 50 --itl-ms 10   # prints "READY <port>"
    python tests/refserver.py --chunk-tokens 64   # long outputs in few chunks (a fast server)

Control endpoints: ``GET /_log`` (the log as JSON), ``POST /_reset`` (clear it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import itertools
import json
import sys
import threading
import time
from typing import Any, Iterator

perf = time.perf_counter

DEFAULTS: dict[str, Any] = {
    "ttft_ms": 50.0,  # request read -> first content chunk written
    "itl_ms": 10.0,  # interval between content chunks
    "chunk_tokens": 1,  # tokens per content chunk
    "role_first": True,  # chat: role-only chunk written at once, before any content
    "reasoning_tokens": 0,  # chat: this many leading tokens go to delta.reasoning_content
    "newline": "lf",  # "lf" | "crlf" | "cr"
    "comments": False,  # a ": ping" comment line before every event
    "split": False,  # write every event in two halves, split_gap_ms apart
    "split_gap_ms": 2.0,
    "done": True,  # send the final "data: [DONE]"
    "usage": "final",  # "final" (choices: [] chunk) | "in_last" (llama.cpp style) | "none"
    "status": 200,  # >= 400: an OpenAI error body with this status
    "echo_auth": False,  # put the received Authorization header in the error body
    "garbage": None,  # "text": 200 text/html body; "json": 200 non-OpenAI JSON
    "stall_s": 0.0,  # pause after the first content chunk
    "abort_after": None,  # drop the connection after this many content chunks
    # misreporting engines (test_misreporting_engines.py):
    "usage_tokens": None,  # usage.completion_tokens reported instead of the tokens streamed
    "finish_reason": "length",  # the last content chunk's finish_reason
    "end_after": None,  # stop streaming after this many content chunks, as end_how says
    "end_how": "finish",  # "finish": as usual | "close": end the body at once (no usage, no
    # [DONE]) | "error": an error event with "choices": [], then [DONE]
    "blank_first": None,  # a text (" ", "\n") flushed as its own content chunk at once
    "token_text": None,  # every token's text (default " t<i>")
}
_NL = {"lf": "\n", "crlf": "\r\n", "cr": "\r"}


class RefServer:
    """The server state: defaults, model name and the timing log."""

    def __init__(self, *, model: str = "ref-model", **defaults: Any) -> None:
        unknown = set(defaults) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown refserver options: {sorted(unknown)}")
        self.model = model
        self.defaults = {**DEFAULTS, **defaults}
        self.log: dict[str, dict[str, Any]] = {}
        self.port = 0
        self._ids = itertools.count()
        self._server: asyncio.base_events.Server | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Conn(self), host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def next_id(self, chat: bool) -> str:
        return f"{'chatcmpl' if chat else 'cmpl'}-{next(self._ids)}"


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 keep-alive connection; requests are handled one at a time."""

    def __init__(self, server: RefServer) -> None:
        self.srv = server
        self.buf = bytearray()  # appended in place: a 600 kB body in 64 kB reads is not copied per read
        self.head: tuple[int, list[str], dict, int] | None = None  # the pending request's parsed head
        self.busy = False
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.task is not None:
            self.task.cancel()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._next()

    def _parse_head(self) -> tuple[int, list[str], dict, int] | None:
        """The pending request's head, parsed once (not again for each read of its body)."""
        if self.head is None:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return None
            head = self.buf[:head_end].decode("latin-1").split("\r\n")
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            end = head_end + 4 + int(headers.get("content-length", "0"))
            self.head = (head_end, head, headers, end)
        return self.head

    def _next(self) -> None:
        if self.busy:
            return
        parsed = self._parse_head()
        if parsed is None:
            return
        head_end, head, headers, end = parsed
        if len(self.buf) < end:
            return
        read_at = perf()
        body = bytes(self.buf[head_end + 4 : end])
        del self.buf[:end]
        self.head = None
        method, path, _ = head[0].split(" ", 2)
        self.busy = True
        self.task = asyncio.get_running_loop().create_task(self._handle(method, path, headers, body, read_at))

    async def _handle(self, method: str, path: str, headers: dict, body: bytes, read_at: float) -> None:
        try:
            await _route(self, method, path, headers, body, read_at)
        except ConnectionError:
            pass
        finally:
            self.busy = False
            self.task = None
            if self.transport is not None and not self.transport.is_closing():
                self._next()

    def write(self, data: bytes) -> float:
        """Write; return the time stamped just before (a reader can wake before write returns)."""
        assert self.transport is not None
        if self.transport.is_closing():
            raise ConnectionError("client went away")
        t = perf()
        self.transport.write(data)
        return t

    def respond(self, status: int, ctype: str, payload: bytes) -> float:
        reason = {200: "OK", 404: "Not Found"}.get(status, "Error")
        head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(payload)}\r\n\r\n"
        return self.write(head.encode() + payload)


async def _route(
    conn: _Conn, method: str, path: str, headers: dict, body: bytes, read_at: float
) -> float | None:
    srv = conn.srv
    if method == "GET" and path.rstrip("/") == "/v1/models":
        data = {"object": "list", "data": [{"id": srv.model, "object": "model"}]}
        return conn.respond(200, "application/json", json.dumps(data).encode())
    if method == "GET" and path == "/_log":
        return conn.respond(200, "application/json", json.dumps(srv.log).encode())
    if method == "POST" and path == "/_reset":
        srv.log.clear()
        return conn.respond(200, "application/json", b"{}")
    if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
        return conn.respond(404, "application/json", b'{"error":{"message":"not found"}}')
    req = json.loads(body)
    opts = {**srv.defaults, **req.get("refserver", {})}
    chat = path.endswith("chat/completions")
    rid = srv.next_id(chat)
    entry: dict[str, Any] = {"read_at": read_at, "writes": [], "token_writes": [], "auth": headers.get("authorization"),
                             "body_sha256": hashlib.sha256(body).hexdigest()}
    srv.log[rid] = entry
    if opts["status"] >= 400:
        msg = "reference server error" + (f" (auth: {headers.get('authorization')})" if opts["echo_auth"] else "")
        err = {"error": {"message": msg, "type": "server_error", "code": opts["status"]}}
        return conn.respond(opts["status"], "application/json", json.dumps(err).encode())
    if opts["garbage"] == "text":
        return conn.respond(200, "text/html", b"<html><body>502 Bad Gateway from a proxy</body></html>")
    if opts["garbage"] == "json":
        return conn.respond(200, "application/json", b'{"hello": "world"}')
    n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
    gen = _Generation(rid, srv.model, chat, n, opts)
    if req.get("stream"):
        await _stream(conn, gen, opts, entry, read_at)
    else:
        await asyncio.sleep(max(0.0, read_at + gen.chunk_deadline(gen.chunks - 1) - perf()))
        # Logged before the write (microseconds early): a client that reads the log as soon as
        # the body arrives must find the entry complete.
        t = perf()
        entry["writes"].append(t)
        entry["token_writes"].append(t)
        conn.respond(200, "application/json", json.dumps(gen.whole()).encode())


class _Generation:
    """The tokens of one response and how they are grouped into chunks."""

    def __init__(self, rid: str, model: str, chat: bool, n: int, opts: dict) -> None:
        self.rid, self.model, self.chat, self.n, self.opts = rid, model, chat, n, opts
        self.k = max(1, int(opts["chunk_tokens"]))
        self.chunks = (n + self.k - 1) // self.k
        told = n if opts["usage_tokens"] is None else int(opts["usage_tokens"])
        self.usage = {"prompt_tokens": 7, "completion_tokens": told, "total_tokens": told + 7}

    def chunk_deadline(self, j: int) -> float:
        return (self.opts["ttft_ms"] + j * self.opts["itl_ms"]) / 1000.0

    def token_text(self, i: int) -> str:
        return f" t{i}" if self.opts["token_text"] is None else str(self.opts["token_text"])

    def chunk(self, j: int, sent: int | None = None, text: str | None = None) -> dict:
        """Content chunk ``j`` of ``sent`` (default: all); ``text`` instead of its tokens'."""
        ids = range(j * self.k, min(self.n, (j + 1) * self.k))
        text = "".join(self.token_text(i) for i in ids) if text is None else text
        last = j == (self.chunks if sent is None else sent) - 1
        reason = self.opts["finish_reason"] if last else None
        if self.chat:
            reasoning = ids[0] < int(self.opts["reasoning_tokens"])
            delta = {"reasoning_content": text} if reasoning else {"content": text}
            if j == 0 and not self.opts["role_first"]:
                delta["role"] = "assistant"
            choice: dict = {"index": 0, "delta": delta, "finish_reason": reason}
        else:
            choice = {"index": 0, "text": text, "finish_reason": reason}
        out = self.envelope([choice])
        if last and self.opts["usage"] == "in_last":
            out["usage"] = self.usage
        return out

    def envelope(self, choices: list) -> dict:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {"id": self.rid, "object": kind, "created": 0, "model": self.model, "choices": choices}

    def whole(self) -> dict:
        text = "".join(self.token_text(i) for i in range(self.n))
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
        else:
            choice = {"index": 0, "text": text, "finish_reason": "length"}
        out = self.envelope([choice])
        out["object"] = "chat.completion" if self.chat else "text_completion"
        out["usage"] = self.usage
        return out


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """A fake server's read of one request with a Content-Length body: its method (b"": the
    connection ended)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return b""
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    await reader.readexactly(length)
    return head.split(b" ", 1)[0]


def _event(payload: str, opts: dict) -> bytes:
    nl = _NL[opts["newline"]]
    text = (f":ping{nl}" if opts["comments"] else "") + f"data: {payload}{nl}{nl}"
    return text.encode()


def _http_chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _send_event(conn: _Conn, data: bytes, opts: dict, entry: dict) -> float:
    if opts["split"] and len(data) > 1:
        half = len(data) // 2
        entry["writes"].append(conn.write(_http_chunk(data[:half])))
        await asyncio.sleep(opts["split_gap_ms"] / 1000.0)
        data = data[half:]
    t = conn.write(_http_chunk(data))
    entry["writes"].append(t)
    return t


async def _stream(conn: _Conn, gen: _Generation, opts: dict, entry: dict, read_at: float) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
    if gen.chat and opts["role_first"]:
        role = gen.envelope([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        head += _http_chunk(_event(json.dumps(role), opts))
    if opts["blank_first"] is not None:
        blank = gen.chunk(0, text=str(opts["blank_first"]))
        blank["choices"][0]["finish_reason"] = None
        head += _http_chunk(_event(json.dumps(blank), opts))
    entry["writes"].append(conn.write(head))
    sent = gen.chunks if opts["end_after"] is None else min(gen.chunks, int(opts["end_after"]))
    cut = opts["end_how"] != "finish" and sent < gen.chunks
    for j in range(sent):
        await asyncio.sleep(max(0.0, read_at + gen.chunk_deadline(j) - perf()))
        chunk = gen.chunk(j, None if cut else sent)
        t = await _send_event(conn, _event(json.dumps(chunk), opts), opts, entry)
        entry["token_writes"].append(t)
        if opts["abort_after"] is not None and j + 1 >= opts["abort_after"]:
            assert conn.transport is not None
            conn.transport.abort()
            return
        if j == 0 and opts["stall_s"]:
            await asyncio.sleep(opts["stall_s"])
    if cut and opts["end_how"] == "close":
        entry["writes"].append(conn.write(b"0\r\n\r\n"))  # a clean end of the body, nothing more
        return
    if cut:  # "error": the engine gave up mid-stream and said so
        failed = gen.envelope([])
        failed["error"] = {"message": "engine overloaded: request aborted", "type": "server_error"}
        await _send_event(conn, _event(json.dumps(failed), opts), opts, entry)
    elif opts["usage"] == "final":
        final = gen.envelope([])
        final["usage"] = gen.usage
        await _send_event(conn, _event(json.dumps(final), opts), opts, entry)
    tail = _event("[DONE]", opts) if opts["done"] else b""
    entry["writes"].append(conn.write((_http_chunk(tail) if tail else b"") + b"0\r\n\r\n"))


@contextlib.contextmanager
def run_in_thread(srv: Any, name: str) -> Iterator[Any]:
    """Run a server with async ``start()``/``close()`` on its own event loop in a daemon thread."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(srv.start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(srv.close())
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()

    thread = threading.Thread(target=main, name=name, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError(f"{name} did not start")
    try:
        yield srv
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@contextlib.contextmanager
def serve_in_thread(**defaults: Any) -> Iterator[RefServer]:
    """Run a :class:`RefServer` on its own event loop in a daemon thread (for tests)."""
    with run_in_thread(RefServer(**defaults), "reference server") as srv:
        yield srv


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft-ms", type=float, default=DEFAULTS["ttft_ms"])
    ap.add_argument("--itl-ms", type=float, default=DEFAULTS["itl_ms"])
    ap.add_argument("--chunk-tokens", type=int, default=DEFAULTS["chunk_tokens"], help="tokens per content chunk")
    ap.add_argument("--max-seconds", type=float, default=600.0, help="exit after this long")
    args = ap.parse_args(argv)
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    srv = RefServer(ttft_ms=args.ttft_ms, itl_ms=args.itl_ms, chunk_tokens=args.chunk_tokens)
    port = loop.run_until_complete(srv.start(port=args.port))
    print(f"READY {port}", flush=True)
    loop.call_later(args.max_seconds, loop.stop)
    with contextlib.suppress(KeyboardInterrupt):
        loop.run_forever()
    loop.run_until_complete(srv.close())
    sys.exit(0)


if __name__ == "__main__":
    main()

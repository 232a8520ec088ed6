"""An OpenAI-compatible server that echoes what it was sent, and its own secrets (127.0.0.1 only).

For the secret-planting test (``test_secrets.py``): a server that reflects the request's
``Authorization`` header, its own ``--api-key`` and its ``HF_TOKEN`` back to the client — in
streamed content, in a 200 body that is not SSE, and in a 401 body. ``--mode ok`` only
streams (every request succeeds, so baselines get written); ``--mode mixed`` cycles through
the three answers; ``--die-after N`` crashes after N completions. Prints its URL, then serves at most ``--max-requests`` requests or
``--max-seconds`` seconds.

    python tests/echoserver.py --port 0 [--api-key K] [--mode ok|mixed]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Callable

HOLD_S = 5.0


class Echo:
    def __init__(self, ns: argparse.Namespace) -> None:
        self.ns = ns
        self.completions = 0
        self.done = asyncio.Event()

    def secrets(self, headers: dict[str, str]) -> str:
        return (f"auth={headers.get('authorization', '-')} own-key={self.ns.api_key or '-'} "
                f"hf={os.environ.get('HF_TOKEN', '-')} deploy={os.environ.get('DEPLOY_SECRET', '-')}")

    async def conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self.one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()

    async def one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HOLD_S)
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
        length = int(headers.get("content-length", 0))
        raw = await asyncio.wait_for(reader.readexactly(length), HOLD_S) if length else b"{}"
        if not path.endswith("/completions"):
            body = json.dumps({"object": "list", "data": [{"id": "echo-model"}]}).encode()
            writer.write(_head(200, "application/json", len(body)) + body)
            await writer.drain()
            return True
        self.completions += 1
        if self.completions >= self.ns.max_requests:
            self.done.set()
        echo = self.secrets(headers)
        kind = 0 if self.ns.mode == "ok" else self.completions % 3
        if kind == 1:  # a 200 that is not an event stream, reflecting the request
            body = json.dumps({"echo": echo}).encode()
            writer.write(_head(200, "application/json", len(body)) + body)
        elif kind == 2:  # a 401 reflecting the credentials it refused
            body = json.dumps({"error": {"message": f"unauthorized: {echo}"}}).encode()
            writer.write(_head(401, "application/json", len(body)) + body)
        else:
            n = int(json.loads(raw).get("max_tokens") or 3)  # as many tokens as asked for
            events = [{"id": "e", "choices": [{"index": 0, "text": f" {echo}"}]} for _ in range(n)]
            events.append({"id": "e", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": n}})
            body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
            body += b"data: [DONE]\n\n"
            writer.write(_head(200, "text/event-stream", len(body)) + body)
        await writer.drain()
        if self.ns.served_file and self.completions == 1:
            with open(self.ns.served_file, "w"):  # the first request answered: a run is under way
                pass
        if self.ns.die_after and self.completions >= self.ns.die_after:
            os._exit(1)  # an engine that crashes mid-run
        return True


def _head(status: int, ctype: str, length: int) -> bytes:
    return (f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {length}\r\n"
            "Connection: keep-alive\r\n\r\n").encode()


async def serve(ns: argparse.Namespace) -> None:
    echo = Echo(ns)
    server = await asyncio.start_server(echo.conn, "127.0.0.1", ns.port)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    try:
        await asyncio.wait_for(echo.done.wait(), ns.max_seconds)
        await asyncio.sleep(1.0)  # let the last answers go out
    except asyncio.TimeoutError:
        pass
    server.close()


def gone(probe: Callable[[], None], wait_s: float = 5.0) -> bool:
    """True once ``probe`` (``os.kill(pid, 0)``, ``os.killpg(pgid, 0)``) finds no process."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            probe()
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def pid_gone(pidfile: str | os.PathLike) -> bool:
    """The process whose id a pidfile holds has ended (tests look for orphans)."""
    with open(pidfile) as f:
        pid = int(f.read())
    return gone(lambda: os.kill(pid, 0))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--api-key")
    ap.add_argument("--mode", choices=["ok", "mixed"], default="mixed")
    ap.add_argument("--max-requests", type=int, default=500)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--die-after", type=int, default=0, help="exit at once after this many completions")
    ap.add_argument("--pidfile", help="write the process id here (tests look for orphans)")
    ap.add_argument("--tag", help="ignored: lets a command carry a {port} it does not use")
    ap.add_argument("--served-file", help="created once the first completion is answered (tests wait on it)")
    ns = ap.parse_args(argv)
    if ns.pidfile:
        with open(ns.pidfile, "w") as f:
            f.write(str(os.getpid()))
    asyncio.run(serve(ns))
    return 0


if __name__ == "__main__":
    sys.exit(main())

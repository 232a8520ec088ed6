"""The client's own HTTP/1.1: how responses end, large bodies, the pool's bound, TLS, and
bursts spread over loop turns."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import ssl
import subprocess
import sys
from pathlib import Path
from time import perf_counter
from typing import Any, Callable, Optional

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from refserver import read_request, serve_in_thread  # noqa: E402

from pytest_goodput.load.client.event_loop import run  # noqa: E402
from pytest_goodput.load.client.connection import ERROR_BODY_LIMIT  # noqa: E402
from pytest_goodput.load.client.http import OpenAIClient  # noqa: E402
from pytest_goodput.load.client.turns import WriteTurns  # noqa: E402
from pytest_goodput.load.plan import pool_size  # noqa: E402
from pytest_goodput.load.sending.loops import START_PER_TURN, start_users  # noqa: E402
from pytest_goodput.load.worker import WARM_CONNECTIONS, Init, warm_connections  # noqa: E402
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan  # noqa: E402
from pytest_goodput.measure.records.record import to_record  # noqa: E402
from pytest_goodput.schema.scenario.spec import ScenarioSpec  # noqa: E402

EVENTS = [
    {"id": "cmpl-1", "choices": [{"index": 0, "text": "hi"}]},
    {"id": "cmpl-1", "choices": [{"index": 0, "text": " there", "finish_reason": "length"}],
     "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
]
BODY = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in EVENTS) + b"data: [DONE]\n\n"


def plan(i: int = 0, prompt: str = "p", n: int = 2) -> RequestPlan:
    return RequestPlan(i, prompt, 1, n, perf_counter())


def _serve(respond: Callable[[asyncio.StreamWriter], bool], client: Callable[[str], Any],
           ssl_context: Optional[ssl.SSLContext] = None) -> tuple[Any, dict]:
    """Run ``client(url)`` against a server answering every request with ``respond(writer)``
    (False: close the connection after it); returns its result and the server's counts."""
    counts = {"connections": 0, "requests": 0, "open": 0, "most_open": 0}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts["connections"] += 1
        counts["open"] += 1
        counts["most_open"] = max(counts["most_open"], counts["open"])
        try:
            while method := await read_request(reader):
                counts["requests"] += method == b"POST"  # a GET: the keep-alive probe
                keep = respond(writer)
                await writer.drain()
                if not keep:
                    break
        finally:
            counts["open"] -= 1
            writer.close()

    async def main() -> Any:
        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ssl_context)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await client(f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}")

    return run(main()), counts


def _records(exchanges: list[RawExchange]) -> list[Any]:
    return [to_record(ex, stream=True, api="completions", min_output_tokens=2) for ex in exchanges]


def _send_all(n: int, **kw: Any) -> Callable[[str], Any]:
    async def client(url: str) -> list[RawExchange]:
        async with OpenAIClient(url, "m", **kw) as c:
            return list(await asyncio.gather(*(c.send(plan(i)) for i in range(n))))
    return client


def test_a_response_delimited_by_the_connections_close_is_read_to_the_close() -> None:
    """No Content-Length, not chunked: the body ends when the server closes (HTTP/1.1 allows it)."""
    def respond(writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + BODY)
        return False

    exchanges, counts = _serve(respond, _send_all(3, max_connections=1))
    records = _records(exchanges)
    assert [r.ok for r in records] == [True] * 3, [r.error_detail for r in records]
    assert all(r.output_tokens == 2 for r in records) and counts["connections"] == 3


def test_the_pool_never_opens_more_than_max_connections_and_queues_the_rest() -> None:
    def respond(writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
        return True

    exchanges, counts = _serve(respond, _send_all(12, max_connections=3))
    assert all(r.ok for r in _records(exchanges))
    assert counts["requests"] == 12 and counts["most_open"] <= 3


def test_a_body_larger_than_a_write_piece_arrives_whole() -> None:
    """A 600 kB body is written in pieces as the transport drains; the server reads it all."""
    prompt = "word " * 120_000

    async def go(url: str) -> tuple[RawExchange, bytes]:
        async with OpenAIClient(url, "ref-model") as c:
            body = c.build_body(plan(0, prompt))
            return await c.send(plan(0, prompt)), body

    with serve_in_thread(ttft_ms=1.0, itl_ms=1.0) as srv:
        ex, body = run(go(f"http://127.0.0.1:{srv.port}"))
        record = to_record(ex, stream=True, api="completions", min_output_tokens=2)
        assert record.ok, record.error_detail
        assert srv.log[record.response_id]["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert ex.request_bytes == len(body) > 500_000


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_an_https_base_url_verifies_the_servers_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True, timeout=60)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)

    def respond(writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
        return True

    untrusted, _ = _serve(respond, _send_all(1), server_ctx)  # a certificate nobody vouches for
    assert _records(untrusted)[0].error_kind == "transport"
    assert "CERTIFICATE_VERIFY_FAILED" in (untrusted[0].error_detail or "")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    exchanges, counts = _serve(respond, _send_all(2, max_connections=1), server_ctx)
    assert all(r.ok for r in _records(exchanges)) and counts["connections"] == 1


def test_a_burst_is_written_at_most_writes_per_turn_per_loop_turn() -> None:
    async def go() -> tuple[int, int, list[bool]]:
        turns = WriteTurns(per_turn=4)
        now = [turns.admit() for _ in range(10)]
        at_once = sum(t is None for t in now)
        await asyncio.sleep(0)  # the next turn lets the next four through
        then = sum(t is not None and t.done() for t in now)
        late = turns.admit()  # others still wait: it queues behind them
        for _ in range(4):
            await asyncio.sleep(0)
        return at_once, then, [t is None or t.done() for t in now] + [late is not None and late.done()]

    at_once, then, done = run(go())
    assert at_once == 4 and then == 4 and all(done)


def test_users_starting_together_are_started_a_few_per_loop_turn() -> None:
    async def go() -> list[int]:
        turn = [0]
        started: list[int] = []

        async def ticker() -> None:
            while True:
                turn[0] += 1
                await asyncio.sleep(0)

        async def user() -> None:
            started.append(turn[0])

        tick = asyncio.get_running_loop().create_task(ticker())
        await asyncio.gather(*await start_users(user, 3 * START_PER_TURN + 5))
        tick.cancel()
        return started

    started = run(go())
    per_turn = {t: started.count(t) for t in set(started)}
    assert len(started) == 3 * START_PER_TURN + 5 and max(per_turn.values()) <= START_PER_TURN


def test_an_error_body_is_kept_only_up_to_its_limit() -> None:
    """A 500 with 1 MB of body: the excerpt stops at ERROR_BODY_LIMIT (one read past it at most)."""
    junk = b"x" * (1 << 20)

    def respond(writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(junk) + junk)
        return True

    (ex,), _ = _serve(respond, _send_all(1))
    record = _records([ex])[0]
    kept = sum(len(b) for _, b in ex.reads)
    assert record.error_kind == "http_status" and record.http_status == 500
    assert ERROR_BODY_LIMIT <= kept < ERROR_BODY_LIMIT + (1 << 18)


def test_a_request_queued_for_a_connection_counts_the_wait_against_its_timeout() -> None:
    """The total timeout covers the wait for a pooled connection: the second of two requests
    on one connection, queued behind a response that stalls past both deadlines, times out
    too (whether its deadline passes in the queue or right after the slot freed)."""
    async def go(url: str) -> list[RawExchange]:
        async with OpenAIClient(url, "ref-model", max_connections=1, timeout_s=0.5,
                                extra_body={"refserver": {"stall_s": 3.0}}) as c:
            return list(await asyncio.gather(c.send(plan(0)), c.send(plan(1))))

    with serve_in_thread(ttft_ms=1.0, itl_ms=1.0) as srv:
        first, second = run(go(f"http://127.0.0.1:{srv.port}"))
    assert first.error_kind == second.error_kind == "timeout" and first.sent_at is not None
    assert first.reads  # the stalled stream had begun: the first timed out mid-stream


@pytest.mark.parametrize(("scenario", "kw", "warm"), [
    ("concurrency", {"concurrency": 300}, 300),
    ("offline", {"requests": 100}, 100),
    ("server", {"rate": 50.0}, WARM_CONNECTIONS),
])
def test_a_closed_loop_opens_one_connection_per_user_before_its_run(scenario: str, kw: dict, warm: int) -> None:
    spec = ScenarioSpec(scenario=scenario, **kw)
    init = Init(spec, "http://127.0.0.1:1/v1", "m", None, pool_size(spec), None)
    assert warm_connections(init) == min(warm, init.pool)

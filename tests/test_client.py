"""OpenAIClient against the reference server over loopback (timing bounds are generous)."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from refserver import RefServer, serve_in_thread  # noqa: E402

from pytest_goodput.load.client.event_loop import new_event_loop, run
from pytest_goodput.load.client.http import OpenAIClient, check_reachable
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.schema.addresses import normalize_base_url


@pytest.fixture(scope="module")
def srv() -> Iterator[RefServer]:
    with serve_in_thread(ttft_ms=20.0, itl_ms=2.0) as server:
        yield server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan(i: int = 0, n: int = 8) -> RequestPlan:
    return RequestPlan(index=i, prompt="hello", prompt_tokens=1, max_tokens=n, scheduled_at=time.perf_counter())


def send(url: str, *, n: int = 8, count: int = 1, **kw: Any) -> list[RawExchange]:
    async def go() -> list[RawExchange]:
        async with OpenAIClient(url, "ref-model", **kw) as c:
            return list(await asyncio.gather(*(c.send(plan(i, n)) for i in range(count))))

    return run(go())


def url(srv: RefServer) -> str:
    return f"http://127.0.0.1:{srv.port}"


def rec(ex: RawExchange, *, stream: bool = True, api: str = "completions") -> Any:
    return to_record(ex, stream=stream, api=api, min_output_tokens=ex.plan.max_tokens)


# --- pure helpers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ("http://h:8000", "http://h:8000/v1"),
        ("http://h:8000/", "http://h:8000/v1"),
        ("http://h:8000/v1", "http://h:8000/v1"),
        ("https://h/v1/", "https://h/v1"),
        (" http://h:1/proxy ", "http://h:1/proxy/v1"),
    ],
)
def test_normalize_base_url(given: str, want: str) -> None:
    assert normalize_base_url(given) == want


@pytest.mark.parametrize("bad", ["ftp://h/v1", "h:8000", "", "http:///v1"])
def test_normalize_base_url_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="base URL"):
        normalize_base_url(bad)


def test_request_bodies() -> None:
    c = OpenAIClient("http://h:1", "m", extra_body={"temperature": 0})
    assert json.loads(c.build_body(plan(n=5))) == {
        "model": "m", "prompt": "hello", "max_tokens": 5, "stream": True,
        "stream_options": {"include_usage": True}, "ignore_eos": True, "min_tokens": 5, "temperature": 0,
    }
    c = OpenAIClient("http://h:1", "m", api="chat", stream=False, ignore_eos=False)
    assert json.loads(c.build_body(plan(n=5))) == {
        "model": "m", "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 5, "max_completion_tokens": 5, "stream": False,
    }


def test_bad_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="api must be"):
        OpenAIClient("http://h:1", "m", api="embeddings")
    monkeypatch.delenv("GOODPUT_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match="GOODPUT_TEST_KEY"):
        OpenAIClient("http://h:1", "m", api_key_env="GOODPUT_TEST_KEY")
    with pytest.raises(RuntimeError, match="async with"):
        run(OpenAIClient("http://h:1", "m").send(plan()))


def test_new_event_loop_prefers_uvloop() -> None:
    loop = new_event_loop()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()


# --- over loopback --------------------------------------------------------------------


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("stream", [True, False])
def test_success(srv: RefServer, api: str, stream: bool) -> None:
    exs = send(url(srv), n=8, count=3, api=api, stream=stream)
    for ex in exs:
        r = rec(ex, stream=stream, api=api)
        assert r.ok, r.error_detail
        assert (r.output_tokens, r.token_count_source, r.prompt_tokens) == (8, "usage", 7)
        entry = srv.log[r.response_id]
        # the same monotonic clock: sent < server read < first content write <= first read
        assert r.sent_at < entry["read_at"] < entry["token_writes"][0] <= r.first_token_at
        assert r.ttft_ms >= 19.0 and r.e2e_ms < 5000
        if stream and r.tokens_at_once:
            # a starved client read every chunk at once: TPOT is then undefined, and flagged
            assert r.content_chunks == 8 and r.itl_ms == [] and r.tpot_ms is None
        elif stream:
            assert r.content_chunks == 8 and len(r.itl_ms) == 7
            assert r.tpot_ms == pytest.approx(sum(r.itl_ms) / 7)
        else:
            assert r.ttft_ms == r.e2e_ms and r.tpot_ms is None


def test_chat_role_first_and_reasoning(srv: RefServer) -> None:
    opts = {"refserver": {"role_first": True, "reasoning_tokens": 3, "ttft_ms": 40}}
    (ex,) = send(url(srv), n=6, api="chat", extra_body=opts)
    r = rec(ex, api="chat")
    entry = srv.log[r.response_id]
    assert r.ok and r.content_chunks == 6
    # the role-only chunk went out with the headers, ~40 ms before the first token
    assert r.first_token_at >= entry["token_writes"][0] > entry["writes"][0] + 0.030
    assert r.ttft_ms >= 39.0


@pytest.mark.parametrize(
    "opts",
    [
        {"newline": "crlf", "comments": True},
        {"newline": "cr"},
        {"split": True, "split_gap_ms": 1.0},
        {"done": False},
        {"usage": "in_last"},
        {"chunk_tokens": 3},
    ],
    ids=["crlf-comments", "cr", "split", "no-done", "usage-in-last", "multi-token"],
)
def test_stream_variants(srv: RefServer, opts: dict) -> None:
    # 40 ms between chunks: what is decided is the parsing of each variant, so two chunks must
    # not share one read even when a busy machine delays the client (as 10 ms gaps can).
    (ex,) = send(url(srv), n=7, extra_body={"refserver": {"itl_ms": 40.0, **opts}})
    r = rec(ex)
    assert r.ok, r.error_detail
    assert (r.output_tokens, r.token_count_source) == (7, "usage")
    chunks = 3 if opts.get("chunk_tokens") == 3 else 7
    assert r.content_chunks == chunks and len(r.itl_ms) == 6
    assert r.last_token_at >= srv.log[r.response_id]["token_writes"][-1]


def test_no_usage_falls_back_to_chunks(srv: RefServer) -> None:
    (ex,) = send(url(srv), n=5, extra_body={"refserver": {"usage": "none"}})
    r = rec(ex)
    assert r.ok and (r.output_tokens, r.token_count_source) == (5, "chunks")


def test_http_500_and_api_key_never_leaks(srv: RefServer, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-4f1b9c0d2e"
    monkeypatch.setenv("GOODPUT_TEST_KEY", secret)
    (ok_ex,) = send(url(srv), n=3, api_key_env="GOODPUT_TEST_KEY")
    assert srv.log[rec(ok_ex).response_id]["auth"] == f"Bearer {secret}"
    (ex,) = send(url(srv), api_key_env="GOODPUT_TEST_KEY",
                 extra_body={"refserver": {"status": 500, "echo_auth": True}})
    r = rec(ex)
    assert not r.ok and r.error_kind == "http_status" and r.http_status == 500
    assert r.error_detail.startswith("HTTP 500: reference server error (auth: Bearer ***)")
    assert secret not in r.model_dump_json() and secret not in repr(ex)
    assert secret not in repr(OpenAIClient(url(srv), "m", api_key_env="GOODPUT_TEST_KEY"))


@pytest.mark.parametrize("garbage", ["text", "json"])
def test_garbage_bodies_are_malformed(srv: RefServer, garbage: str) -> None:
    for stream in (True, False):
        (ex,) = send(url(srv), stream=stream, extra_body={"refserver": {"garbage": garbage}})
        r = rec(ex, stream=stream)
        assert not r.ok and r.error_kind == "malformed_stream", (stream, r.error_detail)


def test_timeout_mid_stream(srv: RefServer) -> None:
    t0 = time.perf_counter()
    (ex,) = send(url(srv), timeout_s=0.5, extra_body={"refserver": {"stall_s": 5.0}})
    assert time.perf_counter() - t0 < 5.0  # the 0.5 s timeout ended it, not the 5 s stall
    r = rec(ex)
    assert not r.ok and r.error_kind == "timeout" and r.e2e_ms is None
    assert r.first_token_at is not None and 0.2 <= r.end_at - r.sent_at < 5.0


def test_timeout_before_response_headers(srv: RefServer) -> None:
    (ex,) = send(url(srv), stream=False, timeout_s=0.3, extra_body={"refserver": {"ttft_ms": 3000}})
    r = rec(ex, stream=False)
    assert not r.ok and r.error_kind == "timeout" and r.http_status is None
    assert r.sent_at is not None and r.first_token_at is None


def test_connection_dropped_mid_stream_is_transport(srv: RefServer) -> None:
    (ex,) = send(url(srv), n=8, extra_body={"refserver": {"abort_after": 3}})
    r = rec(ex)
    assert not r.ok and r.error_kind == "transport", r.error_detail


def test_unreachable_port_is_transport_and_fast() -> None:
    port = _free_port()
    t0 = time.perf_counter()
    (ex,) = send(f"http://127.0.0.1:{port}/v1", timeout_s=30)
    assert time.perf_counter() - t0 < 25.0  # refused at once, not after the 30 s timeout
    r = rec(ex)
    assert not r.ok and r.error_kind == "transport" and r.sent_at is None
    assert str(port) in r.error_detail


def test_check_reachable_and_list_models(srv: RefServer) -> None:
    run(check_reachable(url(srv), 5.0))
    port = _free_port()
    with pytest.raises(ConnectionError, match=rf"cannot reach http://127.0.0.1:{port}/v1/models: "):
        run(check_reachable(f"http://127.0.0.1:{port}", 2.0))

    async def models() -> list[str]:
        async with OpenAIClient(url(srv) + "/v1/", "ref-model") as c:
            return await c.list_models()

    assert run(models()) == ["ref-model"]


def test_keep_alive_reuses_connections(srv: RefServer) -> None:
    async def go() -> int:
        async with OpenAIClient(url(srv), "ref-model", max_connections=2) as c:
            for _ in range(3):
                await asyncio.gather(*(c.send(plan(i, 2)) for i in range(2)))
            return sum(conn.requests for conn in c._pool.idle) if len(c._pool.idle) == 2 else -1

    assert run(go()) == 7  # two pooled connections carried six requests and the keep-alive probe


def test_open_connections_then_send(srv: RefServer) -> None:
    async def go() -> tuple[int, RawExchange]:
        async with OpenAIClient(url(srv), "ref-model", max_connections=4) as c:
            opened = await c.open_connections(8)  # capped at max_connections
            return opened, await c.send(plan(0, 3))

    opened, ex = run(go())
    assert opened == 4 and rec(ex).ok


def test_reads_are_stamped_by_the_connection_protocol(srv: RefServer) -> None:
    """The stamp is taken in data_received, so the stream's end equals the last read's stamp."""

    async def go() -> tuple[RawExchange, list[Any]]:
        async with OpenAIClient(url(srv), "ref-model", max_connections=1) as c:
            c._keep_alive.known = True  # no keep-alive probe reads on the connection after
            ex = await c.send(plan(0, 3))
            return ex, list(c._pool.idle)

    ex, pooled = run(go())
    assert rec(ex).ok and len(pooled) == 1
    assert ex.end_at == pooled[0].read_at and ex.reads[-1][0] <= ex.end_at

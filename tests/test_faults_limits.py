"""A hostile or broken server cannot make the client unbounded, or pass for a working one."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from faultserver import serve_in_thread  # noqa: E402

from pytest_goodput.load.client.event_loop import run  # noqa: E402
from pytest_goodput.load.client.http import READ_OVERHEAD, OpenAIClient, response_byte_limit  # noqa: E402
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan  # noqa: E402
from pytest_goodput.measure.records.record import to_record  # noqa: E402
from pytest_goodput.measure.records.sse import MAX_LINE_BYTES  # noqa: E402


def send(url: str, n: int = 1, *, max_tokens: int = 16, fault: dict | None = None,
         **kw: Any) -> list[RawExchange]:
    async def go() -> list[RawExchange]:
        extra = {"fault": fault} if fault else None
        async with OpenAIClient(url, "fault-model", extra_body=extra, timeout_s=20, **kw) as c:
            plans = [RequestPlan(i, "p", 1, max_tokens, time.perf_counter()) for i in range(n)]
            return list(await asyncio.gather(*(c.send(p) for p in plans)))

    return run(go())


def record(ex: RawExchange) -> Any:
    return to_record(ex, stream=True, api="completions")


def test_twenty_million_tokens_claimed_ten_times_is_malformed_and_bounded():
    with serve_in_thread(usage=20_000_000) as srv:
        exs = send(srv.url, 10)
    recs = [record(ex) for ex in exs]
    assert all(r.error_kind == "malformed_stream" for r in recs)
    assert all("usage.completion_tokens 20000000 is implausible" in r.error_detail for r in recs)
    # the count recorded is what was streamed, and no ITL list was sized from the claim
    assert all(r.output_tokens == 3 and r.token_count_source == "chunks" and r.itl_ms == [] for r in recs)


def test_a_body_over_its_byte_limit_stops_reading_and_fails():
    limit = response_byte_limit(16)
    with serve_in_thread(flood_bytes=16 * limit) as srv:
        (ex,) = send(srv.url)
    r = record(ex)
    assert r.error_kind == "malformed_stream" and "reading stopped" in r.error_detail
    held = sum(len(b) + READ_OVERHEAD for _, b in ex.reads)
    assert limit < held < 2 * limit  # one read past the limit (what the socket had delivered)


def test_an_sse_line_over_the_limit_is_malformed():
    with serve_in_thread(line_bytes=MAX_LINE_BYTES + 1) as srv:
        (ex,) = send(srv.url, max_tokens=1024)  # the body limit (8 MiB) lets the line through
    r = record(ex)
    assert r.error_kind == "malformed_stream" and "longer than" in r.error_detail


def test_deeply_nested_json_is_malformed_not_a_crash():
    with serve_in_thread(raw_event="[" * 200_000) as srv:
        (ex,) = send(srv.url, max_tokens=64)
    r = record(ex)
    assert r.error_kind == "malformed_stream"
    body = RawExchange(ex.plan, 0.0, 1.0, 200, [(0.5, b"[" * 200_000)])
    assert to_record(body, stream=False, api="completions").error_kind == "malformed_stream"
    err = RawExchange(ex.plan, 0.0, 1.0, 500, [(0.5, b"[" * 200_000)])
    assert to_record(err, stream=True, api="completions").error_detail.startswith("HTTP 500: [[[")


def test_negative_or_boolean_prompt_tokens_are_ignored():
    plan = RequestPlan(0, "p", 9, 4, 0.0)
    ev = {"id": "x", "choices": [{"text": "a"}], "usage": {"prompt_tokens": -5, "completion_tokens": 1}}
    ex = RawExchange(plan, 0.0, 1.0, 200, [(0.5, b"data: " + json.dumps(ev).encode() + b"\n\n")])
    assert to_record(ex, stream=True, api="completions").prompt_tokens == 9

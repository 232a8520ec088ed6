"""Per-request definitions the gate relies on, on hand-built exchanges (docs/metrics.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.metrics import is_good
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.schema.scenario.spec import build_spec


def ev(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def cmpl(text: str) -> dict:
    return {"id": "c", "choices": [{"index": 0, "text": text}]}


def usage(n: Any) -> dict:
    return {"id": "c", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": n}}


def exchange(reads: list[tuple[float, Any]], *, scheduled: float = 0.0, sent: float = 0.0,
             end: float | None = None, open_loop: bool = False, **kw: Any) -> RawExchange:
    plan = RequestPlan(0, "p", 1, 16, scheduled, open_loop=open_loop)
    raw = [(t, ev(obj)) for t, obj in reads]
    return RawExchange(plan, sent, end if end is not None else raw[-1][0], 200, raw, **kw)


# --- 5. open-loop latency counts from the scheduled arrival ---------------------------


def test_open_loop_ttft_and_e2e_count_from_the_schedule():
    # scheduled at 0, waited 400 ms for a slot, sent at 0.4, first token 0.45, end 0.5
    reads = [(0.45, cmpl("a")), (0.47, cmpl("b")), (0.5, usage(2))]
    r = to_record(exchange(reads, scheduled=0.0, sent=0.4, open_loop=True), stream=True, api="completions")
    assert r.ok and r.latency_from == "scheduled_at"
    assert r.ttft_ms == pytest.approx(450.0) and r.e2e_ms == pytest.approx(500.0)
    assert r.ttft_sent_ms == pytest.approx(50.0) and r.e2e_sent_ms == pytest.approx(100.0)
    assert r.send_lag_ms == pytest.approx(400.0) and r.tpot_ms == pytest.approx(20.0)
    # the keyword overrides the plan's flag; closed loop / offline count from sent_at
    closed = to_record(exchange(reads, scheduled=0.0, sent=0.4, open_loop=True), stream=True,
                       api="completions", from_schedule=False)
    assert closed.latency_from == "sent_at" and closed.ttft_ms == pytest.approx(50.0)
    assert closed.ttft_sent_ms == closed.ttft_ms


def test_open_loop_non_streamed_and_failed():
    body = json.dumps({"id": "x", "choices": [{"text": "hello"}], "usage": {"completion_tokens": 2}})
    ex = RawExchange(RequestPlan(0, "p", 1, 2, 1.0, open_loop=True), 1.1, 1.3, 200, [(1.3, body.encode())])
    r = to_record(ex, stream=False, api="completions")
    assert r.ttft_ms == pytest.approx(300.0) == pytest.approx(r.e2e_ms)
    assert r.ttft_sent_ms == pytest.approx(200.0)
    failed = RawExchange(RequestPlan(0, "p", 1, 2, 1.0, open_loop=True), 1.1, 1.3, 503, [(1.3, b"{}")])
    f = to_record(failed, stream=True, api="completions")
    assert not f.ok and f.ttft_ms is f.ttft_sent_ms is f.e2e_sent_ms is None


def test_a_slower_server_cannot_hide_in_the_client_queue():
    """Ceiling 1, arrivals every 100 ms, service 150 ms: the queue grows. Counted from the
    send, every TTFT looks alike; counted from the schedule, they grow with the backlog."""
    recs = []
    sent = 0.0
    for i in range(5):
        sched = 0.1 * i
        sent = max(sched, sent)
        ex = RawExchange(RequestPlan(i, "p", 1, 2, sched, open_loop=True), sent, sent + 0.15, 200,
                         [(sent + 0.1, ev(cmpl("a"))), (sent + 0.15, ev(cmpl("b")) + b"data: [DONE]\n\n")])
        recs.append(to_record(ex, stream=True, api="completions"))
        sent += 0.15
    assert [round(r.ttft_sent_ms) for r in recs] == [100] * 5
    assert [round(r.ttft_ms) for r in recs] == [100, 150, 200, 250, 300]
    spec = build_spec({"scenario": "server", "rate": 10, "ttft_ms": 120, "concurrency": 1})
    assert sum(is_good(r, spec) for r in recs) == 1


# --- 8. TPOT of tokens that arrived at once; reasoning text once ------------------------


def test_several_tokens_in_one_chunk_have_no_tpot_and_do_not_meet_a_tpot_limit():
    reads = [(0.1, cmpl("a b c d")), (0.101, usage(4))]
    r = to_record(exchange(reads), stream=True, api="completions")
    assert r.ok and r.output_tokens == 4 and r.content_chunks == 1
    assert r.tpot_ms is None and r.itl_ms == [] and r.tokens_at_once
    spec = build_spec({"rate": 1, "tpot_ms": 1000})
    assert not is_good(r, spec)
    one_token = to_record(exchange([(0.1, cmpl("a")), (0.11, usage(1))]), stream=True, api="completions")
    assert one_token.tpot_ms is None and not one_token.tokens_at_once and is_good(one_token, spec)


def test_several_chunks_completed_by_one_read_count_as_at_once():
    plan = RequestPlan(0, "p", 1, 16, 0.0)
    raw = ev(cmpl("a")) + ev(cmpl("b")) + ev(cmpl("c")) + ev(usage(3))
    r = to_record(RawExchange(plan, 0.0, 0.2, 200, [(0.2, raw)]), stream=True, api="completions")
    assert r.content_chunks == 3 and r.tokens_at_once and r.tpot_ms is None and r.itl_ms == []


def test_reasoning_under_both_names_is_counted_once():
    delta = {"reasoning_content": "think", "reasoning": "think", "content": "!"}
    reads = [(0.1, {"id": "c", "choices": [{"delta": delta}]}), (0.2, {"id": "c", "choices": [{"delta": {"content": "x"}}]})]
    ex = exchange(reads)
    r = to_record(ex, stream=True, api="chat", tokenizer=len)
    assert r.output_tokens == len("think!") + len("x")


# --- 1. usage counts the client believes ------------------------------------------------


@pytest.mark.parametrize("claimed", [0, -3, "12", 5.5, True, 20_000_000])
def test_unbelievable_usage_is_a_malformed_stream_counted_from_chunks(claimed):
    r = to_record(exchange([(0.1, cmpl("a")), (0.2, cmpl("b")), (0.3, usage(claimed))]),
                  stream=True, api="completions")
    assert r.error_kind == "malformed_stream" and "usage.completion_tokens" in r.error_detail
    assert (r.output_tokens, r.token_count_source, r.itl_ms) == (2, "chunks", [])


def test_usage_bound_is_four_times_requested_or_the_chunks_streamed():
    def claim(n: Any, chunks: int = 2) -> Any:
        reads = [(0.1 + 0.01 * j, cmpl("a")) for j in range(chunks)] + [(0.9, usage(n))]
        return to_record(exchange(reads), stream=True, api="completions")  # 16 requested

    assert claim(64).ok and claim(65).error_kind == "malformed_stream"
    assert claim(80, chunks=80).ok  # one token per chunk streamed: believable
    assert claim(3.0).ok and claim(3.0).output_tokens == 3  # an integral float counts

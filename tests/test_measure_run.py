"""Run-level definitions the gate relies on, on hand-built records (docs/metrics.md)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_goodput.measure.metrics import (
    LOOP_LAG_CEILING_MS,
    LOOP_LAG_FLOOR_MS,
    judge_loop_lag,
    loop_lag_limit_ms,
    measurement_window,
    summarize,
)
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord
from pytest_goodput.schema.scenario.spec import build_spec

HEALTHY = ClientHealth(valid=True, cpu_utilization=0.1)


# --- 6. the window ---------------------------------------------------------------------


def rec(i: int, sched: float, sent: float, end: float, *, ok: bool = True, warmup: bool = False,
        out: int = 10) -> RequestRecord:
    return RequestRecord(index=i, ok=ok, warmup=warmup, scheduled_at=sched, sent_at=sent, end_at=end,
                         ttft_ms=5.0 if ok else None, tpot_ms=1.0 if ok else None,
                         e2e_ms=(end - sent) * 1e3 if ok else None, output_tokens=out if ok else 0,
                         itl_ms=[1.0] * (out - 1) if ok else [], token_count_source="usage")


def test_open_loop_goodput_does_not_depend_on_how_long_the_last_request_took():
    spec = build_spec({"scenario": "server", "rate": 4, "e2e_ms": 5000})

    def run(e2e: float) -> Any:
        return summarize([rec(i, i * 0.25, i * 0.25, i * 0.25 + e2e) for i in range(9)], spec, HEALTHY)

    fast, slow = run(0.1), run(2.0)
    assert fast.window.seconds == slow.window.seconds == 2.0 and fast.window.basis == "arrivals"
    assert fast.goodput.requests_per_s == slow.goodput.requests_per_s == pytest.approx(9 / 2.0)
    assert fast.throughput.output_tokens_per_s == slow.throughput.output_tokens_per_s


def test_open_loop_single_request_window_is_one_mean_gap():
    spec = build_spec({"scenario": "server", "rate": 2})
    w = measurement_window([rec(0, 5.0, 5.0, 5.3)], spec)
    assert (w.start, w.end, w.seconds, w.basis) == (5.0, 5.5, 0.5, "arrivals")


def closed_loop(users: int, durations: list[list[float]], warmup: int = 0) -> list[RequestRecord]:
    """Chained records: user u's requests take durations[u][j] seconds, each scheduled at the
    end of the previous one (as the closed-loop driver does); indices interleave."""
    out = []
    for u in range(users):
        t = 0.0
        for j, d in enumerate(durations[u]):
            out.append(rec(len(out), t, t + 0.001, t + d, warmup=j < warmup))
            t = t + d
    return out


def test_closed_loop_window_is_the_steady_state():
    # user 0: 4 requests of 1 s; user 1: 2 of 1 s then one of 3 s (the drain: user 0 has stopped at 4 s)
    records = closed_loop(2, [[1, 1, 1, 1], [1, 1, 3]])
    spec = build_spec({"scenario": "concurrency", "concurrency": 2})
    r = summarize(records, spec, HEALTHY)
    w = r.window
    assert w.basis == "steady_state" and (w.start, w.end) == (0.001, 4.0)
    # inside (0.001, 4]: user 0's four requests, user 1's first two, and 1.999 s of the
    # 2.999 s its last one ran (sent 0.001 s after its user became free)
    k = 6 + 1.999 / 2.999
    assert w.steady_requests == pytest.approx(k)
    assert w.seconds == pytest.approx(7 * (4.0 - 0.001) / k)
    assert r.throughput.requests_per_s == pytest.approx(k / (4.0 - 0.001))
    # the whole run would have been 0.001 .. 5: the drain lowered the rate
    assert r.throughput.requests_per_s > 7 / 5.0


def test_closed_loop_batches_completing_together_do_not_tip_the_rate():
    """Lockstep users (an engine that batches them) finish in bursts; the window ends at the
    first end of the last burst. Counting whole requests would miss nearly a burst; counting
    each request's share inside does not."""
    records = closed_loop(4, [[1.0] * 5 for _ in range(4)])
    for i, r in enumerate(records):  # the last burst ends within 10 ms, user by user
        if r.end_at == 5.0:
            records[i] = r.model_copy(update={"end_at": 5.0 + 0.0025 * (i % 4)})
    r = summarize(records, build_spec({"scenario": "concurrency", "concurrency": 4}), HEALTHY)
    assert r.window.basis == "steady_state" and r.window.end == 5.0
    assert r.throughput.requests_per_s == pytest.approx(4 / 1.0, rel=0.01)  # 4 users, 1 s each


def test_closed_loop_window_starts_after_the_warmup():
    records = closed_loop(2, [[0.5, 1, 1, 1], [1, 1, 1, 1]], warmup=1)
    w = measurement_window([r for r in records if not r.warmup],
                           build_spec({"scenario": "concurrency", "concurrency": 2}), records)
    assert w.basis == "steady_state" and w.start == 1.0  # the last warm-up request's end
    assert w.end == 3.5  # user 0 stops first


def test_closed_loop_too_short_for_a_steady_state_falls_back_to_sends():
    spec = build_spec({"scenario": "concurrency", "concurrency": 4})
    records = closed_loop(2, [[1.0], [2.0]])  # fewer users busy than the spec's four
    w = measurement_window(records, spec, records)
    assert w.basis == "sends" and (w.start, w.end) == (0.001, 2.0)
    one_each = closed_loop(2, [[1.0], [1.0]])
    w = measurement_window(one_each, build_spec({"scenario": "concurrency", "concurrency": 2}), one_each)
    assert w.basis == "steady_state" and w.steady_requests == pytest.approx(2.0)
    staggered = closed_loop(2, [[1.0], [3.0]])
    staggered[1] = staggered[1].model_copy(update={"sent_at": 1.5})  # user 1 starts after user 0 stopped
    w = measurement_window(staggered, build_spec({"scenario": "concurrency", "concurrency": 2}), staggered)
    assert w.basis == "sends"


def test_offline_window_is_first_send_to_last_end():
    spec = build_spec({"scenario": "offline", "requests": 3})
    records = [rec(i, 0.0, 0.01 * i, 1.0 + i) for i in range(3)]
    w = summarize(records, spec, HEALTHY).window
    assert (w.start, w.end, w.seconds, w.basis) == (0.0, 3.0, 3.0, "sends")


# --- 7., 8. percentile SLOs: a failure, or a TPOT not measurable, is +inf in the value -----


def test_one_success_and_98_timeouts_break_an_itl_percentile():
    spec = build_spec({"rate": 1, "itl_p99_ms": 50, "max_error_rate": 1.0})
    records = [rec(0, 0, 0, 1, out=200)]
    records += [rec(i, i, i, i + 1, ok=False).model_copy(update={"error_kind": "timeout"})
                for i in range(1, 99)]
    (c,) = summarize(records, spec, HEALTHY).percentile_slos
    assert c.samples == 199 + 98 and c.over_limit == 98
    assert c.value_ms is None and not c.ok  # the value is +inf, as the over-limit count says


def test_tokens_that_arrived_at_once_are_over_a_tpot_percentile_limit():
    at_once = rec(0, 0, 0, 0.1, out=4).model_copy(update={"tpot_ms": None, "itl_ms": [], "tokens_at_once": True})
    one_token = rec(1, 1, 1, 1.1, out=1).model_copy(update={"tpot_ms": None, "itl_ms": []})
    spec = build_spec({"rate": 1, "tpot_p50_ms": 1000})
    (c,) = summarize([at_once, one_token], spec, HEALTHY).percentile_slos
    assert (c.samples, c.over_limit, c.value_ms, c.ok) == (1, 1, None, False)  # one-token: no sample


# --- 4. the loop-lag limit scales with the latencies measured ---------------------------


def lagging(p99: float, **kw: Any) -> ClientHealth:
    return ClientHealth(valid=True, cpu_utilization=0.2, loop_lag_p99_ms=p99,
                        loop_lag_limit_ms=LOOP_LAG_CEILING_MS, **kw)


def test_loop_lag_limit_is_the_smaller_latency_within_floor_and_ceiling():
    assert (LOOP_LAG_FLOOR_MS, LOOP_LAG_CEILING_MS) == (3.0, 10.0)
    assert loop_lag_limit_ms(3.4, 2.0) == LOOP_LAG_FLOOR_MS
    assert loop_lag_limit_ms(12.0, 8.0) == 8.0
    assert loop_lag_limit_ms(300.0, 40.0) == LOOP_LAG_CEILING_MS
    assert loop_lag_limit_ms(None, None) == LOOP_LAG_CEILING_MS
    assert loop_lag_limit_ms(6.0, None) == 6.0  # non-streamed: TTFT alone


def test_moderate_starvation_of_a_fast_engine_is_caught():
    """A CPU hog doubled TTFT P99 (3.4 -> 7.1 ms) with loop lag P99 4.4 ms: under 10 ms, but
    longer than the latencies being measured."""
    health = judge_loop_lag(lagging(4.4), ttft_p50_ms=3.1, itl_p50_ms=1.5)
    assert not health.valid and health.loop_lag_limit_ms == LOOP_LAG_FLOOR_MS
    assert "event-loop lag P99 4.4 ms > 3.0 ms" in health.reasons[0]
    assert not judge_loop_lag(lagging(4.4), ttft_p50_ms=5.0, itl_p50_ms=4.0).valid
    assert judge_loop_lag(lagging(4.4), ttft_p50_ms=40.0, itl_p50_ms=20.0).valid


def test_loop_lag_judged_in_summarize_against_the_runs_own_latencies():
    spec = build_spec({"rate": 1})
    fast = [rec(i, i, i, i + 0.01).model_copy(update={"ttft_ms": 3.0, "itl_ms": [1.5] * 9}) for i in range(5)]
    assert not summarize(fast, spec, lagging(4.4)).client.valid
    slow = [r.model_copy(update={"ttft_ms": 30.0, "itl_ms": [15.0] * 9}) for r in fast]
    assert summarize(slow, spec, lagging(4.4)).client.valid


def test_loop_lag_not_judged_again_when_flagged_already_or_when_the_engine_failed():
    flagged = ClientHealth(valid=False, reasons=["lag"], cpu_utilization=0.2, loop_lag_p99_ms=12.0,
                           loop_lag_limit_ms=LOOP_LAG_CEILING_MS)
    assert judge_loop_lag(flagged, 3.0, 1.0).reasons == ["lag"]
    failing = lagging(4.4, requests=10, failed=6)
    assert judge_loop_lag(failing, 3.0, 1.0).valid
    worker = judge_loop_lag(lagging(4.4, workers=2), 3.0, 1.0)
    assert worker.reasons[0].startswith("the most lagging worker's event-loop lag")


def test_inf_is_never_a_reported_value():
    spec = build_spec({"rate": 1, "ttft_p50_ms": 10})
    r = summarize([rec(0, 0, 0, 1, ok=False).model_copy(update={"error_kind": "timeout"})], spec, HEALTHY)
    assert r.percentile_slos[0].value_ms is None and math.isfinite(r.throughput.requests_per_s)

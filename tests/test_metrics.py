"""Run metrics against hand-computed cases (docs/metrics.md)."""

from __future__ import annotations

import math

import pytest

from pytest_goodput.measure.metrics import distribution, is_good, summarize
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord
from pytest_goodput.schema.scenario.spec import build_spec
from pytest_goodput.stats.quantiles import percentile as percentile_nearest_rank

HEALTHY = ClientHealth(valid=True, cpu_utilization=0.1)


def rec(i: int, *, ok: bool = True, sent: float = 0.0, ttft: float = 10.0, tpot=5.0,
        e2e: float = 50.0, out: int = 9, prompt: int = 100, warmup: bool = False,
        kind=None, itl=None) -> RequestRecord:
    return RequestRecord(
        index=i, ok=ok, warmup=warmup, error_kind=kind, scheduled_at=sent, sent_at=sent,
        end_at=sent + e2e / 1000.0, ttft_ms=ttft if ok else None, tpot_ms=tpot if ok else None,
        e2e_ms=e2e if ok else None, output_tokens=out if ok else 0, prompt_tokens=prompt,
        send_lag_ms=0.5, itl_ms=itl if itl is not None else ([tpot] * (out - 1) if ok and tpot else []),
        token_count_source="usage",
    )


@pytest.mark.parametrize(
    "values,p,expected",
    [
        ([10, 20, 30, 40], 50, 20),
        ([10, 20, 30, 40], 90, 40),
        ([10, 20, 30, 40], 25, 10),
        ([10, 20, 30, 40], 100, 40),
        (list(range(1, 101)), 99, 99),
        (list(range(1, 11)), 90, 9),  # 0.9*10 is 9.000000000000002 in floating point
        ([7], 99, 7),
    ],
)
def test_nearest_rank(values, p, expected):
    assert percentile_nearest_rank(values, p) == expected


def test_nearest_rank_rejects_bad_input():
    with pytest.raises(ValueError):
        percentile_nearest_rank([], 50)
    with pytest.raises(ValueError):
        percentile_nearest_rank([1.0], 0)


def test_distribution_skips_missing_values():
    d = distribution([3.0, None, 1.0, float("nan"), 2.0])
    assert (d.count, d.mean, d.p50, d.max) == (3, 2.0, 2.0, 3.0)
    assert distribution([]).p99 is None


def test_run_metrics_hand_computed():
    spec = build_spec({"scenario": "server", "rate": 2, "ttft_ms": 15, "tpot_ms": 6,
                       "attainment": 0.5, "requests": 4})
    records = [
        rec(0, sent=0.0, ttft=5, e2e=100, warmup=True),  # excluded
        rec(1, sent=1.0, ttft=10, tpot=5, e2e=500, out=11),  # good
        rec(2, sent=1.5, ttft=20, tpot=5, e2e=1000, out=11),  # ttft over
        rec(3, sent=2.0, ttft=12, tpot=7, e2e=1000, out=11),  # tpot over
        rec(4, sent=2.5, ok=False, kind="http_status", e2e=0),  # failed, ends at 2.5
    ]
    r = summarize(records, spec, HEALTHY, load={"rate": 2})
    # open loop: the window is the measured arrivals' span, 1.0 .. 2.5 (the drain is not in it)
    assert (r.window.start, r.window.end, r.window.seconds) == (1.0, 2.5, 1.5)
    assert r.window.basis == "arrivals"
    assert (r.issued, r.completed) == (4, 3)
    assert r.throughput.requests_per_s == pytest.approx(3 / 1.5)
    assert r.throughput.output_tokens_per_s == pytest.approx(33 / 1.5)
    assert r.throughput.total_tokens_per_s == pytest.approx((33 + 300) / 1.5)
    assert r.metrics.ttft_ms.p50 == 12 and r.metrics.ttft_ms.max == 20
    assert r.metrics.ttft_ms.mean == pytest.approx(14)
    assert r.failures == {"http_status": 1}
    g = r.goodput
    assert g is not None
    assert (g.good, g.issued) == (1, 4)
    assert g.attainment == 0.25  # the failure counts in the denominator
    assert g.requests_per_s == pytest.approx(1 / 1.5)
    assert g.tokens_per_s == pytest.approx(11 / 1.5)
    assert g.met is False
    assert r.requests[0].good is True  # warm-up records are kept, judged, but not measured


def test_tpot_slo_vacuous_for_single_token():
    spec = build_spec({"tpot_ms": 1.0, "rate": 1})
    one = rec(0, out=1, tpot=None)
    assert one.tpot_ms is None and is_good(one, spec)
    two_slow = rec(1, out=2, tpot=3.0)
    assert not is_good(two_slow, spec)


def test_no_slos_no_goodput():
    spec = build_spec({"scenario": "offline"})
    r = summarize([rec(0), rec(1, sent=0.1)], spec, HEALTHY)
    assert r.goodput is None and r.requests[0].good is None


def test_percentile_slo_counts_failures_as_over_limit():
    # 3 ok requests at 10 ms and one failure: P50 is 10, P90 is +inf (the failure).
    spec = build_spec({"rate": 1, "ttft_p50_ms": 15, "ttft_p90_ms": 15})
    records = [rec(i, ttft=10) for i in range(3)] + [rec(3, ok=False, kind="timeout")]
    r = summarize(records, spec, HEALTHY)
    by = {c.name: c for c in r.percentile_slos}
    p50, p90 = by["ttft_p50_ms"], by["ttft_p90_ms"]
    assert p50.value_ms == 10 and p50.ok and p50.samples == 4 and p50.over_limit == 1
    assert p90.value_ms is None and not p90.ok
    assert not p50.proven and p50.requests_needed is not None and p50.requests_needed > 4


def test_percentile_slo_proof_matches_mlperf_counts():
    spec = build_spec({"rate": 1, "ttft_p99_ms": 100})
    fast = [rec(i, ttft=10, sent=i * 0.01) for i in range(459)]
    r = summarize(fast, spec, HEALTHY)
    (c,) = r.percentile_slos
    assert c.ok and c.proven and c.requests_needed is None
    r2 = summarize(fast[:458], spec, HEALTHY)
    (c2,) = r2.percentile_slos
    assert c2.ok and not c2.proven and c2.requests_needed == 459


def test_itl_percentile_slo_uses_token_gaps():
    spec = build_spec({"rate": 1, "itl_p50_ms": 4})
    records = [rec(0, itl=[1.0, 2.0, 3.0]), rec(1, sent=1, itl=[10.0])]
    r = summarize(records, spec, HEALTHY)
    (c,) = r.percentile_slos
    assert c.samples == 4 and c.value_ms == 2.0 and c.over_limit == 1
    assert r.metrics.itl_ms.count == 4 and r.metrics.itl_ms.max == 10.0


def test_token_count_source_is_least_exact():
    spec = build_spec({"rate": 1})
    a = rec(0)
    b = rec(1, sent=0.5).model_copy(update={"token_count_source": "chunks"})
    assert summarize([a, b], spec, HEALTHY).token_count_source == "chunks"
    assert summarize([a], spec, HEALTHY).token_count_source == "usage"


def test_empty_run_does_not_crash():
    spec = build_spec({"rate": 1, "ttft_ms": 1})
    r = summarize([rec(0, ok=False, kind="transport")], spec, HEALTHY)
    assert r.completed == 0 and r.goodput is not None and r.goodput.attainment == 0
    assert r.metrics.ttft_ms.count == 0 and math.isfinite(r.throughput.requests_per_s)

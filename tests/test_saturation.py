"""Past saturation: the worked examples of docs/metrics.md ("Saturation in sweeps") and the edges."""

from __future__ import annotations

import math

import pytest

from pytest_goodput.measure.saturation import (
    closed_loop,
    lag_threshold,
    open_loop,
    ttft_trend,
)

ARRIVALS = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
ENDS = [1.0, 4.5, 8.0, 11.0, 14.5, 18.0, 21.0, 24.5, 27.0]
TTFTS = [200.0, 2100.0, 4300.0, 6200.0, 8400.0, 10300.0, 12500.0, 14400.0, 16600.0]
E2ES = [1000.0] + [(e - a) * 1000 for a, e in zip(ARRIVALS[1:], ENDS[1:])]


def test_open_loop_worked_example_of_docs_metrics_md() -> None:
    assert lag_threshold(9) == pytest.approx(1 - 0.10 - 1.645 / 3)
    assert lag_threshold(9) == pytest.approx(0.352, abs=5e-4)
    trend = ttft_trend(ARRIVALS, TTFTS)
    assert trend is not None
    assert trend.slope_ms_per_s == pytest.approx(2050.0)
    assert trend.t == pytest.approx(2050 / math.sqrt(50000 / 7 / 60))
    assert trend.t == pytest.approx(187.9, abs=0.05)
    assert trend.p < 1e-10
    r = open_loop(ARRIVALS, ENDS, TTFTS, E2ES, failed=0, max_error_rate=0.0)
    assert r.ratio == pytest.approx((9 / 27) / (9 / (8 + 1)))
    assert r.past and "achieved/offered 0.333 < 0.352" in r.reason


def test_open_loop_keeping_up_is_not_past_saturation() -> None:
    # Every request served in 1 s, TTFT flat with noise: the drain is one service time.
    ends = [a + 1.0 for a in ARRIVALS]
    ttfts = [200.0, 210.0, 190.0, 205.0, 195.0, 200.0, 210.0, 190.0, 200.0]
    r = open_loop(ARRIVALS, ends, ttfts, [1000.0] * 9, failed=0, max_error_rate=0.0)
    assert r.ratio == pytest.approx(1.0) and not r.past


def test_open_loop_needs_both_lag_and_a_growing_queue() -> None:
    # Lagging completions but a flat TTFT (long outputs): not past saturation.
    flat = [200.0, 210.0, 190.0, 205.0, 195.0, 200.0, 210.0, 190.0, 200.0]
    assert not open_loop(ARRIVALS, ENDS, flat, E2ES, failed=0, max_error_rate=0.0).past
    # A growing TTFT while the completions keep up: not past saturation either.
    ends = [a + 1.0 for a in ARRIVALS]
    creeping = [200.0, 251.0, 299.0, 350.0, 402.0, 449.0, 500.0, 551.0, 600.0]
    r = open_loop(ARRIVALS, ends, creeping, [1000.0] * 9, failed=0, max_error_rate=0.0)
    assert r.trend is not None and r.trend.p < 0.01 and not r.past


def test_errors_beyond_max_error_rate_are_past_saturation() -> None:
    ends = [a + 1.0 for a in ARRIVALS]
    r = open_loop(ARRIVALS, ends, [200.0] * 9, [1000.0] * 9, failed=1, max_error_rate=0.0)
    assert r.past and "error rate" in r.reason
    assert not open_loop(ARRIVALS, ends, [200.0, 201.0, 199.0] * 3, [1000.0] * 9,
                         failed=1, max_error_rate=0.2).past
    assert closed_loop((8, 400, 100, 2000), (16, 800, 100, 2000), failed=2, max_error_rate=0.01).past


def test_closed_loop_worked_example_of_docs_metrics_md() -> None:
    r = closed_loop((8, 400.0, 100, 2000.0), (16, 420.0, 100, 3900.0), failed=0, max_error_rate=0.0)
    assert r.threshold == pytest.approx(1 + 0.10 + 1.645 * math.sqrt(0.02))
    assert r.threshold == pytest.approx(1.333, abs=5e-4)
    assert r.ratio == pytest.approx(1.05) and r.past


def test_closed_loop_still_scaling_or_latency_flat_is_not_past() -> None:
    assert not closed_loop((8, 400.0, 100, 2000.0), (16, 760.0, 100, 2200.0), 0, 0.0).past
    assert not closed_loop((8, 400.0, 100, 2000.0), (16, 410.0, 100, 2100.0), 0, 0.0).past


def test_trend_needs_three_points_and_spread_in_time() -> None:
    assert ttft_trend([0.0, 1.0], [1.0, 2.0]) is None
    assert ttft_trend([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None
    exact = ttft_trend([0.0, 1.0, 2.0], [1.0, 2.0, 3.0])
    assert exact is not None and exact.p == 0.0

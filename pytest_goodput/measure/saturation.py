"""Past saturation: whether a sweep point is beyond the server's knee (pure).

``docs/metrics.md``, "Saturation in sweeps", defines both tests and works an example:

- an **open-loop** (rate) point is past saturation when the server no longer keeps up with the
  offered rate (its completion rate lags the arrival rate by more than a margin beyond Poisson
  noise) *and* a queue grows during the run (TTFT regressed on arrival time has a
  significantly positive slope, one-sided);
- a **closed-loop** (concurrency) point is past saturation when its throughput did not rise
  over the previous point's beyond noise while its median E2E latency kept rising;
- either kind is past saturation when its error rate breaks the spec's ``max_error_rate``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import SaturatedPoint, Saturation
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats.quantiles import percentile
from pytest_goodput.stats.student import t_cdf

#: Throughput shortfall tolerated beyond noise: achieved/offered below 1 − 0.10 − z/√n lags.
MARGIN = 0.10
#: One-sided normal quantile for the throughput tests (95 %).
Z = 1.645
#: One-sided level of the TTFT trend test.
TREND_ALPHA = 0.01
#: Closed loop: median E2E must rise by more than this to count as "kept rising".
LATENCY_RISE = 0.10


@dataclass(frozen=True)
class TtftSlope:
    """Least-squares slope of TTFT on arrival time and its one-sided test (slope > 0)."""

    slope_ms_per_s: float
    t: float
    p: float
    n: int


@dataclass(frozen=True)
class PointSaturation:
    """One sweep point's reading: past saturation or not, and why."""

    past: bool
    reason: str
    ratio: Optional[float] = None  # open loop: achieved/offered; closed loop: throughput gain + 1
    threshold: Optional[float] = None  # the ratio below which the point lags / is flat
    trend: Optional[TtftSlope] = None


def ttft_trend(arrivals_s: Sequence[float], ttfts_ms: Sequence[float]) -> Optional[TtftSlope]:
    """OLS slope of TTFT on arrival time, t = b / se(b), p = P(T_{n−2} ≥ t); None below 3 points."""
    n = len(arrivals_s)
    if n < 3 or n != len(ttfts_ms):
        return None
    mx = sum(arrivals_s) / n
    my = sum(ttfts_ms) / n
    sxx = sum((x - mx) ** 2 for x in arrivals_s)
    if sxx <= 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(arrivals_s, ttfts_ms)) / sxx
    a = my - b * mx
    ssr = sum((y - a - b * x) ** 2 for x, y in zip(arrivals_s, ttfts_ms))
    se = math.sqrt(ssr / (n - 2) / sxx)
    if se == 0:
        t = math.inf if b > 0 else (-math.inf if b < 0 else 0.0)
        return TtftSlope(b, t, 0.0 if b > 0 else 1.0, n)
    t = b / se
    return TtftSlope(b, t, 1.0 - t_cdf(t, n - 2), n)


def errors_break(failed: int, n: int, max_error_rate: float) -> Optional[PointSaturation]:
    """Past saturation by errors: failed / n above the spec's ``max_error_rate``; else None."""
    if n and failed / n > max_error_rate:
        return PointSaturation(True, f"error rate {failed / n:.1%} > max_error_rate {max_error_rate:.1%}")
    return None


def lag_threshold(n: int) -> float:
    """achieved/offered below this lags: 1 − MARGIN − Z/√n (a Poisson count's relative sd is 1/√n)."""
    return 1.0 - MARGIN - Z / math.sqrt(max(n, 1))


def open_loop(
    arrivals_s: Sequence[float],
    ends_s: Sequence[Optional[float]],
    ttfts_ms: Sequence[Optional[float]],
    e2es_ms: Sequence[Optional[float]],
    failed: int,
    max_error_rate: float,
) -> PointSaturation:
    """An open-loop point from its measured requests (``ends_s``/latencies None when failed).

    Offered: n arrivals over the arrival span plus the unloaded service time d (median E2E of
    the first ⌈n/10⌉ ok requests by arrival, before any queue); achieved: ok completions over
    first arrival → last completion. Lags when achieved/offered < 1 − 0.10 − 1.645/√n.
    """
    n = len(arrivals_s)
    if n == 0:
        return PointSaturation(False, "no requests")
    broken = errors_break(failed, n, max_error_rate)
    if broken is not None:
        return broken
    ok = sorted((a, e, t, d) for a, e, t, d in zip(arrivals_s, ends_s, ttfts_ms, e2es_ms)
                if e is not None and t is not None and d is not None)
    if len(ok) < 3:
        return PointSaturation(False, "too few completed requests")
    t0 = min(arrivals_s)
    first = [d for _, _, _, d in ok[:max(1, math.ceil(n / 10))]]
    service_s = percentile(sorted(first), 50) / 1000.0  # type: ignore[operator]
    offered = n / (max(arrivals_s) - t0 + service_s)
    span = max(e for _, e, _, _ in ok) - t0  # type: ignore[type-var]
    achieved = len(ok) / span if span > 0 else math.inf
    ratio = achieved / offered
    threshold = lag_threshold(n)
    trend = ttft_trend([a - t0 for a, _, _, _ in ok], [t for _, _, t, _ in ok])  # type: ignore[misc]
    growing = trend is not None and trend.p < TREND_ALPHA
    past = ratio < threshold and growing
    why = (f"achieved/offered {ratio:.3f} {'<' if ratio < threshold else '≥'} {threshold:.3f}, "
           f"TTFT slope {trend.slope_ms_per_s if trend else float('nan'):+.3g} ms/s "
           f"(p {trend.p if trend else float('nan'):.2g})")
    return PointSaturation(past, why, ratio, threshold, trend)


def closed_loop(
    previous: tuple[float, float, int, float],
    current: tuple[float, float, int, float],
    failed: int,
    max_error_rate: float,
) -> PointSaturation:
    """A closed-loop point against the previous one; each is (concurrency, output tok/s,
    measured requests, median E2E ms). Flat: gain < 0.10·(k − 1) + 1.645·√(1/n₁ + 1/n₀) with
    k the concurrency ratio; past saturation when flat and the median E2E rose > 10 %."""
    c0, thr0, n0, e0 = previous
    c1, thr1, n1, e1 = current
    broken = errors_break(failed, n1, max_error_rate)
    if broken is not None:
        return broken
    if min(n0, n1) < 1 or thr0 <= 0 or c0 <= 0:
        return PointSaturation(False, "too few requests")
    k = c1 / c0
    ratio = thr1 / thr0
    threshold = 1.0 + MARGIN * (k - 1.0) + Z * math.sqrt(1.0 / n1 + 1.0 / n0)
    rising = e1 > (1.0 + LATENCY_RISE) * e0
    past = ratio < threshold and rising
    why = (f"throughput ×{ratio:.3f} {'<' if ratio < threshold else '≥'} ×{threshold:.3f} for "
           f"concurrency ×{k:g}, median E2E ×{e1 / e0 if e0 > 0 else math.inf:.3g}")
    return PointSaturation(past, why, ratio, threshold)


def _measured(result: RunResult) -> list:
    return [r for r in result.requests if not r.warmup]


def _closed_summary(result: RunResult, load: float) -> tuple[float, float, int, float]:
    recs = _measured(result)
    e2e = sorted(r.e2e_ms for r in recs if r.ok and r.e2e_ms is not None)
    return (load, result.throughput.output_tokens_per_s, len(recs),
            percentile(e2e, 50) if e2e else 0.0)  # type: ignore[return-value]


def point_saturation(spec: ScenarioSpec, results: Sequence[RunResult], i: int) -> PointSaturation:
    """Sweep point ``i`` of ``spec`` (a sweep) from its run and, closed loop, the one before."""
    assert spec.sweep is not None
    res = results[i]
    recs = _measured(res)
    failed = sum(not r.ok for r in recs)
    if spec.sweep_over == "rate":
        return open_loop([r.scheduled_at for r in recs],
                         [r.end_at if r.ok else None for r in recs],
                         [r.ttft_ms if r.ok else None for r in recs],
                         [r.e2e_ms if r.ok else None for r in recs], failed, spec.max_error_rate)
    if i == 0:
        broken = errors_break(failed, len(recs), spec.max_error_rate)
        return broken or PointSaturation(False, "first point: nothing to compare with")
    return closed_loop(_closed_summary(results[i - 1], spec.sweep[i - 1]),
                       _closed_summary(res, spec.sweep[i]), failed, spec.max_error_rate)


def saturation_record(spec: ScenarioSpec, readings: Sequence[PointSaturation],
                      stopped: bool) -> Saturation:
    """What a sweep keeps: the measured loads, where saturation began (None: nowhere measured),
    its step index (``len(sweep)`` when none), why, and the loads skipped after it."""
    assert spec.sweep is not None
    loads = list(spec.sweep)
    began = next((i for i, r in enumerate(readings) if r.past), None)
    measured = loads[:len(readings)]
    return Saturation(
        load_kind=spec.sweep_over,
        measured=measured,
        began_at=None if began is None else loads[began],
        step=len(loads) if began is None else began,
        reason=None if began is None else readings[began].reason,
        points=[SaturatedPoint(load=v, past=r.past, reason=r.reason) for v, r in zip(measured, readings)],
        skipped=loads[len(readings):] if stopped else [],
    )

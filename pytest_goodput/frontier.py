"""Pareto frontiers (throughput vs interactivity) and their comparison against a baseline.

Pure: pydantic models and arithmetic, no I/O. ``docs/frontiers.md`` defines every rule here:
x = interactivity (tokens/s/user = 1000 / TPOT ms at a chosen percentile), y = output
tokens/s (per GPU), the frontier is the set of non-dominated points read as a step function
(no interpolation, as MLPerf Endpoints requires), and a new frontier regresses where its
best throughput at an interactivity at least as high as a baseline point's falls below
tolerance beyond noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict

from .metrics import percentile_nearest_rank
from .outcome import MetricComparison, Verdict
from .results import RunResult

LoadKind = Literal["concurrency", "rate"]

Side = Literal["baseline", "current"]

#: Interactivity slack when matching points: run-to-run noise of a P50 TPOT is ~1 %, so a
#: twin point within 5 % still serves the baseline point's users.
DEFAULT_X_TOLERANCE = 0.05

#: ``noise(point, side)``: relative half-width of the point's throughput (0.03 = ±3 %) in the
#: baseline or current run, or None if unknown.
NoiseFn = Callable[["FrontierPoint", Side], Optional[float]]


class FrontierPoint(BaseModel):
    """One operating point of a sweep.

    ``interactivity`` and ``throughput`` are None when undefined (e.g. no request produced
    two tokens); such points, like NaN or infinite ones, never reach a frontier.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    load: float
    load_kind: LoadKind
    interactivity: Optional[float]  # tokens/s/user = 1000 / TPOT_ms at the chosen percentile
    throughput: Optional[float]  # output tokens/s (per GPU if gpus > 1)
    ttft_ms: Optional[float] = None
    tpot_ms: Optional[float] = None
    slo_ok: Optional[bool] = None
    samples: int = 0


def _finite(value: Optional[float]) -> bool:
    return value is not None and math.isfinite(value)


def _usable(p: FrontierPoint) -> bool:
    return _finite(p.interactivity) and _finite(p.throughput)


def nearest_rank(values: Sequence[float], percentile: float) -> Optional[float]:
    """Nearest-rank percentile of the finite values (metrics' definition); None if none."""
    if not 0 < percentile <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {percentile}")
    data = sorted(v for v in values if math.isfinite(v))
    return percentile_nearest_rank(data, percentile) if data else None


def _load_of(result: RunResult) -> tuple[float, LoadKind]:
    """The offered load and its kind: sweeps say which axis they swept; offline is all-in-flight."""
    spec = result.spec
    kind: LoadKind
    if spec.scenario == "sweep":
        kind = spec.sweep_over
    elif spec.scenario in ("concurrency", "offline"):
        kind = "concurrency"
    else:
        kind = "rate"
    if kind in result.load:
        return float(result.load[kind]), kind
    fallback = spec.concurrency if kind == "concurrency" else spec.rate
    if fallback is None and spec.scenario == "offline":
        fallback = result.issued  # every request in flight at t=0
    return float(fallback if fallback is not None else math.nan), kind


def _slo_ok(result: RunResult) -> Optional[bool]:
    """True when every stated SLO held; None when the run stated none."""
    checks: list[bool] = []
    if result.goodput is not None and result.spec.has_request_slos:
        checks.append(result.goodput.met)
    checks.extend(c.ok for c in result.percentile_slos)
    return all(checks) if checks else None


def point_from_result(result: RunResult, percentile: float = 50, gpus: int = 1) -> FrontierPoint:
    """Reduce one run to a frontier point; P50 by default, P90 as MLPerf Endpoints uses.

    TPOT and TTFT are nearest-rank percentiles over ok, non-warm-up requests.
    """
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    measured = [r for r in result.requests if r.ok and not r.warmup]
    tpots = [r.tpot_ms for r in measured if r.tpot_ms is not None]
    ttfts = [r.ttft_ms for r in measured if r.ttft_ms is not None]
    tpot = nearest_rank(tpots, percentile)
    ttft = nearest_rank(ttfts, percentile)
    interactivity = 1000.0 / tpot if tpot is not None and tpot > 0 else None
    load, kind = _load_of(result)
    return FrontierPoint(
        load=load,
        load_kind=kind,
        interactivity=interactivity,
        throughput=result.throughput.output_tokens_per_s / gpus,
        ttft_ms=ttft,
        tpot_ms=tpot,
        slo_ok=_slo_ok(result),
        samples=sum(1 for t in tpots if math.isfinite(t)),
    )


def pareto_frontier(points: Iterable[FrontierPoint]) -> list[FrontierPoint]:
    """Non-dominated points, interactivity ascending (so throughput strictly descending).

    Higher is better on both axes. Of exact duplicates the one with the lowest load is kept
    (then the earliest given), so the result does not depend on input order otherwise.
    """
    candidates = [(i, p) for i, p in enumerate(points) if _usable(p)]
    candidates.sort(
        key=lambda ip: (-ip[1].interactivity, -ip[1].throughput, ip[1].load, ip[1].load_kind, ip[0])  # type: ignore[operator]
    )
    kept: list[FrontierPoint] = []
    best = -math.inf
    for _, p in candidates:
        assert p.throughput is not None
        if p.throughput > best:
            kept.append(p)
            best = p.throughput
    kept.reverse()
    return kept


def _best_at_or_above(points: Iterable[FrontierPoint], x: float) -> Optional[FrontierPoint]:
    """The highest-throughput point with interactivity >= x (ties: the more interactive)."""
    best: Optional[FrontierPoint] = None
    for p in points:
        if not _usable(p) or not p.interactivity >= x:  # type: ignore[operator]
            continue
        if best is None or (p.throughput, p.interactivity) > (best.throughput, best.interactivity):  # type: ignore[operator]
            best = p
    return best


def step_lookup(frontier: Sequence[FrontierPoint], x: float) -> Optional[float]:
    """Best frontier throughput at interactivity >= x; None beyond the right end.

    A step function: left of the first point it holds the first point's throughput, on
    (x[i-1], x[i]] it holds point i's, and nothing is interpolated.
    """
    best = _best_at_or_above(frontier, x)
    return None if best is None else best.throughput


def step_polyline(
    frontier: Sequence[FrontierPoint], x_start: Optional[float] = None
) -> tuple[list[float], list[float]]:
    """Vertices of the step function drawn as a plain line (agrees with :func:`step_lookup`).

    Starts at ``x_start`` (default: the first point) at the first throughput, drops
    vertically right *after* each point (steps-pre), and ends at the last point.
    """
    front = pareto_frontier(frontier)
    if not front:
        return [], []
    xs: list[float] = []
    ys: list[float] = []
    first = front[0]
    assert first.interactivity is not None and first.throughput is not None
    if x_start is not None and x_start < first.interactivity:
        xs.append(x_start)
        ys.append(first.throughput)
    for i, p in enumerate(front):
        assert p.interactivity is not None and p.throughput is not None
        if i > 0:
            xs.append(front[i - 1].interactivity)  # type: ignore[arg-type]
            ys.append(p.throughput)
        xs.append(p.interactivity)
        ys.append(p.throughput)
    return xs, ys


def max_throughput_under_slo(points: Iterable[FrontierPoint]) -> Optional[FrontierPoint]:
    """Highest-throughput point whose SLOs all held (ties: more interactive, then lower load)."""
    ok = [p for p in points if p.slo_ok is True and _finite(p.throughput)]
    if not ok:
        return None
    return min(
        ok,
        key=lambda p: (
            -p.throughput,  # type: ignore[operator]
            -(p.interactivity if _finite(p.interactivity) else -math.inf),  # type: ignore[operator]
            p.load,
        ),
    )


class FrontierPointComparison(BaseModel):
    """One baseline frontier point against the current frontier's step function."""

    model_config = ConfigDict(extra="forbid")

    interactivity: float
    baseline: FrontierPoint
    current: Optional[FrontierPoint] = None  # best current point at interactivity >= baseline's
    ratio: float  # current / baseline throughput; 0 when no current point is that interactive
    interval: tuple[float, float]  # of the ratio; zero width when no noise is known
    verdict: Verdict


class FrontierComparison(BaseModel):
    """Per-point ratios, the worst one, and the overall verdict."""

    model_config = ConfigDict(extra="forbid")

    tolerance: float
    points: list[FrontierPointComparison]
    worst: Optional[FrontierPointComparison] = None
    verdict: Verdict
    baseline_frontier: list[FrontierPoint]
    current_frontier: list[FrontierPoint]

    @property
    def worst_ratio(self) -> Optional[float]:
        return None if self.worst is None else self.worst.ratio

    def to_metric_comparison(self, metric: str = "frontier_throughput") -> MetricComparison:
        """The comparison as one gated metric (its worst point), for reports and the gate."""
        w = self.worst
        common = dict(metric=metric, direction="higher", tolerance=self.tolerance, verdict=self.verdict)
        if w is None:
            return MetricComparison(**common, method="pareto step lookup", note="no baseline frontier")
        counts = {v: sum(1 for p in self.points if p.verdict == v) for v in ("regressed", "inconclusive", "improved")}
        note = ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "all points pass"
        return MetricComparison(
            **common,
            baseline=w.baseline.throughput,
            current=None if w.current is None else w.current.throughput,
            change=w.ratio - 1.0,
            interval=(w.interval[0] - 1.0, w.interval[1] - 1.0),
            method="pareto step lookup",
            note=f"worst at {w.interactivity:.4g} tok/s/user of {len(self.points)} points; {note}",
        )


def _half_width(noise: Optional[NoiseFn], p: Optional[FrontierPoint], side: Side) -> float:
    if noise is None or p is None:
        return 0.0
    h = noise(p, side)
    if h is None or not math.isfinite(h) or h < 0:
        return 0.0
    return h


def ratio_interval(ratio: float, h_current: float, h_baseline: float) -> tuple[float, float]:
    """Worst-case bounds of current/baseline when each has a relative half-width.

    [r(1-hc)/(1+hb), r(1+hc)/(1-hb)]: interval arithmetic, conservative on purpose (fewer
    false alarms); the upper bound is infinite when the baseline half-width reaches 1.
    """
    lo = ratio * max(0.0, 1.0 - h_current) / (1.0 + h_baseline)
    hi = ratio * (1.0 + h_current) / (1.0 - h_baseline) if h_baseline < 1.0 else math.inf
    if ratio == 0.0:
        hi = 0.0
    return lo, hi


def point_verdict(ratio: float, interval: tuple[float, float], tolerance: float) -> Verdict:
    """regressed: the whole interval is below 1-tol; inconclusive: only the estimate is;
    improved: the whole interval is above 1+tol; otherwise pass."""
    lo, hi = interval
    if ratio < 1.0 - tolerance:
        return "regressed" if hi < 1.0 - tolerance else "inconclusive"
    if lo > 1.0 + tolerance:
        return "improved"
    return "pass"


def overall_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    """Worst state wins: regressed > inconclusive > improved > pass; no points is ``new``."""
    if not verdicts:
        return "new"
    for state in ("regressed", "inconclusive", "improved"):
        if state in verdicts:
            return state  # type: ignore[return-value]
    return "pass"


def compare_frontiers(
    baseline: list[FrontierPoint],
    current: list[FrontierPoint],
    tolerance: float = 0.05,
    noise: Optional[NoiseFn] = None,
    x_tolerance: Optional[float] = None,
) -> FrontierComparison:
    """Judge ``current`` at every baseline frontier point (see docs/frontiers.md).

    Interactivity is measured too, so it is noisy: a current point counts as serving a
    baseline point when its interactivity is at least the baseline's × (1 − ``x_tolerance``)
    (default: ``tolerance``). Without this, a twin point measured 0.01 % less interactive
    misses the step lookup and a same-engine rerun is reported as a regression.

    ``noise(point, side)`` gives a point's relative throughput half-width (e.g. from
    :func:`throughput_interval`); it is asked for each baseline point (side "baseline")
    and its matched current point (side "current"). Without it, tolerance alone decides.
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    x_tol = DEFAULT_X_TOLERANCE if x_tolerance is None else x_tolerance
    if not 0 <= x_tol < 1:
        raise ValueError(f"x_tolerance must be in [0, 1), got {x_tol}")
    base_front = pareto_frontier(baseline)
    cur_front = pareto_frontier(current)
    rows: list[FrontierPointComparison] = []
    for b in base_front:
        assert b.interactivity is not None and b.throughput is not None
        c = _best_at_or_above(cur_front, b.interactivity * (1.0 - x_tol))
        if c is None:
            ratio = 0.0
        elif b.throughput > 0:
            ratio = c.throughput / b.throughput  # type: ignore[operator]
        else:
            ratio = 1.0  # nothing to lose against a zero baseline
        interval = ratio_interval(
            ratio, _half_width(noise, c, "current"), _half_width(noise, b, "baseline")
        )
        rows.append(
            FrontierPointComparison(
                interactivity=b.interactivity,
                baseline=b,
                current=c,
                ratio=ratio,
                interval=interval,
                verdict=point_verdict(ratio, interval, tolerance),
            )
        )
    worst = min(rows, key=lambda r: (r.ratio, r.interactivity)) if rows else None
    return FrontierComparison(
        tolerance=tolerance,
        points=rows,
        worst=worst,
        verdict=overall_verdict([r.verdict for r in rows]),
        baseline_frontier=base_front,
        current_frontier=cur_front,
    )

"""Sweep points and Pareto frontiers (throughput vs interactivity) from run results (pure).

``docs/frontiers.md`` defines every rule here: x = interactivity (tokens/s/user = 1000 /
TPOT ms at a chosen percentile), y = output tokens/s (per GPU), and the frontier is the set
of non-dominated points read as a step function (no interpolation, as MLPerf Endpoints
requires).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Optional

from pytest_goodput.schema.outcomes.frontier import FrontierPoint, LoadKind
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.stats.inputs import finite
from pytest_goodput.stats.quantiles import percentile


def usable(p: FrontierPoint) -> bool:
    """Both coordinates are finite numbers: the point can stand on a frontier."""
    return finite(p.interactivity) and finite(p.throughput)


def nearest_rank(values: Sequence[float], pct: float) -> Optional[float]:
    """Nearest-rank percentile of the finite values (metrics' definition); None if none."""
    if not 0 < pct <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {pct}")
    data = sorted(v for v in values if math.isfinite(v))
    return percentile(data, pct) if data else None


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
    candidates = [(i, p) for i, p in enumerate(points) if usable(p)]
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


def best_at_or_above(points: Iterable[FrontierPoint], x: float) -> Optional[FrontierPoint]:
    """The highest-throughput point with interactivity >= x (ties: the more interactive)."""
    best: Optional[FrontierPoint] = None
    for p in points:
        if not usable(p) or not p.interactivity >= x:  # type: ignore[operator]
            continue
        if best is None or (p.throughput, p.interactivity) > (best.throughput, best.interactivity):  # type: ignore[operator]
            best = p
    return best


def step_lookup(frontier: Sequence[FrontierPoint], x: float) -> Optional[float]:
    """Best frontier throughput at interactivity >= x; None beyond the right end.

    A step function: left of the first point it holds the first point's throughput, on
    (x[i-1], x[i]] it holds point i's, and nothing is interpolated.
    """
    best = best_at_or_above(frontier, x)
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
    ok = [p for p in points if p.slo_ok is True and finite(p.throughput)]
    if not ok:
        return None
    return min(
        ok,
        key=lambda p: (
            -p.throughput,  # type: ignore[operator]
            -(p.interactivity if finite(p.interactivity) else -math.inf),  # type: ignore[operator]
            p.load,
        ),
    )

"""Frontier points and frontier comparisons: the JSON form of a sweep and of its verdict (pure)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict

from pytest_goodput.schema.outcomes.comparison import MetricComparison, Verdict

LoadKind = Literal["concurrency", "rate"]

Side = Literal["baseline", "current"]

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

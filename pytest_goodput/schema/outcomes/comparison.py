"""One gated metric's comparison, baseline against current, and the verdicts (pure schema).

Apart from the test's outcome (``outcome``) so that the shapes an outcome holds (frontier
comparisons, sessions' sweeps) can use it without an import cycle.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Verdict = Literal["pass", "improved", "regressed", "inconclusive", "underpowered", "new", "incomparable"]
VERDICTS: tuple[str, ...] = ("pass", "improved", "regressed", "inconclusive", "underpowered", "new",
                             "incomparable")
Direction = Literal["higher", "lower"]

#: The symbol each verdict is shown with in terminal and Markdown reports.
VERDICT_SYMBOL: dict[str, str] = {
    "pass": "✅",
    "improved": "🚀",
    "regressed": "❌",
    "inconclusive": "⚠️",
    "underpowered": "🔍",
    "new": "🆕",
    "incomparable": "⛔",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricComparison(_Model):
    """One gated metric, baseline vs current.

    ``change`` is relative, signed so that positive means the metric's value went up
    (``(current - baseline) / baseline``); ``interval`` is the confidence interval of that
    relative change. ``direction`` says which way is good.
    """

    metric: str
    direction: Direction
    baseline: Optional[float] = None
    current: Optional[float] = None
    change: Optional[float] = None
    interval: Optional[tuple[float, float]] = None
    tolerance: float
    verdict: Verdict
    method: str = ""
    note: str = ""
    detectable: Optional[float] = Field(
        None, description="the smallest worse change this comparison could judge regressed")
    scale: Literal["relative", "absolute"] = Field(
        "relative", description="relative: change is (current-baseline)/baseline; absolute: "
        "current-baseline (the error rate, in fractions)")
    basis: Optional[str] = Field(
        None, description="the metric that baseline, current and change are values of, when it "
        "is not `metric` itself: a sweep's row holds its worst load point's output throughput "
        "or TPOT")
    within_launch: Optional[float] = Field(
        None, description="the baseline's noise within a launch: SD of one run's value among the "
        "repeats of its session, on the metric's analysis scale (relative for log scales); more "
        "requests or repeats shrink it (docs/statistics.md, 'Power planning')")
    between_launch: Optional[float] = Field(
        None, description="the baseline's noise between launches: SD of a launch's own level, the "
        "within part taken out; only more launches (baseline sessions, PR launches) shrink it")

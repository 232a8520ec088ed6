"""Reports' shared vocabulary: metric labels and order, number formats, statuses (pure).

The terminal, Markdown and GitHub
reports all format numbers through these functions so that a value reads the same in a
log line, a PR comment and an annotation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Optional

from pytest_goodput.schema import registry

if TYPE_CHECKING:  # pragma: no cover
    from pytest_goodput.schema.outcomes.outcome import MetricComparison, TestOutcome

#: Test statuses (``TestOutcome.status``) in the order summaries count them.
STATUSES: tuple[str, ...] = (
    "passed",
    "regressed",
    "inconclusive",
    "underpowered",
    "new",
    "slo-failed",
    "invalid",
    "error",
    "incomparable",
    "workload-changed",
)
#: Statuses that fail the gate (inconclusive fails only in strict mode).
FAILING: frozenset[str] = frozenset({"regressed", "slo-failed", "invalid", "error"})
#: Statuses that deserve a detailed look in every report.
NOTEWORTHY: frozenset[str] = FAILING | {"inconclusive", "underpowered", "incomparable",
                                         "workload-changed"}

#: How bad a verdict is, for picking a test's worst metric (higher is worse).
VERDICT_SEVERITY: dict[str, int] = {
    "improved": 0,
    "pass": 1,
    "new": 2,
    "incomparable": 3,
    "underpowered": 4,
    "inconclusive": 4,
    "regressed": 5,
}



def canonical_metric(name: str) -> str:
    """The path form of a metric name (``ttft_p99_ms`` → ``metrics.ttft_ms.p99``)."""
    return registry.canonical(name)


def metric_info(name: str) -> tuple[str, str]:
    """(label, unit) of a metric, from the registry; a name it does not know is its own label."""
    info = registry.lookup_info(name)
    return (info.label, info.unit) if info is not None else (name, "")


def metric_label(name: str, with_unit: bool = True) -> str:
    """``goodput (req/s)``: how a metric is named in table cells."""
    label, unit = metric_info(name)
    return f"{label} ({unit})" if with_unit and unit and unit != "%" else label


def comparison_unit(c: "MetricComparison") -> str:
    """The unit of a compared row's values: its basis metric's (a sweep's worst point), else its own."""
    return metric_info(c.basis or c.metric)[1]


def comparison_label(c: "MetricComparison", with_unit: bool = True) -> str:
    """A compared row's name: ``frontier: TPOT P50 (ms)`` when a sweep's worst point was
    judged on its TPOT, so that no value is shown under another metric's name and unit."""
    if not c.basis or c.basis == c.metric:
        return metric_label(c.metric, with_unit)
    return f"frontier: {metric_label(c.basis, with_unit)}"


def metric_sort_key(name: str) -> tuple[int, str]:
    """Known metrics in the registry's report order, then unknown ones alphabetically."""
    return registry.order_key(name)


def _finite(x: Optional[float]) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def fmt_num(x: Optional[float], missing: str = "–") -> str:
    """Three significant digits, thousands grouped, no scientific notation for big values."""
    if x is None:
        return missing
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if x == 0:
        return "0"
    return f"{x:.3g}"


def fmt_percent(fraction: Optional[float], missing: str = "–") -> str:
    """A fraction as a percent that never rounds a shortfall up to 100 %."""
    if fraction is None:
        return missing
    if not math.isfinite(fraction):
        return str(fraction)
    value = fraction * 100.0
    for digits in (1, 2, 3, 4):
        text = f"{value:.{digits}f}"
        if fraction >= 1 or float(text) < 100:
            break
    return f"{text}%"


def fmt_value(x: Optional[float], unit: str = "", missing: str = "–", with_unit: bool = False) -> str:
    """A metric value in its unit; fractions with unit ``%`` are shown as percents."""
    if unit == "%":
        return fmt_percent(x, missing)
    text = fmt_num(x, missing)
    return f"{text} {unit}" if with_unit and unit and x is not None else text


def fmt_change(change: Optional[float], missing: str = "–", scale: str = "relative") -> str:
    """A signed change: relative ``+12.3%`` / ``-4.0%``, or absolute in percentage points
    (``+2.00 pp``: the error rate, a difference of two fractions)."""
    if change is None:
        return missing
    if math.isnan(change):
        return "nan"
    if math.isinf(change):
        return "+inf" if change > 0 else "-inf"
    if scale == "absolute":
        return f"{change * 100:+.2f} pp"
    return f"{change * 100:+.1f}%"


def fmt_interval(interval: Optional[tuple[float, float]], missing: str = "–",
                 scale: str = "relative") -> str:
    """``[-5.1%, +2.0%]``: the interval of a change (see :func:`fmt_change`)."""
    if interval is None:
        return missing
    lo, hi = interval
    return f"[{fmt_change(lo, scale=scale)}, {fmt_change(hi, scale=scale)}]"


def sorted_outcomes(outcomes: Iterable["TestOutcome"]) -> list["TestOutcome"]:
    """Reports list tests by node id so that reruns diff cleanly."""
    return sorted(outcomes, key=lambda o: o.nodeid)


def sorted_comparisons(outcome: "TestOutcome") -> list["MetricComparison"]:
    return sorted(outcome.comparisons, key=lambda c: metric_sort_key(c.metric))


def badness(c: "MetricComparison") -> float:
    """How far a change moved in the bad direction (negative: it improved)."""
    if not _finite(c.change):
        return 0.0
    return -c.change if c.direction == "higher" else c.change  # type: ignore[operator]


def worst_comparison(outcome: "TestOutcome") -> Optional["MetricComparison"]:
    """The comparison a one-row summary shows: worst verdict, then the largest bad change."""
    if not outcome.comparisons:
        return None
    return max(
        sorted_comparisons(outcome),
        key=lambda c: (VERDICT_SEVERITY.get(c.verdict, 0), badness(c)),
    )


def status_counts(outcomes: Iterable["TestOutcome"]) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    return counts


def key_metric_values(outcome: "TestOutcome") -> dict[str, Optional[float]]:
    """``key_metrics`` keyed by canonical path."""
    return {canonical_metric(k): v for k, v in outcome.key_metrics.items()}


def sides(outcome: "TestOutcome") -> tuple[str, str]:
    """What the two sides of a comparison are called: base and head in A/B mode."""
    return ("base", "head") if outcome.ab is not None else ("baseline", "current")

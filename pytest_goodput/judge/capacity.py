"""A capacity search's result against the baseline's, judged by their brackets (pure).

A search ends with a bracket [lower, upper] around the highest rate meeting the attainment
target; two capacities differ beyond doubt only when their brackets, widened by the
tolerance, do not overlap (``docs/scenarios.md``).
"""

from __future__ import annotations

import math
from typing import Any

from pytest_goodput.schema.outcome import MetricComparison

METRIC = "capacity.requests_per_s"


def _bound(value: Any, default: float) -> float:
    return default if value is None else float(value)


def capacity_comparison(
    baseline_capacity: dict[str, Any], current_capacity: dict[str, Any], tolerance: float
) -> MetricComparison:
    """Judge ``capacity.requests_per_s`` by its search brackets (see the module docstring)."""
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    b = float(baseline_capacity["requests_per_s"])
    c = float(current_capacity["requests_per_s"])
    b_lo = _bound(baseline_capacity.get("lower"), b)
    c_lo = _bound(current_capacity.get("lower"), c)
    b_hi = _bound(baseline_capacity.get("upper"), math.inf)
    c_hi = _bound(current_capacity.get("upper"), math.inf)
    change = (c - b) / b if b > 0 else None
    interval = None
    if b_lo > 0 and math.isfinite(b_hi) and math.isfinite(c_hi):
        interval = (c_lo / b_hi - 1.0, c_hi / b_lo - 1.0)
    fmt = lambda lo, hi: f"[{lo:.4g}, {'∞' if math.isinf(hi) else f'{hi:.4g}'}]"  # noqa: E731
    common = dict(metric=METRIC, direction="higher", baseline=b, current=c, change=change,
                  interval=interval, tolerance=tolerance, method="capacity search brackets")
    note = f"baseline {fmt(b_lo, b_hi)} req/s, current {fmt(c_lo, c_hi)} req/s"
    b_target, c_target = baseline_capacity.get("target"), current_capacity.get("target")
    if b_target is not None and c_target is not None and float(b_target) != float(c_target):
        return MetricComparison(**common, verdict="incomparable",
                                note=f"attainment target changed: {b_target} -> {c_target}")
    if c_hi < b_lo * (1.0 - tolerance):
        verdict = "regressed"
    elif c < b * (1.0 - tolerance):
        verdict = "inconclusive"
        note += "; worse than tolerance but the brackets overlap"
    elif c_lo > b_hi * (1.0 + tolerance):
        verdict = "improved"
    else:
        verdict = "pass"
    incomplete = [name for name, d in (("baseline", baseline_capacity), ("current", current_capacity))
                  if d.get("complete") is False]
    if incomplete and verdict in ("regressed", "improved"):
        verdict = "inconclusive"
        note += f"; {' and '.join(incomplete)} search stopped early"
    return MetricComparison(**common, verdict=verdict, note=note)

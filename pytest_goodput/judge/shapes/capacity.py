"""A capacity search's result against the baseline's sessions, judged by the scalar rule (pure).

Each search ends with a bracket [lower, upper] around the highest rate meeting the
attainment target (relative width at most the search resolution); the capacity is its lower
end. The change is judged like every scalar metric (``verdicts.rule``): on the log scale,
with the bracket's width as the search's own noise (a uniform spread over the bracket), the
session-to-session spread of the baseline's capacities, and the registry's prior for
whole-measurement shapes. A search that hit ``capacity_max_rate`` has no upper bound: such
a capacity is *at least* the cap, and two of them are equal as far as the search can tell.
A bracket is also a hard bound: a capacity is never *regressed* (or *improved*) while the
brackets, widened by the tolerance, still overlap.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from pytest_goodput.judge.scalar.verdicts import rule
from pytest_goodput.schema import registry
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.runs.session import Capacity
from pytest_goodput.judge.vocabulary import CONFIDENCE, MetricDef

METRIC = "capacity.requests_per_s"


def _bracket(capacity: Capacity) -> tuple[float, float, float]:
    """(capacity, lower, upper) with a missing upper bound as +inf."""
    hi = capacity.upper
    return float(capacity.requests_per_s), float(capacity.lower), math.inf if hi is None else float(hi)


def _search_sd(capacity: Capacity) -> float:
    """SD of the log capacity from the bracket alone: a uniform spread over [lower, upper]."""
    _, lo, hi = _bracket(capacity)
    if lo <= 0 or not math.isfinite(hi):
        return 0.0
    return math.log(hi / lo) / math.sqrt(12.0)


def capacity_comparison(baseline: Sequence[Capacity] | Capacity,
                        current: Capacity, tolerance: float,
                        confidence: float = CONFIDENCE) -> MetricComparison:
    """Judge ``capacity.requests_per_s``: the current search against every baseline session's."""
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    sessions = [baseline] if isinstance(baseline, Capacity) else list(baseline)
    defn = MetricDef.of(METRIC, tolerance)
    c, c_lo, c_hi = _bracket(current)
    base = [_bracket(b) for b in sessions]
    fmt = lambda lo, hi: f"[{lo:.4g}, {'∞' if math.isinf(hi) else f'{hi:.4g}'}]"  # noqa: E731
    note = (f"baseline {', '.join(fmt(lo, hi) for _, lo, hi in base)} req/s, "
            f"current {fmt(c_lo, c_hi)} req/s")
    common = dict(metric=METRIC, direction="higher", tolerance=tolerance,
                  method="capacity search brackets")
    b_target, c_target = sessions[-1].target, current.target
    if float(b_target) != float(c_target):
        return MetricComparison(**common, baseline=base[-1][0], current=c, verdict="incomparable",
                                note=f"attainment target changed: {b_target} -> {c_target}")
    values = [v for v, _, _ in base]
    if min(values + [c]) <= 0:
        verdict = "pass" if min(values) == c else ("improved" if c > min(values) else "regressed")
        return MetricComparison(**common, baseline=min(values), current=c, verdict=verdict,
                                note=f"{note}; a capacity of 0: judged by direction only")
    logs = np.log(values)
    b = float(math.exp(logs.mean()))
    if not math.isfinite(c_hi) and all(not math.isfinite(hi) for _, _, hi in base):
        return MetricComparison(**common, baseline=b, current=c, change=c / b - 1.0, verdict="pass",
                                note=f"{note}; every search reached capacity_max_rate")
    within = math.sqrt(_search_sd(current) ** 2
                       + float(np.mean([_search_sd(x) ** 2 for x in sessions])) / len(sessions))
    s = float(np.std(logs, ddof=1)) if len(logs) >= 2 else None
    out = rule(defn, base=b, cur=c, change=c / b - 1.0, d=math.log(c / b), scale="log",
               within=(within, within), machine=registry.metric(METRIC).run_cv,
               spread=(s, len(logs) - 1 if s is not None else 0), sessions=len(sessions),
               confidence=confidence, method="capacity search brackets", note=note)
    # A bracket is a hard bound, not only noise: no verdict the brackets themselves refute.
    b_lo = float(math.exp(np.mean([math.log(lo) for _, lo, _ in base]))) if min(lo for _, lo, _ in base) > 0 else 0.0
    b_hi = max(hi for _, _, hi in base)
    if out.verdict == "regressed" and not c_hi < b_lo * (1.0 - tolerance):
        out = out.model_copy(update={"verdict": "inconclusive",
                                     "note": f"{out.note}; worse than tolerance but the brackets overlap"})
    if out.verdict == "improved" and not c_lo > b_hi * (1.0 + tolerance):
        out = out.model_copy(update={"verdict": "pass",
                                     "note": f"{out.note}; better, but the brackets overlap"})
    incomplete = [name for name, d in (("baseline", sessions[-1]), ("current", current))
                  if not d.complete]
    if incomplete and out.verdict in ("regressed", "improved"):
        out = out.model_copy(update={"verdict": "inconclusive",
                                     "note": f"{out.note}; {' and '.join(incomplete)} search stopped early"})
    return out

"""Verdicts from summaries alone: an imported file that kept no per-request values (pure).

With no requests there is no spread within a run. With one file per side the verdict is the
two values' relative change against the tolerance, by the same rule as any verdict
(``verdicts.decide``) with a zero-width interval; with two or more files on each side their
run-to-run spread gives a Welch interval on the log scale. Every such verdict's note says
"summary only: no spread known" and what that means.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from pytest_goodput.judge.vocabulary import CONFIDENCE, MetricDef, decide
from pytest_goodput.schema.outcomes.comparison import MetricComparison
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.stats.student import t_ppf

NOTE = ("summary only: no spread known (a file held each metric's summary, not its requests, so the "
        "noise within a run is unknown; {how})")
ONE_EACH = "the verdict is the change against the tolerance alone, and noise larger than the tolerance can pass or fail it by chance"
ACROSS = "the interval is the run-to-run spread of the {b} baseline and {c} current files"


def summary_comparisons(baseline: Side, current: Side, defs: Sequence[MetricDef],
                        confidence: float = CONFIDENCE) -> list[MetricComparison]:
    """Each gated metric from every session's summary (one value per file)."""
    out = []
    for d in defs:
        b = _values(baseline, d.path)
        c = _values(current, d.path)
        if not b or not c:
            missing = "baseline" if not b else "current"
            out.append(MetricComparison(metric=d.path, direction=d.direction, tolerance=d.tolerance,
                                        verdict="inconclusive", method="summary",
                                        note=NOTE.format(how=f"the {missing} files do not give {d.path}")))
            continue
        out.append(_compare(d, b, c, confidence))
    return out


def _values(side: Side, path: str) -> list[float]:
    xs = [s.summary.get(path) for s in side.sessions]
    return [float(x) for x in xs if x is not None and x > 0 and math.isfinite(x)]


def _compare(d: MetricDef, b: list[float], c: list[float], confidence: float) -> MetricComparison:
    mb, mc = _geomean(b), _geomean(c)
    change = mc / mb - 1.0
    interval = _interval(b, c, confidence)
    how = ACROSS.format(b=len(b), c=len(c)) if interval is not None else ONE_EACH
    verdict = decide(d.direction, change, interval or (change, change), d.tolerance)
    return MetricComparison(metric=d.path, direction=d.direction, baseline=mb, current=mc, change=change,
                            interval=interval, tolerance=d.tolerance, verdict=verdict,  # type: ignore[arg-type]
                            method="summary", note=NOTE.format(how=how))


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _interval(b: list[float], c: list[float], confidence: float) -> Optional[tuple[float, float]]:
    """Welch on log values: the relative change's interval, from the files' spread."""
    if len(b) < 2 or len(c) < 2:
        return None
    lb, lc = [math.log(x) for x in b], [math.log(x) for x in c]
    vb, vc = _var(lb) / len(lb), _var(lc) / len(lc)
    diff = sum(lc) / len(lc) - sum(lb) / len(lb)
    se = math.sqrt(vb + vc)
    if se == 0:
        return (math.exp(diff) - 1, math.exp(diff) - 1)
    df = (vb + vc) ** 2 / (vb ** 2 / (len(lb) - 1) + vc ** 2 / (len(lc) - 1)) if vb + vc > 0 else 1.0
    h = t_ppf(0.5 + confidence / 2, max(df, 1.0)) * se
    return (math.exp(diff - h) - 1, math.exp(diff + h) - 1)


def _var(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)

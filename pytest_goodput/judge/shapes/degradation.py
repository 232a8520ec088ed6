"""Degradation within the run, judged against the baseline's own (pure).

A run's degradation (``measure/degradation.py``) is the change from its first steady time
slice to its last. ``docs/metrics.md`` ("Degradation within the run") is the rule: the
current sessions' mean degradation D_c is compared with the baseline sessions' mean D_b, on
an absolute scale (points of relative change), so an engine that always slows a little over
a run (a cache filling up) is held to its own habit rather than to zero. One session's
degradation varies by v: with two baseline sessions or more, the sessions' own spread (each
side's sample variance, pooled by degrees of freedom), which holds every source of noise
that differs between two runs of one schedule (slow machine drift included) and none that
they share (the seeded schedule's own busier and quieter slices); with one, the mean
within-run variance (the slice-to-slice noise, ``sd²``), which holds the schedule's slices
too and so overstates it. The change ``D_c − D_b`` has variance ``v · (1/k_c + 1/k_b)`` for
k_c current and k_b baseline sessions. The interval is the change ± z·SD, z at the judge's
confidence, and the verdict is the gate's rule (``verdicts.decide``): regressed when the
change is worse than the tolerance and its interval excludes zero. With no noise known
(fewer than four steady slices and one baseline session) a worse change is only
inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, fmean, variance
from typing import Optional

from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.registry import metric
from pytest_goodput.judge.vocabulary import CONFIDENCE, decide

#: One session's degradation: metric path → (value, within-run SD or None).
SessionDegradation = dict[str, tuple[float, Optional[float]]]
METHOD = "last time slice vs the first steady ones; slice-to-slice and session spread, normal"


def _spread(base: Sequence[tuple[float, Optional[float]]],
            cur: Sequence[tuple[float, Optional[float]]]) -> Optional[float]:
    """The variance of one session's degradation: the sessions' own spread (each side's sample
    variance, pooled by degrees of freedom) when the baseline has two sessions or more, else
    the mean within-run variance (``sd²``); None when neither is known."""
    sides = [side for side in (base, cur) if len(side) >= 2]
    if len(base) >= 2:
        df = sum(len(side) - 1 for side in sides)
        return sum((len(side) - 1) * variance([v for v, _ in side]) for side in sides) / df
    sds = [sd for _, sd in (*base, *cur) if sd is not None]
    return fmean([sd * sd for sd in sds]) if sds else None


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def degradation_comparison(path: str, baseline: Sequence[SessionDegradation],
                           current: Sequence[SessionDegradation], tolerance: float,
                           confidence: float = CONFIDENCE) -> Optional[MetricComparison]:
    """One degradation metric as a verdict; None when the baseline never measured it."""
    base = [s[path] for s in baseline if path in s]
    if not base:
        return None
    info = metric(path)
    cur = [s[path] for s in current if path in s]
    if not cur:
        return MetricComparison(
            metric=path, direction=info.direction, tolerance=tolerance, verdict="inconclusive",
            scale="absolute", method=METHOD, baseline=fmean(v for v, _ in base),
            note="not measured in this run: it needs two usable time slices from a steady one "
                 "(a longer run, or a shorter slice_s=)")
    d_b, d_c = fmean(v for v, _ in base), fmean(v for v, _ in cur)
    change = d_c - d_b
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    spread = _spread(base, cur)
    known = spread is not None
    half = z * math.sqrt((spread or 0.0) * (1.0 / len(base) + 1.0 / len(cur)))
    verdict = decide(info.direction, change, (change - half, change + half), tolerance)
    note = (f"{_pct(d_c)} within the run (baseline sessions: {', '.join(_pct(v) for v, _ in base)}); "
            f"noise ±{half:.1%}")
    if not known:
        note += "; the noise is unknown (fewer than 4 steady slices and one baseline session)"
        if verdict in ("regressed", "improved"):
            verdict = "inconclusive" if verdict == "regressed" else "pass"
    return MetricComparison(
        metric=path, direction=info.direction, baseline=d_b, current=d_c, change=change,
        interval=(change - half, change + half), tolerance=tolerance, verdict=verdict,  # type: ignore[arg-type]
        method=METHOD, note=note, scale="absolute", detectable=max(half, tolerance) if known else None)

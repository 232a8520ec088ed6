"""Degradation within the run, judged against the baseline's own (pure).

A run's degradation (``measure/degradation.py``) is the change from its first steady time
slice to its last. ``docs/metrics.md`` ("Degradation within the run") is the rule: the
current sessions' mean degradation D_c is compared with the baseline sessions' mean D_b, on
an absolute scale (points of relative change), so an engine that always slows a little over
a run (a cache filling up) is held to its own habit rather than to zero. The change
``D_c − D_b`` has variance ``v_c/k_c + v_b/k_b`` where, for each side of k sessions, v is the
larger of the mean within-run variance (the slice-to-slice noise, ``sd²``) and the sessions'
sample variance. The interval is the change ± z·SD, z at the judge's confidence, and the
verdict is the gate's rule (``verdicts.decide``): regressed when the change is worse than the
tolerance and its interval excludes zero. With no noise known on either side (fewer than
four steady slices, one session each) a worse change is only inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, fmean, variance
from typing import Optional

from pytest_goodput.judge.verdicts import CONFIDENCE, decide
from pytest_goodput.schema.outcome import MetricComparison
from pytest_goodput.schema.registry import metric

#: One session's degradation: metric path → (value, within-run SD or None).
SessionDegradation = dict[str, tuple[float, Optional[float]]]
METHOD = "last time slice vs the first steady ones; slice-to-slice and session spread, normal"


def _side(values: Sequence[tuple[float, Optional[float]]]) -> tuple[float, Optional[float]]:
    """The side's mean degradation and the variance of that mean (None: no noise known)."""
    xs = [v for v, _ in values]
    sds = [sd for _, sd in values if sd is not None]
    within = fmean([sd * sd for sd in sds]) if sds else None
    between = variance(xs) if len(xs) >= 2 else None
    known = [v for v in (within, between) if v is not None]
    return fmean(xs), (max(known) / len(xs) if known else None)


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
            scale="absolute", method=METHOD, baseline=_side(base)[0],
            note="not measured in this run: it needs two usable time slices from a steady one "
                 "(a longer run, or a shorter slice_s=)")
    d_b, v_b = _side(base)
    d_c, v_c = _side(cur)
    change = d_c - d_b
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    known = [v for v in (v_b, v_c) if v is not None]
    half = z * math.sqrt(sum(known))
    verdict = decide(info.direction, change, (change - half, change + half), tolerance)
    note = (f"{_pct(d_c)} within the run (baseline sessions: {', '.join(_pct(v) for v, _ in base)}); "
            f"noise ±{half:.1%}")
    if not known:
        note += "; the noise is unknown (fewer than 4 steady slices, one session per side)"
        if verdict in ("regressed", "improved"):
            verdict = "inconclusive" if verdict == "regressed" else "pass"
    return MetricComparison(
        metric=path, direction=info.direction, baseline=d_b, current=d_c, change=change,
        interval=(change - half, change + half), tolerance=tolerance, verdict=verdict,  # type: ignore[arg-type]
        method=METHOD, note=note, scale="absolute", detectable=max(half, tolerance) if known else None)

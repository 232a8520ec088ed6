"""Degradation within a run: the last usable time slice against the first steady ones (pure).

``docs/metrics.md`` ("Degradation within the run") is the contract. For each metric, with
x the usable slices' values from the first steady one on: ``value = x[last] / ref − 1``,
where ``ref`` is the median of the first :data:`REFERENCE` of them (fewer when the run has
fewer before its last), so a first steady slice still a little warm does not move it. Its within-run noise is the
slice-to-slice SD σ of the steady slices' values relative to their median, from the median
absolute successive difference (``σ = 1.4826 · median|r[i+1] − r[i]| / √2``): successive
differences cancel a slow trend, and their median ignores the one large step a degradation
makes. The value is a difference of two slices, so its SD is ``√2 · σ``; below four steady
slices (three differences) it is None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median
from typing import Optional

from pytest_goodput.schema.runs.slices import Degradation, Slice, Slices

#: Metric path → the slice's field it reads.
METRICS: dict[str, str] = {
    "degradation.output_tokens_per_s": "output_tokens_per_s",
    "degradation.ttft_ms.p50": "ttft_ms_p50",
    "degradation.tpot_ms.p50": "tpot_ms_p50",
}
#: Consistency constant of the median absolute deviation for a normal law.
MAD_NORMAL = 1.4826
#: Successive differences the noise needs (four slices).
MIN_DIFFERENCES = 3
#: Steady slices the reference is the median of.
REFERENCE = 3


def values(slices: Sequence[Slice], field: str) -> list[tuple[int, float]]:
    """(index, value) of the usable slices (enough requests, a positive value) for one field."""
    out = []
    for i, s in enumerate(slices):
        v = getattr(s, field)
        if not s.too_few and v is not None and v > 0 and math.isfinite(v):
            out.append((i, float(v)))
    return out


def slice_noise(xs: Sequence[float]) -> Optional[float]:
    """σ of one slice's value relative to the median, from the median absolute successive
    difference; None below :data:`MIN_DIFFERENCES` differences."""
    if len(xs) - 1 < MIN_DIFFERENCES:
        return None
    mid = median(xs)
    rel = [x / mid - 1.0 for x in xs]
    diffs = [abs(b - a) for a, b in zip(rel, rel[1:])]
    return MAD_NORMAL * median(diffs) / math.sqrt(2.0)


def degradation(slices: Sequence[Slice], steady_from: Optional[int]) -> dict[str, Degradation]:
    """Each metric's change from the first steady slices to the last usable one, with its SD."""
    if steady_from is None:
        return {}
    out: dict[str, Degradation] = {}
    for path, field in METRICS.items():
        steady = [(i, v) for i, v in values(slices, field) if i >= steady_from]
        if len(steady) < 2 or steady[0][0] != steady_from:
            continue
        xs = [v for _, v in steady]
        sigma = slice_noise(xs)
        ref = median(xs[:min(REFERENCE, len(xs) - 1)])
        out[path] = Degradation(value=xs[-1] / ref - 1.0, reference=ref, last=xs[-1],
                                sd=None if sigma is None else math.sqrt(2.0) * sigma)
    return out


#: Suffix of the key a baseline session's summary keeps a degradation's within-run SD under.
SD_SUFFIX = ".sd"


def session_degradation(runs: Sequence[Optional[Slices]]) -> dict[str, tuple[float, Optional[float]]]:
    """One session's degradation per metric over its repeats: the mean value, and the SD of
    that mean (``√Σsd² / r``; None when a repeat's noise is unknown)."""
    out: dict[str, tuple[float, Optional[float]]] = {}
    for path in METRICS:
        ds = [s.degradation[path] for s in runs if s is not None and path in s.degradation]
        if not ds:
            continue
        sds = [d.sd for d in ds]
        sd = None if any(x is None for x in sds) else math.sqrt(sum(x * x for x in sds)) / len(ds)  # type: ignore[operator]
        out[path] = (math.fsum(d.value for d in ds) / len(ds), sd)
    return out


def to_summary(session: dict[str, tuple[float, Optional[float]]]) -> dict[str, Optional[float]]:
    """A session's degradation as a baseline summary keeps it: the value, and its SD."""
    out: dict[str, Optional[float]] = {}
    for path, (value, sd) in session.items():
        out[path] = value
        out[path + SD_SUFFIX] = sd
    return out


def from_summary(summary: dict[str, Optional[float]]) -> dict[str, tuple[float, Optional[float]]]:
    """The degradation a baseline session recorded (empty before time slices were kept)."""
    return {p: (float(v), summary.get(p + SD_SUFFIX)) for p in METRICS
            if (v := summary.get(p)) is not None}

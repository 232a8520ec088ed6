"""Prometheus histograms as a run saw them: after − before, merged over runs, read (pure).

Why: an engine's histogram is cumulative since it started; the run's own distribution is the
difference of two scrapes. Its mean is exact (``_sum / _count``); a percentile is only known
to lie inside one bucket, so it is reported as that bucket's bounds, never interpolated
(``docs/metrics.md``, "The engine's clock").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

from pytest_goodput.schema.runs.engine_clock import Histogram
from pytest_goodput.stats.quantiles import nearest_rank

__all__ = ["delta", "merge", "mean_ms", "percentile_bounds_ms"]


def delta(before: Optional[Histogram], after: Histogram) -> Optional[Histogram]:
    """The observations made between two scrapes; ``after`` itself when there was no ``before``
    or the engine restarted (its count went down). None when the bounds changed."""
    if before is None or after.count < before.count:
        return after
    if before.bounds != after.bounds:
        return None
    return after.model_copy(update={
        "cumulative": [a - b for a, b in zip(after.cumulative, before.cumulative)],
        "count": after.count - before.count, "sum": after.sum - before.sum})


def merge(histograms: Sequence[Histogram]) -> Optional[Histogram]:
    """Several runs' histograms as one (same series and bounds); None if empty or they differ."""
    if not histograms or any(h.bounds != histograms[0].bounds for h in histograms):
        return None
    first = histograms[0]
    return first.model_copy(update={
        "cumulative": [sum(c) for c in zip(*(h.cumulative for h in histograms))],
        "count": sum(h.count for h in histograms), "sum": sum(h.sum for h in histograms)})


def mean_ms(h: Histogram) -> Optional[float]:
    """``_sum / _count`` in ms: exact, whatever the buckets. None without observations."""
    return h.sum / h.count * 1000.0 if h.count > 0 else None


def percentile_bounds_ms(h: Histogram, p: float) -> Optional[tuple[float, float]]:
    """The bucket holding the nearest-rank ``p``-th percentile, as (lower, upper] in ms.

    Rank k = ceil(p/100 · n); the percentile is the k-th smallest observation, which lies in
    the first bucket whose cumulative count reaches k: above the previous bound (0 for the
    first bucket), at most this one (``inf`` past the last finite bound).
    """
    if h.count <= 0:
        return None
    k = nearest_rank(int(round(h.count)), p)
    lower = 0.0
    for bound, cum in zip(h.bounds, h.cumulative):
        if cum >= k:
            return lower * 1000.0, bound * 1000.0
        lower = bound
    return lower * 1000.0, math.inf

"""The one nearest-rank percentile (MLPerf style) and distribution-free quantile intervals.

Every percentile the product reports is a value some request really had: the smallest
sample with at least P % of the sample at or below it.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from pytest_goodput.stats.binomial import binom_pmf_all
from pytest_goodput.stats.inputs import check_confidence

Interval = tuple[float, float]
#: A batched statistic: maps an array (..., n) to an array (...) along the last axis.
Statistic = Callable[[np.ndarray], np.ndarray]


def nearest_rank(n: int, percentile: float) -> int:
    """1-based nearest rank of the P-th percentile of n samples: ⌈P/100 · n⌉ (at least 1)."""
    return max(1, math.ceil(percentile / 100.0 * n - 1e-9))


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The smallest value with at least ``p`` % of the sample at or below it.

    ``sorted_values`` must be sorted ascending and non-empty; ``0 < p <= 100``.
    """
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of an empty sample")
    if not 0 < p <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {p}")
    return float(sorted_values[nearest_rank(n, p) - 1])


def quantile_interval_ranks(n: int, percentile: float, confidence: float = 0.95) -> tuple[int, int]:
    """1-based order-statistic ranks (l, u) bracketing the P-th percentile, distribution-free.

    With B ~ Binomial(n, P/100) the number of samples at or below the true quantile,
    P(x₍ₗ₎ ≤ ξ ≤ x₍ᵤ₎) ≥ F(u−1) − F(l−1). Equal tails: l is the largest rank with
    F(l−1) ≤ α/2 and u the smallest with F(u−1) ≥ 1 − α/2. ``l = 0`` means −∞ and
    ``u = n + 1`` means +∞ (too few samples to bound that side).
    """
    check_confidence(confidence)
    if n <= 0:
        return (0, 1)
    cdf = np.cumsum(binom_pmf_all(n, percentile / 100.0))
    half = (1.0 - confidence) / 2.0
    eps = 1e-12
    lower_ok = np.nonzero(cdf[: n] <= half + eps)[0]  # cdf[j] = F(j), candidate l = j + 1
    low = int(lower_ok[-1]) + 1 if lower_ok.size else 0
    upper_ok = np.nonzero(cdf[:n] >= 1.0 - half - eps)[0]  # u − 1 = j
    up = int(upper_ok[0]) + 1 if upper_ok.size else n + 1
    return (low, up)


def quantile_interval(
    values: Sequence[float], percentile: float, confidence: float = 0.95
) -> Interval:
    """Distribution-free confidence interval of the P-th percentile (may be ±inf)."""
    xs = np.sort(np.asarray(values, dtype=float))
    low, up = quantile_interval_ranks(len(xs), percentile, confidence)
    lo = float(xs[low - 1]) if low >= 1 else -math.inf
    hi = float(xs[up - 1]) if up <= len(xs) else math.inf
    return (lo, hi)


def nearest_rank_stat(percentile: float) -> Statistic:
    """A batched nearest-rank percentile statistic for :func:`bootstrap_interval`."""

    def stat(x: np.ndarray) -> np.ndarray:
        r = nearest_rank(x.shape[-1], percentile)
        return np.partition(x, r - 1, axis=-1)[..., r - 1]

    return stat


def nearest_rank_rows(x: np.ndarray, percentile: float) -> np.ndarray:
    """Nearest-rank percentile along the last axis, skipping NaN (NaN for a row without values).

    Like :func:`nearest_rank_stat`, but each row ranks only its values that are not NaN
    (+∞ is a value: the gate ranks a failed request as +∞).
    """
    xs = np.sort(np.asarray(x, dtype=float), axis=-1)  # +inf sorts before NaN, NaN last
    count = np.sum(~np.isnan(xs), axis=-1)
    rank = np.maximum(1, np.ceil(percentile / 100.0 * count - 1e-9)).astype(int)
    out = np.take_along_axis(xs, (rank - 1)[..., None], axis=-1)[..., 0]
    return np.where(count > 0, out, np.nan)

"""Bootstrap intervals (percentile and BCa), paired resampling indices and ratio intervals."""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Iterator, Literal, Sequence

import numpy as np

from pytest_goodput.stats.inputs import check_confidence
from pytest_goodput.stats.quantiles import Interval, Statistic


def _resample(rng: np.random.Generator, x: np.ndarray, reps: int) -> np.ndarray:
    return x[rng.integers(0, len(x), size=(reps, len(x)))]


def bootstrap_interval(
    values: Sequence[float],
    statistic: Statistic,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    method: Literal["percentile", "bca"] = "percentile",
) -> Interval:
    """Seeded bootstrap interval of a statistic of per-request samples.

    ``percentile``: the α/2 and 1−α/2 quantiles of the resampled statistic.
    ``bca``: Efron's bias-corrected and accelerated interval (jackknife acceleration).
    """
    check_confidence(confidence)
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    reps = statistic(_resample(rng, x, n_resamples))
    alpha = 1.0 - confidence
    lo_q, hi_q = alpha / 2.0, 1.0 - alpha / 2.0
    if method == "bca":
        lo_q, hi_q = _bca_levels(x, reps, statistic, lo_q, hi_q)
    elif method != "percentile":
        raise ValueError(f"unknown bootstrap method {method!r}")
    return (float(np.quantile(reps, lo_q)), float(np.quantile(reps, hi_q)))


def _bca_levels(
    x: np.ndarray, reps: np.ndarray, statistic: Statistic, lo_q: float, hi_q: float
) -> tuple[float, float]:
    """Adjusted quantile levels of the BCa interval (bias z0 and acceleration a)."""
    nd = NormalDist()
    theta = float(statistic(x[None, :])[0])
    frac = (np.sum(reps < theta) + 0.5 * np.sum(reps == theta)) / len(reps)
    frac = min(max(frac, 1.0 / len(reps)), 1.0 - 1.0 / len(reps))
    z0 = nd.inv_cdf(frac)
    n = len(x)
    keep = ~np.eye(n, dtype=bool)
    jack = statistic(np.broadcast_to(x, (n, n))[keep].reshape(n, n - 1))
    dev = jack.mean() - jack
    denom = 6.0 * float(np.sum(dev**2)) ** 1.5
    a = float(np.sum(dev**3)) / denom if denom > 0 else 0.0

    def level(q: float) -> float:
        zq = nd.inv_cdf(q)
        return nd.cdf(z0 + (z0 + zq) / (1.0 - a * (z0 + zq)))

    return level(lo_q), level(hi_q)


def default_block(n: int) -> int:
    """Block length of the moving-block bootstrap: ⌈n^(1/3)⌉, the classic rate for the
    variance of a mean of a weakly dependent series (Hall, Horowitz & Jing 1995)."""
    return max(1, math.ceil(n ** (1.0 / 3.0) - 1e-9))


def paired_indices(n: int, n_resamples: int = 2000, seed: int = 0, block: int = 1) -> np.ndarray:
    """Bootstrap resamples of request indices 0..n−1, shape (n_resamples, n).

    Applied to every run of a paired comparison at once: runs that replay one schedule
    (same seed: same prompts, lengths and arrivals) keep request i of one run next to
    request i of the others, so workload variance cancels in the contrast. ``block`` > 1
    draws runs of consecutive indices (a moving-block bootstrap): requests in flight
    together share the engine's batches and queue, so they are not independent draws.
    """
    return np.concatenate(list(paired_index_chunks(n, n_resamples, seed, block=block)))


def paired_index_chunks(
    n: int, n_resamples: int = 2000, seed: int = 0, max_elements: int = 1 << 21, block: int = 1
) -> Iterator[np.ndarray]:
    """:func:`paired_indices` in row blocks of at most ``max_elements`` indices (bounded memory)."""
    if n <= 0:
        raise ValueError(f"paired_indices needs n ≥ 1, got {n}")
    if block < 1:
        raise ValueError(f"block must be ≥ 1, got {block}")
    block = min(block, n)
    rng = np.random.default_rng(seed)
    rows = max(1, max_elements // n)
    per_row = -(-n // block)  # blocks needed to cover n indices
    offsets = np.arange(block)
    for start in range(0, n_resamples, rows):
        m = min(rows, n_resamples - start)
        if block == 1:
            yield rng.integers(0, n, size=(m, n))
            continue
        starts = rng.integers(0, n - block + 1, size=(m, per_row))
        yield (starts[..., None] + offsets).reshape(m, per_row * block)[:, :n]


def bootstrap_ratio_interval(
    current: Sequence[float],
    baseline: Sequence[float],
    statistic: Statistic,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Percentile-bootstrap interval of stat(current) / stat(baseline), resampling each side.

    Returns (nan, nan) when a side is empty; ratios with a zero denominator become inf.
    """
    check_confidence(confidence)
    a = np.asarray(current, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if a.size == 0 or b.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = statistic(_resample(rng, a, n_resamples)) / statistic(_resample(rng, b, n_resamples))
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    alpha = 1.0 - confidence
    return (float(np.quantile(ratio, alpha / 2)), float(np.quantile(ratio, 1 - alpha / 2)))

"""Binomial tail probabilities, percentile proofs (MLPerf early stopping), proportion intervals
(score and exact) and the dispersion of grouped counts."""

from __future__ import annotations

import functools
import math
from typing import Callable, Optional, Sequence

import numpy as np

from pytest_goodput.stats.inputs import check_confidence, z_value

Interval = tuple[float, float]


def binom_pmf_all(n: int, p: float) -> np.ndarray:
    """P(X = i) for i = 0..n, X ~ Binomial(n, p), computed in log space (no overflow)."""
    if p <= 0.0 or p >= 1.0:
        out = np.zeros(n + 1)
        out[0 if p <= 0.0 else n] = 1.0
        return out
    i = np.arange(1, n + 1, dtype=float)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log(n - i + 1.0) - np.log(i))))
    k = np.arange(n + 1, dtype=float)
    logpmf = log_choose + k * math.log(p) + (n - k) * math.log1p(-p)
    w = np.exp(logpmf - logpmf.max())
    return w / w.sum()


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p), by log-space summation of the pmf terms 0..k."""
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"binom_cdf needs n ≥ 0 and 0 ≤ p ≤ 1, got n={n}, p={p}")
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p == 0.0:
        return 1.0
    if p == 1.0:
        return 0.0
    i = np.arange(0, k + 1, dtype=float)
    steps = np.log(n - i[1:] + 1.0) - np.log(i[1:])
    log_choose = np.concatenate(([0.0], np.cumsum(steps)))
    logpmf = log_choose + i * math.log(p) + (n - i) * math.log1p(-p)
    top = float(logpmf.max())
    return min(1.0, math.exp(top) * float(np.exp(logpmf - top).sum()))


def percentile_proof(
    n: int, over: int, percentile: float, confidence: float = 0.99
) -> tuple[bool, Optional[int]]:
    """MLPerf early stopping: is "P-th percentile ≤ limit" proven by ``n`` samples, ``over`` above it?

    Proven when P(X ≤ over | n, 1 − p) ≤ 1 − confidence: were the true percentile above the
    limit, each sample would exceed it with probability ≥ 1 − p, and seeing this few
    exceedances would be that unlikely. Returns ``(proven, requests_needed)``, the latter the
    smallest n' ≥ n proving it with the same ``over`` count (None when already proven).
    """
    if not 0.0 < percentile < 100.0:
        raise ValueError(f"percentile must be in (0, 100), got {percentile}")
    check_confidence(confidence)
    if n < 0 or over < 0 or over > n:
        raise ValueError(f"need 0 ≤ over ≤ n, got n={n}, over={over}")
    q = 1.0 - percentile / 100.0
    alpha = 1.0 - confidence

    def proves(m: int) -> bool:
        return m > over and binom_cdf(over, m, q) <= alpha

    if proves(n):
        return True, None
    lo, hi = n, max(n, over + 1, 16)
    while not proves(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # CDF falls as n grows: lo never proves, hi always does
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if proves(mid) else (mid, hi)
    return False, hi


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval for a binomial proportion k/n (good coverage even near 0 and 1)."""
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    z = z_value(confidence)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe_interval(k1: int, n1: int, k2: int, n2: int, confidence: float = 0.95) -> Interval:
    """Newcombe's hybrid score interval (his method 10) for the difference p1 − p2.

    Combines the two Wilson intervals: L = d − √((p1−l1)² + (u2−p2)²),
    U = d + √((u1−p1)² + (p2−l2)²).
    """
    p1 = k1 / n1 if n1 > 0 else 0.0
    p2 = k2 / n2 if n2 > 0 else 0.0
    l1, u1 = wilson_interval(k1, n1, confidence)
    l2, u2 = wilson_interval(k2, n2, confidence)
    d = p1 - p2
    return (d - math.hypot(p1 - l1, u2 - p2), d + math.hypot(u1 - p1, p2 - l2))


def _bisect_p(f: Callable[[float], float], target: float) -> float:
    """The p in [0, 1] where the decreasing function f crosses target (60 halvings: 1e-18)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if f(mid) > target else (lo, mid)
    return (lo + hi) / 2.0


@functools.lru_cache(maxsize=4096)  # pure; the gate asks for the same counts again and again
def clopper_pearson_interval(k: int, n: int, confidence: float = 0.95) -> Interval:
    """Exact (Clopper–Pearson) interval for a binomial proportion k/n.

    Each bound is the p at which seeing k (or a more extreme count) has probability α/2, so
    each side errs at most α/2 however few the failures: a score interval's normal tail is
    too thin for a count of 0–5, exactly where error rates live.
    """
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    check_confidence(confidence)
    a = (1.0 - confidence) / 2.0
    lo = 0.0 if k == 0 else (a ** (1.0 / n) if k == n else
                             _bisect_p(lambda p: binom_cdf(k - 1, n, p), 1.0 - a))
    hi = 1.0 if k == n else (1.0 - a ** (1.0 / n) if k == 0 else
                             _bisect_p(lambda p: binom_cdf(k, n, p), a))
    return (lo, hi)


def exact_difference_interval(k1: int, n1: int, k2: int, n2: int, confidence: float = 0.95,
                              widen: float = 1.0) -> Interval:
    """Interval for p1 − p2 from the two Clopper–Pearson intervals, combined by MOVER
    (Newcombe's square-and-add): L = d − √((p1−l1)² + (u2−p2)²), U = d + √((u1−p1)² + (p2−l2)²).

    ``widen`` scales both distances (an overdispersion factor, ≥ 1). The exact limits keep
    each side's error at or below α/2 at small counts, where the Wilson limits of
    :func:`newcombe_interval` do not (docs/statistics.md, "Error rate").
    """
    if widen < 1.0:
        raise ValueError(f"widen must be ≥ 1, got {widen}")
    p1 = k1 / n1 if n1 > 0 else 0.0
    p2 = k2 / n2 if n2 > 0 else 0.0
    l1, u1 = clopper_pearson_interval(k1, n1, confidence)
    l2, u2 = clopper_pearson_interval(k2, n2, confidence)
    d = p1 - p2
    return (max(-1.0, d - widen * math.hypot(p1 - l1, u2 - p2)),
            min(1.0, d + widen * math.hypot(u1 - p1, p2 - l2)))


def dispersion(counts: Sequence[tuple[int, int]]) -> tuple[float, int]:
    """Pearson's quasi-binomial dispersion of groups' (failed, issued) counts, and its degrees
    of freedom: φ̂ = Σ (kᵢ − nᵢp̂)² / (nᵢp̂(1 − p̂)) / (G − 1), p̂ pooled.

    1 means the groups differ as much as binomial noise predicts; more, that the rate itself
    moves between them. (1.0, 0) with fewer than two groups or a pooled rate of 0 or 1
    (every group alike).
    """
    groups = [(k, n) for k, n in counts if n > 0]
    if len(groups) < 2:
        return 1.0, 0
    p = sum(k for k, _ in groups) / sum(n for _, n in groups)
    if p <= 0.0 or p >= 1.0:
        return 1.0, len(groups) - 1
    x2 = math.fsum((k - n * p) ** 2 / (n * p * (1.0 - p)) for k, n in groups)
    return x2 / (len(groups) - 1), len(groups) - 1

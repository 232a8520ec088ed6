"""Statistics for the gate: intervals, bootstrap, binomial proofs (pure, numpy only).

Every method here is written out with its formula in ``docs/statistics.md``. scipy is
deliberately not a runtime dependency: the binomial and Student-t distributions are
computed here and cross-checked against scipy in the tests.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Callable, Iterator, Literal, Optional, Sequence

import numpy as np

Interval = tuple[float, float]
#: A batched statistic: maps an array (..., n) to an array (...) along the last axis.
Statistic = Callable[[np.ndarray], np.ndarray]


def z_value(confidence: float) -> float:
    """Two-sided standard-normal critical value, e.g. 1.95996 for 0.95."""
    _check_confidence(confidence)
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


# --- binomial -------------------------------------------------------------------------


def _binom_pmf_all(n: int, p: float) -> np.ndarray:
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
    _check_confidence(confidence)
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


# --- proportions ----------------------------------------------------------------------


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


# --- quantiles ------------------------------------------------------------------------


def nearest_rank(n: int, percentile: float) -> int:
    """1-based nearest rank of the P-th percentile of n samples: ⌈P/100 · n⌉ (at least 1)."""
    return max(1, math.ceil(percentile / 100.0 * n - 1e-9))


def quantile_interval_ranks(n: int, percentile: float, confidence: float = 0.95) -> tuple[int, int]:
    """1-based order-statistic ranks (l, u) bracketing the P-th percentile, distribution-free.

    With B ~ Binomial(n, P/100) the number of samples at or below the true quantile,
    P(x₍ₗ₎ ≤ ξ ≤ x₍ᵤ₎) ≥ F(u−1) − F(l−1). Equal tails: l is the largest rank with
    F(l−1) ≤ α/2 and u the smallest with F(u−1) ≥ 1 − α/2. ``l = 0`` means −∞ and
    ``u = n + 1`` means +∞ (too few samples to bound that side).
    """
    _check_confidence(confidence)
    if n <= 0:
        return (0, 1)
    cdf = np.cumsum(_binom_pmf_all(n, percentile / 100.0))
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


# --- bootstrap ------------------------------------------------------------------------


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
    _check_confidence(confidence)
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


def paired_indices(n: int, n_resamples: int = 2000, seed: int = 0) -> np.ndarray:
    """Bootstrap resamples of request indices 0..n−1, shape (n_resamples, n).

    Applied to every run of a paired comparison at once: runs that replay one schedule
    (same seed: same prompts, lengths and arrivals) keep request i of one run next to
    request i of the others, so workload variance cancels in the contrast.
    """
    return np.concatenate(list(paired_index_chunks(n, n_resamples, seed)))


def paired_index_chunks(
    n: int, n_resamples: int = 2000, seed: int = 0, max_elements: int = 1 << 21
) -> Iterator[np.ndarray]:
    """:func:`paired_indices` in row blocks of at most ``max_elements`` indices (bounded memory)."""
    if n <= 0:
        raise ValueError(f"paired_indices needs n ≥ 1, got {n}")
    rng = np.random.default_rng(seed)
    rows = max(1, max_elements // n)
    for start in range(0, n_resamples, rows):
        yield rng.integers(0, n, size=(min(rows, n_resamples - start), n))


def nearest_rank_rows(x: np.ndarray, percentile: float) -> np.ndarray:
    """Nearest-rank percentile along the last axis, skipping NaN (NaN for a row without values).

    Like :func:`nearest_rank_stat`, but each row ranks only its finite values, as
    ``metrics.summarize`` ranks only successful requests.
    """
    xs = np.sort(np.asarray(x, dtype=float), axis=-1)  # NaN sorts last
    count = np.sum(np.isfinite(xs), axis=-1)
    rank = np.maximum(1, np.ceil(percentile / 100.0 * count - 1e-9)).astype(int)
    out = np.take_along_axis(xs, (rank - 1)[..., None], axis=-1)[..., 0]
    return np.where(count > 0, out, np.nan)


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
    _check_confidence(confidence)
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


# --- Student t and prediction intervals -----------------------------------------------


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) by Lentz's continued fraction."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * f / a


def t_cdf(t: float, df: float) -> float:
    """Student-t CDF with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError("df must be > 0")
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_ppf(q: float, df: float) -> float:
    """Student-t quantile by bisection on :func:`t_cdf` (df ≥ 1e6 uses the normal)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q}")
    if df >= 1e6:
        return NormalDist().inv_cdf(q)
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def prediction_interval(
    history: Sequence[float],
    confidence: float = 0.95,
    *,
    new_runs: int = 1,
    log: bool = True,
) -> Optional[Interval]:
    """Where the mean of ``new_runs`` future runs should fall, from ≥ 2 past per-run values.

    ȳ ± t_{m−1, 1−α/2} · s · √(1/new_runs + 1/m) on y = log(value) (``log=True``, for
    ratios; bounds are returned back-transformed) or on the raw values. None when fewer
    than two finite (and, for logs, positive) values are available.
    """
    _check_confidence(confidence)
    ys = [v for v in history if v is not None and math.isfinite(v) and (v > 0 or not log)]
    m = len(ys)
    if m < 2 or new_runs < 1:
        return None
    y = np.log(ys) if log else np.asarray(ys, dtype=float)
    half = t_ppf(0.5 + confidence / 2.0, m - 1) * float(np.std(y, ddof=1)) * math.sqrt(
        1.0 / new_runs + 1.0 / m
    )
    centre = float(np.mean(y))
    if log:
        return (math.exp(centre - half), math.exp(centre + half))
    return (centre - half, centre + half)

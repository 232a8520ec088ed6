"""Student t distribution (CDF, quantile), prediction intervals and Welch's t-test, written out so scipy stays optional."""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist
from typing import Optional, Sequence

import numpy as np

from pytest_goodput.stats.inputs import check_confidence
from pytest_goodput.stats.quantiles import Interval


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


@lru_cache(maxsize=4096)
def t_ppf(q: float, df: float) -> float:
    """Student-t quantile by bisection on :func:`t_cdf` (df ≥ 1e6 uses the normal); cached,
    as the judge asks for the same few quantiles many times per test."""
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
    check_confidence(confidence)
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


def welch_different(a: Sequence[float], b: Sequence[float], confidence: float = 0.99) -> bool:
    """Whether the means of ``a`` and ``b`` differ at ``confidence`` (two-sided).

    Welch's t = (mean_b - mean_a) / sqrt(s_a²/n_a + s_b²/n_b) against the Student-t quantile
    with the Welch–Satterthwaite degrees of freedom. Both samples constant (a fixed output
    length): different exactly when the means differ. Fewer than two values on a side: False
    (no spread to judge against), unless both sides are constant.
    """
    na, nb = len(a), len(b)
    if na == 0 or nb == 0:
        return False
    ma, mb = math.fsum(a) / na, math.fsum(b) / nb
    va = math.fsum((x - ma) ** 2 for x in a) / (na - 1) if na > 1 else 0.0
    vb = math.fsum((x - mb) ** 2 for x in b) / (nb - 1) if nb > 1 else 0.0
    if va == 0.0 and vb == 0.0:
        return ma != mb and (na > 1 or nb > 1)
    if na < 2 or nb < 2:
        return False
    qa, qb = va / na, vb / nb
    se = math.sqrt(qa + qb)
    df = (qa + qb) ** 2 / ((qa * qa / (na - 1) if qa else 0.0) + (qb * qb / (nb - 1) if qb else 0.0))
    return abs(mb - ma) / se > t_ppf(0.5 + confidence / 2.0, df)

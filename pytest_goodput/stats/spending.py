"""Group-sequential boundaries by Lan–DeMets alpha spending (pure, numpy only).

A test looked at K times (at information fractions t_1 < … < t_K = 1, here rounds n / N)
and stopped at the first look whose statistic crosses its boundary would, at the same
level at every look, err far more often than once. A spending function α(t) says how
much of the one-sided error α may have been spent by information t; the boundary c_k of
look k is the one for which, under the null and with the earlier looks not crossed, the
chance to cross at look k is exactly α(t_k) − α(t_{k−1}) (Lan & DeMets 1983):

    P(Z_1 < c_1, …, Z_{k−1} < c_{k−1}, Z_k ≥ c_k) = α(t_k) − α(t_{k−1})

with Z_k = S_k / √t_k and S a Brownian motion in information. Solved look by look by
numerical integration of S's density over the region not yet stopped (Armitage, McPherson
& Rowe 1969; Jennison & Turnbull 2000, ch. 19). ``docs/statistics.md`` ("A/B mode").

With the variance estimated at each look the statistic is a t with the look's degrees of
freedom, not a Z, and a t held to each look's normal-theory level (the significance-level
approach) errs above α at few degrees of freedom. ``t_boundaries`` solves the same equation
for the paired t statistics themselves, T_n = √n d̄_n / s_n of normal rounds (simulated
from a fixed seed: every job gets the same boundaries).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np

from pytest_goodput.stats.student import t_cdf, t_ppf

Spending = Literal["obf", "pocock"]
SPENDING: tuple[Spending, ...] = ("obf", "pocock")
_N = NormalDist()
_GRID = 401  # points of the density grid per look (odd: Simpson's rule)
_PATHS = 400_000  # simulated paths of the t boundaries (the error spent is exact to ~±0.02 α)
_MIN_CROSS = 40  # fewer crossings than this at a look: that look's own t quantile (conservative)
_SEED = 20261201

__all__ = ["SPENDING", "Spending", "boundaries", "nominal_levels", "spent", "t_boundaries", "t_levels"]


def spent(kind: Spending, alpha: float, t: float) -> float:
    """α(t): the one-sided error spent by information fraction t ∈ [0, 1].

    ``obf``: 2 − 2Φ(z_{1−α/2} / √t), O'Brien–Fleming-like (spends almost nothing early);
    ``pocock``: α · ln(1 + (e − 1) t), Pocock-like (spends evenly).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if t <= 0.0:
        return 0.0
    t = min(t, 1.0)
    if kind == "obf":
        return 2.0 - 2.0 * _N.cdf(_N.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(t))
    if kind == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    raise ValueError(f"unknown spending function {kind!r}: use one of {', '.join(SPENDING)}")


def _simpson(x: np.ndarray) -> np.ndarray:
    h = (x[-1] - x[0]) / (len(x) - 1)
    w = np.ones(len(x))
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w * h / 3.0


def _pdf(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _sf(x: np.ndarray) -> np.ndarray:
    return np.array([0.5 * math.erfc(v / math.sqrt(2.0)) for v in np.atleast_1d(x)])


def _solve(cross, target: float, start: float) -> float:  # type: ignore[no-untyped-def]
    """c with cross(c) = target: Newton's steps on log cross(c), kept inside a bracket."""
    lo, hi = -10.0, 40.0
    c = min(max(start, lo), hi) if math.isfinite(start) else 3.0
    for _ in range(200):
        p, slope = cross(c)
        if abs(p - target) <= 1e-10 * target or hi - lo < 1e-12:
            break
        lo, hi = (c, hi) if p > target else (lo, c)  # cross(c) falls as c rises
        step = c - (math.log(p) - math.log(target)) * p / slope if p > 0 and slope < 0 else math.nan
        c = step if lo < step < hi else 0.5 * (lo + hi)
    return c


@lru_cache(maxsize=64)
def _bounds(fractions: tuple[float, ...], alpha: float, kind: Spending) -> tuple[float, ...]:
    out: list[float] = []
    grid = weights = dens = None  # density of S over the region not stopped at the last look
    t_prev, spent_prev = 0.0, 0.0
    for t in fractions:
        target = spent(kind, alpha, t) - spent_prev
        if grid is None:
            c = _N.inv_cdf(1.0 - target) if target > 0 else math.inf
        else:
            sd = math.sqrt(t - t_prev)

            def cross(c: float) -> tuple[float, float]:
                """The chance to cross at this look with boundary c, and its slope in c."""
                x = (c * math.sqrt(t) - grid) / sd
                m = weights * dens
                return float(np.sum(m * _sf(x))), -float(np.sum(m * _pdf(x))) * math.sqrt(t) / sd

            c = math.inf if target <= 0 else _solve(cross, target, out[-1])
        out.append(c)
        top = min(c, 12.0) * math.sqrt(t)
        new = np.linspace(-12.0 * math.sqrt(t), top, _GRID)
        if grid is None:
            dens = _pdf(new / math.sqrt(t)) / math.sqrt(t)
        else:
            sd = math.sqrt(t - t_prev)
            dens = (_pdf((new[:, None] - grid[None, :]) / sd) / sd) @ (weights * dens)
        grid, weights = new, _simpson(new)
        t_prev, spent_prev = t, spent(kind, alpha, t)
    return tuple(out)


def boundaries(fractions: Sequence[float], alpha: float, kind: Spending) -> list[float]:
    """The upper z boundaries c_1 … c_K of one-sided ``alpha`` spent by ``kind`` at the looks'
    information ``fractions`` (increasing, the last ≤ 1); a lower boundary, if any, is taken
    as non-binding (ignoring it keeps the error at or below ``alpha``)."""
    fs = tuple(float(f) for f in fractions)
    if not fs or any(not 0.0 < f <= 1.0 for f in fs) or any(b <= a for a, b in zip(fs, fs[1:])):
        raise ValueError(f"information fractions must increase within (0, 1], got {list(fs)}")
    return list(_bounds(fs, float(alpha), kind))


def nominal_levels(fractions: Sequence[float], alpha: float, kind: Spending) -> list[float]:
    """Each look's nominal one-sided level 1 − Φ(c_k): what a t test with the look's own
    degrees of freedom is held to (the significance-level approach to unknown variance)."""
    return [1.0 - _N.cdf(c) if math.isfinite(c) else 0.0 for c in boundaries(fractions, alpha, kind)]


@lru_cache(maxsize=64)
def _t_bounds(looks: tuple[int, ...], total: int, alpha: float, kind: Spending) -> tuple[float, ...]:
    paths = max(50_000, min(_PATHS, 20_000_000 // looks[-1]))
    rng = np.random.default_rng(_SEED)
    s, q = np.zeros(paths), np.zeros(paths)
    alive = np.ones(paths, dtype=bool)
    out: list[float] = []
    spent_prev, made = 0.0, 0
    for n in looks:
        for _ in range(n - made):
            x = rng.standard_normal(paths)
            s += x
            q += x * x
        made = n
        target = spent(kind, alpha, n / total) - spent_prev
        spent_prev += target
        t = s / math.sqrt(n) / np.sqrt(np.maximum(q - s * s / n, 1e-300) / (n - 1))
        crossings = int(round(target * paths))
        if not out or crossings < _MIN_CROSS:
            # The first look has no earlier looks to condition on: the exact t quantile. A
            # look spending too little to simulate is held to it alone, which can only err less.
            c = t_ppf(1.0 - target, n - 1) if target > 0 else math.inf
        else:
            ts = np.sort(t[alive])
            k = min(crossings, ts.size - 1)
            c = float(0.5 * (ts[-k] + ts[-k - 1]))  # k alive paths at or above c
        out.append(c)
        alive &= t < c
    return tuple(out)


def t_boundaries(looks: Sequence[int], total: int, alpha: float, kind: Spending) -> list[float]:
    """Upper boundaries c_1 … c_K of paired t statistics T_n = √n d̄_n / s_n with n − 1 degrees
    of freedom at ``looks`` (rounds n, increasing, from 2, the last ≤ ``total``), one-sided
    ``alpha`` spent by ``kind`` at information n / ``total``: under d_r iid normal with mean 0,
    P(T_{n_1} < c_1, …, T_{n_{k−1}} < c_{k−1}, T_{n_k} ≥ c_k) = α(t_k) − α(t_{k−1}), the
    other side non-binding. Solved on simulated paths (fixed seed), each c_k the empirical
    quantile of T_{n_k} over the paths not yet stopped; the first look's is exact."""
    ns = tuple(int(n) for n in looks)
    if not ns or ns[0] < 2 or ns[-1] > total or any(b <= a for a, b in zip(ns, ns[1:])):
        raise ValueError(f"looks must be increasing round counts from 2 to {total}, got {list(ns)}")
    return list(_t_bounds(ns, int(total), float(alpha), kind))


def t_levels(looks: Sequence[int], total: int, alpha: float, kind: Spending) -> list[float]:
    """Each look's one-sided level P(T_{n−1} ≥ c_k) under ``t_boundaries``: the level at which a
    t test with the look's degrees of freedom has exactly the boundary as its critical value."""
    return [1.0 - t_cdf(c, n - 1) if math.isfinite(c) else 0.0
            for n, c in zip(looks, t_boundaries(looks, total, alpha, kind))]

"""A/B mode's boundaries are the paired t statistic's own: at a change exactly at the
tolerance, early *regressed* decisions spend no more than the budget (stats/spending.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_goodput.judge.sequential.stopping import DEFAULT_RULE
from pytest_goodput.stats.spending import nominal_levels, spent, t_boundaries, t_levels
from pytest_goodput.stats.student import t_ppf

LOOKS = list(range(4, 13))


def crossed(levels: list[float], seed: int, paths: int = 100_000) -> tuple[float, float]:
    """How often t statistics of normal rounds (mean 0: a change at the tolerance) cross the
    t quantiles of ``levels`` at rounds 4 … 12: before the last look, and at all."""
    rng = np.random.default_rng(seed)
    d = rng.standard_normal((paths, LOOKS[-1]))
    hit = np.zeros(paths, dtype=bool)
    early = 0.0
    for n, a in zip(LOOKS, levels):
        x = d[:, :n]
        t = x.mean(axis=1) * math.sqrt(n) / x.std(axis=1, ddof=1)
        hit |= t >= t_ppf(1.0 - a, n - 1)
        if n == LOOKS[-2]:
            early = hit.mean()
    return float(early), float(hit.mean())


def test_the_t_boundaries_spend_the_budget_where_normal_levels_overspend() -> None:
    new = [DEFAULT_RULE.levels(n, 4, 12, 0.98)[0] for n in LOOKS]
    early, total = crossed(new, seed=7)
    # Independent paths: spent by 11 of 12 rounds is α ln(1 + (e − 1) 11/12) = 0.946 %, by 12
    # the whole 1 %; 100 000 paths measure it to ±0.06 pp (2 SE).
    assert early == pytest.approx(spent("pocock", 0.01, 11 / 12), abs=0.0008)
    assert total == pytest.approx(0.01, abs=0.0008)
    old_early, old_total = crossed(nominal_levels([n / 12 for n in LOOKS], 0.01, "pocock"), seed=7)
    assert old_total > 0.011 and old_early > 0.0105  # the t against normal-theory levels: 1.16 %


def test_the_first_look_is_the_exact_t_quantile_and_later_ones_are_stricter() -> None:
    c = t_boundaries(LOOKS, 12, 0.01, "pocock")
    assert c[0] == pytest.approx(t_ppf(1.0 - spent("pocock", 0.01, 4 / 12), 3), rel=1e-9)
    levels = t_levels(LOOKS, 12, 0.01, "pocock")
    normal = nominal_levels([n / 12 for n in LOOKS], 0.01, "pocock")
    assert levels[0] == pytest.approx(normal[0], rel=1e-6)
    assert all(t < z for t, z in zip(levels[1:], normal[1:]))
    assert t_boundaries(LOOKS, 12, 0.01, "pocock") == c  # a fixed seed: every job the same


@pytest.mark.parametrize("looks,total", [([1, 2], 4), ([3, 3], 4), ([], 4), ([3, 5], 4)])
def test_bad_looks_are_refused(looks: list[int], total: int) -> None:
    with pytest.raises(ValueError):
        t_boundaries(looks, total, 0.01, "pocock")

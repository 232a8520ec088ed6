"""Lan–DeMets spending boundaries (stats/spending.py) against published and hand-computed values."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from pytest_goodput.stats.spending import boundaries, nominal_levels, spent

FIVE = [0.2, 0.4, 0.6, 0.8, 1.0]


def test_spending_functions_by_hand() -> None:
    z = NormalDist().inv_cdf(1 - 0.01 / 2)  # 2.5758
    assert spent("obf", 0.01, 0.3) == pytest.approx(2 - 2 * NormalDist().cdf(z / math.sqrt(0.3)))
    assert spent("obf", 0.01, 0.3) == pytest.approx(2.57e-6, rel=0.01)
    assert spent("pocock", 0.05, 0.3) == pytest.approx(0.05 * math.log(1 + (math.e - 1) * 0.3))  # 0.020787
    for kind in ("obf", "pocock"):
        assert spent(kind, 0.01, 1.0) == pytest.approx(0.01) and spent(kind, 0.01, 0.0) == 0.0


def test_one_look_is_the_fixed_sample_test() -> None:
    assert boundaries([1.0], 0.01, "obf") == pytest.approx([NormalDist().inv_cdf(0.99)])  # 2.3263
    assert nominal_levels([1.0], 0.05, "pocock") == pytest.approx([0.05])


def test_five_equal_looks_match_the_published_boundaries() -> None:
    # One-sided α = 0.025, K = 5 equally spaced looks (Jennison & Turnbull 2000; gsDesign's
    # sfLDOF / sfLDPocock).
    assert boundaries(FIVE, 0.025, "obf") == pytest.approx([4.8769, 3.3569, 2.6803, 2.2898, 2.0310], abs=2e-3)
    assert boundaries(FIVE, 0.025, "pocock") == pytest.approx([2.4380, 2.4268, 2.4101, 2.3966, 2.3859], abs=2e-3)


def test_the_boundaries_hold_the_error_over_all_looks() -> None:
    """Brownian paths at the looks of 3 … 10 rounds: crossing any boundary ≈ α, not 8 × α."""
    fr = np.array([n / 10 for n in range(3, 11)])
    rng = np.random.default_rng(1)
    inc = rng.normal(size=(40_000, len(fr))) * np.sqrt(np.diff(np.concatenate(([0.0], fr))))
    z = np.cumsum(inc, axis=1) / np.sqrt(fr)
    for kind in ("obf", "pocock"):
        crossed = (z >= np.array(boundaries(list(fr), 0.05, kind))).any(axis=1).mean()
        assert crossed == pytest.approx(0.05, abs=0.006), kind
    naive = (z >= NormalDist().inv_cdf(0.95)).any(axis=1).mean()
    assert naive > 0.12  # the same level at every look errs far more often


@pytest.mark.parametrize("fractions,kind", [([0.5, 0.5], "obf"), ([0.0, 1.0], "obf"), ([], "pocock"),
                                            ([1.0], "linear")])
def test_bad_looks_are_refused(fractions: list[float], kind: str) -> None:
    with pytest.raises(ValueError):
        boundaries(fractions, 0.01, kind)  # type: ignore[arg-type]

"""Statistics against published reference values and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_goodput import stats

scipy_stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize(
    ("pct", "over", "needed"),
    [(99, 0, 459), (99, 1, 662), (99, 2, 838), (99, 10, 2010),
     (90, 0, 44), (90, 1, 64), (90, 2, 81), (90, 10, 197)],
)
def test_percentile_proof_mlperf_counts(pct: float, over: int, needed: int) -> None:
    assert stats.percentile_proof(needed, over, pct) == (True, None)
    assert stats.percentile_proof(needed - 1, over, pct) == (False, needed)
    assert stats.percentile_proof(over, over, pct) == (False, needed)


def test_percentile_proof_edges() -> None:
    assert stats.percentile_proof(0, 0, 99) == (False, 459)
    assert stats.percentile_proof(5000, 0, 99) == (True, None)
    with pytest.raises(ValueError):
        stats.percentile_proof(5, 6, 99)
    with pytest.raises(ValueError):
        stats.percentile_proof(5, 0, 100)


@pytest.mark.parametrize(("k", "n", "p"), [(0, 10, 0.3), (5, 100, 0.03), (2, 838, 0.01),
                                           (450, 1000, 0.5), (9999, 10000, 0.999)])
def test_binom_cdf_matches_scipy(k: int, n: int, p: float) -> None:
    assert stats.binom_cdf(k, n, p) == pytest.approx(scipy_stats.binom.cdf(k, n, p), rel=1e-9, abs=1e-15)


def test_binom_cdf_edges() -> None:
    assert stats.binom_cdf(-1, 10, 0.5) == 0.0
    assert stats.binom_cdf(10, 10, 0.5) == 1.0
    assert stats.binom_cdf(3, 10, 0.0) == 1.0
    assert stats.binom_cdf(3, 10, 1.0) == 0.0


def test_wilson_reference_values() -> None:
    lo, hi = stats.wilson_interval(8, 10, 0.95)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    lo, hi = stats.wilson_interval(0, 10, 0.95)
    assert lo == pytest.approx(0.0, abs=1e-12) and round(hi, 4) == 0.2775
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)


# Newcombe (1998), Statistics in Medicine 17:873-890, Table II, method 10.
@pytest.mark.parametrize(
    ("k1", "n1", "k2", "n2", "lo", "hi"),
    [(56, 70, 48, 80, 0.0524, 0.3339), (9, 10, 3, 10, 0.1705, 0.8090),
     (6, 7, 2, 7, 0.0582, 0.8062), (5, 56, 0, 29, -0.0381, 0.1926),
     (0, 10, 0, 20, -0.1611, 0.2775), (0, 10, 0, 10, -0.2775, 0.2775),
     (10, 10, 0, 20, 0.6791, 1.0000), (10, 10, 0, 10, 0.6075, 1.0000)],
)
def test_newcombe_paper_examples(k1: int, n1: int, k2: int, n2: int, lo: float, hi: float) -> None:
    got = stats.newcombe_interval(k1, n1, k2, n2, 0.95)
    assert (round(got[0], 4), round(got[1], 4)) == (lo, hi)


def _scipy_ranks(n: int, pct: float, conf: float) -> tuple[int, int]:
    q, half = pct / 100, (1 - conf) / 2
    cdf = scipy_stats.binom.cdf(np.arange(n + 1), n, q)
    lows = [j + 1 for j in range(n) if cdf[j] <= half + 1e-12]
    ups = [j + 1 for j in range(n) if cdf[j] >= 1 - half - 1e-12]
    return (lows[-1] if lows else 0, ups[0] if ups else n + 1)


@pytest.mark.parametrize(("n", "pct", "conf"), [(100, 50, 0.95), (300, 99, 0.95), (900, 99, 0.96),
                                                (2000, 99, 0.99), (50, 90, 0.9), (10, 50, 0.99)])
def test_quantile_ranks_match_scipy(n: int, pct: float, conf: float) -> None:
    got = stats.quantile_interval_ranks(n, pct, conf)
    assert got == _scipy_ranks(n, pct, conf)
    low, up = got
    cdf = scipy_stats.binom.cdf
    q = pct / 100
    coverage = (cdf(up - 1, n, q) if up <= n else 1.0) - (cdf(low - 1, n, q) if low >= 1 else 0.0)
    assert coverage >= conf


def test_quantile_interval_known_ranks() -> None:
    # n=100, median, 95 %: ranks 40 and 61 (classic table value).
    assert stats.quantile_interval_ranks(100, 50, 0.95) == (40, 61)
    # P99 of 300 samples cannot be bounded above at 95 %: P(all ≤ ξ) = 0.99**300 = 0.049.
    assert stats.quantile_interval_ranks(300, 99, 0.95) == (293, 301)
    xs = list(range(1, 101))
    assert stats.quantile_interval(xs, 50, 0.95) == (40.0, 61.0)
    lo, hi = stats.quantile_interval(list(range(300)), 99, 0.95)
    assert lo == 292.0 and hi == math.inf


def test_quantile_interval_contains_nearest_rank_estimate() -> None:
    rng = np.random.default_rng(3)
    xs = np.sort(rng.exponential(size=500))
    for pct in (50, 90, 99):
        lo, hi = stats.quantile_interval(xs, pct, 0.95)
        est = xs[stats.nearest_rank(500, pct) - 1]
        assert lo <= est <= hi


def test_bootstrap_mean_close_to_normal_theory() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(10.0, 2.0, 400)
    lo, hi = stats.bootstrap_interval(x, lambda a: a.mean(axis=-1), seed=1, n_resamples=4000)
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert lo == pytest.approx(x.mean() - 1.96 * se, abs=0.1 * se * 1.96)
    assert hi == pytest.approx(x.mean() + 1.96 * se, abs=0.1 * se * 1.96)
    assert stats.bootstrap_interval(x, lambda a: a.mean(axis=-1), seed=1) == stats.bootstrap_interval(
        x, lambda a: a.mean(axis=-1), seed=1
    )
    blo, bhi = stats.bootstrap_interval(x, lambda a: a.mean(axis=-1), seed=1, method="bca")
    assert blo < x.mean() < bhi


def test_bootstrap_ratio_interval_brackets_truth() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.exponential(1.2, 2000), rng.exponential(1.0, 2000)
    lo, hi = stats.bootstrap_ratio_interval(a, b, lambda x: x.mean(axis=-1), seed=2)
    assert lo < 1.2 < hi and lo > 1.0
    assert math.isnan(stats.bootstrap_ratio_interval([], b, lambda x: x.mean(axis=-1))[0])


def test_nearest_rank_stat() -> None:
    x = np.arange(1.0, 101.0)
    assert stats.nearest_rank_stat(99)(x[None, :])[0] == 99.0
    assert stats.nearest_rank_stat(50)(x[None, :])[0] == 50.0


@pytest.mark.parametrize(("q", "df"), [(0.975, 1), (0.975, 2), (0.99, 6), (0.98, 4.5), (0.6, 30), (0.025, 3)])
def test_t_ppf_matches_scipy(q: float, df: float) -> None:
    assert stats.t_ppf(q, df) == pytest.approx(scipy_stats.t.ppf(q, df), rel=1e-9)
    assert stats.t_cdf(1.3, df) == pytest.approx(scipy_stats.t.cdf(1.3, df), rel=1e-9)


def test_prediction_interval_hand_computed() -> None:
    ys = [100.0, 103.0, 98.0]
    lo, hi = stats.prediction_interval(ys, 0.95)
    logs = np.log(ys)
    half = scipy_stats.t.ppf(0.975, 2) * logs.std(ddof=1) * math.sqrt(1 + 1 / 3)
    assert lo == pytest.approx(math.exp(logs.mean() - half))
    assert hi == pytest.approx(math.exp(logs.mean() + half))
    raw = stats.prediction_interval([1.0, 3.0], 0.95, log=False, new_runs=2)
    assert raw is not None
    assert raw[1] - 2.0 == pytest.approx(scipy_stats.t.ppf(0.975, 1) * math.sqrt(2) * 1.0)
    assert stats.prediction_interval([5.0]) is None
    assert stats.prediction_interval([5.0, float("nan")]) is None


def test_order_statistic_interval_covers_at_p99() -> None:
    # Exact method: coverage ≥ nominal for any continuous distribution (here lognormal).
    rng = np.random.default_rng(42)
    truth = math.exp(0.8 * scipy_stats.norm.ppf(0.99))
    hits = sum(
        lo <= truth <= hi
        for lo, hi in (stats.quantile_interval(rng.lognormal(0, 0.8, 1000), 99, 0.9) for _ in range(400))
    )
    assert hits / 400 >= 0.87  # nominal 0.90; binomial slack for 400 trials


def test_nearest_rank_rows_skips_nan() -> None:
    x = np.array([[3.0, 1.0, np.nan, 2.0], [np.nan, np.nan, np.nan, np.nan], [4.0, 8.0, 6.0, 2.0]])
    # Row 0: finite values 1, 2, 3; P50 rank ⌈1.5⌉ = 2 -> 2; P99 rank 3 -> 3.
    assert stats.nearest_rank_rows(x, 50.0)[0] == 2.0
    assert stats.nearest_rank_rows(x, 99.0)[0] == 3.0
    assert math.isnan(stats.nearest_rank_rows(x, 50.0)[1])
    # A row without NaN agrees with the batched nearest-rank statistic.
    assert stats.nearest_rank_rows(x, 75.0)[2] == stats.nearest_rank_stat(75.0)(x[2:3])[0] == 6.0


def test_paired_indices_are_seeded_and_in_range() -> None:
    idx = stats.paired_indices(7, n_resamples=50, seed=3)
    assert idx.shape == (50, 7) and idx.min() >= 0 and idx.max() <= 6
    assert np.array_equal(idx, stats.paired_indices(7, n_resamples=50, seed=3))
    assert not np.array_equal(idx, stats.paired_indices(7, n_resamples=50, seed=4))
    with pytest.raises(ValueError):
        stats.paired_indices(0)


def test_paired_index_chunks_bound_memory() -> None:
    chunks = list(stats.paired_index_chunks(1000, n_resamples=25, seed=5, max_elements=10_000))
    assert [c.shape for c in chunks] == [(10, 1000), (10, 1000), (5, 1000)]
    assert all(c.min() >= 0 and c.max() <= 999 for c in chunks)


def test_chi_square_quantile_matches_scipy() -> None:
    """The power bound's chi-square quantile (Wilson–Hilferty) within 1 % of scipy's from 3
    degrees of freedom on (the fewest the judge uses: the prior's)."""
    from scipy.stats import chi2

    from pytest_goodput.judge.noise.spread import chi2_ppf, power_bound

    for df in (3, 4, 7, 13, 30):
        for q in (0.9, 0.95, 0.99):
            assert chi2_ppf(q, df) == pytest.approx(chi2.ppf(q, df), rel=0.01), (df, q)
    assert power_bound(4, 0.05) == pytest.approx((4 / chi2.ppf(0.95, 4)) ** 0.5, rel=0.005)

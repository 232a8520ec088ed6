"""The error rate's verdict at small counts: exact limits on pooled failure counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import beta

from pytest_goodput.judge.scalar.error_rate import error_rate_comparison, widening
from pytest_goodput.judge.scalar.verdicts import CONFIDENCE, MetricDef, compare
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.stats.binomial import clopper_pearson_interval, dispersion, exact_difference_interval

ERR = MetricDef.of("error_rate")
ORDER = {"improved": 0, "pass": 1, "inconclusive": 2, "regressed": 3}


def run(n: int, failed: set[int] | range) -> Samples:
    """n requests; those at the indices in ``failed`` fail."""
    ok = [i not in failed for i in range(n)]
    lat = [10.0 if o else None for o in ok]
    return Samples(window_s=float(n), ok=ok, ttft_ms=lat, tpot_ms=lat, e2e_ms=lat,
                   output_tokens=[8 if o else 0 for o in ok], prompt_tokens=[16] * n)


def direct(base: list[list[Samples]], cur: list[Samples], **options: object):
    """The error rate's own comparison, called as ``compare_metric`` calls it."""
    return error_rate_comparison(ERR, base, cur, confidence=CONFIDENCE, **options)  # type: ignore[arg-type]


def error_verdict(base: list[list[Samples]], cur: list[Samples]):
    """The error rate's comparison as the gate makes it (paired runs of one schedule)."""
    (c,) = compare(base, cur, [], paired=True)
    assert c.metric == "error_rate"
    return c


def test_clopper_pearson_limits_are_scipys_beta_quantiles() -> None:
    for k, n in [(0, 20), (1, 20), (3, 200), (7, 1000), (150, 300), (20, 20)]:
        lo, hi = clopper_pearson_interval(k, n, 0.98)
        assert lo == pytest.approx(beta.ppf(0.01, k, n - k + 1) if k else 0.0, abs=1e-12)
        assert hi == pytest.approx(beta.ppf(0.99, k + 1, n - k) if k < n else 1.0, abs=1e-12)


def test_the_difference_interval_by_hand() -> None:
    # 1 failure in 20 against 0 in 100, 98 %: the exact limits have closed forms, the lower
    # of 1/20 is 1 − 0.99^(1/20) (P(X ≥ 1) = 1 %) and the upper of 0/100 is 1 − 0.01^(1/100).
    l1 = 1 - 0.99 ** (1 / 20)
    u2 = 1 - 0.01 ** (1 / 100)
    u1 = beta.ppf(0.99, 2, 19)
    lo, hi = exact_difference_interval(1, 20, 0, 100, 0.98)
    assert lo == pytest.approx(0.05 - math.hypot(0.05 - l1, u2), abs=1e-12)
    assert lo == pytest.approx(-0.016900528, abs=1e-8)
    assert hi == pytest.approx(0.05 + (u1 - 0.05), abs=1e-12)  # the baseline's 0 has no room below


def test_dispersion_by_hand() -> None:
    # 2 failures in one of five sessions of 20: p̂ = 0.02, expected 0.4 a session,
    # X² = (1.6² + 4·0.4²) / (20·0.02·0.98) = 8.163, over 4 degrees of freedom.
    phi, nu = dispersion([(0, 20)] * 4 + [(2, 20)])
    assert (phi, nu) == (pytest.approx(2.0408163, rel=1e-6), 4)
    assert dispersion([(0, 20)] * 5) == (1.0, 4)  # all alike: no excess, never 0
    assert dispersion([(3, 20)]) == (1.0, 0)
    assert widening(0.7, 4, 0.98) == 1.0  # never narrowed below binomial
    assert widening(2.0, 4, 0.98) == pytest.approx(math.sqrt(1 + (3.746947 / 2.326348) ** 2), rel=1e-5)


def test_aa_at_twenty_requests_against_an_all_zero_baseline_is_not_regressed() -> None:
    """Five sessions of 20 with no failure, then 1 or 2 in 20: read *regressed* before
    (the sessions' spread was 0 and shrank the run's own noise); at a true rate of 1–2 % on
    both sides that happens in several % of A/A pairs."""
    base = [[run(20, set())] for _ in range(5)]
    for k in (1, 2):
        c = error_verdict(base, [run(20, range(k))])
        assert c.verdict == "inconclusive", c
        assert c.change == pytest.approx(k / 20) and c.scale == "absolute"
        assert c.interval is not None and c.interval[0] < 0.0 < c.interval[1]
    assert error_verdict(base, [run(20, range(3))]).verdict == "regressed"  # 3 in 20: 0.7 % at p = 2 %


def test_all_zero_sessions_leave_the_interval_its_binomial_width() -> None:
    c = error_verdict([[run(200, set())] for _ in range(5)], [run(200, set())])
    assert c.verdict == "pass" and c.change == 0.0
    assert c.interval is not None
    assert c.interval[1] == pytest.approx(clopper_pearson_interval(0, 200, 0.98)[1])
    assert c.interval[0] == pytest.approx(-clopper_pearson_interval(0, 1000, 0.98)[1])


def test_ten_points_more_at_two_hundred_requests_is_regressed() -> None:
    base = [[run(200, {7 + s, 100 + s})] for s in range(5)]  # 1 %
    c = error_verdict(base, [run(200, set(range(0, 200, 9)))])  # 23 in 200: 11.5 %
    assert c.verdict == "regressed"
    assert c.baseline == pytest.approx(0.01) and c.change == pytest.approx(0.105)
    assert c.interval is not None and 0.0 < c.interval[0] < 0.105 < c.interval[1]
    assert c.detectable is not None and ERR.tolerance <= c.detectable < 0.105


def test_fewer_failures_beyond_the_tolerance_are_improved() -> None:
    base = [[run(200, set(range(s, 200, 20)))] for s in range(5)]  # 5 %
    c = error_verdict(base, [run(200, set())])
    assert c.verdict == "improved" and c.interval is not None and c.interval[1] < 0.0


def test_sessions_that_differ_beyond_binomial_noise_widen_the_interval() -> None:
    steady = [[run(200, set(range(s, 200, 50)))] for s in range(5)]  # 4 failures in each
    bursty = [[run(200, set(range(k)))] for k in (0, 0, 0, 0, 20)]  # the same 20, in one session
    cur = [run(200, set(range(14)))]
    a, b = error_verdict(steady, cur), error_verdict(bursty, cur)
    assert a.baseline == b.baseline == pytest.approx(0.02)
    assert a.verdict == "regressed" and b.verdict == "inconclusive"
    assert a.interval is not None and b.interval is not None and b.interval[0] < a.interval[0]
    assert "more than binomial" in b.note and "dispersion" in b.method


def test_one_baseline_session_says_binomial_is_assumed() -> None:
    c = error_verdict([[run(50, {3})]], [run(50, {3})])
    assert c.verdict == "pass" and "1 baseline session" in c.note


def test_significance_beyond_the_tolerance_needs_the_whole_interval_beyond_it() -> None:
    base = [[run(200, {7 + s, 100 + s})] for s in range(5)]
    cur = [run(200, set(range(0, 200, 9)))]
    assert direct(base, cur, significance="tolerance").verdict == "regressed"
    small = [run(200, set(range(0, 200, 25)))]  # 8 in 200: regressed on zero only
    assert direct(base, small).verdict == "regressed"
    assert direct(base, small, significance="tolerance").verdict == "inconclusive"


def test_no_baseline_and_no_requests() -> None:
    assert direct([], [run(10, {1})]).verdict == "new"
    assert direct([[run(0, set())]], [run(0, set())]).verdict == "pass"
    assert direct([[run(10, set())]], [run(0, set())]).verdict == "regressed"
    with pytest.raises(ValueError):
        direct([[run(10, set())]], [])


@settings(max_examples=150, deadline=None)
@given(sessions=st.lists(st.integers(0, 6), min_size=1, max_size=5),
       n=st.sampled_from([20, 50, 200]), k=st.integers(0, 12), extra=st.integers(1, 12),
       seed=st.integers(0, 2**16))
def test_adding_failures_to_the_current_run_never_improves_the_verdict(
        sessions: list[int], n: int, k: int, extra: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = [[run(n, set(rng.choice(n, size=min(b, n), replace=False).tolist()))] for b in sessions]
    order = rng.permutation(n).tolist()
    fewer = error_verdict(base, [run(n, set(order[:min(k, n)]))])
    more = error_verdict(base, [run(n, set(order[:min(k + extra, n)]))])
    assert fewer.verdict in ORDER and more.verdict in ORDER  # never underpowered
    assert ORDER[more.verdict] >= ORDER[fewer.verdict], (fewer, more)

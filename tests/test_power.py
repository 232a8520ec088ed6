"""Power stated truly: ``detectable`` is the change read *regressed* half of the time, and
*underpowered* holds it against the tolerance without discounting a prior that dominates."""

from __future__ import annotations

import math

import pytest

from pytest_goodput.judge.noise.spread import PRIOR_RUNS, power_bound, power_factor, prior_dominates
from pytest_goodput.judge.scalar.verdicts import MetricDef, rule

TTFT = MetricDef.of("metrics.ttft_ms.p99")  # 15 % tolerance, lower is better


def judged(d: float, *, within: float, spread=(None, 0), sessions: int = 1):
    return rule(TTFT, base=1.0, cur=math.exp(d), change=math.expm1(d), d=d, scale="log",
                within=(within, within), machine=0.03, spread=spread, sessions=sessions)


def test_the_prior_dominates_with_one_or_two_sessions():
    assert PRIOR_RUNS == 3.0
    assert prior_dominates(0) and prior_dominates(1) and not prior_dominates(4)
    assert power_factor(3.0, 0, 0.05) == 1.0 and power_factor(4.0, 1, 0.05) == 1.0
    assert power_factor(7.0, 4, 0.05) == pytest.approx(power_bound(7.0, 0.05))


@pytest.mark.parametrize("sessions,spread", [(1, (None, 0)), (5, (0.02, 4))])
def test_detectable_is_the_critical_value(sessions, spread):
    """A true change equal to ``detectable`` is read regressed half of the time: the current
    run's noise is symmetric about it, and the rule calls regressed just above it."""
    a = judged(0.0, within=0.02, spread=spread, sessions=sessions)
    at = math.log1p(a.detectable)
    assert judged(at + 1e-6, within=0.02, spread=spread, sessions=sessions).verdict == "regressed"
    assert judged(at - 1e-6, within=0.02, spread=spread, sessions=sessions).verdict != "regressed"


def test_one_session_beyond_the_tolerance_is_underpowered_and_says_the_prior_dominates():
    """One session: the spread is the registry's prior, an assumption with no sampling error
    to discount, so a resolution beyond the tolerance is underpowered (before: the χ² lower
    bound at the prior's 3 pseudo-degrees of freedom, ×0.62, called it adequate)."""
    c = judged(0.0, within=0.02)
    assert 0.15 < c.detectable and c.detectable * power_bound(3.0, 0.05) < 0.15
    assert c.verdict == "underpowered"
    assert "with 1 baseline session(s) the prior spread dominates" in c.note


def test_measured_spread_keeps_the_benefit_of_its_sampling_error():
    """Ten sessions measured the spread: beyond the tolerance only within its sampling error
    stays a note, not a verdict."""
    c = judged(0.0, within=0.01, spread=(0.055, 9), sessions=10)
    assert c.detectable > 0.15 and c.verdict == "pass"
    assert "only within the sampling error" in c.note

"""A/B rounds as a test outcome, hand-computed (docs/metrics.md, "A/B comparisons")."""

from __future__ import annotations

import math

import pytest

from pytest_goodput.judge.sequential.ab import analyse
from pytest_goodput.judge.sequential.ab_outcome import ab_outcome
from pytest_goodput.judge.judge import Policy, fails
from pytest_goodput.judge.sequential.stopping import RULES
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.schema.outcomes.ab import ABRound
from pytest_goodput.schema.scenario.spec import build_spec

SPEC = build_spec({"scenario": "concurrency", "concurrency": 4, "requests": 40})
TTFT = "metrics.ttft_ms.p50"


def rounds(pairs, dropped=()):
    out = []
    for i, (b, h) in enumerate(pairs, start=1):
        if i in dropped:
            out.append(ABRound(index=i, order="head-base", dropped="head invalid twice (send lag)"))
        else:
            out.append(ABRound(index=i, order="base-head" if i % 2 else "head-base",
                               base={TTFT: b, "error_rate": 0.0}, head={TTFT: h, "error_rate": 0.0}))
    return out


def test_base_and_head_are_geometric_means_and_the_change_their_ratio():
    # base 10, 20 ms; head 11, 22 ms: base √200 = 14.142, head √242 = 15.556, change +10 %
    result, stop = analyse(rounds([(10, 11), (20, 22)]),
                           [MetricDef.of(TTFT, 0.05)], min_rounds=2, max_rounds=3, spec=SPEC)
    c = next(c for c in result.comparisons if c.metric == TTFT)
    assert c.baseline == pytest.approx(math.sqrt(10 * 20))
    assert c.current == pytest.approx(math.sqrt(11 * 22))
    assert c.change == pytest.approx(0.10)
    assert c.interval == pytest.approx((0.10, 0.10))  # both rounds +10 %: no spread
    assert c.verdict == "regressed" and stop


def test_the_outcome_names_the_rounds_and_fails_like_any_regression():
    result, _ = analyse(rounds([(10, 11), (20, 22)]), [MetricDef.of(TTFT, 0.05)],
                        min_rounds=2, max_rounds=3, spec=SPEC, rule=RULES["bonferroni"])
    o = ab_outcome("t.py::test_x", result, [], [], base="simulator", head="simulator SLOWDOWN=1.1")
    assert o.ab is not None
    assert o.ab.orders == ["AB", "BA"] and o.ab.rounds_used == 2 and o.ab.rounds_dropped == 0
    assert o.ab.looks == 2 and o.ab.alpha_per_look == pytest.approx(0.01)  # Bonferroni: (1 − 0.98) / 2
    assert o.client_valid and o.status == "regressed"
    assert fails(o, Policy())
    assert "base simulator vs head simulator SLOWDOWN=1.1" in o.notes[0]


def test_too_few_valid_rounds_make_the_test_invalid_and_name_each_dropped_round():
    result, stop = analyse(rounds([(10, 11), (20, 22), (10, 11)], dropped=(1, 2)),
                           [MetricDef.of(TTFT, 0.05)], min_rounds=2, max_rounds=3, spec=SPEC)
    assert stop and result.rounds_used == 1
    o = ab_outcome("t.py::test_x", result, [], [], base="a", head="b")
    assert not o.client_valid and o.status == "invalid" and o.comparisons == []
    assert o.client_reasons[0] == "only 1 of 3 A/B rounds were valid (at least 2 needed)"
    assert o.client_reasons[1:] == ["round 1: head invalid twice (send lag)",
                                    "round 2: head invalid twice (send lag)"]
    assert fails(o, Policy())

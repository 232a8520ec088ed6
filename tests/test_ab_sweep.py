"""A/B mode for sweeps, hand-computed: each load point paired by round (judge/sequential/ab_sweep.py)."""

from __future__ import annotations

import pytest

from pytest_goodput.judge.sequential.ab_sweep import analyse_sweep, point_key, sweep_defs
from pytest_goodput.schema.outcomes.ab import ABRound
from pytest_goodput.schema.scenario.spec import build_spec

SPEC = build_spec({"scenario": "sweep", "sweep": [1, 4], "sweep_over": "concurrency", "requests": 30})
THR, TPOT = "throughput.output_tokens_per_s", "metrics.tpot_ms.p50"


def round_(i, at1, at4):
    """Round i: (base, head) throughput and TPOT at load 1 and at load 4."""
    base, head = {}, {}
    for load, ((bt, bp), (ht, hp)) in ((1, at1), (4, at4)):
        base.update({point_key(load, THR): bt, point_key(load, TPOT): bp, point_key(load, "error_rate"): 0.0})
        head.update({point_key(load, THR): ht, point_key(load, TPOT): hp, point_key(load, "error_rate"): 0.0})
    return ABRound(index=i, order="base-head", base=base, head=head)


def test_a_sweep_compares_throughput_and_tpot_at_the_frontier_percentile():
    assert [d.path for d in sweep_defs(SPEC)] == [THR, TPOT]
    assert [d.direction for d in sweep_defs(SPEC)] == ["higher", "lower"]


def test_the_worst_point_decides_and_every_point_is_kept():
    # load 1 unchanged in both rounds; load 4: head throughput 100 → 80 (−20 %) in both rounds
    rounds = [round_(i, ((100, 10), (100, 10)), ((400, 10), (320, 10))) for i in (1, 2)]
    result, stop = analyse_sweep(rounds, SPEC, min_rounds=2, max_rounds=3)
    assert stop and result.decided
    frontier = result.comparisons[0]
    assert frontier.metric == "frontier_throughput" and frontier.verdict == "regressed"
    assert frontier.change == pytest.approx(-0.20)
    assert "worst at load 4 (throughput -20.0%) of 2 points" in frontier.note
    assert [(p["load"], p["verdict"]) for p in result.points] == [(1.0, "pass"), (4.0, "regressed")]
    assert result.stop_reason == "regressed beyond the tolerance over the whole interval at load 4"


def test_a_sweep_waits_for_every_point():
    # load 1 cleared (identical); load 4 noisy (−30 %, +30 %): undecided, so no stop before the limit
    rounds = [round_(1, ((100, 10), (100, 10)), ((400, 10), (280, 13))),
              round_(2, ((100, 10), (100, 10)), ((400, 10), (520, 7)))]
    result, stop = analyse_sweep(rounds, SPEC, min_rounds=2, max_rounds=3)
    assert not stop
    result, stop = analyse_sweep([*rounds, round_(3, ((100, 10), (100, 10)), ((400, 10), (400, 10)))],
                                 SPEC, min_rounds=2, max_rounds=3)
    assert stop and not result.decided
    assert result.stop_reason == "round limit 3 reached; undecided at load 4"

"""Sweeps judge latency at equal load: every point's TTFT and TPOT percentiles against the
baseline's same load, a knee halved on a doubling grid and a point never reached fail the
test through the one judge (docs/frontiers.md, "Comparing with a baseline")."""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np
import pytest

from judge_scenarios import Workload, run, sweep_side
from pytest_goodput.judge import Policy, fails, judge
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.scenario.spec import SpecError, build_spec

LOADS = (2.0, 4.0, 8.0, 16.0)
#: An open loop: each point's window is its requests over its rate, so throughput is the rate.
WORKLOADS = [dataclasses.replace(Workload.draw(200, seed=int(load), tpot_ms=10.0 * (1 + load / 8)),
                                 window_s=200 / load) for load in LOADS]


def session(seed: int, ttft: Sequence[float] = (1.0,) * 4, points: int = 4) -> list[Samples]:
    rng = np.random.default_rng(seed)
    return [run(w, rng, ttft_factor=f) for w, f in zip(WORKLOADS[:points], ttft)]


def judged(current: list[Samples], *, cur_step: Optional[float] = None,
           base_step: Optional[float] = None, **spec_kw: object) -> Outcome:
    spec = build_spec(dict(scenario="sweep", sweep=list(LOADS), sweep_over="rate", requests=200,
                           isl=128, osl=64, **spec_kw))
    base = sweep_side(spec, [session(seed) for seed in range(1, 6)],
                None if base_step is None else [base_step] * 5)
    cur = sweep_side(spec, [current], None if cur_step is None else [cur_step])
    return judge("t.py::test_sweep", cur, base, Policy())


def frontier_row(outcome: Outcome):
    return next(c for c in outcome.comparisons if c.metric == "frontier_throughput")


def by_load(outcome: Outcome) -> dict:
    assert outcome.frontier is not None and outcome.frontier.comparison is not None
    return {p.load: p for p in outcome.frontier.comparison.by_load}


def test_ttft_tripled_at_every_point_fails_and_names_point_and_metric() -> None:
    out = judged(session(99, ttft=(3.0,) * 4))
    assert fails(out, Policy())
    points = by_load(out)
    assert all(p.verdict == "regressed" for p in points.values())
    ttft = {c.metric: c for c in points[16.0].latency}["metrics.ttft_ms.p50"]
    assert ttft.verdict == "regressed" and ttft.change == pytest.approx(2.0, rel=0.1)
    # Throughput is the offered rate in an open loop: it did not move.
    assert points[16.0].throughput.verdict != "regressed" and abs(points[16.0].throughput.change) < 0.05
    assert "TTFT P" in frontier_row(out).note and "4 regressed" in frontier_row(out).note


def test_ttft_tripled_at_the_top_point_only_fails_there() -> None:
    out = judged(session(99, ttft=(1.0, 1.0, 1.0, 3.0)))
    assert fails(out, Policy())
    points = by_load(out)
    assert all(points[x].verdict in ("pass", "underpowered") for x in LOADS[:3])
    assert points[16.0].verdict == "regressed"
    assert frontier_row(out).note.startswith("worst at load 16 (TTFT P")


def test_knee_halved_on_a_doubling_grid_fails() -> None:
    # Every baseline session saturated at 16 req/s (step 3); the PR's at 8 (step 2).
    out = judged(session(99), cur_step=2.0, base_step=3.0)
    sat = next(c for c in out.comparisons if c.metric == "sweep.saturation_load")
    assert sat.verdict == "regressed" and (sat.baseline, sat.current) == (16.0, 8.0)
    assert fails(out, Policy())


def test_top_point_unreached_fails() -> None:
    out = judged(session(99, points=3))
    points = by_load(out)
    assert points[16.0].verdict == "regressed" and "not reached" in points[16.0].throughput.note
    assert points[16.0].throughput.current is None
    assert frontier_row(out).verdict == "regressed" and fails(out, Policy())


@pytest.mark.parametrize("seed", [101, 102, 103])
def test_the_same_server_passes(seed: int) -> None:
    out = judged(session(seed), cur_step=3.0, base_step=3.0)
    assert not fails(out, Policy())
    assert all(p.verdict != "regressed" for p in by_load(out).values())
    # Each point is judged on throughput, the frontier's TPOT P50 and the default TTFT P50.
    p = by_load(out)[2.0]
    assert p.tpot is not None and p.tpot.metric == "metrics.tpot_ms.p50"
    assert [c.metric for c in p.latency] == ["metrics.ttft_ms.p50"]


def test_gate_names_what_each_point_is_judged_on() -> None:
    out = judged(session(99, ttft=(3.0,) * 4), gate=["metrics.tpot_ms.p99"])
    assert not fails(out, Policy())
    assert [c.metric for c in by_load(out)[16.0].latency] == ["metrics.tpot_ms.p99"]
    assert out.spec["gate"] == ["metrics.tpot_ms.p99"]
    slow = judged(session(99, ttft=(3.0,) * 4), gate=["metrics.ttft_ms.p90"])
    assert fails(slow, Policy())


def test_gate_on_a_sweep_refuses_what_no_point_has() -> None:
    with pytest.raises(SpecError, match="a sweep's gate= names what each point"):
        build_spec(dict(scenario="sweep", sweep=[1, 2], requests=8, gate=["degradation.ttft_ms.p50"],
                               slice_s=1.0))
    with pytest.raises(SpecError, match="gate= does not apply to scenario 'capacity'"):
        build_spec(dict(scenario="capacity", requests=8, ttft_ms=100, gate=["metrics.ttft_ms.p99"]))


def test_family_confidence_of_docs_metrics_md() -> None:
    from pytest_goodput.judge.shapes.frontier import family_confidence

    # 4 points × 3 metrics: 1 − 0.02 / 12.
    assert family_confidence(0.98, 12) == pytest.approx(0.9983333333)
    assert family_confidence(0.98, 0) == pytest.approx(0.98)


def test_a_regression_alone_is_inconclusive_across_the_sweep() -> None:
    from pytest_goodput.judge.shapes.frontier import family_verdict
    from pytest_goodput.schema.outcomes.outcome import MetricComparison

    def at(confidence: float) -> MetricComparison:
        verdict = "regressed" if confidence < 0.99 else "inconclusive"
        return MetricComparison(metric="metrics.ttft_ms.p50", direction="lower", tolerance=0.1,
                                verdict=verdict, note="spread")

    c = family_verdict(at, 0.98, 0.999, 20)
    assert c.verdict == "inconclusive" and "not across the sweep's 20 comparisons" in c.note
    assert family_verdict(at, 0.98, 0.98, 1).verdict == "regressed"

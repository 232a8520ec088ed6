"""A sweep's verdict is its points compared at equal load; the step lookup of the two
frontiers, and the ``interactivity_tolerance`` it matches points with, are a view reported
beside that verdict and decide nothing (docs/frontiers.md, "Comparing with a baseline")."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from judge_scenarios import Workload, evidence, run
from pytest_goodput.judge import Policy, fails, judge
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.runs.session import Sweep
from pytest_goodput.schema.scenario.spec import build_spec

LOADS = (1.0, 4.0, 16.0)
#: Each load's workload: TPOT grows with load, and so does throughput (a shorter window).
WORKLOADS = [dataclasses.replace(Workload.draw(120, seed=int(load), tpot_ms=10.0 * (1 + load / 8)),
                                 window_s=30.0 / load) for load in LOADS]


def session(seed: int, tpot_factor: float = 1.0) -> list[Samples]:
    rng = np.random.default_rng(seed)
    return [run(w, rng, machine_cv=0.0, tpot_factor=tpot_factor) for w in WORKLOADS]


def frontier(points: list[Samples]) -> list[dict]:
    """The frontier points of one session, by their definitions (docs/frontiers.md, "Axes")."""
    out = []
    for load, s in zip(LOADS, points):
        tpot = sorted(v for v in s.tpot_ms if v is not None)
        p50 = tpot[math.ceil(0.5 * len(tpot)) - 1]
        out.append({"load": load, "load_kind": "concurrency", "interactivity": 1000.0 / p50,
                    "throughput": sum(s.output_tokens) / s.window_s})
    return out


def with_frontier(side, points: list[Samples]):
    """``side`` with its newest session's sweep frontier."""
    newest = side.sessions[-1].model_copy(update={"sweep": Sweep(frontier=frontier(points))})
    return dataclasses.replace(side, sessions=[*side.sessions[:-1], newest])


def judged(interactivity_tolerance: float):
    spec = build_spec(dict(scenario="sweep", sweep=list(LOADS), requests=120, isl=128, osl=64,
                           interactivity_tolerance=interactivity_tolerance))
    sessions = [session(seed) for seed in (1, 2, 3)]
    baseline = with_frontier(evidence(spec, sessions), sessions[-1])
    # The same engine, every point's TPOT 1 % longer: its interactivity lands just left of the
    # baseline's at every load, as a rerun's may.
    now = session(9, tpot_factor=1.01)
    current = with_frontier(evidence(spec, [now]), now)
    return judge("t.py::test_sweep", current, baseline, Policy())


def test_interactivity_tolerance_changes_the_step_view_and_no_verdict() -> None:
    strict, loose, wide = judged(0.0), judged(0.05), judged(0.5)
    # The view: with no slack every baseline point misses the lookup and is matched with a
    # slower point; with the default slack each is matched with its twin.
    assert strict.frontier.comparison.verdict == "regressed"
    assert loose.frontier.comparison.verdict == "pass"
    # The verdict: the same at every setting, from the points compared at equal load.
    for out in (strict, loose, wide):
        assert {c.metric: c.verdict for c in out.comparisons} == \
            {c.metric: c.verdict for c in loose.comparisons}
        assert not fails(out, Policy())
    row = next(c for c in loose.comparisons if c.metric == "frontier_throughput")
    assert row.verdict != "regressed" and row.method.startswith("equal-load points")
    assert [p.load for p in loose.frontier.comparison.by_load] == list(LOADS)


@pytest.mark.parametrize("value", [-0.1, 1.0])
def test_interactivity_tolerance_is_a_fraction(value: float) -> None:
    from pytest_goodput.schema.scenario.spec import SpecError

    with pytest.raises(SpecError, match="interactivity_tolerance"):
        build_spec(dict(scenario="sweep", sweep=[1, 2], requests=8, interactivity_tolerance=value))

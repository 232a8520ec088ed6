"""A/B sweeps stop past saturation as single sweeps do (fake runs, run/ab.py)."""

from __future__ import annotations

from pytest_goodput.run.ab import run_ab
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from test_saturation_sweep import KNEE_AT_4, KNEE_AT_16, SPEC, point_run

# base saturates at 16 (gain 5 % for 4x the users while E2E quadruples), head already at 4.
BASE, HEAD = KNEE_AT_16, KNEE_AT_4


def run_both(spec: ScenarioSpec, seed: int) -> tuple[list[tuple[str, float]], object]:
    ran: list[tuple[str, float]] = []

    def run(s: ScenarioSpec, engine: str) -> RunResult:
        ran.append((engine, float(s.concurrency or 0)))
        return point_run(s, *(BASE if engine == "base" else HEAD)[s.concurrency])

    result = run_ab(spec, "base", "head", seed=seed, min_rounds=2, max_rounds=2, run=run)  # type: ignore[arg-type]
    return ran, result


def test_the_first_round_finds_saturation_and_later_rounds_skip_the_loads_above_it():
    for seed in range(4):  # both round-1 orders: base first and head first
        ran, result = run_both(SPEC, seed)
        per_side = {side: [load for s, load in ran if s == side] for side in ("base", "head")}
        # round 1: head saturates at 4, base at 16; both measure up to 16, then round 2 the same
        assert per_side["base"] == [1, 4, 16, 1, 4, 16], (seed, ran)
        assert per_side["head"] == [1, 4, 16, 1, 4, 16], (seed, ran)
        assert 32.0 not in [load for _, load in ran]
        assert any("every round skipped concurrency 32" in n for n in result.notes)  # type: ignore[attr-defined]
        assert result.spec.sweep == SPEC.sweep  # type: ignore[attr-defined]
        assert [p["load"] for p in result.points] == [1.0, 4.0, 16.0]  # type: ignore[attr-defined]


def test_saturation_stop_false_measures_every_point_in_every_round():
    ran, result = run_both(SPEC.model_copy(update={"saturation_stop": False}), 0)
    assert [load for s, load in ran if s == "base"] == [1, 4, 16, 32, 1, 4, 16, 32]
    assert not any("skipped" in n for n in result.notes)  # type: ignore[attr-defined]

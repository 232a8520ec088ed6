"""A/B mode's rounds (run/ab.py) with a fake runner: order, re-runs, dropped rounds, stopping."""

from __future__ import annotations

import pytest

from pytest_goodput.judge.sequential.ab import round_order
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.run import ab as run_ab_module
from pytest_goodput.run.ab import measure_ab, run_ab
from pytest_goodput.schema.ab_options import split_ab_args
from pytest_goodput.schema.runs.results import (
    ClientHealth,
    Distribution,
    LatencyMetrics,
    RunResult,
    Throughput,
    Window,
)
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError

SPEC = ScenarioSpec(scenario="offline", requests=10, seed=5)  # gates output throughput only
THR = "throughput.output_tokens_per_s"


def fake_result(tok_s: float, valid: bool) -> RunResult:
    d = Distribution()
    return RunResult(
        spec=SPEC, load={}, window=Window(start=0.0, end=1.0, seconds=1.0), issued=10, completed=10,
        metrics=LatencyMetrics(ttft_ms=d, tpot_ms=d, itl_ms=d, e2e_ms=d),
        throughput=Throughput(requests_per_s=10.0, output_tokens_per_s=tok_s, total_tokens_per_s=tok_s),
        send_lag_ms=d, token_count_source="usage",
        client=ClientHealth(valid=valid, reasons=[] if valid else ["send lag P99 120 ms"],
                            cpu_utilization=0.5),
    )


class Fake:
    """Two engines by name; ``speed`` per engine; ``invalid``: (engine, call number) pairs."""

    def __init__(self, speed: dict[str, list[float]], invalid: set[tuple[str, int]] | None = None) -> None:
        self.speed = speed
        self.invalid = invalid or set()
        self.calls: list[str] = []

    def __call__(self, spec: ScenarioSpec, engine: object) -> RunResult:
        name = str(engine)
        self.calls.append(name)
        n = self.calls.count(name)
        speeds = self.speed[name]
        return fake_result(speeds[(n - 1) % len(speeds)], (name, n) not in self.invalid)


@pytest.fixture(autouse=True)
def values_from_throughput(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake runs have no per-request records: read the throughput they report."""
    def values(base: RunResult, head: RunResult, defs: list[MetricDef]):
        return ({THR: base.throughput.output_tokens_per_s, "error_rate": 0.0},
                {THR: head.throughput.output_tokens_per_s, "error_rate": 0.0})
    monkeypatch.setattr(run_ab_module, "round_values", values)


def test_each_round_runs_both_engines_in_its_drawn_order_and_stops_when_decided() -> None:
    fake = Fake({"base": [600.0, 601.0, 599.0], "head": [600.5, 600.0, 600.0]})
    lines: list[str] = []
    result = run_ab(SPEC, "base", "head", run=fake, say=lines.append, min_rounds=3)  # type: ignore[arg-type]
    assert result.rounds_used == 3 and result.stopped_early and result.decided
    assert [c.verdict for c in result.comparisons] == ["pass", "pass"]
    expected = [round_order(result.seed, r) for r in (1, 2, 3)]
    assert [r.order for r in result.rounds] == expected
    assert fake.calls == [s for o in expected for s in (o.split("-"))]
    assert lines[0].startswith("round 1: ")


def test_each_job_draws_its_own_order_seed_and_a_given_seed_replays_it() -> None:
    runs = [run_ab(SPEC, "base", "head", run=Fake({"base": [600.0, 601.0, 599.0],  # type: ignore[arg-type]
                                                    "head": [600.5, 600.0, 600.0]}), min_rounds=3)
            for _ in range(2)]
    assert runs[0].seed != runs[1].seed  # 32 random bits: equal once in 4 billion
    replay = run_ab(SPEC, "base", "head", run=Fake({"base": [600.0, 601.0, 599.0],  # type: ignore[arg-type]
                                                    "head": [600.5, 600.0, 600.0]}),
                    min_rounds=3, seed=runs[0].seed)
    assert replay.seed == runs[0].seed
    assert [r.order for r in replay.rounds] == [r.order for r in runs[0].rounds]


def test_the_markers_order_seed_replays_a_job_in_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    _, options = split_ab_args({"scenario": "concurrency", "ab_order_seed": 11}, "test_x")
    assert options.ab_order_seed == 11
    with pytest.raises(SpecError, match="ab_order_seed"):
        split_ab_args({"ab_order_seed": -1}, "test_x")
    fake = Fake({"base": [600.0, 601.0, 599.0], "head": [600.5, 600.0, 600.0]})
    real = run_ab_module.run_ab
    monkeypatch.setattr(run_ab_module, "run_ab", lambda *a, **kw: real(*a, **kw, run=fake))
    measured = measure_ab(SPEC, "base", "head", min_rounds=3, order_seed=options.ab_order_seed)  # type: ignore[arg-type]
    assert measured.result.seed == 11
    assert [r.order for r in measured.result.rounds] == [round_order(11, r) for r in (1, 2, 3)]


def test_an_invalid_run_is_run_once_more_and_a_twice_invalid_round_is_dropped() -> None:
    # head's 1st run invalid (re-run valid: round kept); head's 4th and 5th invalid (round dropped).
    fake = Fake({"base": [600.0], "head": [420.0, 421.0, 419.0]},
                invalid={("head", 1), ("head", 4), ("head", 5)})
    result = run_ab(SPEC, "base", "head", run=fake, min_rounds=3, max_rounds=5)  # type: ignore[arg-type]
    assert result.rounds[0].notes and "re-measured once" in result.rounds[0].notes[0]
    assert not result.rounds[0].dropped
    assert result.rounds[2].dropped.startswith("head invalid twice")
    assert result.rounds_dropped == 1 and result.rounds_used == 3
    assert result.regressed == [THR]  # -30 % in every kept round: decided at the first look
    assert len(result.rounds) == 4 and result.stopped_early and result.decided


def test_a_round_limit_counts_dropped_rounds() -> None:
    fake = Fake({"base": [600.0], "head": [600.0]}, invalid={("head", n) for n in range(1, 20)})
    result = run_ab(SPEC, "base", "head", run=fake, min_rounds=2, max_rounds=3)  # type: ignore[arg-type]
    assert len(result.rounds) == 3 and result.rounds_used == 0 and not result.decided


@pytest.mark.parametrize("spec,message", [
    (ScenarioSpec(scenario="capacity", ttft_ms=500), "does not compare capacity searches"),
    (ScenarioSpec(scenario="offline", requests=10, repeats=2), "--repeats"),
])
def test_capacity_searches_and_repeats_are_refused(spec: ScenarioSpec, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run_ab(spec, "base", "head", run=Fake({}))  # type: ignore[arg-type]


def test_a_sweep_round_runs_every_point_on_both_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    # Values per point from the fake's throughput: head 20 % slower at every point.
    from pytest_goodput.judge.sequential.ab_sweep import point_key

    def values(spec, base, head, tolerance=None):
        side = lambda runs: {point_key(load, p): (r.throughput.output_tokens_per_s if p == THR else 0.0)  # noqa: E731
                             for load, r in zip(spec.sweep, runs) for p in (THR, "error_rate")}
        return side(base), side(head)

    monkeypatch.setattr(run_ab_module, "sweep_round_values", values)
    sweep = ScenarioSpec(scenario="sweep", sweep=[1, 4], sweep_over="concurrency", requests=10,
                         frontier_percentile=99.9, seed=5)  # no gateable TPOT percentile: throughput only
    fake = Fake({"base": [600.0], "head": [480.0]})
    result = run_ab(sweep, "base", "head", run=fake, min_rounds=2, max_rounds=4)  # type: ignore[arg-type]
    assert fake.calls.count("base") == fake.calls.count("head") == 2 * len(result.rounds)
    assert result.rounds_used == 2 and result.decided
    assert result.comparisons[0].metric == "frontier_throughput"
    assert result.comparisons[0].verdict == "regressed"
    assert result.comparisons[0].change == pytest.approx(-0.20)
    assert [p["verdict"] for p in result.points] == ["regressed", "regressed"]


def test_each_round_measures_the_error_rate_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate names throughput only; the rounds still carry the error rate, which is compared."""
    asked: list[list[str]] = []

    def values(base: RunResult, head: RunResult, defs: list[MetricDef]):
        asked.append([d.path for d in defs])
        return ({THR: 600.0, "error_rate": 0.0}, {THR: 600.0, "error_rate": 0.02 + 0.001 * len(asked)})
    monkeypatch.setattr(run_ab_module, "round_values", values)
    result = run_ab(SPEC, "base", "head", run=Fake({"base": [600.0], "head": [600.0]}))  # type: ignore[arg-type]
    assert asked[0] == [THR, "error_rate"]
    assert result.regressed == ["error_rate"] and result.decided

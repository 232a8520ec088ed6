"""Capacity search on synthetic attainment curves, and bracket-based capacity comparison."""

from __future__ import annotations

import math
import random
from typing import Callable, Optional

import pytest

from pytest_goodput.judge.shapes.capacity import capacity_comparison
from pytest_goodput.run.capacity import (
    MAX_PROBES,
    Probe,
    bracket,
    plan_next_rate,
    search,
)
from pytest_goodput.schema.runs.results import (
    ClientHealth,
    Distribution,
    Goodput,
    LatencyMetrics,
    RunResult,
    Throughput,
    Window,
)
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.schema.runs.session import Capacity


def cap_spec(**kw: object) -> ScenarioSpec:
    args: dict = {"scenario": "capacity", "ttft_ms": 500.0, "attainment": 0.9, "requests": 100}
    args.update(kw)
    return ScenarioSpec(**args)


def fake_result(spec: ScenarioSpec, attainment: float, valid: bool = True) -> RunResult:
    issued = 100
    good = round(attainment * issued)
    d = Distribution()
    return RunResult(
        spec=spec,
        load={"rate": float(spec.rate or 0)},
        window=Window(start=0.0, end=10.0, seconds=10.0),
        issued=issued,
        completed=issued,
        metrics=LatencyMetrics(ttft_ms=d, tpot_ms=d, itl_ms=d, e2e_ms=d),
        throughput=Throughput(requests_per_s=10.0, output_tokens_per_s=640.0, total_tokens_per_s=1920.0),
        goodput=Goodput(requests_per_s=good / 10.0, tokens_per_s=good * 6.4, attainment=good / issued,
                        good=good, issued=issued, target=spec.attainment,
                        met=good / issued >= spec.attainment),
        send_lag_ms=d,
        token_count_source="usage",
        client=ClientHealth(valid=valid, reasons=[] if valid else ["send lag P99 120 ms"],
                            cpu_utilization=0.5),
    )


class FakeRunner:
    """Records the specs it was asked to run; attainment from a curve over the rate."""

    def __init__(self, curve: Callable[[float], float], invalid_at: Optional[float] = None) -> None:
        self.curve = curve
        self.invalid_at = invalid_at
        self.specs: list[ScenarioSpec] = []

    def __call__(self, spec: ScenarioSpec, engine: object, progress: object) -> RunResult:
        self.specs.append(spec)
        assert spec.rate is not None
        return fake_result(spec, self.curve(spec.rate), valid=spec.rate != self.invalid_at)

    @property
    def rates(self) -> list[float]:
        return [s.rate for s in self.specs]  # type: ignore[misc]


def step_curve(knee: float) -> Callable[[float], float]:
    return lambda r: 1.0 if r < knee else 0.5


# ------------------------------------------------------------------ search sequence


def test_doubling_then_bisection_finds_the_knee_within_resolution() -> None:
    runner = FakeRunner(step_curve(7.3))
    m = search(cap_spec(), engine=None, run_once=runner)  # type: ignore[arg-type]
    # 1, 2, 4 pass; 8 fails; bisect [4, 8]: 6 ok, 7 ok, 7.5 fails, 7.25 ok -> (7.5-7.25)/7.25 = 3.4 %
    assert runner.rates == [1, 2, 4, 8, 6, 7, 7.5, 7.25]
    cap = m.capacity
    assert cap is not None
    assert cap.requests_per_s == 7.25 and cap.lower == 7.25 and cap.upper == 7.5
    assert (cap.upper - cap.lower) / cap.lower <= 0.05
    assert cap.lower <= 7.3 <= cap.upper
    assert cap.target == 0.9 and cap.complete is True
    assert [p.passed for p in cap.probes] == [True, True, True, False, True, True, False, True]
    assert cap.as_dict()["probes"][3] == {"rate": 8.0, "attainment": 0.5, "passed": False,
                                          "goodput_rps": 5.0, "good": 50, "issued": 100}
    assert m.kind == "capacity" and [r.spec.rate for r in m.results] == runner.rates


def test_probes_are_server_scenarios_of_the_same_spec() -> None:
    runner = FakeRunner(step_curve(3.0))
    spec = cap_spec(rate=2.0, seed=7, isl=256)
    search(spec, None, runner)  # type: ignore[arg-type]
    first = runner.specs[0]
    assert first.scenario == "server" and first.rate == 2.0
    assert (first.seed, first.isl, first.ttft_ms, first.attainment) == (7, 256, 500.0, 0.9)


@pytest.mark.parametrize("knee", [0.7, 1.9, 3.0, 7.3, 13.0, 100.0, 555.5])
def test_capacity_brackets_the_knee_for_many_curves(knee: float) -> None:
    runner = FakeRunner(step_curve(knee))
    cap = search(cap_spec(capacity_resolution=0.02), None, runner).capacity  # type: ignore[arg-type]
    assert cap is not None
    lo, hi = cap.lower, cap.upper
    assert lo < knee <= hi
    assert (hi - lo) / lo <= 0.02
    assert cap.requests_per_s == lo


def test_start_rate_from_spec() -> None:
    runner = FakeRunner(step_curve(7.3))
    search(cap_spec(rate=5.0), None, runner)  # type: ignore[arg-type]
    # 5 ok, 10 fails, bisect: 7.5 f, 6.25 ok, 6.875 ok, 7.1875 ok -> (7.5-7.1875)/7.1875 = 4.3 %
    assert runner.rates == [5, 10, 7.5, 6.25, 6.875, 7.1875]


def test_cap_stops_doubling_and_leaves_no_upper_bound() -> None:
    runner = FakeRunner(lambda r: 1.0)
    cap = search(cap_spec(capacity_max_rate=6.0), None, runner).capacity  # type: ignore[arg-type]
    assert runner.rates == [1, 2, 4, 6]
    assert cap is not None and (cap.requests_per_s, cap.lower, cap.upper) == (6.0, 6.0, None)


def test_start_above_cap_is_clamped() -> None:
    runner = FakeRunner(step_curve(7.3))
    search(cap_spec(rate=50.0, capacity_max_rate=10.0), None, runner)  # type: ignore[arg-type]
    assert runner.rates[:2] == [10, 5]  # 10 fails, then bisect needs a pass: halve


def test_cap_below_knee_with_failures_above_cap_bisects_normally() -> None:
    runner = FakeRunner(step_curve(5.0))
    cap = search(cap_spec(capacity_max_rate=6.0), None, runner).capacity  # type: ignore[arg-type]
    assert runner.rates[:4] == [1, 2, 4, 6]
    assert cap is not None and cap.lower < 5.0 <= cap.upper <= 6.0


def test_never_passing_halves_three_times_then_reports_zero() -> None:
    runner = FakeRunner(lambda r: 0.0)
    cap = search(cap_spec(rate=4.0), None, runner).capacity  # type: ignore[arg-type]
    assert runner.rates == [4, 2, 1, 0.5]
    assert cap is not None
    assert cap.requests_per_s == 0.0 and cap.lower == 0.0 and cap.upper == 0.5


def test_first_probe_fails_but_a_lower_rate_passes_then_bisects() -> None:
    runner = FakeRunner(step_curve(1.5))
    cap = search(cap_spec(rate=4.0), None, runner).capacity  # type: ignore[arg-type]
    # 4 f, 2 f, 1 ok; bisect [1, 2]: 1.5 f, 1.25 ok, 1.375 ok, 1.4375 ok -> 0.0625/1.4375 = 4.3 %
    assert runner.rates == [4, 2, 1, 1.5, 1.25, 1.375, 1.4375]
    assert cap is not None and (cap.lower, cap.upper) == (1.4375, 1.5)


def test_invalid_probe_stops_the_search_with_a_reason() -> None:
    runner = FakeRunner(step_curve(7.3), invalid_at=8.0)
    m = search(cap_spec(), None, runner)  # type: ignore[arg-type]
    cap = m.capacity
    assert cap is not None
    assert runner.rates == [1, 2, 4, 8] and len(m.results) == 4
    assert cap.complete is False
    assert "8 req/s is invalid" in cap.stopped and "send lag P99 120 ms" in cap.stopped
    assert cap.probes[-1].invalid is True and cap.probes[-1].passed is False
    # the invalid probe is no evidence of failure: no upper bound, capacity at least 4
    assert (cap.requests_per_s, cap.upper) == (4.0, None)


def test_noisy_curve_terminates_and_stays_near_the_knee() -> None:
    """Attainment near the target flips randomly; the bracket stays around the knee."""
    for seed in range(30):
        rng = random.Random(seed)

        def curve(r: float) -> float:
            base = 1.0 if r < 7.3 else 0.5
            return base if abs(r - 7.3) > 0.4 else rng.choice([1.0, 0.5])

        runner = FakeRunner(curve)
        cap = search(cap_spec(), None, runner).capacity  # type: ignore[arg-type]
        assert cap is not None and len(runner.rates) < MAX_PROBES
        assert 6.9 - 0.4 <= cap.lower < cap.upper <= 7.7 + 0.4
        assert (cap.upper - cap.lower) / cap.lower <= 0.05


def test_pass_above_a_failure_never_raises_the_lower_bound() -> None:
    history = [Probe(4, True), Probe(8, False), Probe(6, False), Probe(16, True)]
    assert bracket(history) == (4, 6)
    assert plan_next_rate(history, cap_spec()) == 5.0


def test_plan_is_pure_and_converges() -> None:
    spec = cap_spec(capacity_resolution=0.1)
    assert plan_next_rate([], spec) == 1.0
    assert plan_next_rate([Probe(10, True), Probe(11, False)], spec) is None  # 10 % wide
    assert plan_next_rate([Probe(10, True), Probe(11.5, False)], spec) == 10.75
    assert plan_next_rate([Probe(1, True)] * MAX_PROBES, spec) is None


def test_missing_slos_is_an_error() -> None:
    spec = cap_spec().model_copy(update={"ttft_ms": None})
    with pytest.raises(ValueError, match="per-request SLOs"):
        search(spec, None, FakeRunner(step_curve(3)))  # type: ignore[arg-type]


# ------------------------------------------------------------------ comparison


def cap(value: float, lower: Optional[float] = None, upper: Optional[float] = None,
        **kw: object) -> Capacity:
    return Capacity.model_validate({"requests_per_s": value, "lower": value if lower is None else lower,
                                    "upper": upper, "target": 0.9, **kw})


FIVE = [cap(7.25, upper=7.5)] * 5  # five baseline sessions that found the same bracket


def test_same_engine_passes_hand_computed() -> None:
    """Five identical sessions [7.25, 7.5] against a current [7.0, 7.25], tolerance 10 %.

    Search SD of one bracket: ln(7.5/7.25)/√12 = 0.0097872; within-run SD of d:
    √(sd_c² + mean(sd_b²)/5) = 0.0097872·√1.2 = 0.010721. The sessions agree exactly
    (s = 0), so the prior decides with ν₀ = 3 of weight: prior var = 0.03²·1.2 + 0.010721²
    = 0.0012, var = 3·0.0012/7 = 0.00051422, half-width = t(7, 0.99)·√var = 2.9980·0.022676
    = 0.067984 on the log scale.
    """
    c = capacity_comparison(FIVE, cap(7.0, upper=7.25), 0.10)
    assert c.verdict == "pass" and c.metric == "capacity.requests_per_s" and c.direction == "higher"
    assert c.baseline == pytest.approx(7.25) and c.current == 7.0
    assert c.change == pytest.approx(7.0 / 7.25 - 1)
    d = math.log(7.0 / 7.25)
    assert c.interval == pytest.approx((math.expm1(d - 0.067984), math.expm1(d + 0.067984)), abs=2e-4)
    assert c.detectable == pytest.approx(0.10)


def test_single_baseline_session_is_underpowered_not_failed() -> None:
    c = capacity_comparison(cap(7.25, upper=7.5), cap(7.0, upper=7.25), 0.10)
    assert c.verdict == "underpowered" and "more baseline session" in c.note


def test_disjoint_brackets_beyond_tolerance_regress() -> None:
    c = capacity_comparison(FIVE, cap(5.25, upper=5.5), 0.10)
    assert c.verdict == "regressed"
    assert "7.25" in c.note and "5.5" in c.note


def test_within_tolerance_passes() -> None:
    # -4.8 %: within the 10 % tolerance, whatever the brackets say
    assert capacity_comparison(FIVE, cap(6.9, upper=7.1), 0.10).verdict == "pass"


def test_coarse_current_search_cannot_prove_a_drop() -> None:
    # a coarse current search [5, 8]: estimate 5 is 31 % lower, but the bracket spans 60 %
    c = capacity_comparison(FIVE, cap(5.0, upper=8.0), 0.10)
    assert c.verdict in ("inconclusive", "underpowered")


def test_improved_is_symmetric() -> None:
    five = [cap(5.0, upper=5.25)] * 5
    assert capacity_comparison(five, cap(7.0, upper=7.25), 0.10).verdict == "improved"
    assert capacity_comparison(five, cap(5.4, upper=5.6), 0.10).verdict == "pass"


def test_searches_at_the_rate_cap_are_equal() -> None:
    assert capacity_comparison([cap(8.0)] * 5, cap(8.0), 0.10).verdict == "pass"
    c = capacity_comparison([cap(8.0)] * 5, cap(2.0, upper=2.1), 0.10)
    assert c.verdict == "regressed"


def test_zero_capacity_cases() -> None:
    assert capacity_comparison(cap(0.0, upper=0.5), cap(0.0, upper=0.5), 0.05).verdict == "pass"
    c = capacity_comparison(cap(4.0, upper=4.2), cap(0.0, upper=0.5), 0.05)
    assert c.verdict == "regressed"
    up = capacity_comparison(cap(0.0, upper=0.5), cap(4.0, upper=4.2), 0.05)
    assert up.verdict == "improved"


def test_incomplete_search_is_never_decisive() -> None:
    c = capacity_comparison(FIVE, cap(2.0, upper=2.1, complete=False), 0.10)
    assert c.verdict == "inconclusive" and "current search stopped early" in c.note


def test_changed_target_is_incomparable() -> None:
    other = cap(7.0, upper=7.2, target=0.99)
    assert capacity_comparison(cap(7.25, upper=7.5), other, 0.05).verdict == "incomparable"


def test_comparison_round_trips_through_json() -> None:
    c = capacity_comparison(FIVE, cap(5.25, upper=5.5), 0.10)
    assert type(c).model_validate_json(c.model_dump_json()) == c
    assert not any(math.isinf(v) for v in (c.interval or ()))


def test_bad_tolerance() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        capacity_comparison(cap(1.0), cap(1.0), 1.0)


# ------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_capacity_search_on_a_slowed_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real probes through runner.measure and the load generator.

    A slowed engine (8x) keeps the probed rates low (under ~10 req/s). The search is the
    subject, not the client's pace: with a passing self-check a busy machine cannot stop it,
    so the search completes and is checked, never skipped.
    """
    import fake_selfcheck
    from pytest_goodput.engines.engine import simulator
    from pytest_goodput.run.runner import measure

    fake_selfcheck.install(monkeypatch)

    spec = cap_spec(rate=2.0, ttft_ms=600.0, tpot_ms=80.0, osl=32, requests=None, timeout_s=5.0,
                    duration_s=2.5, capacity_resolution=0.2)
    with simulator(slowdown=8.0) as engine:
        m = measure(spec, engine)
    cap = m.capacity
    assert cap is not None and m.kind == "capacity" and len(m.results) == len(cap.probes) >= 2
    assert [r.spec.scenario for r in m.results] == ["server"] * len(m.results)
    assert [r.spec.rate for r in m.results] == [p.rate for p in cap.probes]
    assert cap.complete, cap.stopped
    assert cap.upper is not None and (cap.upper - cap.lower) / cap.lower <= 0.2
    assert 1 <= cap.requests_per_s <= 16, cap
    for p, r in zip(cap.probes, m.results):
        assert r.goodput is not None and p.attainment == r.goodput.attainment
        assert p.passed == (r.goodput.attainment >= 0.9)
    assert capacity_comparison([cap] * 5, cap, tolerance=0.1).verdict == "pass"

"""Machine drift (sim/drift.py), its hook in the simulator model, the drift comparison of
bench/gate_quality.py (stored baseline against A/B mode), the gate-quality trial itself (the
registry's default gate, the mixed-length workload, the median arm) and bench/judge_cases.py,
run with tiny trial counts."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_goodput.sim.drift import SpeedSchedule, day_level, lognormal_sigma
from pytest_goodput.sim.model import SimRequest, simulate
from pytest_goodput.sim.profile import SimProfile

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def test_schedule_is_deterministic_per_seed_and_independent_of_query_order() -> None:
    a = SpeedSchedule(level=1.1, wander_cv=0.05, tau_s=10.0, seed=7)
    b = SpeedSchedule(level=1.1, wander_cv=0.05, tau_s=10.0, seed=7)
    times = [0.0, 3.5, 250.0, 17.2, 999.9]
    late_first = [b(t) for t in reversed(times)][::-1]  # b extends its path from the far end
    assert [a(t) for t in times] == late_first
    other = SpeedSchedule(level=1.1, wander_cv=0.05, tau_s=10.0, seed=8)
    assert [a(t) for t in times] != [other(t) for t in times]
    assert a(3.0) == a(3.99) and a(3.99) != a(4.0)  # constant within a 1 s cell, then moves
    assert a.shifted(100.0)(5.0) == a(105.0)


def test_schedule_without_wander_is_the_level_and_bad_input_is_refused() -> None:
    s = SpeedSchedule(level=1.25, wander_cv=0.0, seed=3)
    assert {s(t) for t in (0.0, 1.5, 1e4)} == {1.25}
    with pytest.raises(ValueError, match="level"):
        SpeedSchedule(level=0.0)
    with pytest.raises(ValueError, match="tau_s"):
        SpeedSchedule(tau_s=0.0)
    with pytest.raises(ValueError, match="virtual time"):
        s(-1.0)
    with pytest.raises(ValueError, match="coefficient of variation"):
        lognormal_sigma(-0.1)


def test_wander_has_the_asked_mean_cv_and_correlation_time() -> None:
    """AR(1) in log speed: mean level, CV wander_cv, lag-tau autocorrelation e^-1."""
    s = SpeedSchedule(level=1.0, wander_cv=0.05, tau_s=10.0, seed=1)
    xs = [s(float(t)) for t in range(40_000)]
    assert statistics.fmean(xs) == pytest.approx(1.0, abs=0.005)
    assert statistics.pstdev(xs) == pytest.approx(0.05, rel=0.1)
    logs = [math.log(x) for x in xs]
    m = statistics.fmean(logs)
    var = statistics.pvariance(logs)
    lag = statistics.fmean((logs[i] - m) * (logs[i + 10] - m) for i in range(len(logs) - 10)) / var
    assert lag == pytest.approx(math.exp(-1.0), abs=0.05)
    # within a few seconds the machine barely moves; a minute apart, it is nearly fresh
    near = statistics.fmean(abs(xs[i + 1] - xs[i]) for i in range(0, 39_000, 7))
    far = statistics.fmean(abs(xs[i + 60] - xs[i]) for i in range(0, 39_000, 7))
    assert near < far / 3


def test_day_levels_are_seeded_lognormal_with_mean_one() -> None:
    assert day_level(5, 2, 0.05) == day_level(5, 2, 0.05) != day_level(5, 3, 0.05)
    assert day_level(5, 2, 0.0) == 1.0
    levels = [day_level(11, d, 0.05) for d in range(5000)]
    assert statistics.fmean(levels) == pytest.approx(1.0, abs=0.004)
    assert statistics.pstdev(levels) == pytest.approx(0.05, rel=0.08)


def test_the_model_multiplies_each_step_by_the_speed_at_its_start() -> None:
    reqs = [SimRequest(i, 64, 16, 0.0) for i in range(4)]
    plain = simulate(SimProfile(), reqs)
    double = simulate(SimProfile(), reqs, speed=lambda t: 2.0)
    for p, d in zip(plain, double):
        assert d.token_times == pytest.approx([2 * x for x in p.token_times])
    # slow from 20 ms on: steps starting before are unchanged, later ones are three times longer
    step = simulate(SimProfile(), reqs, speed=lambda t: 1.0 if t < 0.02 else 3.0)
    ends = sorted({x for line in plain for x in line.token_times})  # every step emits here
    slow = sorted({x for line in step for x in line.token_times})
    k = sum(start < 0.02 for start in [0.0, *ends[:-1]])  # steps starting before 20 ms
    assert 0 < k < len(ends)
    assert slow[:k] == pytest.approx(ends[:k])
    assert slow[k] - slow[k - 1] == pytest.approx(3 * (ends[k] - ends[k - 1]))


def _bench_args(**over: object) -> argparse.Namespace:
    a = dict(requests=40, rate=8.0, isl=128, osl=64, ttft_slo=20.0, tpot_slo=9.5, schedule_seed=0,
             noise_sigma=0.01, sessions=3, repeats=2, confidence=0.98, prior_runs=3.0,
             power_alpha=0.1, goodput_slowdown=1.5, ttft_slowdown=1.5, day_cv=0.05, wander_cv=0.03,
             tau=30.0, gap=2.0, min_rounds=3, max_rounds=4, power_trials=1)
    a.update(over)
    return argparse.Namespace(**a)


@pytest.fixture
def gate_drift(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(BENCH))
    import gate_drift

    return gate_drift


def test_ab_trial_passes_a_a_and_fails_a_large_slowdown_through_run_ab(gate_drift) -> None:  # type: ignore[no-untyped-def]
    r = gate_drift.ab_trial(_bench_args(), 0)
    assert set(r) == set(gate_drift.DRIFT_ARMS)
    assert not r["A/A"]["fails"] and "regressed" not in r["A/A"]["verdicts"].values()
    assert r["goodput -10%"]["fails"] and r["goodput -10%"]["verdicts"]["goodput.requests_per_s"] == "regressed"
    assert all(3 <= r[a]["rounds"] <= 4 and r[a]["engine_s"] > 0 for a in r)
    assert gate_drift.ab_trial(_bench_args(), 0) == r  # seeded: the same trial twice
    assert set(gate_drift.ab_trial(_bench_args(), 1)) == {"A/A"}  # past --power-trials: A/A only


def test_a_stored_baseline_recorded_on_a_faster_day_raises_a_false_alarm(
        gate_drift, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The level shift between the recording day and the check day is what A/B removes."""
    args = _bench_args(day_cv=0.0, wander_cv=0.0, power_trials=0)
    assert not gate_drift.stored_trial(args, 0)["A/A"]["fails"]
    plain_init = gate_drift.Job.__init__

    def fast_recording_day(self, a, seed, day):  # type: ignore[no-untyped-def]
        plain_init(self, a, seed, day)
        self.speed = SpeedSchedule(level=0.85 if day == 0 else 1.0)

    monkeypatch.setattr(gate_drift.Job, "__init__", fast_recording_day)
    out = gate_drift.stored_trial(args, 0)
    assert out["A/A"]["fails"], out
    assert out["A/A"]["verdicts"]["metrics.tpot_ms.p99"] == "regressed", out


def test_bench_drift_command_prints_both_modes(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(BENCH / "gate_quality.py"), "--drift", "--trials", "2",
           "--power-trials", "1", "--requests", "40", "--max-rounds", "4", "--workers", "1"]
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()]
    assert "4/4 trials" in res.stdout
    for mode in ("stored baseline", "A/B"):
        for arm, n in (("A/A", 2), ("goodput -10%", 1), ("P99 TTFT +20%", 1)):
            line = next(r for r in rows if " ".join(r).startswith(f"{mode} {arm} "))
            count = line[len(mode.split()) + len(arm.split())]
            assert count.endswith(f"/{n}"), line
            per_metric = next(r for r in rows if r[:len(mode.split()) + len(arm.split())]
                              == [*mode.split(), *arm.split()] and r[-1] == f"(n={n})")
            assert "metrics.ttft_ms.p99" in per_metric


def test_ab_stopping_replays_exactly_what_run_ab_decides(gate_drift) -> None:  # type: ignore[no-untyped-def]
    """bench/ab_stopping.py judges recorded rounds: the same rounds and verdicts as the live job."""
    import ab_stopping

    from pytest_goodput.judge.sequential.ab import DEFAULT_RULE
    from pytest_goodput.run.ab import ab_metrics

    args = _bench_args(goodput_slowdown=1.1, ttft_slowdown=1.12, max_rounds=5, record_rounds=5)
    live = gate_drift.ab_trial(args, 0)
    _t, recorded = ab_stopping.record((args, 0))
    defs = ab_metrics(gate_drift.ab_spec(args))
    for arm, r in live.items():
        rounds = [ab_stopping.ABRound(**x) for x in recorded[arm]]
        rep = ab_stopping.replay(rounds, defs, DEFAULT_RULE, 3, 5, 0)
        assert (rep["rounds"], rep["verdicts"]) == (r["rounds"], r["verdicts"]), arm
    assert ab_stopping.parse_rule("obf:pocock@0.1").clear_alpha == 0.1
    with pytest.raises(SystemExit, match="unknown split"):
        ab_stopping.parse_rule("linear")


@pytest.fixture
def gate_quality(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(BENCH))
    import gate_quality

    return gate_quality


def test_the_bench_gates_the_registry_default_gate_with_the_medians(gate_quality) -> None:  # type: ignore[no-untyped-def]
    from pytest_goodput.schema import registry

    assert gate_quality.GATED == (*registry.default_gate(gate_quality.SPEC), "error_rate")
    assert {"metrics.ttft_ms.p50", "metrics.tpot_ms.p50", "goodput.requests_per_s"} <= set(gate_quality.GATED)
    assert gate_quality.SPEC.requests == 240 and gate_quality.SPEC.repeats == 2  # the README marker


def test_the_workload_mixes_prompt_lengths_fixed_by_the_schedule(gate_quality) -> None:  # type: ignore[no-untyped-def]
    args = _bench_args(requests=240, long_isl=512, long_frac=0.2)
    isl = gate_quality.prompt_lengths(args)
    assert (isl == 512).sum() == 48 and (isl == 128).sum() == 192
    assert (gate_quality.prompt_lengths(args) == isl).all()  # the same requests in every run
    assert (gate_quality.prompt_lengths(_bench_args()) == 128).all()  # without long_frac: one length
    import numpy as np

    run = gate_quality.one_run(args, 1, 1.0, "A/A", np.random.default_rng(0))
    assert run.prompt_tokens == [int(x) for x in isl]
    ttft = np.array(run.ttft_ms)
    assert np.median(ttft[isl == 512]) > np.quantile(ttft[isl == 128], 0.9)  # the long ones hold the tail
    slow = gate_quality.one_run(args, 1, 1.0, gate_quality.SHORT_SLOWER, np.random.default_rng(0))
    short = isl == 128
    assert np.array(slow.ttft_ms)[short] == pytest.approx(2.5 * ttft[short])
    assert np.array(slow.tpot_ms)[short] == pytest.approx(1.3 * np.array(run.tpot_ms)[short])
    assert np.array(slow.ttft_ms)[~short] == pytest.approx(ttft[~short])


def test_a_trial_passes_a_a_and_fails_the_median_arm(gate_quality) -> None:  # type: ignore[no-untyped-def]
    args = _bench_args(requests=60, long_isl=512, long_frac=0.2, seed=2026, session_cv=0.002,
                       tpot_slowdown=1.5)
    r = gate_quality.trial((args, 0))
    assert set(r) == set(gate_quality.ARMS)
    assert set(r["A/A"]["verdicts"]) == set(gate_quality.GATED)
    assert not r["A/A"]["fails"] and "regressed" not in r["A/A"]["verdicts"].values(), r["A/A"]
    med = r[gate_quality.SHORT_SLOWER]
    assert med["fails"] and med["strict"]
    assert med["verdicts"]["metrics.ttft_ms.p50"] == "regressed", med["verdicts"]
    assert med["verdicts"]["metrics.tpot_ms.p50"] == "regressed", med["verdicts"]
    for arm in ("goodput -10%", "P99 TTFT +20%", "errors 0->2%"):
        assert r[arm]["fails"], (arm, r[arm]["verdicts"])
    assert r[arm]["verdicts"]["error_rate"] == "regressed"


def test_judge_cases_reproduce_the_fixed_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import judge_cases

    one = judge_cases.case_failure_in_one_session(0)
    for mode in ("default", "strict"):
        verdicts, failed = one[mode][0], one[mode][1]
        assert failed and verdicts["metrics.ttft_ms.p99"] == verdicts["metrics.tpot_ms.p99"] == "regressed"
    six = judge_cases.case_short_prompts_slower(0)
    assert six["default"][1] and six["default"][0]["metrics.ttft_ms.p50"] == "regressed"
    seven = judge_cases.case_readme_marker(0)
    assert seven["strict"] == ({"ttft_p99_ms": "proven", "tpot_p99_ms": "proven"}, False)
    four = judge_cases.case_one_failure_in_400(0)
    assert all(v is not None and v < float("inf") for m, v in four["strict"][2].items()
               if m in judge_cases.P99)  # one failure in 400 leaves the P99s decidable

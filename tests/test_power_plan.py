"""Power planning (``judge/noise/power_plan.py``): the noise split and the launches a tolerance
needs, against hand-computed cases; the ``plan`` command and the recording's plan as users
meet them."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_goodput.judge.noise.power_plan import noise_split, plan_metric, seconds_per_launch
from pytest_goodput.judge.noise.sittings import Sittings
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.schema.runs.results import Samples

TPOT_P50 = "metrics.tpot_ms.p50"


def constant_run(log_value: float, n: int = 20, window_s: float = 10.0) -> Samples:
    """A run whose every request has TPOT e^log_value: its P50 is exactly that."""
    v = math.exp(log_value)
    return Samples(window_s=window_s, ok=[True] * n, ttft_ms=[10.0] * n, tpot_ms=[v] * n,
                   e2e_ms=[10.0 + 63 * v] * n, output_tokens=[64] * n, prompt_tokens=[16] * n)


def sessions_of(means: list[float], half_gap: float = 0.01) -> list[list[Samples]]:
    """Sessions of two runs each, log values mean ± half_gap."""
    return [[constant_run(m - half_gap), constant_run(m + half_gap)] for m in means]


def test_the_noise_split_is_the_one_way_analysis_of_the_sessions_runs() -> None:
    # Three launches of two runs; on the log scale each pair is 0.02 apart (deviations ±0.01):
    # σ_w² = 6·0.0001 / 3 = 0.0002. Session values 0.01, 0.11, -0.09: s² = 0.02 / 2 = 0.01;
    # σ_b² = 0.01 - 0.0002 / 2 = 0.0099.
    split = noise_split(sessions_of([0.01, 0.11, -0.09]), TPOT_P50)
    assert split is not None and split.scale == "log"
    assert split.within == pytest.approx(math.sqrt(0.0002), rel=1e-9)
    assert split.session == pytest.approx(0.1, rel=1e-9)
    assert split.between == pytest.approx(math.sqrt(0.0099), rel=1e-9)
    assert (split.sessions, split.repeats) == (3, 2.0)


def test_without_repeats_the_within_part_is_unknown_and_between_is_the_session_spread() -> None:
    split = noise_split([[constant_run(m)] for m in (0.0, 0.1, -0.1)], TPOT_P50)
    assert split is not None and split.within is None
    assert split.between == pytest.approx(0.1, rel=1e-9) and split.session == split.between


def test_a_noisy_baseline_states_that_no_number_of_launches_reaches_the_tolerance() -> None:
    # s² = 0.01 measured (ν = 2) dominates the prior; K = 1: Var = 0.01·(1 + 1/3),
    # half = t(0.99, 2) · √Var = 6.964557 · 0.1154701 = 0.8042; detectable e^0.8042 - 1.
    row = plan_metric(sessions_of([0.01, 0.11, -0.09]), MetricDef.of(TPOT_P50))
    assert row is not None and row.tolerance == 0.05
    assert row.one_launch == pytest.approx(math.expm1(6.964557 * math.sqrt(0.01 * 4 / 3)), rel=1e-4)
    assert row.launches is None  # the baseline's own σ²/S remains
    assert row.limit == pytest.approx(math.expm1(6.964557 * math.sqrt(0.01 / 3)), rel=1e-4)


def test_the_launches_a_tolerance_needs_by_hand() -> None:
    # Five launches of two runs: σ_w² = 0.0002, s² = 0.00025 (ν = 4), machine prior 2 % (TPOT
    # percentiles), request part of d: σ_w²/2 · (1/K + 1/5). Var = (3·prior + 4·s²·k) / 7 with
    # k = 1/K + 1/5, prior = 0.02²·k + 0.0001·k; t(0.99, 7) = 2.997952.
    #   K = 1: Var = (3·0.0006 + 4·0.0003) / 7 = 0.00042857 → +6.40 % (> 0.95 · 5 %)
    #   K = 2: Var = 0.00025 → +4.85 %;  K = 3: Var = 0.00019048 → +4.22 % (< 4.75 %)
    #   K → ∞: Var = 0.000071429 → +2.57 %
    row = plan_metric(sessions_of([0.0, 0.02, -0.02, 0.01, -0.01]), MetricDef.of(TPOT_P50))
    assert row is not None
    assert row.one_launch == pytest.approx(math.expm1(2.997952 * math.sqrt(0.0030 / 7)), rel=1e-4)
    assert row.launches == 3
    assert row.limit == pytest.approx(math.expm1(2.997952 * math.sqrt(0.0005 / 7)), rel=1e-3)


def test_the_baseline_sessions_a_tolerance_needs_by_hand() -> None:
    # The case above with S sessions (ν = S − 1, the spread measured so far kept) and K = 1:
    # k = 1 + 1/S, Var = k·(3·0.0005 + ν·0.00025)/(3 + ν), t(0.99, 3 + ν):
    #   S = 13: 2.602480 · √0.00032308 = 0.046778 → +4.789 % (> 4.75 %)
    #   S = 14: 2.583487 · √0.00031808 = 0.046076 → +4.715 % (< 4.75 %): one PR launch will do
    row = plan_metric(sessions_of([0.0, 0.02, -0.02, 0.01, -0.01]), MetricDef.of(TPOT_P50))
    assert row is not None and row.with_sessions == (14, 1)
    # s = 10 %: even 30 sessions and 8 launches leave Var = 0.01·(1/8 + 1/30), +10.3 %
    noisy = plan_metric(sessions_of([0.01, 0.11, -0.09]), MetricDef.of(TPOT_P50))
    assert noisy is not None and noisy.with_sessions is None


def test_a_run_outside_a_one_sitting_baseline_keeps_the_between_sitting_prior() -> None:
    sessions = sessions_of([0.0, 0.02, -0.02, 0.01, -0.01])
    ttft = MetricDef.of("metrics.ttft_ms.p99")
    inside = plan_metric(sessions, ttft)
    outside = plan_metric(sessions, ttft, sittings=Sittings(count=1, current_new=True))
    assert inside is not None and outside is not None
    assert outside.one_launch > inside.one_launch
    assert outside.limit > ttft.tolerance and outside.launches is None  # 8 % prior x (1 + 1/1)


def test_seconds_per_launch_is_the_mean_of_the_sessions_run_windows() -> None:
    sessions = [[constant_run(0, window_s=10.0), constant_run(0, window_s=12.0)],
                [constant_run(0, window_s=14.0)]]
    assert seconds_per_launch(sessions) == pytest.approx((22.0 + 14.0) / 2)


def test_the_plan_command_reads_the_example_suites_baselines(tmp_path: Path) -> None:
    """``python -m pytest_goodput plan DIR`` as the docs give it: a plan per test, nothing run."""
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-m", "pytest_goodput", "plan", "example_suite/baselines"],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "power plan: test_serving.py::test_interactive_slo: 5 session(s) x 1 run(s)" in out
    assert "the baseline spans 2 sittings" in out  # recorded on two days: the spread measures it
    assert "none for a sweep test" in out
    missing = subprocess.run([sys.executable, "-m", "pytest_goodput", "plan", str(tmp_path / "nope.json")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "nope.json: no such file" in missing.stderr


def test_every_gated_comparison_carries_its_baselines_noise_split() -> None:
    """The judge's comparisons (JSON report) hold the split of the plan's first case:
    σ_w = √0.0002, σ_b = √0.0099 on TPOT P50's log scale."""
    sys.path.insert(0, str(Path(__file__).parent))
    from judge_scenarios import evidence, spec

    from pytest_goodput.judge import judge

    sp = spec(20)
    out = judge("t::x", evidence(sp, [[constant_run(0.0), constant_run(0.0)]]),
                evidence(sp, sessions_of([0.01, 0.11, -0.09])))
    (tpot,) = [c for c in out.comparisons if c.metric == TPOT_P50]
    assert tpot.within_launch == pytest.approx(math.sqrt(0.0002), rel=1e-9)
    assert tpot.between_launch == pytest.approx(math.sqrt(0.0099), rel=1e-9)
    (err,) = [c for c in out.comparisons if c.metric == "error_rate"]
    assert err.within_launch is None and err.between_launch is None

"""The middle of the distribution is gated: P90 TTFT and P90 TPOT in the latency scenarios'
default gate (issue 41), judged through the public judge (``judge()`` → ``fails()``) on
hand-built sessions, and bench/middle.py's slowdown of the middle requests."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from judge_scenarios import Workload, run, spec, verdicts
from pytest_goodput.schema import registry
from pytest_goodput.schema.scenario.spec import build_spec

BENCH = Path(__file__).resolve().parents[1] / "bench"
P90 = ("metrics.ttft_ms.p90", "metrics.tpot_ms.p90")
#: The server scenario's gate before the middle was gated.
BEFORE = ["goodput.requests_per_s", "metrics.ttft_ms.p50", "metrics.ttft_ms.p99",
          "metrics.tpot_ms.p50", "metrics.tpot_ms.p99"]


def test_latency_scenarios_gate_the_p90s_with_their_registry_tolerances() -> None:
    for scenario, extra in (("server", dict(rate=8.0)), ("interactive", dict(rate=8.0, ttft_ms=500.0, tpot_ms=30.0))):
        sp = build_spec(dict(scenario=scenario, requests=240, isl=128, osl=64, **extra))
        assert set(P90) <= set(registry.default_gate(sp)), scenario
    for scenario, extra in (("offline", {}), ("concurrency", dict(concurrency=4))):
        sp = build_spec(dict(scenario=scenario, requests=240, isl=128, osl=64, **extra))
        assert not set(P90) & set(registry.default_gate(sp)), scenario
    ttft, tpot = (registry.metric(p) for p in P90)
    assert (ttft.tolerance, ttft.run_cv, ttft.day_cv) == (0.10, 0.03, 0.08)  # TTFT: queueing
    assert (tpot.tolerance, tpot.run_cv, tpot.day_cv) == (0.05, 0.02, 0.01)  # TPOT: machine speed
    assert ttft.percentile == tpot.percentile == 90.0


def _middle(w: Workload, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The requests ranked between the median and the 80th percentile of TTFT: TTFT ×1.6–1.9
    and TPOT ×1.12, the rest unchanged."""
    rank = np.argsort(np.argsort(w.ttft)) / w.n
    hit = (rank >= 0.5) & (rank < 0.8)
    return np.where(hit, rng.uniform(1.6, 1.9, w.n), 1.0), np.where(hit, 1.12, 1.0)


@pytest.mark.parametrize("trial", range(3))
def test_a_slowdown_of_the_middle_fails_on_p90_ttft_and_passed_the_gate_before(trial: int) -> None:
    rng = np.random.default_rng([41, trial])
    w = Workload.draw(240, seed=trial, sigma=0.6)  # queueing: a wide TTFT
    base = [[run(w, rng, machine_cv=0.01)] for _ in range(5)]
    ttft_f, tpot_f = _middle(w, rng)
    cur = [run(w, rng, machine_cv=0.01, ttft_factor=ttft_f, tpot_factor=tpot_f)]
    out, v, failed = verdicts(spec(240), base, cur)
    assert failed and v["metrics.ttft_ms.p90"] == "regressed", v
    assert v["metrics.ttft_ms.p50"] != "regressed" and v["metrics.ttft_ms.p99"] != "regressed", v
    p90 = next(c for c in out.comparisons if c.metric == "metrics.ttft_ms.p90")
    assert p90.change is not None and p90.change > p90.tolerance == 0.10
    # The gate of the day, named in gate=, let it through: neither the medians nor the P99s moved.
    _, v_before, failed_before = verdicts(spec(240, gate=BEFORE), base, cur)
    assert not failed_before and "metrics.ttft_ms.p90" not in v_before, v_before


@pytest.mark.parametrize("trial", range(3))
def test_a_a_passes_with_the_p90s_judged(trial: int) -> None:
    rng = np.random.default_rng([410, trial])
    w = Workload.draw(240, seed=100 + trial)
    base = [[run(w, rng)] for _ in range(5)]
    _, v, failed = verdicts(spec(240), base, [run(w, rng)])
    assert set(P90) <= set(v) and not failed, v
    assert "regressed" not in {v[p] for p in P90}, v


def test_the_bench_judges_the_gate_before_and_the_registry_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import middle

    assert middle.AFTER == (*registry.default_gate(middle.SPEC), "error_rate")
    assert set(middle.AFTER) - set(middle.BEFORE) == set(P90)
    rng = np.random.default_rng(0)
    w = Workload.draw(100, seed=0)
    r = run(w, rng)
    slowed = middle.middle(r, np.random.default_rng(1), (0.5, 0.8), (1.6, 1.9), 1.12)
    ttft, new = np.array(r.ttft_ms), np.array(slowed.ttft_ms)
    ratio = new / ttft
    rank = np.argsort(np.argsort(ttft)) / len(ttft)
    hit = (rank >= 0.5) & (rank < 0.8)
    assert hit.sum() == 30 and ((ratio[hit] >= 1.6) & (ratio[hit] <= 1.9)).all()
    assert (ratio[~hit] == 1.0).all()
    assert np.array(slowed.tpot_ms)[hit] == pytest.approx(1.12 * np.array(r.tpot_ms)[hit])
    decode = np.array(r.e2e_ms) - ttft
    assert np.array(slowed.e2e_ms)[hit] == pytest.approx(new[hit] + 1.12 * decode[hit])
    assert not math.isnan(float(np.median(new)))


def test_the_gated_p90_hand_computed() -> None:
    from pytest_goodput.judge.values import metric_value
    from pytest_goodput.schema.runs.results import Samples

    ttft = [float(v) for v in range(10, 101, 10)]
    run_ok = Samples(window_s=1.0, ok=[True] * 10, ttft_ms=ttft, tpot_ms=ttft, e2e_ms=ttft,
                     output_tokens=[8] * 10, prompt_tokens=[8] * 10)
    assert metric_value(run_ok, "metrics.ttft_ms.p90") == 90.0
    ok = [True] * 10
    ok[1] = False  # the 20 ms request failed: ranked at the top
    failed = run_ok.model_copy(update={"ok": ok, "ttft_ms": [None if not o else v for v, o in zip(ttft, ok)]})
    assert metric_value(failed, "metrics.ttft_ms.p90") == 100.0

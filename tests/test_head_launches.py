"""Measuring the PR over several engine launches (``judge/sequential/head_launches.py``): the looks'
levels by hand, the stopping decision, and the gate as users run it (pytester)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from judge_scenarios import Workload, evidence, run, spec  # noqa: E402

from pytest_goodput.judge import Policy, fails  # noqa: E402
from statistics import NormalDist  # noqa: E402

from pytest_goodput.judge.sequential.head_launches import (  # noqa: E402
    HeadRule, conditional_power, judge_look, look, settle)
from pytest_goodput.schema.outcomes.outcome import MetricComparison  # noqa: E402
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome  # noqa: E402


def test_one_planned_launch_is_the_gates_own_single_look() -> None:
    lk = look(1, 1, 5)
    assert (lk.regress_confidence, lk.last) == (0.98, True)


def test_the_first_looks_level_is_the_pocock_share_at_its_information() -> None:
    # S = 5, K = 3: I_k = 1/(1/k + 1/5) = 0.8333, 1.4286, 1.875; t_1 = 0.8333/1.875 = 0.4444.
    # Pocock-type spending: α·ln(1 + (e − 1)·t) = 0.01·ln(1.76368) = 0.0056741 at the first look,
    # all of it spent there: two-sided confidence 1 − 2·0.0056741.
    lk = look(1, 3, 5, rule=HeadRule("pocock", "pocock"))
    assert lk.regress_confidence == pytest.approx(1 - 2 * 0.01 * math.log(1 + (math.e - 1) * (0.8333333 / 1.875)), rel=1e-5)
    assert lk.clear_confidence == pytest.approx(1 - 2 * 0.05 * math.log(1 + (math.e - 1) * (0.8333333 / 1.875)), rel=1e-5)
    later = [look(k, 3, 5, rule=HeadRule("pocock", "pocock")) for k in (2, 3)]
    # every later look is held to a stricter level than the whole budget at once
    assert all(x.regress_confidence > 0.98 for x in [lk, *later]) and later[-1].last


def test_the_default_rule_spends_the_false_alarm_budget_late_and_the_clearing_budget_evenly() -> None:
    # O'Brien–Fleming-type at t_1 = 0.4444: 2 − 2Φ(z_0.995 / √t) = 2 − 2Φ(2.5758 / 0.6667)
    # = 1.12e-4 at the first look (the regressed side), Pocock-type on the cleared side.
    lk = look(1, 3, 5)
    t = 0.8333333 / 1.875
    first = 2 - 2 * NormalDist().cdf(NormalDist().inv_cdf(0.995) / math.sqrt(t))
    assert lk.regress_confidence == pytest.approx(1 - 2 * first, rel=1e-6)
    assert lk.clear_confidence == pytest.approx(1 - 2 * 0.05 * math.log(1 + (math.e - 1) * t), rel=1e-5)
    # the last look keeps most of the budget: far closer to the single look's 0.98 than Pocock's
    assert 0.98 < look(3, 3, 5).regress_confidence < look(3, 3, 5, rule=HeadRule("pocock", "pocock")).regress_confidence


def test_conditional_power_is_the_trends_chance_to_cross_the_last_looks_threshold() -> None:
    # σ = 10 % per launch, one launch of four so far 2 % worse; the last look's half-width is
    # small (spread 1 % over 30 sessions), so the threshold is the tolerance, ln 1.05 = 0.04879.
    # d_4 − d_1 ~ N(0, σ²·3/16): sd 0.0433; P(d_4 > 0.04879) = 1 − Φ((0.04879 − 0.02)/0.0433).
    cp = conditional_power(0.02, 0.10, 0.01, 0.01, 1, 4, 30, math.log(1.05), 0.98)
    assert cp == pytest.approx(1 - NormalDist().cdf((math.log(1.05) - 0.02) / (0.10 * math.sqrt(3) / 4)), rel=1e-9)
    assert conditional_power(0.02, 0.10, 0.01, 0.01, 4, 4, 30, math.log(1.05), 0.98) == 0.0  # no launch left


@pytest.mark.parametrize("bad", [(0, 3), (4, 3), (1, 21)])
def test_looks_outside_the_budget_are_refused(bad: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match="launches must satisfy"):
        look(bad[0], bad[1], 5)


def _c(metric: str, verdict: str, interval: tuple[float, float], tol: float = 0.1) -> MetricComparison:
    return MetricComparison(metric=metric, direction="lower", change=sum(interval) / 2, interval=interval,
                            tolerance=tol, verdict=verdict, detectable=tol)  # type: ignore[arg-type]


def _outcome(*cs: MetricComparison) -> Outcome:
    return Outcome(nodeid="t::x", scenario="server", comparisons=list(cs), baseline_status="compared")


def test_a_regression_decides_the_test_at_any_look() -> None:
    reg = _outcome(_c("metrics.ttft_ms.p99", "regressed", (0.3, 0.5)), _c("metrics.tpot_ms.p50", "pass", (-0.2, 0.2)))
    out, decided = settle(reg, reg, look(1, 3, 5))
    assert decided and "a metric regressed" in out.notes[-1]


def test_every_metric_cleared_decides_and_reads_pass() -> None:
    at_regress = _outcome(_c("metrics.ttft_ms.p99", "underpowered", (-0.12, 0.14)))
    at_clear = _outcome(_c("metrics.ttft_ms.p99", "pass", (-0.08, 0.09)))  # worse end 9 % ≤ 10 %
    out, decided = settle(at_regress, at_clear, look(1, 3, 5))
    assert decided and out.comparisons[0].verdict == "pass"
    assert "cleared at launch 1 of 3" in out.comparisons[0].note


def test_an_uncleared_metric_waits_for_the_next_launch_unless_no_launch_could_clear_it() -> None:
    at_regress = _outcome(_c("metrics.ttft_ms.p99", "inconclusive", (-0.05, 0.3)),
                          _c("metrics.tpot_ms.p50", "pass", (-0.02, 0.03)))
    _, decided = settle(at_regress, at_regress, look(1, 3, 5))
    assert not decided
    out, decided = settle(at_regress, at_regress, look(1, 3, 5), futile={"metrics.ttft_ms.p99"})
    assert decided and "more launches could not clear metrics.ttft_ms.p99" in out.notes[-1]
    _, decided = settle(at_regress, at_regress, look(3, 3, 5))
    assert not decided  # the budget is spent: the last look's verdicts stand


def test_judged_through_the_public_judge_a_quiet_aa_clears_and_a_slower_engine_regresses() -> None:
    """Hand-built launches (2 % launch noise, 240 requests x 2): an unchanged engine is cleared
    at the first of three planned launches; one 30 % slower is regressed there (nothing more
    to measure either way)."""
    w = Workload.draw(240, 3)
    rng = np.random.default_rng(11)
    sp = spec(240, repeats=2)
    base = evidence(sp, [[run(w, rng), run(w, rng)] for _ in range(5)])
    same, decided = judge_look("t::x", evidence(sp, [[run(w, rng), run(w, rng)]]), base, Policy(), 3)
    assert decided and not fails(same, Policy())
    assert "every gated metric cleared" in same.notes[-1]
    slow = [[run(w, rng, ttft_factor=1.3, tpot_factor=1.3) for _ in range(2)]]
    worse, decided = judge_look("t::x", evidence(sp, slow), base, Policy(), 3)
    assert decided and fails(worse, Policy())


def test_a_metric_out_of_reach_is_waited_for_only_while_a_regression_is_still_likely() -> None:
    """Six baseline launches 10 % apart (s ≈ 7 %), every tolerance 5 %: no planned launch could
    clear a metric. A PR launch at the baseline's level is not waited for (its chance to read
    regressed by the third launch is nil); one 22 % slower is not regressed at the first
    look (O'Brien–Fleming-type: little budget spent early) but is waited for."""
    w = Workload.draw(80, 5)
    rng = np.random.default_rng(3)
    sp = spec(80, tolerance=0.05)
    base = evidence(sp, [[run(w, rng, machine_cv=0.002, ttft_factor=f, tpot_factor=f)]
                         for f in (0.9, 1.1, 0.95, 1.05, 1.0, 1.0)])

    def one(f: float):  # type: ignore[no-untyped-def]
        return evidence(sp, [[run(w, rng, machine_cv=0.002, ttft_factor=f, tpot_factor=f)]])
    same, decided = judge_look("t::x", one(1.0), base, Policy(), 3)
    assert decided and not fails(same, Policy()) and "more launches could not clear" in same.notes[-1]
    slower, decided = judge_look("t::x", one(1.22), base, Policy(), 3)
    assert not decided and not slower.regressed
    _, decided = judge_look("t::x", one(1.22), base, Policy(), 3, rule=HeadRule(futility=1.0))
    assert decided  # the first rule gave up on it at once


# ---- as users run it ----------------------------------------------------------------------

# pytester's in-process runs drop modules first imported inside them; C extensions such as
# numpy cannot be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.load.coordinator  # noqa: E402,F401
import pytest_goodput.plugin.harness  # noqa: E402,F401
import pytest_goodput.plugin.session  # noqa: E402,F401
import pytest_goodput.report.files  # noqa: E402,F401
import pytest_goodput.run.gating  # noqa: E402,F401

pytest_plugins = ["pytester"]

LAUNCHES = """
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=24, isl=16, osl=8)
def test_closed(goodput, goodput_engine):
    urls.append(goodput_engine.base_url)
    goodput.run()
    urls.append(goodput_engine.base_url)

urls = []

def test_zz_launches():
    print("LAUNCH URLS", len(set(urls)))
"""


def test_the_gate_measures_a_slower_pr_over_launches_and_stops_when_it_regresses(pytester, monkeypatch) -> None:
    """``--goodput-head-launches=3``: a PR twice as slow regresses before the budget is spent
    (at the first launch or, as the false-alarm budget is spent late and three baseline
    sessions leave few degrees of freedom, the second); the verdict says how many launches
    it was measured over. Every look and the verdict share one read of the baseline and one
    fingerprint of the environment (the look that decided is the verdict, not judged again)."""
    from pytest_goodput.run import gating

    pytester.makepyfile(test_perf=LAUNCHES)
    res = pytester.runpytest("--goodput-update-baseline", "--goodput-sessions=3", "-k", "test_closed")
    res.assert_outcomes(passed=1)
    monkeypatch.setenv("GOODPUT_SIM_SLOWDOWN", "2.0")
    calls: list[str] = []
    load, collect, judge_look = gating.store.load, gating.collect, gating.judge_look
    monkeypatch.setattr(gating.store, "load", lambda *a, **k: calls.append("read") or load(*a, **k))
    monkeypatch.setattr(gating, "collect", lambda *a, **k: calls.append("fingerprint") or collect(*a, **k))
    monkeypatch.setattr(gating, "judge_look", lambda *a, **k: calls.append("look") or judge_look(*a, **k))
    res = pytester.runpytest("--goodput-baseline", "--goodput-head-launches=3", "-s")
    res.assert_outcomes(passed=1, failed=1)
    looks = calls.count("look")
    assert looks in (1, 2) and calls.count("read") == 1 and calls.count("fingerprint") == 1, calls
    res.stdout.fnmatch_lines([f"*measured over {looks} engine launch(es) of at most 3*"])
    res.stdout.fnmatch_lines(["*measured over [12] engine launch(es) of at most 3 (a metric regressed)*"])
    res.stdout.fnmatch_lines(["*LAUNCH URLS [12]"])  # decided before the third launch


@pytest.mark.parametrize("value", ["0", "21", "x"])
def test_the_head_launches_option_is_validated(pytester, value: str) -> None:
    pytester.makepyfile(test_perf="def test_a():\n    pass\n")
    res = pytester.runpytest(f"--goodput-head-launches={value}")
    assert res.ret != 0
    res.stderr.fnmatch_lines(["*head_launches*"])


class _Engine:
    kind = "fake"

    def __init__(self, can: bool) -> None:
        self.can_relaunch, self.relaunches = can, 0

    def relaunch(self) -> None:
        self.relaunches += 1


class _Session:
    """The plugin session as the harness sees it: a budget of 3 and a decision after ``decide_at``."""

    def __init__(self, decide_at: int) -> None:
        self.decide_at, self.looks = decide_at, []

    def head_launches(self, spec: object) -> int:
        return 3

    def head_decided(self, nodeid: str, spec: object, measured: list, engine: object) -> bool:
        self.looks.append(len(measured))
        return len(measured) >= self.decide_at


@pytest.mark.parametrize("decide_at,launches", [(1, 1), (2, 2), (9, 3)])
def test_the_harness_relaunches_until_decided_or_the_budget_is_spent(monkeypatch, decide_at: int, launches: int) -> None:
    from pytest_goodput.plugin.harness import GoodputHarness

    session, engine = _Session(decide_at), _Engine(can=True)
    h = GoodputHarness(session, "t::x", {}, lambda: engine)  # type: ignore[arg-type]
    h.spec = object()  # type: ignore[assignment]
    monkeypatch.setattr(h, "_valid_measurement", lambda eng: object())
    measured = h._head_launches(None, 3)
    assert len(measured) == launches and engine.relaunches == launches - 1
    assert h.head_planned == 3  # judged as looks of a budget of 3
    assert session.looks == list(range(1, min(decide_at, 2) + 1))  # no look after the last launch


def test_an_engine_not_started_here_is_measured_once_and_says_why(monkeypatch) -> None:
    from pytest_goodput.plugin.harness import GoodputHarness

    engine = _Engine(can=False)
    h = GoodputHarness(_Session(9), "t::x", {}, lambda: engine)  # type: ignore[arg-type]
    h.spec = object()  # type: ignore[assignment]
    monkeypatch.setattr(h, "_valid_measurement", lambda eng: object())
    assert len(h._head_launches(None, 3)) == 1 and engine.relaunches == 0
    assert h.head_planned == 1  # judged as the gate's single look
    assert "measured over one launch, not up to 3" in h.notes[-1]

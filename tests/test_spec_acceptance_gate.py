"""Speculative decoding's acceptance rate as a gated metric: the session value, the judge's
comparison hand-computed (judge/scalar/acceptance.py), and bench/spec_acceptance.py."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from statistics import NormalDist

import pytest

from pytest_goodput.judge.scalar.acceptance import SUMMARY_KEY, acceptance_comparison, session_acceptance
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Session

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _s(rate: float) -> Session:
    return Session(summary={SUMMARY_KEY: rate})


def test_the_registry_knows_acceptance_as_a_judged_not_nameable_metric() -> None:
    info = registry.metric(registry.ACCEPTANCE)
    assert (info.direction, info.unit, info.tolerance, info.run_cv) == ("higher", "%", 0.05, 0.04)
    assert not registry.is_gateable(registry.ACCEPTANCE) and registry.is_tolerable(registry.ACCEPTANCE)


def test_a_session_s_rate_from_its_summary_or_its_runs_counters() -> None:
    assert session_acceptance(_s(0.6)) == 0.6
    runs = [RunResult.model_construct(server_metrics=m) for m in (
        {"spec_decode_draft_tokens": 300.0, "spec_decode_accepted_tokens": 210.0},
        {"spec_decode_draft_tokens": 100.0, "spec_decode_accepted_tokens": 30.0}, {})]
    assert session_acceptance(Session(results=runs)) == pytest.approx(240 / 400)
    assert session_acceptance(Session(results=runs[2:])) is None  # speculation off


def test_the_comparison_hand_computed() -> None:
    # baseline 50 %, 50 %, 50 %; current 40 %: change 0.4 / 0.5 - 1 = -20 %. Spread: the
    # baseline's measured 0 on 2 df, shrunk to the prior ln(1 + 0.04²) on 3 pseudo-sessions:
    # v = 3 ln(1.0016) / 5; half = z(0.99) sqrt(v (1/3 + 1)) on the log scale.
    c = acceptance_comparison([_s(0.5)] * 3, [_s(0.4)], 0.05)
    assert c is not None and c.metric == registry.ACCEPTANCE
    v = 3 * math.log(1.0016) / 5
    half = NormalDist().inv_cdf(0.99) * math.sqrt(v * (1 / 3 + 1))
    assert (c.baseline, c.current) == pytest.approx((0.5, 0.4))
    assert c.change == pytest.approx(-0.2)
    assert c.interval == pytest.approx((math.expm1(math.log(0.8) - half), math.expm1(math.log(0.8) + half)))
    assert c.verdict == "regressed" and "40.0%" in c.note
    assert acceptance_comparison([_s(0.5)] * 3, [_s(0.49)], 0.05).verdict == "pass"  # type: ignore[union-attr]
    assert acceptance_comparison([_s(0.5)] * 3, [_s(0.6)], 0.05).verdict == "improved"  # type: ignore[union-attr]
    assert acceptance_comparison([Session()], [_s(0.6)], 0.05) is None  # never drafted


def test_the_bench_reads_the_simulator_s_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import spec_acceptance

    args = argparse.Namespace(requests=12, rate=1.0, isl=16, osl=16, spec_tokens=3,
                              noise_sigma=0.0, schedule_seed=0)
    full, tpot, tps = spec_acceptance.one_session(args, 1, 1.0)
    assert full == 1.0 and tpot > 0 and tps > 0
    assert spec_acceptance.one_session(args, 1, 0.0)[0] == 0.0

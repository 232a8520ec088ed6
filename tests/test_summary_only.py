"""Verdicts from summaries alone (``judge/scalar/summary_only.py``), on hand-computed cases."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from pytest_goodput.judge.scalar.summary_only import summary_comparisons
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.schema.runs.session import ResultSource, Session
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.scenario.spec import ScenarioSpec

SPEC = ScenarioSpec(scenario="concurrency", concurrency=4)
TTFT = MetricDef("metrics.ttft_ms.p99", "lower", 0.10)


def side(*values: float) -> Side:
    src = ResultSource(tool="vllm-bench", per_request=False)
    return Side(SPEC, SPEC.identity_hash(), [Session(summary={TTFT.path: v}, source=src) for v in values])


def test_one_file_a_side_is_the_change_against_the_tolerance():
    (c,) = summary_comparisons(side(100.0), side(115.0), [TTFT])
    assert c.change == pytest.approx(0.15) and c.interval is None and c.verdict == "regressed"
    assert c.note.startswith("summary only: no spread known") and "tolerance alone" in c.note
    (c,) = summary_comparisons(side(100.0), side(105.0), [TTFT])
    assert c.verdict == "pass"


def test_several_files_give_a_welch_interval_on_the_log_scale():
    (c,) = summary_comparisons(side(100.0, 110.0), side(120.0, 130.0), [TTFT], confidence=0.98)
    # Geometric means √(100·110) = 104.88 and √(120·130) = 124.90: change +19.09 %.
    assert c.change == pytest.approx(math.sqrt(120 * 130) / math.sqrt(100 * 110) - 1)
    lb, lc = [math.log(100), math.log(110)], [math.log(120), math.log(130)]
    vb, vc = stats.tvar(lb) / 2, stats.tvar(lc) / 2
    df = (vb + vc) ** 2 / (vb ** 2 + vc ** 2)
    d, h = sum(lc) / 2 - sum(lb) / 2, stats.t.ppf(0.99, df) * math.sqrt(vb + vc)
    assert c.interval == pytest.approx((math.exp(d - h) - 1, math.exp(d + h) - 1))
    assert c.verdict == "inconclusive"  # worse beyond 10 %, but two files a side cannot exclude noise
    assert "run-to-run spread of the 2 baseline and 2 current files" in c.note


def test_a_metric_no_file_gives_is_inconclusive_and_says_so():
    (c,) = summary_comparisons(side(100.0), side(100.0), [MetricDef("metrics.tpot_ms.p50", "lower", 0.05)])
    assert c.verdict == "inconclusive" and "do not give metrics.tpot_ms.p50" in c.note

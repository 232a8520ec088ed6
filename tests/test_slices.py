"""Time slices, the steady state's start and the degradation gate, hand-computed (pure layers)."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from pytest_goodput.judge.shapes.degradation import degradation_comparison
from pytest_goodput.judge.evidence import from_baseline, from_results
from pytest_goodput.judge.judge import Policy, judge, metric_defs
from pytest_goodput.measure.degradation import from_summary, session_degradation, slice_noise, to_summary
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.measure.slices import edges, run_slices, time_slices
from pytest_goodput.report.text.slices import slices_block, slices_line
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome
from pytest_goodput.schema.registry import DEGRADATION, default_gate, is_gateable, tolerance_for
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError, build_spec
from pytest_goodput.sim.degrade import DegradeSchedule, degrade_schedule
from pytest_goodput.sim.profile import SimProfile

SPEC = ScenarioSpec(scenario="server", rate=8.0, requests=73, isl=8, osl=10, slice_s=1.5)
GAP = 0.125  # exact in binary: arrivals, ends and edges compare exactly


def tpot(i: int) -> float:
    """TPOT by the slice the request completes in (slice k holds completions in [1.5k, 1.5k+1.5))."""
    end = i * GAP + GAP
    return 8.0 if end >= 7.5 else (5.5 if 3.0 <= end < 4.5 or end >= 6.0 else 5.0)


def hand_run() -> RunResult:
    """73 requests every 0.125 s, each lasting 0.125 s: the window is [0, 9] (arrivals), six
    slices of 1.5 s. TTFT 20 ms in the first slice (warm-up), 10 ms after; TPOT 5, 5, 5.5, 5,
    5.5 ms in the first five slices and 8 ms in the last (the run degrades)."""
    recs = [RequestRecord(index=i, ok=True, output_tokens=10, prompt_tokens=8, token_count_source="usage",
                          scheduled_at=i * GAP, sent_at=i * GAP, first_token_at=i * GAP + 0.01,
                          end_at=i * GAP + GAP, ttft_ms=20.0 if i * GAP + GAP < 1.5 else 10.0,
                          tpot_ms=tpot(i), e2e_ms=GAP * 1000)
            for i in range(73)]
    return summarize(recs, SPEC, ClientHealth(valid=True, cpu_utilization=0.1))


def test_edges_tile_the_window_and_fold_a_short_remainder():
    assert edges(0.0, 10.0, 3.0) == [0.0, 3.0, 6.0, 10.0]  # remainder 1 s < 1.5 s: folded
    assert edges(0.0, 11.0, 3.0) == [0.0, 3.0, 6.0, 9.0, 11.0]  # remainder 2 s: a slice of its own
    assert edges(5.0, 7.0, 3.0) == [5.0, 7.0]  # shorter than a slice: one slice
    assert edges(5.0, 5.0, 3.0) == []


def test_latencies_by_completion_throughput_by_work_inside():
    r = hand_run()
    assert (r.window.start, r.window.end) == (0.0, 9.0)
    s = run_slices(r)
    assert s is not None and [x.start_s for x in s.slices] == [0, 1.5, 3.0, 4.5, 6.0, 7.5]
    # completions: i=0..10 end in [0.125, 1.375]; i=11 ends at 1.5, in the second slice; the
    # last slice's end is inclusive (i=59..71 end in [7.5, 9.0]), i=72 ends after the window
    assert [x.completed for x in s.slices] == [11, 12, 12, 12, 12, 13]
    # work: every slice holds 12 whole requests of 10 tokens over 1.5 s
    assert [x.requests_per_s for x in s.slices] == pytest.approx([8.0] * 6)
    assert [x.output_tokens_per_s for x in s.slices] == pytest.approx([80.0] * 6)
    assert [x.ttft_ms_p50 for x in s.slices] == [20.0, 10, 10, 10, 10, 10]
    assert [x.tpot_ms_p50 for x in s.slices] == [5.0, 5.0, 5.5, 5.0, 5.5, 8.0]
    assert not any(x.too_few for x in s.slices)
    off = r.model_copy(update={"spec": SPEC.model_copy(update={"slice_s": None})})
    assert run_slices(off) is None  # off by default


def test_the_steady_state_begins_after_the_warm_slice():
    s = run_slices(hand_run())
    assert s is not None
    # slice 1: TTFT 20 vs 10 in the next (+100 % > 15 %); slice 2 agrees with slice 3 within
    # the bands (TPOT 5 vs 5.5: -9.1 %, band max(10 %, 3 sigma = 30.0 %))
    assert s.steady_from == 1 and s.steady_at_s == 1.5
    assert "slice 2 of 6 (at 1.5 s)" in s.steady_note and "TPOT P50 ±30%" in s.steady_note
    assert s.steady_note.endswith("the 1 slice(s) before it are warm-up: warmup_s=1.5 would leave them out")


def test_degradation_value_and_noise_by_hand():
    s = run_slices(hand_run())
    assert s is not None
    tp = s.degradation["degradation.tpot_ms.p50"]
    # steady slices 5, 5.5, 5, 5.5, 8: reference median(5, 5.5, 5) = 5, value 8/5 - 1
    assert tp.reference == 5.0 and tp.last == 8.0 and tp.value == pytest.approx(0.6)
    # relative to their median 5.5: |successive differences| 1/11, 1/11, 1/11, 5/11 -> median
    # 1/11; sigma = 1.4826 x (1/11) / sqrt 2; sd = sqrt 2 x sigma
    assert tp.sd == pytest.approx(1.4826 / 11)
    assert s.degradation["degradation.output_tokens_per_s"].value == pytest.approx(0.0)
    assert s.degradation["degradation.output_tokens_per_s"].sd == pytest.approx(0.0)
    assert s.degradation["degradation.ttft_ms.p50"].value == 0.0
    assert slice_noise([1.0, 1.0, 1.0]) is None  # two differences: too few


def test_a_slice_with_too_few_requests_shows_counts_but_no_medians():
    r = hand_run()
    s = time_slices(r.requests[:30], r.window, 1.5)  # requests 0..29 end by 3.75 s
    assert [x.completed for x in s.slices][:3] == [11, 12, 7]
    assert s.slices[2].too_few and s.slices[2].ttft_ms_p50 is None and s.slices[2].requests_per_s > 0
    assert s.slices[3].completed == 0 and s.slices[3].too_few
    # two usable slices: the first disagrees with the second (TTFT 20 vs 10), no steady state
    assert s.steady_from is None and s.degradation == {}


def test_sessions_pool_repeats_and_round_trip_through_a_baseline_summary():
    a, b = run_slices(hand_run()), run_slices(hand_run())
    sess = session_degradation([a, b])
    value, sd = sess["degradation.tpot_ms.p50"]
    assert value == pytest.approx(0.6) and sd == pytest.approx(math.sqrt(2) * (1.4826 / 11) / 2)
    assert from_summary(to_summary(sess)) == sess
    assert session_degradation([None]) == {}


def test_judge_rule_by_hand():
    path = "degradation.output_tokens_per_s"  # direction higher: a drop is worse
    z = NormalDist().inv_cdf(0.99)  # the judge's 98 % two-sided confidence: 2.326
    base = [{path: (0.02, 0.03)}, {path: (-0.01, 0.04)}]
    # two baseline sessions: v is their sample variance, ((0.015)² + (0.015)²) / 1 = 0.00045
    # (the within-run SDs are not used); baseline mean 0.005, current -0.25: change -0.255,
    # SD sqrt(0.00045 x (1/1 + 1/2)) = 0.02598
    c = degradation_comparison(path, base, [{path: (-0.25, 0.05)}], 0.10)
    assert c is not None and c.verdict == "regressed" and c.scale == "absolute"
    assert c.change == pytest.approx(-0.255) and c.baseline == pytest.approx(0.005)
    half = z * math.sqrt(0.00045 * 1.5)
    assert c.interval == pytest.approx((-0.255 - half, -0.255 + half), abs=1e-9)
    # A/A-like: -8.5 points, within the 10-point tolerance
    assert degradation_comparison(path, base, [{path: (-0.08, 0.05)}], 0.10).verdict == "pass"  # type: ignore[union-attr]
    # sessions that disagree (+10 %, -10 %: v = 0.02, SD 0.173): -15 points is worse than the
    # tolerance but within the noise, inconclusive
    wide = [{path: (0.10, 0.01)}, {path: (-0.10, 0.01)}]
    assert degradation_comparison(path, wide, [{path: (-0.15, 0.01)}], 0.10).verdict == "inconclusive"  # type: ignore[union-attr]
    # one baseline session: v is the mean within-run variance, (0.03² + 0.05²) / 2 = 0.0017,
    # SD sqrt(0.0017 x 2) = 0.0583, -15 points ± 13.6: regressed
    one = degradation_comparison(path, [{path: (0.0, 0.03)}], [{path: (-0.15, 0.05)}], 0.10)
    assert one is not None and one.verdict == "regressed"
    assert one.interval == pytest.approx((-0.15 - z * math.sqrt(0.0034), -0.15 + z * math.sqrt(0.0034)))
    # no noise known: never regressed
    unknown = degradation_comparison(path, [{path: (0.0, None)}], [{path: (-0.3, None)}], 0.10)
    assert unknown is not None and unknown.verdict == "inconclusive" and "noise is unknown" in unknown.note
    # a baseline without slices gives no row; a current run without them is inconclusive
    assert degradation_comparison(path, [{}], [{path: (-0.3, 0.01)}], 0.10) is None
    assert degradation_comparison(path, base, [{}], 0.10).verdict == "inconclusive"  # type: ignore[union-attr]


def test_the_judge_gates_degradation_against_the_baselines_own():
    from pytest_goodput.schema.runs.baseline import BaselineFile
    from pytest_goodput.schema.runs.session import Session
    from pytest_goodput.schema.environment import Fingerprint

    run = hand_run().model_copy(update={"slices": run_slices(hand_run())})
    current = from_results([run])
    assert current.degradation[0]["degradation.tpot_ms.p50"][0] == pytest.approx(0.6)
    flat = {"degradation.tpot_ms.p50": 0.0, "degradation.tpot_ms.p50.sd": 0.02}
    doc = BaselineFile(nodeid="t", spec=SPEC.model_dump(mode="json"), spec_hash=SPEC.identity_hash(),
                       sessions=[Session(recorded_at="2026-12-01T00:00:00+00:00", environment=Fingerprint(),
                                         summary=flat, samples=current.history[0])])
    outcome = judge("t", current, from_baseline(doc, SPEC), Policy())
    rows = {c.metric: c for c in outcome.comparisons}
    assert rows["degradation.tpot_ms.p50"].verdict == "regressed"  # +60 points against 0
    assert "degradation.output_tokens_per_s" not in rows  # the baseline never measured it
    assert outcome.slices is not None and outcome.slices.steady_from == 1


def test_registry_spec_rules_and_identity():
    assert all(is_gateable(p) for p in DEGRADATION)
    assert set(DEGRADATION) <= set(default_gate(SPEC))
    assert not set(DEGRADATION) & set(default_gate(SPEC.model_copy(update={"slice_s": None})))
    assert all(d.path not in DEGRADATION for d in metric_defs(SPEC))  # judged on their own
    # absolute: a blanket relative tolerance does not tighten them
    assert tolerance_for(SPEC, "degradation.ttft_ms.p50", 0.05) == 0.25
    assert SPEC.identity_hash() == SPEC.model_copy(update={"slice_s": None}).identity_hash()
    with pytest.raises(SpecError, match="set slice_s="):
        build_spec({"scenario": "concurrency", "concurrency": 2, "gate": ["degradation.tpot_ms.p50"]})
    with pytest.raises(SpecError, match="slice_s"):
        build_spec({"scenario": "concurrency", "concurrency": 2, "slice_s": 0})


def test_simulator_degradation_ramps_from_its_first_step():
    d = DegradeSchedule(2.0, 10.0, 5.0)
    assert [d(100.0), d(109.9), d(112.5), d(115.0), d(200.0)] == pytest.approx([1.0, 1.0, 1.5, 2.0, 2.0])
    assert DegradeSchedule(3.0, 1.0, 0.0)(0.0) == 1.0
    assert degrade_schedule(SimProfile()) is None
    assert degrade_schedule(SimProfile(degrade_slowdown=1.5)) is not None


def test_reports_show_the_slices_and_fall_back_to_the_table():
    s = run_slices(hand_run())
    o = Outcome(nodeid="t.py::test", scenario="server", slices=s)
    line = slices_line(o)
    assert line is not None and line.startswith("slices: 6 × 1.5 s, steady from 1.5 s; output tok/s 80 → 80")
    assert "degradation: output throughput +0.0 %, TTFT P50 +0.0 %, TPOT P50 +60.0 %" in line
    block = slices_block(o)
    assert "```mermaid" in block and "| 2 | 1.5 | 1.5 | 12 | 0 | 80 | 10 | 5 | steady from here |" in block

    def broken(*_: object) -> str:
        raise RuntimeError("no chart")

    plain = slices_block(o, broken)
    assert "```mermaid" not in plain and "steady from here" in plain
    assert slices_line(Outcome(nodeid="t", scenario="server")) is None
    many = s.model_copy(update={"slices": s.slices * 5})  # 30 slices: 12 rows, "…", 12 rows
    table = slices_block(Outcome(nodeid="t", scenario="server", slices=many), None)
    assert table.count("\n| ") == 2 + 24 + 1 and "| … |" in table  # header, separator, rows, …

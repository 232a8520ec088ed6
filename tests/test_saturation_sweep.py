"""A sweep stops after its first point past saturation, and the judge reads where it began (fake runs)."""

from __future__ import annotations

from typing import Optional

import pytest

from pytest_goodput.judge.evidence import from_session, from_sessions
from pytest_goodput.judge.judge import Policy, fails, judge
from pytest_goodput.measure.headline import session_metrics
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.run import runner
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec

N, TOKENS = 40, 10
SPEC = ScenarioSpec(scenario="sweep", sweep=(1, 4, 16, 32), requests=N, isl=8, osl=TOKENS)
# concurrency -> (output tok/s, E2E ms): 4 users scale, 16 gain 5 % for 4x the users while
# the latency quadruples (past saturation), 32 would only queue more.
KNEE_AT_16 = {1: (100.0, 1000.0), 4: (380.0, 1050.0), 16: (400.0, 4000.0), 32: (405.0, 8000.0)}
# a server with room for one request: 4 users gain nothing over 1.
KNEE_AT_4 = {1: (100.0, 1000.0), 4: (105.0, 3900.0), 16: (106.0, 15000.0), 32: (106.0, 30000.0)}
# the same server with twice the room: 16 users still scale, 32 are past saturation.
KNEE_AT_32 = {1: (100.0, 1000.0), 4: (380.0, 1050.0), 16: (1400.0, 1150.0), 32: (1450.0, 2300.0)}


def point_run(spec: ScenarioSpec, tokens_per_s: float, e2e_ms: float) -> RunResult:
    """``N`` requests of ``TOKENS`` tokens over a window giving ``tokens_per_s``."""
    window = N * TOKENS / tokens_per_s
    recs = [RequestRecord(index=i, ok=True, output_tokens=TOKENS, prompt_tokens=8,
                          token_count_source="usage", scheduled_at=0.0, sent_at=0.0,
                          first_token_at=0.1, last_token_at=window, end_at=window,
                          ttft_ms=100.0, tpot_ms=10.0, e2e_ms=e2e_ms) for i in range(N)]
    return summarize(recs, spec, ClientHealth(valid=True, cpu_utilization=0.1),
                     load={"concurrency": float(spec.concurrency or 0)})


def run_sweep(monkeypatch: pytest.MonkeyPatch, table: dict, spec: ScenarioSpec = SPEC):
    ran: list[float] = []

    def fake_run_once(s: ScenarioSpec, engine: object, progress: Optional[object] = None) -> RunResult:
        ran.append(float(s.concurrency or 0))
        return point_run(s, *table[s.concurrency])

    monkeypatch.setattr(runner, "run_once", fake_run_once)
    return runner.sweep(spec, engine=None), ran  # type: ignore[arg-type]


def test_the_sweep_stops_at_the_first_point_past_saturation(monkeypatch: pytest.MonkeyPatch) -> None:
    m, ran = run_sweep(monkeypatch, KNEE_AT_16)
    assert ran == [1.0, 4.0, 16.0] and len(m.results) == 3
    assert m.sweep is not None
    sat = m.sweep.saturation
    assert sat.measured == [1, 4, 16] and sat.began_at == 16 and sat.step == 2
    assert sat.skipped == [32] and sat.saved_s == pytest.approx(
        sum(r.window.seconds for r in m.results) / 3)
    assert [p.past for p in sat.points] == [False, False, True]
    assert "throughput ×1.053 <" in sat.reason
    assert any(n.startswith("sweep stopped: past saturation at concurrency 16") and
               "skipped concurrency 32, 1 point(s)" in n for n in m.notes)
    assert session_metrics(m)["sweep.saturation_step"] == 2.0
    assert session_metrics(m)["sweep.saturation_load"] == 16.0


def test_saturation_stop_false_keeps_climbing(monkeypatch: pytest.MonkeyPatch) -> None:
    m, ran = run_sweep(monkeypatch, KNEE_AT_16, SPEC.model_copy(update={"saturation_stop": False}))
    assert ran == [1.0, 4.0, 16.0, 32.0] and m.sweep is not None
    sat = m.sweep.saturation
    assert sat.began_at == 16 and sat.skipped == [] and sat.saved_s is None
    assert not any(n.startswith("sweep stopped") for n in m.notes)
    # Not part of what a point measures: the same baseline serves both.
    assert SPEC.model_copy(update={"saturation_stop": False}).identity_hash() == SPEC.identity_hash()


def test_no_point_past_saturation_measures_the_whole_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    flat = {1: (100.0, 1000.0), 4: (390.0, 1000.0), 16: (1500.0, 1050.0), 32: (2900.0, 1100.0)}
    m, ran = run_sweep(monkeypatch, flat)
    assert len(ran) == 4 and m.sweep is not None
    sat = m.sweep.saturation
    assert sat.began_at is None and sat.step == 4 and sat.skipped == []
    assert "sweep.saturation_load" not in session_metrics(m)


def test_the_judge_names_a_saturation_point_two_steps_lower(monkeypatch: pytest.MonkeyPatch) -> None:
    base = [run_sweep(monkeypatch, KNEE_AT_32)[0] for _ in range(3)]
    cur = run_sweep(monkeypatch, KNEE_AT_4)[0]
    outcome = judge("t.py::test_sweep", from_session(cur), from_sessions(base), Policy())
    rows = {c.metric: c for c in outcome.comparisons}
    sat = rows["sweep.saturation_load"]
    assert sat.verdict == "regressed" and (sat.baseline, sat.current) == (32.0, 4.0)
    assert outcome.frontier is not None and outcome.frontier.saturation is not None and outcome.frontier.saturation.began_at == 4
    # The skipped points, which every baseline session measured, were not reached: regressed.
    by_load = {p.load: p for p in outcome.frontier.comparison.by_load}
    assert list(by_load) == [1.0, 4.0, 16.0, 32.0]
    assert [by_load[x].verdict for x in (16.0, 32.0)] == ["regressed", "regressed"]
    assert "not reached" in by_load[16.0].throughput.note
    # One step lower on a grid of doublings (or more), three sessions agreeing: regressed too.
    one = judge("t.py::test_sweep", from_session(run_sweep(monkeypatch, KNEE_AT_16)[0]),
                from_sessions(base), Policy())
    assert {c.metric: c for c in one.comparisons}["sweep.saturation_load"].verdict == "regressed"
    assert fails(one, Policy())
    same = judge("t.py::test_sweep", from_session(base[0]), from_sessions(base), Policy())
    assert {c.metric: c for c in same.comparisons}["sweep.saturation_load"].verdict == "pass"


def test_run_files_of_a_stopped_sweep_are_the_baselines_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --json`` of a stopped sweep holds only the points it measured: read against the
    full sweep's spec it is that sweep with the rest skipped, so the two stay comparable."""
    from pytest_goodput.judge.evidence import from_sweep_runs

    m, _ = run_sweep(monkeypatch, KNEE_AT_16)
    ev = from_sweep_runs(m.results, like=SPEC)
    assert ev.spec.sweep == SPEC.sweep and ev.spec_hash == SPEC.identity_hash()
    assert ev.saturation is not None and ev.saturation.skipped == [32] and ev.saturation_steps == [2.0]
    # A shorter sweep whose last point is not past saturation is another sweep.
    flat = {1: (100.0, 1000.0), 4: (390.0, 1000.0)}
    short, _ = run_sweep(monkeypatch, flat, SPEC.model_copy(update={"sweep": (1, 4)}))
    other = from_sweep_runs(short.results, like=SPEC)
    assert other.spec.sweep == (1.0, 4.0) and other.spec_hash != SPEC.identity_hash()

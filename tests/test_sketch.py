"""Sketched runs: DDSketch percentiles within their bound, parts that merge, the threshold.

A run above its threshold is summarized from its workers' merged parts (``run_part``,
``sketched``) instead of every record; these tests hold that path to the exact one
(``summarize``) on the same records: counts, windows, rates, goodput and SLO verdicts equal,
percentiles within α.
"""

from __future__ import annotations

import math
import random
import re

import pytest

from pytest_goodput.judge.evidence import samples_of
from pytest_goodput.load.sketch import SKETCH_ABOVE, SketchPlan, sketch_plan
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.load.pools.ray.columns import unpack
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.run_part import part_of, records_of
from pytest_goodput.measure.sketched import sketch_note, summarize_part
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats.quantiles import percentile
from pytest_goodput.stats.sketch import QuantileSketch

pytest.importorskip("ddsketch", reason="sketched runs need pytest-goodput[ray]")
ALPHA = 0.01


def test_sketch_percentiles_are_within_one_percent_of_nearest_rank():
    # 1..1000: the nearest-rank P50 is the 500th value, P90 the 900th, P99 the 990th
    s = QuantileSketch(ALPHA).extend(float(v) for v in range(1, 1001))
    for p, exact in ((50, 500.0), (90, 900.0), (99, 990.0), (100, 1000.0), (0.1, 1.0)):
        assert abs(s.percentile(p) - exact) <= ALPHA * exact, p
    assert (round(s.percentile(50), 1), round(s.percentile(99), 1)) == (497.8, 982.6)  # docs/metrics.md
    assert (s.count, s.mean, s.max, s.min) == (1000, 500.5, 1000.0, 1.0)  # exact
    # four values: P50 is the 2nd (20), P75 the 3rd (30); the bucket of 20 is within 1 % of it
    small = QuantileSketch(ALPHA).extend([10.0, 20.0, 30.0, 40.0, None, math.nan])
    assert small.count == 4 and 19.8 <= small.percentile(50) <= 20.2 and 29.7 <= small.percentile(75) <= 30.3
    assert QuantileSketch(ALPHA).percentile(50) is None


def test_merging_two_workers_sketches_is_the_sketch_of_their_union():
    rng = random.Random(4)
    xs = [rng.lognormvariate(3.0, 1.0) for _ in range(5000)]
    a, b = QuantileSketch(ALPHA).extend(xs[::2]), QuantileSketch(ALPHA).extend(xs[1::2])
    merged, union = a.merge(b), QuantileSketch(ALPHA).extend(xs)
    exact = sorted(xs)
    for p in (50, 90, 95, 99, 99.9):
        assert merged.percentile(p) == union.percentile(p)  # bucket counts add: nothing lost
        assert abs(merged.percentile(p) - percentile(exact, p)) <= ALPHA * percentile(exact, p)
    assert merged.count == 5000 and merged.max == max(xs) and merged.mean == pytest.approx(sum(xs) / 5000)
    with pytest.raises(ValueError, match="relative accuracy"):
        QuantileSketch(0.01).merge(QuantileSketch(0.02))


def _record(i: int, rng: random.Random, sched: float, warm: bool, dur: float) -> RequestRecord:
    if i % 17 == 5:  # a failure: counted, never a latency sample
        return RequestRecord(index=i, ok=False, warmup=warm, error_kind="timeout", scheduled_at=sched,
                             sent_at=sched + 0.001, end_at=sched + dur, send_lag_ms=1.0)
    ttft = rng.lognormvariate(3.0, 0.6)
    out = rng.randint(2, 30)
    return RequestRecord(index=i, ok=True, warmup=warm, scheduled_at=sched, sent_at=sched + 0.001,
                         end_at=sched + dur, ttft_ms=ttft, tpot_ms=rng.uniform(4, 9), e2e_ms=dur * 1000,
                         itl_ms=[rng.uniform(3, 10) for _ in range(out - 1)], output_tokens=out,
                         prompt_tokens=16, token_count_source="usage", send_lag_ms=rng.uniform(0, 2))


def _server_records(n: int) -> list[RequestRecord]:
    rng = random.Random(1)
    return [_record(i, rng, 10.0 + 0.05 * i, i < 4, rng.uniform(0.05, 0.4)) for i in range(n)]


def _concurrency_records(users: int, per_user: int) -> list[RequestRecord]:
    """``users`` chains: each request is scheduled (and sent) at its predecessor's end."""
    rng, out = random.Random(2), []
    for u in range(users):
        t = 5.0 + 0.003 * u
        for j in range(per_user):
            dur = rng.uniform(0.05, 0.3)
            r = _record(j * users + u, rng, t, j * users + u < users, dur)
            out.append(r.model_copy(update={"sent_at": t}))
            t += dur
    return sorted(out, key=lambda r: r.index)


def _shifted(records: list[RequestRecord], by: float) -> list[RequestRecord]:
    """The records as a worker on another clock took them (``by`` seconds behind the driver)."""
    return [r.model_copy(update={k: getattr(r, k) - by for k in ("scheduled_at", "sent_at", "end_at")
                                 if getattr(r, k) is not None}) for r in records]


CLIENT = ClientHealth(valid=True, cpu_utilization=0.1, loop_lag_p99_ms=0.5)
CASES = {
    "server": (ScenarioSpec(scenario="server", rate=20, requests=396, warmup_requests=4, ttft_ms=40,
                            ttft_p90_ms=60, itl_p99_ms=9.5), _server_records(400), lambda r: r.index % 2),
    "concurrency": (ScenarioSpec(scenario="concurrency", concurrency=3, requests=297, warmup_requests=3,
                                 e2e_ms=250, e2e_p90_ms=280, e2e_p99_ms=280), _concurrency_records(3, 100),
                    lambda r: int(r.index % 3 == 2)),  # users 0, 1 on worker 0; user 2 on worker 1
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_sketched_summary_is_the_exact_one_within_its_bound(name):
    spec, records, worker = CASES[name]
    exact = summarize(records, spec, CLIENT)
    w0 = [r for r in records if worker(r) == 0]
    w1 = _shifted([r for r in records if worker(r) == 1], 100.0)  # another host's clock
    part = part_of(w0, spec, ALPHA).merge(part_of(w1, spec, ALPHA).shifted(100.0))
    sample = [r for r in records if r.index % 10 == 0]
    info = SketchPlan(ALPHA, 0.1, 0, len(records)).info(1000, sum(not r.warmup for r in sample))
    got = summarize_part(part, sample, spec, CLIENT, info)
    assert got.window.basis == exact.window.basis
    assert got.window.seconds == pytest.approx(exact.window.seconds, rel=1e-9)
    assert (got.issued, got.completed, got.failures) == (exact.issued, exact.completed, exact.failures)
    assert got.throughput.model_dump() == pytest.approx(exact.throughput.model_dump(), rel=1e-9)
    assert got.goodput.model_dump() == pytest.approx(exact.goodput.model_dump(), rel=1e-9)
    for g, e in zip(got.percentile_slos, exact.percentile_slos, strict=True):
        assert (g.ok, g.proven, g.samples, g.over_limit) == (e.ok, e.proven, e.samples, e.over_limit)
        assert (g.value_ms is None) == (e.value_ms is None)  # None: the rank fell on a failure
        assert e.value_ms is None or abs(g.value_ms - e.value_ms) <= ALPHA * e.value_ms
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        g, e = getattr(got.metrics, metric), getattr(exact.metrics, metric)
        assert (g.count, g.max) == (e.count, e.max) and g.mean == pytest.approx(e.mean, rel=1e-12)
        for p in ("p50", "p90", "p95", "p99"):
            assert abs(getattr(g, p) - getattr(e, p)) <= ALPHA * getattr(e, p), (metric, p)
    assert got.send_lag_ms.count == exact.send_lag_ms.count
    assert got.percentiles == "sketch" and exact.percentiles == "exact" and exact.sketch is None
    assert [r.index for r in got.requests] == [r.index for r in sample]
    # the sample's rates estimate the run's: its window is scaled to the sample's share
    s = samples_of([got])[0]
    assert s.window_s == pytest.approx(exact.window.seconds * len(s.ok) / exact.issued)
    assert "within ±1% of exact" in sketch_note(got) and sketch_note(exact) is None


def test_only_runs_above_the_threshold_are_sketched():
    spec = ScenarioSpec(scenario="server", rate=10, requests=10)
    assert sketch_plan(spec, SKETCH_ABOVE) is None
    plan = sketch_plan(spec, SKETCH_ABOVE + 1)
    assert plan is not None and plan.alpha == ALPHA and plan.fraction == pytest.approx(100_000 / (SKETCH_ABOVE + 1))
    small = spec.model_copy(update={"sketch_above": 20})
    assert sketch_plan(small, 20) is None and sketch_plan(small, 21).fraction == 1.0
    assert small.identity_hash() == spec.identity_hash()  # how a run ships is not what it measures
    assert sketch_plan(small, 0) is None  # a run of unknown size is never sketched
    with pytest.raises(ValueError, match="sketch_above"):
        ScenarioSpec(scenario="server", rate=10, requests=10, sketch_above=0)


def test_the_sample_is_chosen_by_request_index_from_the_seed():
    a, b = SketchPlan(ALPHA, 0.25, 7, 4000).kept(), SketchPlan(ALPHA, 0.25, 7, 4000).kept()
    assert (a == b).all() and 900 < a.sum() < 1100  # the same requests, whatever the workers
    assert not (a == SketchPlan(ALPHA, 0.25, 8, 4000).kept()).all()


def test_reports_say_a_run_was_sketched():
    from report_fixtures import passed

    from pytest_goodput.report.md.markdown import render_markdown
    from pytest_goodput.report.text.run_result import render_result
    from pytest_goodput.report.text.terminal import render_summary

    spec, records, _ = CASES["server"]
    info = SketchPlan(ALPHA, 0.1, 0, 400).info(300, 40)
    got = summarize_part(part_of(records, spec, ALPHA), records[::10], spec, CLIENT, info)
    note = sketch_note(got)
    assert note == ("percentiles sketched (DDSketch, within ±1% of exact): 396 measured requests, above "
                    "the 300-request threshold; counts, rates, goodput and SLO pass/fail exact; 40 requests "
                    "(a seeded uniform 10.00% sample) kept for comparisons")
    assert re.search(r"^sketched +" + re.escape(note), render_result(got), re.M)  # the CLI's table
    o = passed().model_copy(update={"notes": [note]})
    assert f"note: {o.nodeid}: {note}" in render_summary([o], width=400)  # pytest's terminal summary
    assert f"> **Sketched:** {note}" in render_markdown([o])


def _exchange(i: int, sched: float, rng: random.Random, tokens: int = 6) -> RawExchange:
    sent = sched
    t = sent + rng.uniform(0.01, 0.05)
    reads = []
    for j in range(tokens):
        reads.append((t, f'data: {{"choices":[{{"text":" t{i}.{j}"}}]}}\n\n'.encode()))
        t += rng.uniform(0.002, 0.01)
    reads.append((t, b"data: [DONE]\n\n"))
    return RawExchange(RequestPlan(i, f"p{i}", 4, tokens, sched, warmup=i < 2), sent, t, 200, reads)


def test_a_worker_ships_its_share_summarized_in_slices_and_a_sample(monkeypatch):
    from pytest_goodput.load import sketch

    monkeypatch.setattr(sketch, "SLICE", 7)
    monkeypatch.setattr(sketch, "TICK_S", 0.0)
    rng, exs = random.Random(3), []
    for u in range(2):  # two users' chains: each request starts at its predecessor's end
        t = 1.0 + 0.001 * u
        for j in range(20):
            exs.append(_exchange(2 * j + u, t, rng))
            t = exs[-1].end_at
    exs.sort(key=lambda ex: ex.plan.index)
    spec = ScenarioSpec(scenario="concurrency", concurrency=2, requests=38, warmup_requests=2, isl=4, osl=6,
                        e2e_p90_ms=80)
    plan = SketchPlan(ALPHA, 0.25, 1, 40)
    ticks: list[int] = []
    shipped = sketch.Sketcher(plan, spec, None).share(exs, ticks.append)
    assert ticks == [40] * 6 and shipped["count"] == 40  # a heartbeat per slice, progress unchanged
    kept = plan.kept()
    assert [ex.plan.index for ex in shipped["sample"]] == [i for i in range(40) if kept[i]]
    exact = summarize(records_of(exs, spec, None), spec, CLIENT)
    got = summarize_part(shipped["part"], [], spec, CLIENT, plan.info(39, 0))
    assert exact.window.basis == got.window.basis == "steady_state"
    assert got.window.seconds == pytest.approx(exact.window.seconds, rel=1e-9)
    assert got.throughput.model_dump() == pytest.approx(exact.throughput.model_dump(), rel=1e-9)
    assert (got.issued, got.completed, got.metrics.itl_ms.count) == (38, 38, exact.metrics.itl_ms.count)
    assert got.percentile_slos[0].over_limit == exact.percentile_slos[0].over_limit

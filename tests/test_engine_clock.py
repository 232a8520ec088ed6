"""The engine's clock by hand: histogram deltas and bucket bounds, per-request metrics, the
summary beside ours, the simulator's stamps, and the rule that says whose clock moved.

Every expected number here is computed by hand in the comment beside it
(``docs/metrics.md``, "The engine's clock").
"""

from __future__ import annotations

import json
import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Histogram as PromHistogram

from pytest_goodput.engines.histograms import histograms, run_histograms
from pytest_goodput.engines.prometheus import families
from pytest_goodput.judge.attribution import ENGINE_SHARE, attribute, with_attribution
from pytest_goodput.measure.clocks.histogram import delta, mean_ms, merge, percentile_bounds_ms
from pytest_goodput.measure.clocks.summary import clock_summary
from pytest_goodput.measure.records.response import parse_body, parse_stream
from pytest_goodput.report.md.clock import clock_block
from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.schema.runs.engine_clock import EngineTiming, Histogram
from pytest_goodput.schema.runs.results import RequestRecord, RunResult
from pytest_goodput.sim.clock import EngineClock
from report_fixtures import cmp, outcome


def _h(cumulative: list[float], count: float, total: float, bounds=(0.01, 0.02, 0.04)) -> Histogram:
    return Histogram(series="vllm:time_to_first_token_seconds", bounds=list(bounds), cumulative=cumulative,
                     count=count, sum=total)


def test_percentile_is_bounded_by_the_bucket_holding_its_nearest_rank():
    # 5 observations: 1 in (0, 10] ms, 2 in (10, 20], 1 in (20, 40], 1 above 40 ms.
    h = _h([1, 3, 4], 5, 0.1)
    assert mean_ms(h) == pytest.approx(20.0)  # 0.1 s / 5 = 20 ms, exact whatever the buckets
    # rank ⌈p/100 · 5⌉: p20 → 1 (first bucket); p21 → 2 and p60 → 3 (second); p80 → 4 (third);
    # p81 → 5: past the last finite bound, no upper bound
    assert percentile_bounds_ms(h, 20) == (0.0, 10.0)
    assert percentile_bounds_ms(h, 21) == percentile_bounds_ms(h, 60) == (10.0, 20.0)
    assert percentile_bounds_ms(h, 80) == (20.0, 40.0)
    assert percentile_bounds_ms(h, 81) == (40.0, math.inf)
    assert percentile_bounds_ms(_h([0, 0, 0], 0, 0.0), 50) is None and mean_ms(_h([0, 0, 0], 0, 0.0)) is None


def test_the_run_is_after_minus_before_and_runs_merge_by_summing():
    before, after = _h([1, 3, 4], 5, 0.1), _h([3, 4, 8], 9, 0.25)
    d = delta(before, after)
    assert (d.cumulative, d.count, d.sum) == ([2, 1, 4], 4, pytest.approx(0.15))
    assert delta(None, after) == after  # a labelled histogram first seen after the run counts whole
    assert delta(after, before) == before  # the count went down: the engine restarted
    assert delta(before, _h([3, 4, 8], 9, 0.25, bounds=(0.01, 0.02, 0.05))) is None  # other bounds
    m = merge([before, d])
    assert (m.cumulative, m.count, m.sum) == ([3, 4, 8], 9, pytest.approx(0.25))
    assert merge([]) is None and merge([before, _h([1], 1, 0.0, bounds=(0.5,))]) is None


def _exposition(observe) -> str:
    registry = CollectorRegistry()
    hists = {name: PromHistogram(name, "h", ["model_name"], buckets=[0.01, 0.02], registry=registry)
             for name in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                          "vllm:time_per_output_token_seconds", "sglang:queue_time_seconds")}
    observe(hists)
    return generate_latest(registry).decode()


def test_histograms_are_read_by_neutral_name_summed_over_labels():
    def observe(h):
        h["vllm:time_to_first_token_seconds"].labels("a").observe(0.005)
        h["vllm:time_to_first_token_seconds"].labels("b").observe(0.015)
        h["vllm:time_to_first_token_seconds"].labels("b").observe(3.0)
        h["vllm:inter_token_latency_seconds"].labels("a").observe(0.005)
        h["vllm:time_per_output_token_seconds"].labels("a").observe(0.5)
        h["sglang:queue_time_seconds"].labels("a").observe(0.001)
    found = histograms(families(_exposition(observe)))
    ttft = found["ttft"]  # two label sets summed: ≤10 ms: 1, ≤20 ms: 2, all 3, sum 3.02 s
    assert (ttft.bounds, ttft.cumulative, ttft.count, ttft.sum) == ([0.01, 0.02], [1, 2], 3, pytest.approx(3.02))
    assert found["itl"].series == "vllm:inter_token_latency_seconds"  # preferred over the older name
    assert found["queue"].series == "sglang:queue_time_seconds" and "e2e" not in found
    assert families("<html>not prometheus</html>") is None and histograms(families("")) == {}


def test_an_engine_without_histograms_has_no_engine_clock():
    parsed = families("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n")
    assert run_histograms(parsed, parsed) == {}
    assert run_histograms(None, parsed) == {} and run_histograms(parsed, families(None)) == {}
    assert clock_summary([RunResult.model_construct(engine_histograms={}, requests=[])]) == {}


def test_per_request_metrics_are_read_as_vllm_sends_them():
    t = EngineTiming.from_metrics({"time_to_first_token_ms": 8.0, "queue_time_ms": 2, "generation_time_ms": 30.0,
                                   "mean_itl_ms": None, "tokens_per_second": True, "other": 1})
    assert t == EngineTiming(time_to_first_token_ms=8.0, queue_time_ms=2.0, generation_time_ms=30.0)
    assert t.ttft_from_queue_ms() == 10.0  # vLLM's TTFT counts from scheduling: the queue is added
    read = EngineTiming.from_metrics
    assert read(None) is None and read({}) is None and read({"queue_time_ms": -1}) is None


def _rec(i: int, ttft: float, engine_ttft: float, queue: float) -> RequestRecord:
    return RequestRecord(index=i, ok=True, scheduled_at=0.0, ttft_ms=ttft, e2e_ms=ttft + 50, itl_ms=[5.0, 7.0],
                         engine=EngineTiming(time_to_first_token_ms=engine_ttft, queue_time_ms=queue,
                                             mean_itl_ms=6.0))


def test_summary_puts_the_engines_numbers_beside_ours():
    # ours 20 and 30 ms; the engine's queue + TTFT 2+8 = 10 and 5+15 = 20 ms: gaps 10 and 10
    run = RunResult.model_construct(engine_histograms={"ttft": _h([1, 3, 4], 5, 0.1)},
                                    requests=[_rec(0, 20.0, 8.0, 2.0), _rec(1, 30.0, 15.0, 5.0)])
    s = clock_summary([run])
    assert s["engine_ttft_mean_ms"] == pytest.approx(20.0) and s["engine_ttft_count"] == 5
    assert (s["engine_ttft_p50_lo_ms"], s["engine_ttft_p50_hi_ms"]) == (10.0, 20.0)  # rank 3
    assert s["engine_ttft_p99_lo_ms"] == 40.0 and "engine_ttft_p99_hi_ms" not in s  # past the last bound
    assert s["engine_request_ttft_mean_ms"] == 15.0
    assert (s["engine_request_ttft_p50_ms"], s["engine_request_ttft_p90_ms"]) == (10.0, 20.0)  # ranks 1, 2
    assert (s["engine_request_queue_mean_ms"], s["engine_request_itl_mean_ms"]) == (3.5, 6.0)
    assert (s["ttft_gap_mean_ms"], s["ttft_gap_p90_ms"], s["engine_requests"]) == (10.0, 10.0, 2)
    assert (s["client_ttft_mean_ms"], s["client_e2e_mean_ms"], s["client_itl_mean_ms"]) == (25.0, 75.0, 6.0)


def test_the_simulator_stamps_requests_on_its_own_clock():
    clock = EngineClock(per_request=True)
    clock.arrived("r", 1.0)
    clock.emitted("r", 1, False, at=1.5, step_s=0.2)  # first token: scheduled at 1.3, TTFT 0.5 s
    clock.emitted("r", 1, False, at=1.6, step_s=0.1)  # ITL 0.1 s
    clock.emitted("r", 2, True, at=1.8, step_s=0.2)  # ITL 0.2 s; done, 4 tokens, E2E 0.8 s
    assert (clock.ttft.count, clock.ttft.sum, clock.queue.sum) == (1, pytest.approx(0.5), pytest.approx(0.3))
    assert (clock.itl.count, clock.itl.sum, clock.e2e.sum) == (2, pytest.approx(0.3), pytest.approx(0.8))
    assert clock.ttft.cumulative()[8] == ("0.25", 0.0) and clock.ttft.cumulative()[9] == ("0.5", 1.0)  # le 0.5
    m = clock.metrics("r")  # vLLM's arithmetic: TTFT from scheduling, mean ITL over tokens - 1
    assert m == pytest.approx({"time_to_first_token_ms": 200.0, "queue_time_ms": 300.0,
                               "generation_time_ms": 300.0, "mean_itl_ms": 100.0, "tokens_per_second": 8.0})
    assert clock.metrics("r") is None  # handed out once
    clock.arrived("late", 2.0)  # admitted at 2.0 s, taken by a step the lagging loop started at 1.9 s
    clock.emitted("late", 1, True, at=2.1, step_s=0.2)
    assert clock.metrics("late") == pytest.approx({"time_to_first_token_ms": 200.0, "queue_time_ms": 0.0,
                                                   "generation_time_ms": 0.0, "mean_itl_ms": None,
                                                   "tokens_per_second": 5.0})


def _sides(eng_base: float, eng_cur: float, ours_base: float, ours_cur: float, key="engine_ttft_mean_ms"):
    return ({key: eng_cur, "client_ttft_mean_ms": ours_cur}, {key: eng_base, "client_ttft_mean_ms": ours_base})


def test_whose_clock_moved_by_the_engines_share_of_our_move():
    regressed = [cmp("metrics.ttft_ms.p99", 20.0, 40.0, "regressed")]
    # ours +20 ms; the engine +10 ms: share 0.5, engine-side; +9.8 ms: 0.49, client/network
    assert attribute(regressed, *_sides(10.0, 20.0, 20.0, 40.0)).side == "engine"
    assert ENGINE_SHARE == 0.5
    found = attribute(regressed, *_sides(10.0, 19.8, 20.0, 40.0))
    assert found.side == "client" and "49% of ours" in found.note
    assert attribute([cmp("metrics.ttft_ms.p50", 40.0, 20.0, "improved")], *_sides(20.0, 10.0, 40.0, 20.0)).side == "engine"
    assert attribute(regressed, *_sides(10.0, 10.0, 20.0, 19.0)).side == "tail"  # our mean fell
    none = attribute(regressed, {"client_ttft_mean_ms": 40.0}, {"client_ttft_mean_ms": 20.0})
    assert (none.side, none.short) == ("unknown", "no engine clock on either side")
    assert attribute(regressed, {"client_ttft_mean_ms": 40.0}, _sides(10, 20, 20, 40)[1]).short == (
        "no engine clock on the current run")
    assert attribute([cmp("metrics.tpot_ms.p99", 20.0, 40.0, "regressed")], *_sides(10, 20, 20, 40)) is None
    assert attribute([cmp("metrics.ttft_ms.p99", 20.0, 20.5, "pass")], *_sides(10, 20, 20, 40)) is None
    # per-request metrics are preferred when both sides have them
    cur, base = _sides(10.0, 30.0, 20.0, 40.0, key="engine_request_ttft_mean_ms")
    cur["engine_ttft_mean_ms"], base["engine_ttft_mean_ms"] = 10.0, 10.0
    assert attribute(regressed, cur, base).side == "engine"


def test_the_verdicts_and_the_markdown_report_say_whose_clock_moved():
    cur, base = _sides(10.0, 10.5, 20.0, 80.0)
    o = with_attribution(outcome("tests/test_x.py::test_chat", comparisons=[
        cmp("metrics.ttft_ms.p99", 20.0, 80.0, "regressed"), cmp("metrics.tpot_ms.p99", 10.0, 10.0, "pass")],
        server={"current": cur, "baseline": base}))
    ttft, tpot = o.comparisons
    assert ttft.note == "client/network: the engine's mean TTFT did not move (+0.5 ms of our +60.0 ms)"
    assert tpot.note == "" and o.notes[-1].startswith("TTFT regressed on the client/network side")
    report = render_markdown([o])
    assert "**The engine's clock**" in report and "| TTFT | current | 80 | 10.5 |" in report
    assert "**Whose clock moved:** TTFT regressed on the client/network side" in report
    assert clock_block(outcome("tests/test_x.py::test_chat", server={"current": {"waiting_mean": 1.0}})) == ""


def test_the_metrics_object_is_read_from_a_streams_usage_chunk_and_from_a_body():
    m = {"time_to_first_token_ms": 4.0, "queue_time_ms": 1.0}
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    stream = (b'data: {"id":"c","choices":[{"index":0,"text":" a","finish_reason":"length"}]}\n\n'
              b'data: ' + json.dumps({"id": "c", "choices": [], "usage": usage, "metrics": m}).encode()
              + b"\n\ndata: [DONE]\n\n")
    assert parse_stream([(1.0, stream)]).engine_metrics == m
    body = {"id": "c", "choices": [{"index": 0, "text": " a", "finish_reason": "length"}], "usage": usage,
            "metrics": m}
    assert parse_body([(1.0, json.dumps(body).encode())], 1.0).engine_metrics == m
    assert parse_body([(1.0, json.dumps({**body, "metrics": None}).encode())], 1.0).engine_metrics is None

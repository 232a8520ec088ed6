"""TPOT of each phase of a reasoning model's output, and the spec's reasoning controls,
against hand-computed cases (docs/metrics.md, "Reasoning"; docs/workloads.md)."""

from __future__ import annotations

import json

import pytest

from pytest_goodput.judge.values import metric_value
from pytest_goodput.load.client.http import OpenAIClient
from pytest_goodput.load.requests.controls import reasoning_body
from pytest_goodput.measure.records.exchange import RequestPlan
from pytest_goodput.measure.metrics import percentile_checks, summarize
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, Samples
from pytest_goodput.schema.scenario.spec import SpecError, build_spec
from pytest_goodput.sim import openai
from test_reasoning import THINKING, delta, record, usage  # tests/ is on the path (rootdir conftest)


def test_phase_tpot_of_reasoning_then_answer():
    # reasoning chunks at 10.050, .060, .070 (3 tokens); answer chunks at .100, .110 (2)
    r = record(THINKING + [(10.120, usage(5))])
    assert r.reasoning_tpot_ms == pytest.approx(10.0)  # (10.070 - 10.050) / (3 - 1)
    assert r.answer_tpot_ms == pytest.approx(10.0)  # (10.110 - 10.100) / (2 - 1)
    assert r.tpot_ms == pytest.approx(15.0)  # the whole output: (10.110 - 10.050) / 4


def test_phase_tpot_divides_by_the_phase_tokens_of_the_split():
    # usage says 6 reasoning and 3 answer tokens over the same chunks (several per chunk)
    r = record(THINKING + [(10.120, usage(9, reasoning=6))])
    assert r.reasoning_tpot_ms == pytest.approx(4.0)  # 20 ms / (6 - 1)
    assert r.answer_tpot_ms == pytest.approx(5.0)  # 10 ms / (3 - 1)


def test_one_answer_token_has_no_answer_tpot():
    r = record(THINKING[:-1] + [(10.120, usage(4, reasoning=3))])
    assert r.answer_tpot_ms is None and r.reasoning_tpot_ms == pytest.approx(10.0)


def test_a_chunk_carrying_both_phases_counts_in_both():
    reads = [(10.050, delta(reasoning_content="a")), (10.060, delta(reasoning_content=" b")),
             (10.080, delta(reasoning_content=" c", content=" x")), (10.100, delta(content=" y")),
             (10.110, usage(5, reasoning=3))]
    r = record(reads)
    assert r.reasoning_tpot_ms == pytest.approx(15.0)  # (10.080 - 10.050) / 2
    assert r.answer_tpot_ms == pytest.approx(20.0)  # (10.100 - 10.080) / 1


def test_reasoning_that_arrived_at_once_has_no_reasoning_tpot():
    reads = [(10.050, delta(reasoning_content="a b c")), (10.100, delta(content=" x")),
             (10.110, delta(content=" y")), (10.120, usage(5, reasoning=3))]
    r = record(reads)
    assert r.reasoning_tpot_ms is None
    assert r.answer_tpot_ms == pytest.approx(10.0)


def test_without_reasoning_the_answer_tpot_is_the_tpot():
    reads = [(10.050, delta(content="a")), (10.070, delta(content=" b")), (10.090, delta(content=" c")),
             (10.100, usage(3))]
    r = record(reads)
    assert r.reasoning_tpot_ms is None
    assert r.answer_tpot_ms == r.tpot_ms == pytest.approx(20.0)


def test_non_streamed_has_no_phase_tpot():
    body = {"id": "b", "choices": [{"index": 0, "message": {"reasoning_content": "hmm ok",
                                                             "content": "four"}}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 3}}
    r = record([(10.250, json.dumps(body).encode())], stream=False)
    assert r.ok and r.reasoning_tpot_ms is None and r.answer_tpot_ms is None


def rec(i: int, answer_tpot, reasoning_tpot=None, answer=20, ok=True) -> RequestRecord:
    return RequestRecord(
        index=i, ok=ok, error_kind=None if ok else "timeout", scheduled_at=0.1 * i, sent_at=0.1 * i,
        end_at=0.1 * i + 1.0, ttft_ms=10.0, ttfo_ms=50.0, e2e_ms=1000.0, tpot_ms=5.0,
        output_tokens=answer + 10, reasoning_tokens=10, answer_tokens=answer,
        reasoning_token_source="usage", token_count_source="usage",
        answer_tpot_ms=answer_tpot if ok else None, reasoning_tpot_ms=reasoning_tpot if ok else None)


def test_run_metrics_slos_and_gate_know_the_phase_tpots():
    run = [rec(0, 4.0, 2.0), rec(1, 6.0, 3.0), rec(2, None, answer=1), rec(3, 8.0, 4.0),
           rec(4, None, ok=False)]
    spec = build_spec({"scenario": "server", "rate": 10, "requests": 5, "api": "chat",
                       "answer_tpot_p50_ms": 5.0, "gate": ["metrics.answer_tpot_ms.p99"]})
    r = summarize(run, spec, ClientHealth(valid=True, cpu_utilization=0.1))
    assert r.metrics.answer_tpot_ms.count == 3  # the one-token answer has none
    assert r.metrics.answer_tpot_ms.mean == pytest.approx(6.0)
    assert r.metrics.reasoning_tpot_ms.p50 == 3.0
    # the SLO: [4, 6, 8, +inf (the failure)]; one answer token is not a sample; P50 rank 2 = 6
    (check,) = percentile_checks(run, spec)
    assert (check.metric, check.samples, check.over_limit, check.value_ms, check.ok) == (
        "answer_tpot_ms", 4, 3, 6.0, False)
    assert registry.is_gateable("metrics.answer_tpot_ms.p99")
    assert registry.is_gateable("metrics.reasoning_tpot_ms.mean")
    s = Samples.from_records(run, 1.0)
    assert s.answer_tpot_ms == [4.0, 6.0, None, 8.0, None]
    assert metric_value(s, "metrics.answer_tpot_ms.p99") == float("inf")  # failure as +inf
    assert metric_value(s, "metrics.answer_tpot_ms.mean") == pytest.approx(6.0)


# --- reasoning controls ----------------------------------------------------------------------


def test_reasoning_controls_are_spec_fields_and_part_of_its_identity():
    base = build_spec({"scenario": "server", "rate": 1, "api": "chat"})
    high = build_spec({"scenario": "server", "rate": 1, "api": "chat", "reasoning_effort": "high"})
    capped = build_spec({"scenario": "server", "rate": 1, "api": "chat", "thinking_budget": 256})
    assert len({base.identity_hash(), high.identity_hash(), capped.identity_hash()}) == 3
    assert reasoning_body(base) == {}
    assert reasoning_body(high) == {"reasoning_effort": "high"}
    assert reasoning_body(capped) == {"thinking_token_budget": 256}
    with pytest.raises(SpecError, match="reasoning_effort"):
        build_spec({"scenario": "server", "rate": 1, "api": "chat", "reasoning_effort": "max"})
    with pytest.raises(SpecError, match="need api='chat'"):
        build_spec({"scenario": "server", "rate": 1, "thinking_budget": 64})
    with pytest.raises(SpecError, match="thinking_budget"):
        build_spec({"scenario": "server", "rate": 1, "api": "chat", "thinking_budget": 0})


def test_the_request_body_carries_the_controls():
    client = OpenAIClient("http://127.0.0.1:9", "m", api="chat",
                          extra_body=reasoning_body(build_spec(
                              {"scenario": "server", "rate": 1, "api": "chat",
                               "reasoning_effort": "low", "thinking_budget": 100})))
    body = json.loads(client.build_body(RequestPlan(0, "hi", 1, 8, 0.0)))
    assert body["reasoning_effort"] == "low" and body["thinking_token_budget"] == 100
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_simulator_scales_reasoning_by_effort_and_caps_it_by_budget():
    assert openai.reasoning_length({}, 12) == (12, None)
    assert openai.reasoning_length({"reasoning_effort": "low"}, 12) == (6, None)
    assert openai.reasoning_length({"reasoning_effort": "high"}, 12) == (24, None)
    assert openai.reasoning_length({"reasoning_effort": "high", "thinking_token_budget": 20}, 12) == (20, None)
    assert openai.reasoning_length({"thinking_token_budget": 0}, 12) == (0, None)
    assert openai.reasoning_length({"reasoning_effort": "extreme"}, 12)[1].startswith(
        "reasoning_effort must be one of low, medium, high")
    assert "thinking_token_budget" in openai.reasoning_length({"thinking_token_budget": "x"}, 12)[1]


def test_the_run_table_shows_ttfo_and_phase_tpot_for_a_reasoning_run():
    from pytest_goodput.report.text.run_result import render_result

    spec = build_spec({"scenario": "server", "rate": 10, "requests": 2, "api": "chat"})
    health = ClientHealth(valid=True, cpu_utilization=0.1)
    text = render_result(summarize([rec(0, 4.0, 2.0), rec(1, 6.0, 3.0)], spec, health))
    ttfo = next(line for line in text.splitlines() if line.startswith("TTFO ms"))
    assert ttfo.split()[2:4] == ["2", "50.00"]  # n, mean
    answer = next(line for line in text.splitlines() if line.startswith("answer TPOT ms"))
    assert answer.split()[3:5] == ["2", "5.00"]  # mean of 4 and 6
    plain = [r.model_copy(update={"reasoning_tokens": 0}) for r in (rec(0, 4.0), rec(1, 6.0))]
    assert "TTFO" not in render_result(summarize(plain, spec, health))

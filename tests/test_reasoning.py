"""Reasoning models, against hand-computed cases (docs/metrics.md, "Reasoning").

Byte streams and bodies go through the record builder; records through the run metrics,
the SLO checks and the judge's note on reasoning length.
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional

import pytest

from pytest_goodput.judge.judge import Policy, judge
from pytest_goodput.judge.workload import check_workload
from pytest_goodput.judge.slos import run_slo_outcomes
from pytest_goodput.judge.values import metric_value, pooled
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.headline import key_metrics
from pytest_goodput.measure.metrics import is_good, summarize
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, Samples
from pytest_goodput.schema.scenario.spec import SpecError, build_spec
from pytest_goodput.sim import openai
from pytest_goodput.sim.profile import SimProfileError, profile_from_env_and_args

HEALTHY = ClientHealth(valid=True, cpu_utilization=0.1)


def ev(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def delta(**fields: Any) -> dict:
    return {"id": "r1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": fields}]}


def usage(n: int, reasoning: Optional[Any] = None, details: bool = True) -> dict:
    u: dict[str, Any] = {"prompt_tokens": 4, "completion_tokens": n}
    if details and reasoning is not None:
        u["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {"id": "r1", "choices": [], "usage": u}


def exchange(reads: list[tuple[float, Any]], *, sent: float = 10.0, scheduled: Optional[float] = None,
             open_loop: bool = False, max_tokens: int = 16) -> RawExchange:
    plan = RequestPlan(0, "p", 4, max_tokens, sent if scheduled is None else scheduled,
                       open_loop=open_loop)
    raw = [(t, obj if isinstance(obj, bytes) else ev(obj)) for t, obj in reads]
    if not isinstance(reads[-1][1], bytes):  # a stream: it ends as servers end one
        raw[-1] = (raw[-1][0], raw[-1][1] + b"data: [DONE]\n\n")
    return RawExchange(plan, sent, raw[-1][0], 200, raw)


#: sent at 10.000 s; role-only chunk, 3 reasoning chunks, 2 answer chunks, usage.
THINKING = [
    (10.010, delta(role="assistant", content="")),
    (10.050, delta(reasoning_content="Let")),
    (10.060, delta(reasoning_content=" me")),
    (10.070, delta(reasoning_content=" think")),
    (10.100, delta(content=" Four")),
    (10.110, delta(content=" apples")),
]


def record(reads: list[tuple[float, Any]], **kw: Any) -> RequestRecord:
    stream = kw.pop("stream", True)
    tokenizer = kw.pop("tokenizer", None)
    return to_record(exchange(reads, **kw), stream=stream, api="chat", tokenizer=tokenizer)


# --- per request -----------------------------------------------------------------------


def test_reasoning_then_answer_gives_exact_ttfo_and_chunk_split():
    r = record(THINKING + [(10.120, usage(5))])
    assert r.ok
    assert r.ttft_ms == pytest.approx(50.0)  # first token of either kind; role-only is not one
    assert r.ttfo_ms == pytest.approx(100.0)  # first answer token, same origin
    assert r.first_answer_at == pytest.approx(10.100)
    assert r.e2e_ms == pytest.approx(120.0)
    assert (r.output_tokens, r.token_count_source) == (5, "usage")
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_token_source) == (3, 2, "chunks")
    assert r.tpot_ms == pytest.approx(15.0)  # (10.110 - 10.050) / 4, both phases
    assert r.content_chunks == 5


def test_usage_details_decide_the_split_when_reported():
    r = record(THINKING + [(10.120, usage(5, reasoning=3))])
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_token_source) == (3, 2, "usage")
    # chunks may carry several tokens: the engine's count wins over the chunk count
    r = record(THINKING + [(10.120, usage(9, reasoning=6))])
    assert (r.output_tokens, r.reasoning_tokens, r.answer_tokens) == (9, 6, 3)
    # without the detail, 9 tokens are shared by chunks: round(9 x 3/5) = 5
    r = record(THINKING + [(10.120, usage(9))])
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_token_source) == (5, 4, "chunks")


def test_no_usage_counts_chunks_like_output_tokens():
    r = record(THINKING)
    assert (r.output_tokens, r.token_count_source) == (5, "chunks")
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_token_source) == (3, 2, "chunks")


def test_both_field_names_are_counted_once():
    both = [(t, delta(reasoning_content=d["choices"][0]["delta"]["reasoning_content"],
                      reasoning=d["choices"][0]["delta"]["reasoning_content"]))
            if "reasoning_content" in d["choices"][0]["delta"] else (t, d) for t, d in THINKING]
    words = lambda text: len(text.split())  # noqa: E731 - a tokenizer: one word, one token
    r = record(both, tokenizer=words)
    # "Let me think" once + " Four apples": 5 words; reasoning 3 words, not 6
    assert (r.output_tokens, r.token_count_source) == (5, "tokenizer")
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_token_source) == (3, 2, "tokenizer")
    assert r.ttft_ms == pytest.approx(50.0) and r.ttfo_ms == pytest.approx(100.0)
    # `reasoning` alone (the new name) counts the same
    new_name = [(t, delta(reasoning=d["choices"][0]["delta"]["reasoning_content"]))
                if "reasoning_content" in d["choices"][0]["delta"] else (t, d) for t, d in THINKING]
    assert record(new_name, tokenizer=words).reasoning_tokens == 3


def test_request_without_reasoning_has_ttfo_equal_to_ttft():
    reads = [(10.020, delta(role="assistant", content="")), (10.040, delta(content="Hi")),
             (10.050, delta(content=" there")), (10.060, usage(2))]
    r = record(reads)
    assert r.ttfo_ms == r.ttft_ms == pytest.approx(40.0)
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_token_source) == (0, 2, None)
    # a completions stream has no reasoning either
    cmpl = [(10.030, {"id": "c", "choices": [{"text": "a"}]}), (10.040, {"id": "c", "choices": [{"text": "b"}]})]
    c = to_record(exchange(cmpl), stream=True, api="completions")
    assert c.ttfo_ms == c.ttft_ms == pytest.approx(30.0) and c.reasoning_tokens == 0


def test_hidden_reasoning_reported_only_in_usage():
    reads = [(10.300, delta(content="Four")), (10.310, delta(content=".")), (10.320, usage(10, reasoning=8))]
    r = record(reads)
    assert r.ttfo_ms == r.ttft_ms == pytest.approx(300.0)
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_token_source) == (8, 2, "usage")


def test_zero_detail_next_to_reasoning_text_is_a_placeholder():
    r = record(THINKING + [(10.120, usage(5, reasoning=0))])
    assert (r.reasoning_tokens, r.reasoning_token_source) == (3, "chunks")


@pytest.mark.parametrize("bad,words", [
    (6, "reasoning_tokens 6 is more than usage.completion_tokens 5"),
    (-1, "reasoning_tokens is not a count of tokens: -1"),
    ("3", "reasoning_tokens is not a count of tokens: '3'"),
    (2.5, "reasoning_tokens is not a count of tokens: 2.5"),
])
def test_unbelievable_reasoning_detail_is_a_malformed_stream(bad, words):
    r = record(THINKING + [(10.120, usage(5, reasoning=bad))])
    assert not r.ok and r.error_kind == "malformed_stream"
    assert words in (r.error_detail or "")
    assert r.ttfo_ms is None and r.reasoning_tokens == 0  # diagnosis keeps the counts


def test_reasoning_that_used_up_the_output_has_no_ttfo():
    reads = THINKING[:4] + [(10.080, usage(3, reasoning=3))]
    r = record(reads)
    assert r.ok and r.ttft_ms == pytest.approx(50.0)
    assert r.ttfo_ms is None and r.first_answer_at is None
    assert (r.reasoning_tokens, r.answer_tokens) == (3, 0)
    assert not is_good(r, build_spec({"scenario": "server", "rate": 1, "ttfo_ms": 1e6}))
    assert is_good(r, build_spec({"scenario": "server", "rate": 1, "ttft_ms": 1e6}))


def test_open_loop_ttfo_counts_from_the_schedule():
    r = record(THINKING, sent=10.0, scheduled=9.5, open_loop=True)
    assert r.ttft_ms == pytest.approx(550.0) and r.ttfo_ms == pytest.approx(600.0)


def test_non_streamed_body_splits_by_characters():
    body = {"id": "r1", "choices": [{"index": 0, "message": {
        "role": "assistant", "reasoning_content": "abcdefgh", "content": "abcd"}}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 6}}
    ex = RawExchange(RequestPlan(0, "p", 4, 16, 1.0), 1.0, 1.25, 200, [(1.25, json.dumps(body).encode())])
    r = to_record(ex, stream=False, api="chat")
    assert r.ttft_ms == r.ttfo_ms == r.e2e_ms == pytest.approx(250.0)
    # 6 tokens x 8 / 12 characters = 4 reasoning, 2 answer
    assert (r.reasoning_tokens, r.answer_tokens, r.reasoning_token_source) == (4, 2, "chunks")


# --- run metrics and SLOs ----------------------------------------------------------------


def rec(i: int, ttfo: Optional[float], reasoning: int = 0, ok: bool = True,
        ttft: float = 10.0) -> RequestRecord:
    return RequestRecord(
        index=i, ok=ok, error_kind=None if ok else "timeout", scheduled_at=i * 0.1, sent_at=i * 0.1,
        end_at=i * 0.1 + 1.0, ttft_ms=ttft if ok else None, ttfo_ms=ttfo if ok else None,
        e2e_ms=1000.0 if ok else None, tpot_ms=5.0 if ok else None, output_tokens=20 if ok else 0,
        reasoning_tokens=reasoning if ok else 0, answer_tokens=20 - reasoning if ok else 0,
        reasoning_token_source="usage" if reasoning and ok else None, token_count_source="usage",
    )


RUN = [rec(0, 100.0, 4), rec(1, 200.0, 8), rec(2, 300.0, 12), rec(3, 400.0, 16), rec(4, None, ok=False)]


def test_ttfo_distribution_and_mean_reasoning_tokens():
    spec = build_spec({"scenario": "server", "rate": 10, "requests": 5})
    r = summarize(RUN, spec, HEALTHY)
    # completed requests only: [100, 200, 300, 400]; nearest rank
    assert r.metrics.ttfo_ms.count == 4
    assert (r.metrics.ttfo_ms.p50, r.metrics.ttfo_ms.p90, r.metrics.ttfo_ms.p99) == (200.0, 400.0, 400.0)
    assert r.metrics.ttfo_ms.mean == pytest.approx(250.0)
    assert r.metrics.reasoning_tokens.mean == pytest.approx(10.0)  # (4+8+12+16) / 4
    assert r.reasoning_token_source == "usage"
    km = key_metrics(r)
    assert km["metrics.ttfo_ms.p99"] == 400.0 and km[registry.REASONING_MEAN] == pytest.approx(10.0)
    # a run without reasoning keeps its old headline numbers
    plain = summarize([rec(0, 10.0), rec(1, 10.0)], spec, HEALTHY)
    assert plain.reasoning_token_source is None
    assert "metrics.ttfo_ms.p99" not in key_metrics(plain)


def test_ttfo_percentile_slos_count_failures_as_infinite():
    # samples [100, 200, 300, 400, +inf]: P50 is rank 3 = 300, P90 rank 5 = +inf
    spec = build_spec({"scenario": "server", "rate": 10, "requests": 5, "max_error_rate": 0.5,
                       "ttfo_p50_ms": 350, "ttfo_p60_ms": 250, "ttfo_p90_ms": 1e6})
    r = summarize(RUN, spec, HEALTHY)
    checks = {c.name: c for c in r.percentile_slos}
    assert checks["ttfo_p50_ms"].ok and checks["ttfo_p50_ms"].value_ms == 300.0
    assert checks["ttfo_p50_ms"].metric == "ttfo_ms" and checks["ttfo_p50_ms"].samples == 5
    assert not checks["ttfo_p60_ms"].ok and checks["ttfo_p60_ms"].value_ms == 300.0  # rank 3
    assert not checks["ttfo_p90_ms"].ok and checks["ttfo_p90_ms"].value_ms is None  # +inf
    assert checks["ttfo_p90_ms"].over_limit == 1
    outcomes = {o.name: o for o in run_slo_outcomes(r, strict=False)}
    assert outcomes["ttfo_p50_ms"].ok  # holds, unproven with 5 samples: passes with a note
    assert "not proven" in outcomes["ttfo_p50_ms"].note
    assert not outcomes["ttfo_p60_ms"].ok and not outcomes["ttfo_p90_ms"].ok
    strict = {o.name: o for o in run_slo_outcomes(r, strict=True)}
    assert not strict["ttfo_p50_ms"].ok  # strict: the unproven hold fails


def test_no_answer_is_over_any_ttfo_percentile_limit():
    spec = build_spec({"scenario": "server", "rate": 10, "requests": 2, "ttfo_p50_ms": 1e6})
    r = summarize([rec(0, None, reasoning=20), rec(1, None, reasoning=20)], spec, HEALTHY)
    (check,) = r.percentile_slos
    assert not check.ok and check.over_limit == 2 and check.value_ms is None


def test_per_request_ttfo_slo_counts_toward_goodput():
    spec = build_spec({"scenario": "server", "rate": 10, "requests": 5, "ttfo_ms": 250,
                       "max_error_rate": 0.5, "attainment": 0.4})
    assert spec.has_request_slos
    r = summarize(RUN, spec, HEALTHY)
    assert r.goodput is not None
    assert (r.goodput.good, r.goodput.issued, r.goodput.attainment) == (2, 5, 0.4)  # 100, 200 ms
    assert r.goodput.met
    assert [x.good for x in r.requests] == [True, True, False, False, False]


# --- spec, registry, gate ----------------------------------------------------------------


def test_spec_and_registry_know_ttfo():
    spec = build_spec({"scenario": "server", "rate": 1, "ttfo_p99_ms": 5000, "ttfo_ms": 3000,
                       "gate": ["metrics.ttfo_ms.p99", registry.REASONING_MEAN]})
    assert spec.percentile_slos == {"ttfo_p99_ms": 5000} and spec.ttfo_ms == 3000
    assert registry.canonical("ttfo_p99_ms") == "metrics.ttfo_ms.p99"
    info = registry.metric("metrics.ttfo_ms.p99")
    assert (info.label, info.unit, info.direction, info.kind, info.tolerance) == (
        "TTFO P99", "ms", "lower", "percentile", 0.15)
    mean = registry.metric(registry.REASONING_MEAN)
    assert (mean.unit, mean.kind, mean.tolerance, mean.gateable) == ("tok", "mean", 0.10, True)
    assert registry.order_key("metrics.ttft_ms.p99") < registry.order_key("metrics.ttfo_ms.p99") \
        < registry.order_key("metrics.tpot_ms.p99")
    with pytest.raises(SpecError, match="ttfo_ms: Input should be greater than 0"):
        build_spec({"scenario": "server", "rate": 1, "ttfo_ms": 0})
    with pytest.raises(SpecError, match="ttfo_p99_ms' must be a positive number"):
        build_spec({"scenario": "server", "rate": 1, "ttfo_p99_ms": -5})
    with pytest.raises(SpecError, match="unknown metric 'metrics.ttfo_ms.p99.9'"):
        build_spec({"scenario": "server", "rate": 1, "gate": ["metrics.ttfo_ms.p99.9"]})


def samples(ttfo: list[Optional[float]], reasoning: list[int], ok: Optional[list[bool]] = None) -> Samples:
    n = len(ttfo)
    ok = ok or [True] * n
    return Samples(window_s=10.0, ok=ok, ttft_ms=[10.0 if o else None for o in ok],
                   tpot_ms=[5.0 if o else None for o in ok], e2e_ms=[50.0 if o else None for o in ok],
                   output_tokens=[20] * n, prompt_tokens=[4] * n, ttfo_ms=ttfo, reasoning_tokens=reasoning)


def test_gate_recomputes_ttfo_and_reasoning_from_samples():
    s = samples([100.0, 200.0, None, 400.0], [10, 20, 0, 30], ok=[True, True, False, True])
    assert metric_value(s, "metrics.ttfo_ms.p50") == 200.0  # [100, 200, 400, +inf], rank 2
    assert metric_value(s, "metrics.ttfo_ms.p99") == math.inf  # the failure reaches P99
    assert metric_value(s, registry.REASONING_MEAN) == pytest.approx(20.0)  # completed only
    old = s.model_copy(update={"ttfo_ms": None, "reasoning_tokens": None})
    assert metric_value(old, "metrics.ttfo_ms.p50") is None  # unknown, not TTFT
    assert pooled([s, old]).ttfo_ms is None and pooled([s, s]).ttfo_ms == s.ttfo_ms * 2
    # baselines round and keep the columns; older files without them still load
    dumped = json.loads(s.model_dump_json())
    assert dumped["ttfo_ms"] == [100.0, 200.0, None, 400.0] and dumped["reasoning_tokens"] == [10, 20, 0, 30]
    dumped.pop("ttfo_ms"), dumped.pop("reasoning_tokens")
    assert Samples.model_validate(dumped).ttfo_ms is None


def test_samples_from_records_keep_ttfo_and_reasoning():
    s = Samples.from_records(RUN, 1.0)
    assert s.ttfo_ms == [100.0, 200.0, 300.0, 400.0, None]
    assert s.reasoning_tokens == [4, 8, 12, 16, 0]


# --- the judge's note ----------------------------------------------------------------------


def thinking(reasoning: list[int], answer: int = 20) -> Samples:
    """Completed requests whose output is their reasoning plus ``answer`` tokens."""
    n = len(reasoning)
    return samples([100.0] * n, reasoning).model_copy(
        update={"output_tokens": [r + answer for r in reasoning]})


def changes(base, cur) -> list[str]:
    return check_workload(base, cur)[0].changes


def test_reasoning_length_change_is_named_with_its_direction():
    base = [[thinking([100, 100, 100, 100])]]
    longer = [thinking([125] * 4)]
    assert changes(base, longer) == [
        "the model thinks 25 % longer (reasoning tokens per request 100 → 125): a workload "
        "change, not a performance change"]
    assert changes(base, [thinking([80] * 4)])[0].startswith(
        "the model thinks 20 % shorter (reasoning tokens per request 100 → 80)")
    assert changes(base, [thinking([110] * 4)]) == []  # exactly 10 %: no change
    assert changes(base, [thinking([111] * 4)]) != []
    none = [[thinking([0] * 4)]]
    assert changes(none, [thinking([0] * 4)]) == []
    assert changes(none, longer)[0].startswith("the model reasons now and did not in the baseline")
    old = [[base[0][0].model_copy(update={"reasoning_tokens": None})]]
    assert changes(old, longer) == [  # recorded before the column: the whole output compared
        "outputs are 21 % longer (output tokens per request 120 → 145): a workload change, "
        "not a performance change"]
    # the mean is over every baseline session's completed requests: (100 + 200) / 2 = 150
    two = [[thinking([100, 100])], [thinking([200, 200])]]
    lengths = check_workload(two, [thinking([150, 150])])[0].lengths
    assert lengths[0].column == "reasoning_tokens" and lengths[0].baseline == pytest.approx(150.0)


def test_judge_outcome_names_the_workload_change():
    spec = build_spec({"scenario": "server", "rate": 10, "requests": 40, "seed": 3})
    n = 40

    def ev_of(reasoning: int) -> Side:
        s = samples([100.0 + i for i in range(n)], [reasoning] * n).model_copy(
            update={"output_tokens": [reasoning + 20] * n})
        return Side.of_samples(spec, [[s]])

    outcome = judge("t::r1", ev_of(260), ev_of(200), Policy())
    assert outcome.baseline_status == "compared"
    assert outcome.workload_changes == [
        "the model thinks 30 % longer (reasoning tokens per request 200 → 260): a workload "
        "change, not a performance change"]
    assert judge("t::r1", ev_of(205), ev_of(200), Policy()).workload_changes == []
    gated = judge("t::r1", Side(spec.model_copy(update={"gate": ("metrics.ttfo_ms.p99",)}),
                                spec.identity_hash(), ev_of(200).sessions),
                  ev_of(200), Policy())
    assert [c.metric for c in gated.comparisons] == ["metrics.ttfo_ms.p99", "error_rate"]
    ttfo = gated.comparisons[0]
    # rank 40 of 100..139 on both sides (a geometric mean over sessions: up to rounding)
    assert ttfo.baseline == pytest.approx(139.0) and ttfo.current == pytest.approx(139.0)
    assert ttfo.change == pytest.approx(0.0, abs=1e-12)
    assert ttfo.verdict != "regressed"


# --- the simulator's wire format ------------------------------------------------------------


def test_simulator_chunks_round_trip_through_the_record_builder():
    enc = openai.ChunkEncoder("x", True, "sim", "length", reasoning_field="both")
    reads = [(10.010, enc.role), (10.050, enc.reasoning_chunk(b" hmm")), (10.060, enc.reasoning_chunk(b" ok")),
             (10.080, enc.pre + b" Yes" + enc.post), (10.090, enc.pre + b" sir" + enc.last_post),
             (10.095, enc.usage_chunk(4, 4, reasoning_tokens=2) + openai.DONE)]
    chunk = json.loads(enc.reasoning_chunk(b" hmm")[len(b"data: "):])
    assert chunk["choices"][0]["delta"] == {"reasoning_content": " hmm", "reasoning": " hmm"}
    usage_obj = json.loads(enc.usage_chunk(4, 4, reasoning_tokens=2)[len(b"data: "):])["usage"]
    assert usage_obj["completion_tokens"] == 4
    assert usage_obj["completion_tokens_details"] == {"reasoning_tokens": 2}
    r = to_record(exchange(reads), stream=True, api="chat")
    assert r.ok and (r.output_tokens, r.reasoning_tokens, r.answer_tokens) == (4, 2, 2)
    assert r.reasoning_token_source == "usage"
    assert r.ttft_ms == pytest.approx(50.0) and r.ttfo_ms == pytest.approx(80.0)
    # off by default: the usage chunk is the one it always was
    assert b"completion_tokens_details" not in openai.ChunkEncoder("x", True, "sim", "stop").usage_chunk(4, 4)
    body = openai.completion_body("x", True, "sim", "Yes", 4, 6, "stop", " hmm", 5)
    assert body["choices"][0]["message"]["reasoning_content"] == " hmm"
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 5}


def test_simulator_reasoning_knobs():
    p = profile_from_env_and_args(env={"GOODPUT_SIM_REASONING_TOKENS": "32",
                                       "GOODPUT_SIM_REASONING_FIELD": "both"})
    assert (p.reasoning_tokens, p.reasoning_field) == (32, "both")
    assert profile_from_env_and_args(env={}).reasoning_tokens == 0
    with pytest.raises(SimProfileError, match="reasoning_tokens .*GOODPUT_SIM_REASONING_TOKENS"):
        profile_from_env_and_args(env={"GOODPUT_SIM_REASONING_TOKENS": "-1"})
    with pytest.raises(SimProfileError, match="reasoning_field"):
        profile_from_env_and_args(env={"GOODPUT_SIM_REASONING_FIELD": "thoughts"})

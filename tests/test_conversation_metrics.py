"""Conversations and prefix caching against hand-computed cases (docs/metrics.md,
"Conversations and prefix caching"): cached tokens from usage, the run's hit rate, TTFT by
turn and over the later turns, the gate's recomputation of ``metrics.ttft_later_ms``, and
the shared-prefix workload's draws."""

from __future__ import annotations

import json
import math

import pytest

from pytest_goodput.judge.values import common_prefix, metric_value, pooled
from pytest_goodput.load.plan import Supply
from pytest_goodput.load.requests.prefix import prefix_groups_of, prefix_text
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.measure.records.prefix_cache import cached_prompt_tokens
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, Samples
from pytest_goodput.schema.scenario.spec import SpecError, build_spec
from pytest_goodput.sim import openai

HEALTHY = ClientHealth(valid=True, cpu_utilization=0.1)


def streamed(usage: dict) -> RawExchange:
    """Sent at 10.000 s; two answer chunks at 10.050 and 10.060 s, then the usage chunk."""
    plan = RequestPlan(0, "p", 4, 2, 10.0, conversation=3, turn=2)
    chunk = lambda text: {"id": "r", "choices": [{"index": 0, "delta": {"content": text}}]}  # noqa: E731
    reads = [(10.05, chunk("a")), (10.06, chunk(" b")), (10.07, {"id": "r", "choices": [], "usage": usage})]
    return RawExchange(plan, 10.0, 10.07, 200,
                       [(t, b"data: " + json.dumps(o).encode() + b"\n\n") for t, o in reads])


def test_a_record_keeps_its_turn_and_the_engines_cached_tokens():
    r = to_record(streamed({"prompt_tokens": 40, "completion_tokens": 2,
                            "prompt_tokens_details": {"cached_tokens": 32}}), stream=True, api="chat")
    assert r.ok and (r.conversation, r.turn, r.prompt_tokens, r.cached_tokens) == (3, 2, 40, 32)
    assert r.ttft_ms == pytest.approx(50.0)
    silent = to_record(streamed({"prompt_tokens": 40, "completion_tokens": 2}), stream=True, api="chat")
    assert silent.ok and silent.cached_tokens is None


@pytest.mark.parametrize("details, prompt, expected", [
    ({"cached_tokens": 32}, 40, 32),
    ({"cached_tokens": 40.0}, 40, 40),  # a whole float is a count
    ({"cached_tokens": 41}, 40, None),  # more than the prompt: not believed
    ({"cached_tokens": -1}, 40, None),
    ({"cached_tokens": True}, 40, None),
    ({"cached_tokens": None}, 40, None),
    ("32", 40, None),
    ({"cached_tokens": 7}, None, 7),
])
def test_cached_tokens_are_believed_only_as_a_count_within_the_prompt(details, prompt, expected):
    assert cached_prompt_tokens({"prompt_tokens_details": details}, prompt) == expected


def rec(i: int, turn, ttft, prompt=100, cached=None, ok=True, warmup=False) -> RequestRecord:
    return RequestRecord(index=i, ok=ok, warmup=warmup, scheduled_at=float(i), sent_at=float(i),
                         end_at=i + 0.5, ttft_ms=ttft if ok else None, prompt_tokens=prompt,
                         cached_tokens=cached, turn=turn, conversation=None if turn is None else i // 3,
                         output_tokens=2 if ok else 0, token_count_source="usage",
                         error_kind=None if ok else "timeout")


#: Two 3-turn conversations: TTFT 40, 10, 20 and 60, 30, (failed); the warm-up is left out.
CONVERSATIONS = [
    rec(0, 1, 40.0, prompt=100, cached=0), rec(1, 2, 10.0, prompt=200, cached=96),
    rec(2, 3, 20.0, prompt=300, cached=192), rec(3, 1, 60.0, prompt=100, cached=0),
    rec(4, 2, 30.0, prompt=200, cached=96), rec(5, 3, None, prompt=300, cached=None, ok=False),
    rec(6, 1, 999.0, prompt=100, cached=100, warmup=True),
]


def test_run_metrics_by_turn_and_the_hit_rate_by_hand():
    spec = build_spec(dict(scenario="concurrency", concurrency=2, api="chat", turns=3, requests=6,
                           warmup_requests=0))
    r = summarize(CONVERSATIONS, spec, HEALTHY)
    by_turn = r.metrics.ttft_ms_by_turn
    assert list(by_turn) == ["1", "2", "3"]
    assert (by_turn["1"].count, by_turn["1"].mean) == (2, 50.0)
    assert (by_turn["2"].count, by_turn["2"].p50, by_turn["3"].count) == (2, 10.0, 1)
    # later turns: 10, 30, 20 -> nearest-rank P50 is the 2nd smallest, 20
    assert (r.metrics.ttft_later_ms.count, r.metrics.ttft_later_ms.p50) == (3, 20.0)
    assert r.metrics.ttft_later_ms.mean == pytest.approx(20.0)
    # completed measured requests reporting cached tokens: (0+96+192+0+96) / (100+200+300+100+200)
    assert r.cached_prompt_tokens == 384
    assert r.prefix_cache_hit_rate == pytest.approx(384 / 900)


def test_runs_without_conversations_or_cache_reports_have_none():
    plain = [rec(0, None, 10.0), rec(1, None, 12.0)]
    r = summarize(plain, build_spec(dict(scenario="offline", requests=2)), HEALTHY)
    assert r.metrics.ttft_later_ms.count == 0 and r.metrics.ttft_ms_by_turn == {}
    assert r.cached_prompt_tokens is None and r.prefix_cache_hit_rate is None
    assert Samples.from_records(plain, 1.0).ttft_later_ms is None


def test_the_gate_recomputes_later_turn_ttft_with_failures_as_infinity():
    s = Samples.from_records(CONVERSATIONS, 2.0)
    assert s.ttft_later_ms == [None, 10.0, 20.0, None, 30.0, None]
    assert registry.is_gateable("metrics.ttft_later_ms.p50")
    info = registry.metric("metrics.ttft_later_ms.p99")
    assert (info.label, info.unit, info.direction, info.tolerance) == ("TTFT turns 2+ P99", "ms", "lower", 0.15)
    # later turns 10, 20, 30 plus the failed request as +inf: P50 is the 2nd of 4 = 20, max +inf
    assert metric_value(s, "metrics.ttft_later_ms.p50") == 20.0
    assert metric_value(s, "metrics.ttft_later_ms.max") == math.inf
    assert metric_value(s, "metrics.ttft_later_ms.mean") == pytest.approx(20.0)
    both = pooled([s, s])
    assert both is not None and both.ttft_later_ms == s.ttft_later_ms * 2
    cut = common_prefix([s], [s.model_copy(update={"ok": s.ok[:4], "ttft_ms": s.ttft_ms[:4],
                                                    "tpot_ms": s.tpot_ms[:4], "e2e_ms": s.e2e_ms[:4],
                                                    "output_tokens": s.output_tokens[:4],
                                                    "prompt_tokens": s.prompt_tokens[:4],
                                                    "ttfo_ms": s.ttfo_ms[:4],
                                                    "reasoning_tokens": s.reasoning_tokens[:4],
                                                    "ttft_later_ms": s.ttft_later_ms[:4]})])
    assert cut is not None and cut[0][0].ttft_later_ms == [None, 10.0, 20.0, None]
    with pytest.raises(SpecError):  # a subset column, not a per-request SLO keyword
        build_spec(dict(scenario="offline", ttft_later_p99_ms=100))
    with pytest.raises(SpecError, match="needs conversations"):  # nothing to measure without turns
        build_spec(dict(scenario="offline", gate=["metrics.ttft_later_ms.p50"]))
    build_spec(dict(scenario="concurrency", concurrency=2, api="chat", turns=2, requests=4,
                    gate=["metrics.ttft_later_ms.p50"], tolerances={"metrics.ttft_later_ms.p50": 0.2}))


def test_the_simulator_reports_cached_tokens_as_vllm_does():
    chunk = openai.ChunkEncoder("1", True, "m", "length").usage_chunk(40, 2, 0, 32)
    usage = json.loads(chunk[len(b"data: "):])["usage"]
    assert usage == {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42,
                     "prompt_tokens_details": {"cached_tokens": 32}}
    body = openai.completion_body("1", False, "m", "x", 3, 1, "length")
    assert "prompt_tokens_details" not in body["usage"]  # prefix caching off: not reported


def test_shared_prefixes_are_seeded_grouped_and_exact_in_length():
    spec = build_spec(dict(scenario="offline", requests=400, isl=8, prefix_len=40, prefix_groups=3,
                           prefix_fraction=0.5, seed=5))
    groups = prefix_groups_of(spec, 400)
    assert groups[:100] == prefix_groups_of(spec, 100)  # more prompts do not redraw the first
    carried = [g for g in groups if g is not None]
    assert 160 < len(carried) < 240 and set(carried) == {0, 1, 2}
    items = Supply(spec, 400, None, None, 9).items
    for item, g in zip(items, groups):
        if g is None:
            assert item.prompt_tokens == 8 and len(item.prompt.split()) == 8
        else:
            assert item.prompt_tokens == 48 and item.prompt.startswith(prefix_text(g, 40, 5, 9) + " ")
    texts = {prefix_text(g, 40, 5, 9) for g in range(3)}
    assert len(texts) == 3 and all(len(t.split()) == 40 for t in texts)
    assert prefix_text(0, 40, 5, 10) != prefix_text(0, 40, 5, 9)  # another run, another prefix
    none = build_spec(dict(scenario="offline", requests=4, isl=8))
    assert [i.prompt_tokens for i in Supply(none, 4, None, None, 9).items] == [8] * 4


def test_conversations_carry_a_prefix_on_their_first_turn_only():
    spec = build_spec(dict(scenario="concurrency", concurrency=2, api="chat", turns=3, requests=30,
                           prefix_len=20, prefix_fraction=1.0))
    assert prefix_groups_of(spec, 30) == [0, None, None] * 10


def test_the_cli_table_shows_turns_and_the_cache():
    from pytest_goodput.report.text.run_result import render_result

    spec = build_spec(dict(scenario="concurrency", concurrency=2, api="chat", turns=3, requests=6))
    text = render_result(summarize(CONVERSATIONS, spec, HEALTHY))
    assert "42.7% of prompt tokens cached (384 tokens)" in text
    rows = {line.split("  ")[0]: line.split() for line in text.splitlines() if line.startswith("TTFT")}
    assert rows["TTFT turn 1 ms"][-7:-5] == ["2", "50.00"]  # n, mean
    assert rows["TTFT turns 2+ ms"][-7:-4] == ["3", "20.00", "20.00"]  # n, mean, p50
    plain = render_result(summarize([rec(0, None, 10.0)], build_spec(dict(scenario="offline", requests=1)), HEALTHY))
    assert "prefix cache" not in plain and "turn" not in plain


def test_conversations_gate_the_later_turns_ttft_by_default():
    from pytest_goodput.schema.registry import default_gate
    from pytest_goodput.schema.scenario.spec import build_spec

    chat = build_spec({"scenario": "concurrency", "concurrency": 2, "api": "chat", "turns": 3, "requests": 6})
    single = build_spec({"scenario": "concurrency", "concurrency": 2, "api": "chat", "requests": 6})
    assert default_gate(chat) == default_gate(single) + ("metrics.ttft_later_ms.p50",)
    assert "metrics.ttft_later_ms.p50" not in default_gate(single)

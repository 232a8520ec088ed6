"""Scenario spec validation: errors name the argument and what is allowed."""

from __future__ import annotations

import pytest

from pytest_goodput.schema.scenario.spec import (
    DEFAULT_REQUESTS,
    SLO_PRESETS,
    SpecError,
    build_spec,
)


def test_defaults():
    s = build_spec({"rate": 5})
    assert s.scenario == "server" and s.requests == DEFAULT_REQUESTS and s.arrival == "poisson"
    assert build_spec({"rate": 5, "duration_s": 3}).requests is None


def test_preset_expands_to_percentile_and_request_slos():
    s = build_spec({"scenario": "interactive", "rate": 4, "slo": "mlperf/llama2-70b/interactive"})
    assert s.percentile_slos == {"ttft_p99_ms": 450.0, "tpot_p99_ms": 40.0}
    assert (s.ttft_ms, s.tpot_ms) == (450.0, 40.0)
    # explicit values win over the preset
    s2 = build_spec({"rate": 4, "slo": "mlperf/llama2-70b/interactive", "ttft_ms": 300})
    assert s2.ttft_ms == 300 and s2.percentile_slos["ttft_p99_ms"] == 450


def test_all_mlperf_presets_present():
    assert SLO_PRESETS["mlperf/llama3.1-8b/interactive"] == (500.0, 30.0)
    assert SLO_PRESETS["mlperf/deepseek-r1/interactive"] == (1500.0, 15.0)
    assert SLO_PRESETS["guidellm/chat"] == (200.0, 50.0)  # GuideLLM's chat example: P99 TTFT, P99 ITL
    assert SLO_PRESETS["guidellm/rag"] == (300.0, 100.0)
    assert len(SLO_PRESETS) == 14


@pytest.mark.parametrize(
    "args,needle",
    [
        ({"scenario": "servre", "rate": 1}, "scenario='servre': scenario= takes one of 'offline', 'server', "
         "'interactive', 'concurrency', 'sweep', 'capacity', 'trace', not the string 'servre'; did you "
         "mean scenario='server'?"),
        ({"rate": -1}, "rate: Input should be greater than 0 (got -1)"),
        ({"scenario": "server"}, "needs rate="),
        ({"scenario": "concurrency"}, "needs concurrency="),
        ({"scenario": "sweep"}, "needs sweep="),
        ({"scenario": "interactive", "rate": 1}, "needs SLOs"),
        ({"scenario": "capacity", "rate": 1}, "needs per-request SLOs"),
        ({"rate": 1, "slo": "mlperf/nope"}, "unknown SLO preset 'mlperf/nope'; allowed:"),
        ({"rate": 1, "ttft_p100_ms": 5}, "percentile must be in (0, 100)"),
        ({"rate": 1, "ttft_p99_ms": -5}, "must be a positive number"),
        ({"rate": 1, "bogus": 1}, "bogus=1: unknown argument"),
        ({"rate": 1, "workload": "jsonl"}, "needs dataset="),
        ({"rate": 1, "arrival": "bursty"}, "arrival='bursty': arrival= takes one of 'poisson', 'gamma', "
         "'constant', not the string 'bursty'"),
    ],
)
def test_errors_name_argument(args, needle):
    with pytest.raises(SpecError) as ei:
        build_spec(args, where="tests/test_x.py::test_y")
    msg = str(ei.value)
    assert msg.startswith("tests/test_x.py::test_y: invalid goodput arguments")
    assert needle in msg


def test_identity_hash_ignores_gate_settings():
    a = build_spec({"rate": 5, "ttft_ms": 100})
    b = build_spec({"rate": 5, "ttft_ms": 100, "tolerance": 0.2, "gate": ["metrics.ttft_ms.p99"]})
    c = build_spec({"rate": 6, "ttft_ms": 100})
    assert a.identity_hash() == b.identity_hash() != c.identity_hash()


def test_scaled():
    s = build_spec({"rate": 5, "requests": 100, "warmup_requests": 10}).scaled(0.25)
    assert (s.requests, s.warmup_requests) == (25, 2)
    assert build_spec({"rate": 5, "requests": 2}).scaled(0.1).requests == 1


@pytest.mark.parametrize(
    "args,needle",
    [
        ({"rate": 1, "gate": ["metrics.itl_ms.p99"]}, "unknown metric 'metrics.itl_ms.p99'"),
        ({"rate": 1, "gate": ["throughput.tokens_per_s"]}, "unknown metric 'throughput.tokens_per_s'"),
        ({"rate": 1, "tolerances": {"metric.ttft_ms.p99": 0.1}}, "unknown metric 'metric.ttft_ms.p99'"),
        ({"rate": 1, "gate": ["frontier_throughput"]}, "unknown metric 'frontier_throughput'"),
        ({"scenario": "offline", "rate": 3}, "rate= does not apply to scenario 'offline'"),
        ({"scenario": "concurrency", "concurrency": 2, "rate": 3}, "rate= does not apply"),
        ({"rate": 1, "sweep": [1, 2]}, "sweep= applies only to scenario 'sweep'"),
        ({"rate": 1, "burstiness": 0.5}, "burstiness= applies only to arrival='gamma'"),
        ({"scenario": "offline", "warmup_s": 2}, "use warmup_requests=, not warmup_s="),
        ({"scenario": "offline", "duration_s": 5}, "needs a concurrency= ceiling"),
        ({"rate": 1, "stream": False, "slo": "mlperf/llama2-70b/server"}, "need streamed responses"),
        ({"rate": 1, "stream": False, "itl_p99_ms": 5}, "itl_p99_ms need streamed responses"),
    ],
)
def test_arguments_that_would_be_ignored_or_unmeasurable_are_refused(args, needle):
    with pytest.raises(SpecError) as ei:
        build_spec(args)
    assert needle in str(ei.value)


def test_gateable_paths_are_what_the_verdict_engine_computes():
    from pytest_goodput.judge.scalar.verdicts import DEFAULT_METRICS, _kind

    ok = ["goodput.attainment", "throughput.total_tokens_per_s", "metrics.e2e_ms.mean",
          "metrics.ttft_ms.max", "metrics.tpot_ms.p95", *DEFAULT_METRICS]
    for path in ok:
        build_spec({"rate": 1, "gate": [path]})
        _kind(path)  # raises if the verdict engine could not compute it
    build_spec({"rate": 1, "tolerances": {"frontier_throughput": 0.1, "capacity.requests_per_s": 0.2}})


def test_specs_round_trip_through_json():
    s = build_spec({"scenario": "server", "rate": 4, "arrival": "gamma", "burstiness": 0.5,
                    "slo": "mlperf/llama3.1-8b/server", "gate": ["goodput.requests_per_s"]})
    again = type(s).model_validate_json(s.model_dump_json())
    assert again == s and again.identity_hash() == s.identity_hash()


def test_fractional_and_out_of_range_percentile_paths_are_refused():
    for path in ("metrics.tpot_ms.p99.9", "metrics.tpot_ms.p0", "metrics.tpot_ms.p101"):
        with pytest.raises(SpecError, match="unknown metric"):
            build_spec({"rate": 1, "gate": [path]})

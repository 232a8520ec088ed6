"""Scenario spec validation: errors name the argument and what is allowed."""

from __future__ import annotations

import pytest

from pytest_goodput.spec import DEFAULT_REQUESTS, SLO_PRESETS, SpecError, build_spec


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
    assert len(SLO_PRESETS) == 10


@pytest.mark.parametrize(
    "args,needle",
    [
        ({"scenario": "servre", "rate": 1}, "scenario: Input should be 'offline', 'server'"),
        ({"rate": -1}, "rate: Input should be greater than 0 (got -1)"),
        ({"scenario": "server"}, "needs rate="),
        ({"scenario": "concurrency"}, "needs concurrency="),
        ({"scenario": "sweep"}, "needs sweep="),
        ({"scenario": "interactive", "rate": 1}, "needs SLOs"),
        ({"scenario": "capacity", "rate": 1}, "needs per-request SLOs"),
        ({"rate": 1, "slo": "mlperf/nope"}, "unknown SLO preset 'mlperf/nope'; allowed:"),
        ({"rate": 1, "ttft_p100_ms": 5}, "percentile must be in (0, 100)"),
        ({"rate": 1, "ttft_p99_ms": -5}, "must be a positive number"),
        ({"rate": 1, "bogus": 1}, "bogus: Extra inputs are not permitted"),
        ({"rate": 1, "workload": "jsonl"}, "needs dataset="),
        ({"rate": 1, "arrival": "bursty"}, "arrival: Input should be 'poisson', 'gamma' or 'constant'"),
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

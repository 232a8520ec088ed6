"""Percentile SLOs proven over a test's pooled repeats, through the one judge (strict mode too).

MLPerf early stopping needs 459 samples with none over the limit to prove a P99: two repeats
of 240 prove it together, two of 200 (400 samples) do not, and strict mode says how many
requests per run would.
"""

from __future__ import annotations

import pytest

from pytest_goodput.judge import Policy, from_results, judge
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord
from pytest_goodput.schema.scenario.spec import build_spec


def _result(n: int, over: int, spec):
    """n closed-loop requests, TTFT 10 ms, the last ``over`` of them 900 ms (over a 500 ms SLO)."""
    records = [RequestRecord(index=i, ok=True, scheduled_at=i * 0.1, sent_at=i * 0.1,
                             end_at=i * 0.1 + 0.2, ttft_ms=900.0 if i >= n - over else 10.0,
                             tpot_ms=5.0, e2e_ms=200.0, output_tokens=16, prompt_tokens=8,
                             send_lag_ms=0.1, token_count_source="usage") for i in range(n)]
    return summarize(records, spec, ClientHealth(valid=True, cpu_utilization=0.1))


@pytest.mark.parametrize("n, over, proven, note", [
    (240, 0, True, "480 samples, 0 over the limit"),
    (200, 0, False, "400 samples over 2 runs, 0 over the limit; a proof needs 459 (230 requests per run)"),
    # one sample over 500 ms in each run: 2 over in 800 (scipy: P(X ≤ 2 | 800, 0.01) = 0.0134 >
    # 0.01; 838 is the first n with P(X ≤ 2 | n, 0.01) ≤ 0.01: 0.00995)
    (400, 1, False, "800 samples over 2 runs, 2 over the limit; a proof needs 838 (419 requests per run)"),
])
def test_the_pooled_proof_counts_every_repeat(n, over, proven, note):
    spec = build_spec({"scenario": "concurrency", "concurrency": 4, "requests": n, "repeats": 2,
                       "ttft_p99_ms": 500})
    runs = [_result(n, over, spec), _result(n, over, spec)]
    for strict in (False, True):
        out = judge("t.py::test_p99", from_results(runs), None, Policy(compare=False, strict=strict))
        slo = next(o for o in out.slos if o.name == "ttft_p99_ms")
        assert slo.proven is proven and note in slo.note
        assert slo.ok is (proven or not strict)

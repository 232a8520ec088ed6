"""Four MLPerf-style scenarios on one engine, each gated by SLOs and its stored baseline.

Sized so the whole suite takes about a minute on the embedded simulator (whose default
preset saturates near 16 req/s at ISL 128 / OSL 64).
"""

import pytest


@pytest.mark.goodput(scenario="offline", requests=160, warmup_requests=16, concurrency=32,
                     isl=128, osl=64)
def test_offline_throughput():
    """Batch job: every request at once, at most 32 in flight; gated on output tokens/s."""


@pytest.mark.goodput(
    scenario="server", rate=12.0, requests=240, warmup_requests=20, isl=128, osl=64,
    ttft_ms=250, tpot_ms=25, attainment=0.95,
)
def test_server_goodput(goodput):
    """Poisson arrivals at 12 req/s; gated on goodput and P99 TTFT / TPOT."""
    result = goodput.run()
    assert result.failures == {}
    assert result.token_count_source == "usage"


@pytest.mark.goodput(
    scenario="interactive", rate=8.0, requests=200, warmup_requests=20, isl=128, osl=64,
    slo="mlperf/llama2-70b/interactive",
)
def test_interactive_slo():
    """MLPerf llama2-70b interactive SLOs: P99 TTFT <= 450 ms, P99 TPOT <= 40 ms."""


@pytest.mark.goodput(scenario="concurrency", concurrency=8, requests=160, warmup_requests=8,
                     isl=128, osl=64)
def test_concurrency_per_user():
    """Eight closed-loop users; gated on output tokens/s, P50 TPOT and P99 TTFT."""

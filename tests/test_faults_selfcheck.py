"""The self-check against broken engines: an engine failure is not a client failure."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from faultserver import serve_in_thread  # noqa: E402

from pytest_goodput.load.client.event_loop import run  # noqa: E402
from pytest_goodput.load.coordinator import drive  # noqa: E402
from pytest_goodput.load.scenario import run_scenario  # noqa: E402
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan  # noqa: E402
from pytest_goodput.measure.metrics import summarize  # noqa: E402
from pytest_goodput.measure.records.record import to_record  # noqa: E402
from pytest_goodput.schema.scenario.spec import ScenarioSpec  # noqa: E402


def test_dead_engine_in_closed_loop_is_an_engine_failure_not_a_busy_client():
    """Every request answered with HTTP 500 at once: the closed loop spins. The run is valid
    (the client is not to blame) and says the engine failed every request."""
    spec = ScenarioSpec(scenario="concurrency", concurrency=4, duration_s=1.5, max_error_rate=1.0)
    with serve_in_thread(status=500) as srv:
        result = run_scenario(spec, srv.url, "fault-model")
    assert result.completed == 0 and result.failures == {"http_status": result.issued}
    assert result.client.valid, result.client.reasons
    assert result.client.failed == result.client.requests > 0
    assert any(f"the engine failed {result.client.failed} of {result.client.requests} requests" in n
               for n in result.client.notes)


def test_retries_are_counted_in_the_run_and_are_not_failures():
    class Flaky:
        async def send(self, p: RequestPlan) -> RawExchange:
            now = time.perf_counter()
            ex = RawExchange(p, now, now + 0.001, 200, [(now + 0.001, b'data: {"choices":[{"text":"a"}]}\n\ndata: [DONE]\n\n')])
            ex.retries = 1 if p.index % 2 else 0
            return ex

    spec = ScenarioSpec(scenario="concurrency", concurrency=2, requests=10)
    out = run(drive(spec, Flaky()))
    health = out.check.health()
    assert health.retries == 5 and health.failed == 0 and health.requests == 10
    recs = [to_record(ex, stream=True, api="completions") for ex in out.exchanges]
    result = summarize(recs, spec, health)
    assert result.client.retries == 5 and result.failures == {}
    assert sum(r.retries for r in result.requests) == 5
    assert any("resent on a fresh connection" in n for n in result.client.notes)

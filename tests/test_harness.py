"""The ``goodput`` fixture's object: one gated run, re-measured once if the client stalled."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_goodput.measure.metrics import summarize
from pytest_goodput.plugin import harness as harness_mod
from pytest_goodput.plugin.harness import GoodputHarness
from pytest_goodput.engines.engine import Engine
from pytest_goodput.plugin.session import GoodputSession
from pytest_goodput.plugin.settings import resolve
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord
from pytest_goodput.schema.scenario.spec import build_spec


def measurement(valid: bool) -> Session:
    spec = build_spec({"scenario": "offline", "requests": 1})
    rec = RequestRecord(index=0, ok=True, scheduled_at=0.0, sent_at=0.0, end_at=0.1, ttft_ms=5.0,
                        e2e_ms=100.0, output_tokens=1, token_count_source="usage")
    health = ClientHealth(valid=valid, reasons=[] if valid else ["send lag P99 40 ms > 10 ms"],
                          cpu_utilization=0.1)
    return Session(spec=spec, results=[summarize([rec], spec, health)])


def harness() -> GoodputHarness:
    session = GoodputSession(resolve({}, {}, {}), Path("."))
    return GoodputHarness(session, "t.py::t", {"scenario": "offline", "requests": 1},
                          lambda: Engine(kind="attach", base_url="http://127.0.0.1:9/v1"), progress_stream=None)


@pytest.mark.parametrize("sequence,expected_valid,expected_calls", [
    ([True], True, 1),
    ([False, True], True, 2),
    ([False, False], False, 2),
])
def test_an_invalid_run_is_measured_once_more(monkeypatch, sequence, expected_valid, expected_calls):
    calls: list = []

    def fake_measure(spec, engine, progress=None, stage=None):
        calls.append(spec)
        return measurement(sequence[len(calls) - 1])

    monkeypatch.setattr(harness_mod, "measure", fake_measure)
    h = harness()
    result = h.run()
    assert result.client.valid is expected_valid and len(calls) == expected_calls
    assert bool(h.remeasured_because) is (expected_calls == 2)
    if expected_calls == 2:
        assert h.remeasured_because == ["send lag P99 40 ms > 10 ms"]

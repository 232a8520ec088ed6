"""A sweep point or capacity probe whose client fell behind is measured once more.

A hiccup on a shared machine must not stop a capacity search or leave a sweep point that
says nothing about the engine; a second invalid run is kept, so the test is invalid with
its reasons. Driven through ``runner.measure`` with the single-run function replaced.
"""

from __future__ import annotations

from typing import Callable

import pytest

from pytest_goodput.run import runner
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec, build_spec
from test_capacity import cap_spec, fake_result, step_curve


def scripted(monkeypatch: pytest.MonkeyPatch, invalid: Callable[[ScenarioSpec, int], bool]) -> list[ScenarioSpec]:
    """Replace ``run_once``: attainment from a step at 7.3 req/s, invalid where ``invalid``
    says (given the spec and how often this load was run before)."""
    seen: list[ScenarioSpec] = []

    def run_once(spec: ScenarioSpec, engine: object, progress: object) -> RunResult:
        key = spec.rate if spec.scenario == "server" else spec.concurrency
        before = sum(1 for s in seen if (s.rate if s.scenario == "server" else s.concurrency) == key)
        seen.append(spec)
        rate = spec.rate if spec.rate is not None else float(spec.concurrency or 1)
        return fake_result(spec, step_curve(7.3)(rate), valid=not invalid(spec, before))

    monkeypatch.setattr(runner, "run_once", run_once)
    return seen


def test_a_probe_invalid_once_is_measured_again_and_the_search_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = scripted(monkeypatch, lambda s, before: s.rate == 8.0 and before == 0)
    m = runner.measure(cap_spec(), None)  # type: ignore[arg-type]
    cap = m.capacity
    assert cap is not None and cap.complete is True and cap.stopped in (None, "")
    assert [s.rate for s in seen][:5] == [1, 2, 4, 8, 8]  # 8 again, then bisection below it
    assert 7.0 <= cap.requests_per_s <= 7.3 and cap.upper is not None
    assert m.notes == ["probe at 8 req/s re-measured once: the client set the pace of the first run "
                       "(send lag P99 120 ms)"]
    assert all(r.client.valid for r in m.results)  # the invalid first try is not kept


def test_a_probe_invalid_twice_stops_the_search_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = scripted(monkeypatch, lambda s, before: s.rate == 8.0)
    m = runner.measure(cap_spec(), None)  # type: ignore[arg-type]
    cap = m.capacity
    assert cap is not None and cap.complete is False
    assert [s.rate for s in seen] == [1, 2, 4, 8, 8]
    assert "8 req/s is invalid" in cap.stopped and len(m.notes) == 1


def test_a_sweep_point_invalid_once_is_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = build_spec(dict(scenario="sweep", sweep=[1, 4], requests=40, isl=16, osl=8))
    seen = scripted(monkeypatch, lambda s, before: s.concurrency == 4 and before == 0)
    m = runner.measure(spec, None)  # type: ignore[arg-type]
    assert [s.concurrency for s in seen] == [1, 4, 4]
    assert len(m.results) == 2 and all(r.client.valid for r in m.results)
    assert m.notes == ["concurrency 4 re-measured once: the client set the pace of the first run "
                       "(send lag P99 120 ms)"]


def test_a_valid_sweep_is_measured_once_per_point(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = build_spec(dict(scenario="sweep", sweep=[1, 4], requests=40, isl=16, osl=8))
    seen = scripted(monkeypatch, lambda s, before: False)
    m = runner.measure(spec, None)  # type: ignore[arg-type]
    assert [s.concurrency for s in seen] == [1, 4] and m.notes == []

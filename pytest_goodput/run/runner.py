"""Run a scenario spec against an engine: repeats, sweeps and capacity searches.

Orchestration only: the load generator measures, the pure modules judge.
"""

from __future__ import annotations

from typing import Optional

from pytest_goodput.engines.engine import Engine
from pytest_goodput.engines.prometheus import scrape, server_metrics
from pytest_goodput.load.drive import ProgressFn
from pytest_goodput.load.scenario import run_scenario
from pytest_goodput.measure.frontier import pareto_frontier, point_from_result
from pytest_goodput.run.capacity import search
from pytest_goodput.schema.measurement import Measurement
from pytest_goodput.schema.results import RunResult
from pytest_goodput.schema.spec import ScenarioSpec


def run_once(
    spec: ScenarioSpec, engine: Engine, progress: Optional[ProgressFn] = None
) -> RunResult:
    """One run of a single-load spec; the engine's ``/metrics`` are read before and after it."""
    metrics_url = engine.base_url.removesuffix("/v1") + "/metrics"
    before = scrape(metrics_url)
    result = run_scenario(
        spec,
        engine.base_url,
        engine.resolve_model(),
        api_key_env=engine.api_key_env,
        progress=progress,
    )
    server = server_metrics(before, scrape(metrics_url))
    return result.model_copy(update={"server_metrics": server}) if server else result


def point_spec(spec: ScenarioSpec, value: float) -> ScenarioSpec:
    """The single-load spec of one sweep point."""
    if spec.sweep_over == "rate":
        return spec.model_copy(update={"scenario": "server", "rate": float(value), "sweep": None})
    return spec.model_copy(
        update={"scenario": "concurrency", "concurrency": int(value), "sweep": None}
    )


def measure(
    spec: ScenarioSpec, engine: Engine, progress: Optional[ProgressFn] = None
) -> Measurement:
    """Run ``spec`` as its scenario asks and return every run it made."""
    if spec.scenario == "sweep":
        return sweep(spec, engine, progress)
    if spec.scenario == "capacity":
        return search(spec, engine, run_once, progress)
    # Repeats share the seed: same prompts and schedule, so their spread is run-to-run noise.
    runs = [run_once(spec, engine, progress) for _ in range(spec.repeats)]
    return Measurement(spec=spec, runs=runs)


def sweep(spec: ScenarioSpec, engine: Engine, progress: Optional[ProgressFn] = None) -> Measurement:
    assert spec.sweep is not None
    runs = [run_once(point_spec(spec, v), engine, progress) for v in spec.sweep]
    points = [point_from_result(r, spec.frontier_percentile, spec.gpus) for r in runs]
    front = pareto_frontier(points)
    return Measurement(
        spec=spec,
        runs=runs,
        kind="sweep",
        frontier={
            "points": [p.model_dump(mode="json") for p in points],
            "current": [p.model_dump(mode="json") for p in front],
        },
    )

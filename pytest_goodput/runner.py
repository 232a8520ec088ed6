"""Run a scenario spec against an engine: repeats, sweeps and capacity searches.

Orchestration only: the load generator measures, the pure modules judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .engine import Engine
from .results import RunResult
from .spec import ScenarioSpec

ProgressFn = Callable[[int, int], None]


@dataclass
class Measurement:
    """What one gated scenario produced: its runs (repeats, sweep points or probes)."""

    spec: ScenarioSpec
    runs: list[RunResult]
    kind: str = "runs"  # runs | sweep | capacity
    frontier: Optional[dict] = None
    capacity: Optional[dict] = None
    extra: dict = field(default_factory=dict)

    @property
    def result(self) -> RunResult:
        """The headline run: the last repeat, or the highest-load sweep point."""
        return self.runs[-1]


def measurement_metrics(m: Measurement) -> dict[str, Optional[float]]:
    """Headline numbers: a run's key metrics, a sweep's best throughput, a capacity."""
    from .gate import key_metrics

    if m.kind == "capacity" and m.capacity is not None:
        return {"capacity.requests_per_s": m.capacity.get("requests_per_s")}
    if m.kind == "sweep" and m.frontier is not None:
        front = m.frontier.get("current") or []
        best = max((p.get("throughput") or 0.0 for p in front), default=None)
        return {"frontier.max_output_tokens_per_s": best, "frontier.points": float(len(front))}
    return key_metrics(m.result)


def run_once(
    spec: ScenarioSpec, engine: Engine, progress: Optional[ProgressFn] = None
) -> RunResult:
    from .loadgen import run_scenario

    return run_scenario(
        spec,
        engine.base_url,
        engine.resolve_model(),
        api_key_env=engine.api_key_env,
        progress=progress,
        server_metrics_url=engine.base_url.removesuffix("/v1") + "/metrics",
    )


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
        from .capacity import search

        return search(spec, engine, run_once, progress)
    # Repeats share the seed: same prompts and schedule, so their spread is run-to-run noise.
    runs = [run_once(spec, engine, progress) for _ in range(spec.repeats)]
    return Measurement(spec=spec, runs=runs)


def sweep(spec: ScenarioSpec, engine: Engine, progress: Optional[ProgressFn] = None) -> Measurement:
    from .frontier import pareto_frontier, point_from_result

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

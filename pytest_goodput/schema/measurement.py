"""What one gated scenario produced: its runs (repeats, sweep points or capacity probes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from pytest_goodput.judge.judge import key_metrics
from pytest_goodput.schema.results import RunResult
from pytest_goodput.schema.spec import ScenarioSpec


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

    if m.kind == "capacity" and m.capacity is not None:
        return {"capacity.requests_per_s": m.capacity.get("requests_per_s")}
    if m.kind == "sweep" and m.frontier is not None:
        front = m.frontier.get("current") or []
        best = max((p.get("throughput") or 0.0 for p in front), default=None)
        return {"frontier.max_output_tokens_per_s": best, "frontier.points": float(len(front))}
    return key_metrics(m.result)

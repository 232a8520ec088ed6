"""What an outcome holds of a sweep or a capacity search: typed, as the JSON reports read (pure).

A sweep's outcome keeps every current point, both frontiers, where saturation began and the
comparison (the step lookup and each load's verdict); a capacity search's keeps both sides'
searches. Keys a producer left out (an A/B sweep has no step lookup, a sweep no saturation
reading) stay out of the JSON: ``Sparse`` writes the fields that were set.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
    model_validator,
)

from pytest_goodput.schema.outcomes.comparison import MetricComparison, Verdict
from pytest_goodput.schema.outcomes.frontier import FrontierPoint, FrontierPointComparison
from pytest_goodput.schema.runs.session import Capacity, Saturation


class Sparse(BaseModel):
    """A model written with the fields that were set, in order (as the dicts it replaced)."""

    model_config = ConfigDict(extra="forbid")

    @model_serializer(mode="wrap")
    def _set_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}


class LoadComparison(Sparse):
    """One sweep point at equal load: throughput, the frontier's TPOT and the gated latencies
    (TTFT and TPOT percentiles) against the baseline's same load; the worst decides."""

    load: float
    verdict: Verdict
    throughput: MetricComparison
    tpot: Optional[MetricComparison] = None
    latency: list[MetricComparison] = Field(default_factory=list, description=(
        "the sweep's per-point gate (gate=, else TTFT P50 and TPOT P50) at this load, "
        "besides the frontier's TPOT"))
    worst: MetricComparison


class SweepComparison(Sparse):
    """A sweep against its baseline: the frontiers' step lookup (gate only) and each load's verdict."""

    tolerance: Optional[float] = None
    points: list[FrontierPointComparison] = Field(default_factory=list)
    worst: Optional[FrontierPointComparison] = None
    verdict: Optional[Verdict] = None
    baseline_frontier: list[FrontierPoint] = Field(default_factory=list)
    current_frontier: list[FrontierPoint] = Field(default_factory=list)
    by_load: list[LoadComparison] = Field(default_factory=list)


class SweepOutcome(Sparse):
    """A sweep test's shape in its outcome."""

    points: list[FrontierPoint] = Field(default_factory=list, description="every current point")
    current: list[FrontierPoint] = Field(default_factory=list, description="the current Pareto frontier")
    saturation: Optional[Saturation] = None
    baseline: Optional[list[FrontierPoint]] = Field(None, description="the baseline's frontier")
    comparison: Optional[SweepComparison] = None

    @model_validator(mode="before")
    @classmethod
    def _current_frontier(cls, data: Any) -> Any:
        """Sessions written before the schema named the current frontier ``frontier``."""
        if isinstance(data, dict) and "frontier" in data and "current" not in data:
            data = {("current" if k == "frontier" else k): v for k, v in data.items()}
        return data

    @field_serializer("saturation")
    def _saturation(self, sat: Optional[Saturation]) -> Optional[dict[str, Any]]:
        return sat.as_dict() if sat is not None else None


class CapacityOutcome(BaseModel):
    """Both sides' capacity searches (None where unknown)."""

    model_config = ConfigDict(extra="forbid")

    current: Optional[Capacity] = None
    baseline: Optional[Capacity] = None

    @field_serializer("current", "baseline")
    def _search(self, search: Optional[Capacity]) -> Optional[dict[str, Any]]:
        return search.as_dict() if search is not None else None

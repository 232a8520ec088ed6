"""What the gate decided: verdict states and per-metric comparisons (pure schema).

Shared by the verdict engine (which fills them), the baseline store, the reports and the
pytest layer (which read them).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from pytest_goodput.schema.outcomes.ab_summary import ABSummary
# The comparison and verdict names are read from here by most layers (re-exported).
from pytest_goodput.schema.outcomes.comparison import (  # noqa: F401
    VERDICT_SYMBOL,
    VERDICTS,
    Direction,
    MetricComparison,
    Verdict,
)
from pytest_goodput.schema.outcomes.cost import TestCost
from pytest_goodput.schema.runs.history import Trend
from pytest_goodput.schema.runs.slices import Slices
from pytest_goodput.schema.outcomes.shapes import CapacityOutcome, SweepOutcome
from pytest_goodput.schema.outcomes.workload_check import WorkloadCheck


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SLOOutcome(_Model):
    """An SLO check of the current run alone (no baseline needed)."""

    name: str
    limit: float
    value: Optional[float]
    ok: bool
    proven: Optional[bool] = None
    note: str = ""
    #: The percentile falls on a failed request: its value is +∞ (``value`` is then None).
    infinite: bool = False


class TestOutcome(_Model):
    """Everything the gate concluded about one test."""

    nodeid: str
    location: Optional[tuple[str, int]] = None
    scenario: str
    comparisons: list[MetricComparison] = Field(default_factory=list)
    slos: list[SLOOutcome] = Field(default_factory=list)
    baseline_status: Literal["compared", "new", "incomparable", "updated", "off"] = "off"
    incomparable_reasons: list[str] = Field(default_factory=list)
    what_changed: dict[str, tuple[Optional[str], Optional[str]]] = Field(default_factory=dict)
    client_valid: bool = True
    client_reasons: list[str] = Field(default_factory=list)
    spec: dict = Field(default_factory=dict, description="the scenario spec as run (JSON form)")
    key_metrics: dict[str, Optional[float]] = Field(
        default_factory=dict, description="headline numbers of the current run, by metric path"
    )
    current_env: dict[str, str] = Field(default_factory=dict)
    baseline_env: Optional[dict[str, str]] = None
    frontier: Optional[SweepOutcome] = Field(
        None, description="sweeps: every point, the frontiers, saturation and the comparison")
    baseline_spec: Optional[dict] = Field(
        None, description="the scenario spec the baseline was recorded with (JSON form), when known")
    server: Optional[dict[str, Optional[dict[str, float]]]] = Field(
        None, description="the engine's own /metrics over the runs: {'current': {...}, 'baseline': {...}}")
    capacity: Optional[CapacityOutcome] = Field(
        None, description="capacity searches, current and baseline, with every probe")
    error: Optional[str] = Field(None, description="the run could not be made (engine down, ...)")
    interrupted: Optional[str] = Field(
        None, description="the test's run stopped before its end (Ctrl-C): why and how far it got; its "
        "partial runs are reported, never judged nor stored as a baseline")
    notes: list[str] = Field(default_factory=list,
                             description="what the gate did on the way: re-measurements, sessions recorded")
    trends: list[Trend] = Field(default_factory=list,
                                description="main-branch history of metrics that regressed or crept")
    baseline_key_metrics: Optional[dict[str, Optional[float]]] = Field(
        None, description="headline numbers of the baseline's newest session, when compared")
    workload: Optional[WorkloadCheck] = Field(
        None, description="did baseline and current run the same workload (prompts, output lengths)")
    ab: Optional[ABSummary] = Field(
        None, description="A/B mode: the base engine (the 'baseline' side) and the rounds behind the verdicts")
    slices: Optional[Slices] = Field(
        None, description="time slices (slice_s=) of the current side's last run: metrics per window, "
        "where the steady state began, the degradation within the run")
    cost: Optional[TestCost] = Field(
        None, description="engine launches and seconds of load this test's measurements took")

    @property
    def status(self) -> str:
        """One word for the test: error, invalid, slo-failed, regressed, workload-changed,
        inconclusive, underpowered, new, incomparable, passed."""
        if self.error:
            return "error"
        if not self.client_valid:
            return "invalid"
        if self.slo_failed:
            return "slo-failed"
        if self.regressed:
            return "regressed"
        if self.workload_changes:  # explains the verdicts below it: named first
            return "workload-changed"
        if self.inconclusive:
            return "inconclusive"
        if self.underpowered:
            return "underpowered"
        if self.baseline_status == "new":
            return "new"
        if self.baseline_status == "incomparable":
            return "incomparable"
        return "passed"

    @property
    def regressed(self) -> list[MetricComparison]:
        return [c for c in self.comparisons if c.verdict == "regressed"]

    @property
    def inconclusive(self) -> list[MetricComparison]:
        return [c for c in self.comparisons if c.verdict == "inconclusive"]

    @property
    def underpowered(self) -> list[MetricComparison]:
        return [c for c in self.comparisons if c.verdict == "underpowered"]

    @property
    def workload_changes(self) -> list[str]:
        """Output-length changes since the baseline, named (the workload, not the speed, moved)."""
        return list(self.workload.changes) if self.workload is not None else []

    @property
    def slo_failed(self) -> list[SLOOutcome]:
        return [s for s in self.slos if not s.ok]

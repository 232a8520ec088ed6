"""One recorded launch of a test: when, where, its samples, summary and shapes (one schema).

A fresh measurement, a stored baseline's session and a result read back from a file are the
same :class:`Session`; the judge reads a list of them (``schema/runs/side.py``). Its typed
shapes are the sweep (points, frontier, where saturation began) and the capacity search.
The runner returns one (``run/runner.py``) with its spec, runs and notes; what is derived
from the runs (samples, summary, degradation) is filled in when it is judged
(``judge/evidence.py``). Nothing a fresh session carries beyond the stored fields is written
to a baseline file.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.outcomes.frontier import FrontierPoint, LoadKind
from pytest_goodput.schema.runs.results import RunResult, Samples
from pytest_goodput.schema.scenario.spec import ScenarioSpec


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SaturatedPoint(_Model):
    """One measured sweep point: past the server's knee or not, and why."""

    load: float
    past: bool
    reason: Optional[str] = None


class Saturation(_Model):
    """Where a sweep's saturation began (``measure/saturation.py``)."""

    load_kind: LoadKind
    measured: list[float] = Field(description="the loads measured, in sweep order")
    began_at: Optional[float] = Field(None, description="the first load past the knee; None: none was")
    step: int = Field(description="its index in the sweep; len(sweep) when none was past it")
    reason: Optional[str] = None
    points: list[SaturatedPoint] = Field(default_factory=list)
    skipped: list[float] = Field(default_factory=list, description="loads not measured after it")
    saved_s: Optional[float] = Field(None, description="seconds of load the skipped loads would have taken")

    def as_dict(self) -> dict[str, Any]:
        """The JSON form reports and outcomes carry (``saved_s`` only when loads were skipped)."""
        return self.model_dump(mode="json", exclude={"saved_s"} if self.saved_s is None else set())


class Sweep(_Model):
    """A sweep session's shape: every point, its Pareto frontier, where saturation began."""

    points: Optional[list[FrontierPoint]] = Field(
        None, description="every measured point; None where only the frontier was kept (baselines)")
    frontier: list[FrontierPoint] = Field(default_factory=list)
    saturation: Optional[Saturation] = None


class CapacityProbe(_Model):
    """One probe of a capacity search: its rate, attainment and goodput."""

    rate: float
    attainment: float
    passed: bool
    invalid: bool = Field(False, description="the client set the pace: the probe does not count")
    goodput_rps: Optional[float] = None
    good: Optional[int] = None
    issued: Optional[int] = None


class Capacity(_Model):
    """A capacity search's result: the highest passing rate, its bracket and every probe."""

    requests_per_s: float
    lower: float
    upper: Optional[float] = None
    target: float = Field(description="the attainment a probe had to reach")
    probes: list[CapacityProbe] = Field(default_factory=list)
    complete: bool = True
    stopped: Optional[str] = Field(None, description="why the search ended early")

    def as_dict(self) -> dict[str, Any]:
        """The JSON form reports and outcomes carry: keys left out where they say nothing."""
        out = self.model_dump(mode="json", exclude={"probes", "complete", "stopped"})
        out["probes"] = [p.model_dump(mode="json", exclude_none=True, exclude=set() if p.invalid else {"invalid"})
                         for p in self.probes]
        out["complete"] = self.complete
        if self.stopped is not None:
            out["stopped"] = self.stopped
        return out


Degradation = dict[str, tuple[float, Optional[float]]]


class ResultSource(_Model):
    """Where an imported session came from: another tool's result file (``interop/readers``).

    ``per_request`` False: the file held summaries only, so no spread within the run is known
    and the judge compares the summaries (``judge/scalar/summary_only.py``)."""

    tool: str = Field(description="the format: vllm-bench, aiperf or guidellm")
    version: Optional[str] = Field(None, description="the tool's or the file schema's version, when it says")
    per_request: bool = Field(description="the file had per-request values (else summaries only)")
    definitions: dict[str, str] = Field(
        default_factory=dict, description="metric -> the definition the file's values follow")


#: What a session measured: repeats of one load, a sweep's points or a capacity search's probes.
SessionKind = Literal["runs", "sweep", "capacity"]


class Session(_Model):
    """One engine launch's measurement of one test, fresh or stored.

    ``samples`` holds one entry per repeat, sweep point or capacity probe; ``results`` the
    full run results of a fresh session. ``spec``, ``results``, ``notes``, ``provenance``
    and ``degradation`` are never stored: a baseline file keeps its spec once, beside its
    sessions, and each session's provenance inside its ``environment``.
    """

    recorded_at: Optional[str] = Field(None, description="ISO 8601; None when unknown")
    environment: Optional[Fingerprint] = Field(None, description="None when unknown")
    summary: dict[str, Optional[float]] = Field(
        default_factory=dict, description="the headline numbers reports show, by metric path")
    samples: list[Samples] = Field(default_factory=list)
    sweep: Optional[Sweep] = None
    capacity: Optional[Capacity] = None
    #: Derived, never stored: the degradation within the run is in ``summary`` too.
    degradation: Degradation = Field(
        default_factory=dict, exclude=True,
        description="metric path -> (degradation within the run, its SD)")
    results: list[RunResult] = Field(default_factory=list, exclude=True)
    source: Optional[ResultSource] = Field(None, description="set when imported from another tool's file")
    #: Fresh sessions only (never stored): the spec that was run, what the run did on the way
    #: (re-measured points, a stopped sweep), and what keeping it valid took
    #: (``environment.SESSION_FACTS``: re-measured, a replaced launch), which recording
    #: stores in the session's ``environment.provenance``.
    spec: Optional[ScenarioSpec] = Field(None, exclude=True)
    notes: list[str] = Field(default_factory=list, exclude=True)
    provenance: dict[str, str] = Field(default_factory=dict, exclude=True)

    @model_serializer(mode="wrap")
    def _without_source(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Stored sessions of our own runs stay as they were: ``source`` only when imported."""
        out: dict[str, Any] = handler(self)
        if out.get("source", 1) is None:
            del out["source"]
        return out

    @property
    def kind(self) -> SessionKind:
        """A capacity search, a sweep, or repeats of one load."""
        return "capacity" if self.capacity is not None else "sweep" if self.sweep is not None else "runs"

    @property
    def result(self) -> RunResult:
        """The headline run: the last repeat, the highest-load sweep point measured, the last probe."""
        return self.results[-1]

    @property
    def runs(self) -> list[RunResult]:
        """Deprecated: ``results`` (the name ``Measurement.runs`` had; it warns and will go)."""
        warnings.warn("Session.runs (formerly Measurement.runs) is deprecated: use Session.results",
                      DeprecationWarning, stacklevel=2)
        return self.results

    @property
    def summary_only(self) -> bool:
        """Imported from summaries alone: no per-request values, no spread within the run."""
        return self.source is not None and not self.source.per_request

    @property
    def client_cpu(self) -> Optional[str]:
        return self.environment.provenance.get("client_cpu") if self.environment is not None else None

    @property
    def saturation_step(self) -> Optional[float]:
        """Where this session's sweep saturated (``len(sweep)``: nowhere); None when unknown."""
        if self.sweep is not None and self.sweep.saturation is not None:
            return float(self.sweep.saturation.step)
        return self.summary.get("sweep.saturation_step")

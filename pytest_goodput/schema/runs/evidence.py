"""One side of a comparison as the judge reads it: a test's runs, however they were stored.

The plugin builds it from a fresh measurement, the ``compare`` CLI from files, either side
from a baseline; the judge sees only this, so the gate and the CLI cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.results import RunResult, Samples
from pytest_goodput.schema.scenario.spec import ScenarioSpec


@dataclass
class Evidence:
    """A test's runs: per-request samples grouped by session (oldest first) and what else is known.

    ``history[k]`` holds the samples of the k-th recorded session: one entry per repeat,
    sweep point or capacity probe. A fresh measurement is one session.
    """

    spec: ScenarioSpec
    spec_hash: str
    history: list[list[Samples]]
    env: Optional[Fingerprint] = None  # of the newest session; None when unknown
    summary: dict[str, Optional[float]] = field(default_factory=dict)
    results: list[RunResult] = field(default_factory=list)  # full results of the newest session, if kept
    frontier: Optional[list[dict[str, Any]]] = None  # the newest session's frontier (sweeps)
    points: Optional[list[dict[str, Any]]] = None  # every sweep point of the newest session
    capacity: Optional[dict[str, Any]] = None  # the newest session's capacity search
    #: Each session's sweep step where saturation began (``len(sweep)``: none), oldest first;
    #: None for a session recorded before sweeps kept it.
    saturation_steps: list[Optional[float]] = field(default_factory=list)
    saturation: Optional[dict[str, Any]] = None  # the newest session's saturation record (sweeps)
    capacities: list[dict[str, Any]] = field(default_factory=list)  # every session's, oldest first
    #: Each session's degradation within the run (time slices): metric path → (value, its
    #: within-run SD or None), oldest first; empty dicts for sessions without slices.
    degradation: list[dict[str, tuple[float, Optional[float]]]] = field(default_factory=list)
    #: When each session was recorded (ISO 8601) and on which client CPU; None when unknown
    #: (the judge then takes the run for a sitting of its own, judge/noise/sittings.py).
    recorded_at: list[Optional[str]] = field(default_factory=list)
    client_cpus: list[Optional[str]] = field(default_factory=list)

    @property
    def samples(self) -> list[Samples]:
        """Every run of every session, oldest first."""
        return [s for session in self.history for s in session]

    @property
    def latest(self) -> list[Samples]:
        """The runs of the newest session."""
        return self.history[-1] if self.history else []

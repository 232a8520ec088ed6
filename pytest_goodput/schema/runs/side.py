"""One side of a comparison as the judge reads it: a test's spec and its sessions, oldest first.

The plugin builds it from the runner's fresh session, the ``compare`` CLI from files, either side
from a baseline; the judge sees only this, so the gate and the CLI cannot disagree. What the
judge reads per session (when, where, samples, degradation, saturation, capacity) is read off
the sessions, never kept beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.outcomes.frontier import FrontierPoint
from pytest_goodput.schema.runs.results import RunResult, Samples
from pytest_goodput.schema.runs.session import Capacity, Degradation, Saturation, Session
from pytest_goodput.schema.scenario.spec import ScenarioSpec


@dataclass
class Side:
    """A test's sessions (a gate measures one or one per launch; a baseline keeps several)."""

    spec: ScenarioSpec
    spec_hash: str
    sessions: list[Session] = field(default_factory=list)
    #: Full run results the SLOs and client validity are judged on; by default every
    #: session's (a gate measuring several launches judges them all).
    slo_results: Optional[list[RunResult]] = None

    @classmethod
    def of_samples(cls, spec: ScenarioSpec, history: list[list[Samples]]) -> "Side":
        """A side known by its samples alone, one list per session (tests, benches)."""
        return cls(spec, spec.identity_hash(), [Session(samples=list(h)) for h in history])

    @property
    def newest(self) -> Optional[Session]:
        return self.sessions[-1] if self.sessions else None

    @property
    def history(self) -> list[list[Samples]]:
        """Each session's samples: one entry per repeat, sweep point or capacity probe."""
        return [list(s.samples) for s in self.sessions]

    @property
    def samples(self) -> list[Samples]:
        """Every run of every session, oldest first."""
        return [x for s in self.sessions for x in s.samples]

    @property
    def latest(self) -> list[Samples]:
        """The runs of the newest session."""
        return list(self.newest.samples) if self.newest is not None else []

    @property
    def results(self) -> list[RunResult]:
        if self.slo_results is not None:
            return self.slo_results
        return [r for s in self.sessions for r in s.results]

    @property
    def summary_only(self) -> bool:
        """Some session is known by its summaries alone (an imported summary-only file)."""
        return any(s.summary_only for s in self.sessions)

    @property
    def env(self) -> Optional[Fingerprint]:
        return self.newest.environment if self.newest is not None else None

    @property
    def summary(self) -> dict[str, Optional[float]]:
        return dict(self.newest.summary) if self.newest is not None else {}

    @property
    def recorded_at(self) -> list[Optional[str]]:
        return [s.recorded_at for s in self.sessions]

    @property
    def client_cpus(self) -> list[Optional[str]]:
        return [s.client_cpu for s in self.sessions]

    @property
    def degradation(self) -> list[Degradation]:
        return [s.degradation for s in self.sessions]

    @property
    def saturation_steps(self) -> list[Optional[float]]:
        return [s.saturation_step for s in self.sessions]

    @property
    def capacities(self) -> list[Capacity]:
        return [s.capacity for s in self.sessions if s.capacity is not None]

    @property
    def capacity(self) -> Optional[Capacity]:
        return self.newest.capacity if self.newest is not None else None

    @property
    def frontier(self) -> Optional[list[FrontierPoint]]:
        """The newest session's Pareto frontier (sweeps)."""
        sweep = self.newest.sweep if self.newest is not None else None
        return list(sweep.frontier) if sweep is not None else None

    @property
    def points(self) -> Optional[list[FrontierPoint]]:
        """Every sweep point of the newest session, when kept."""
        sweep = self.newest.sweep if self.newest is not None else None
        return sweep.points if sweep is not None else None

    @property
    def saturation(self) -> Optional[Saturation]:
        sweep = self.newest.sweep if self.newest is not None else None
        return sweep.saturation if sweep is not None else None

"""What one gated scenario produced: its runs (repeats, sweep points or capacity probes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import ResultSource, Capacity, Sweep
from pytest_goodput.schema.scenario.spec import ScenarioSpec


@dataclass
class Measurement:
    """What one gated scenario produced: its runs (repeats, sweep points or probes)."""

    spec: ScenarioSpec
    runs: list[RunResult]
    kind: str = "runs"  # runs | sweep | capacity
    frontier: Optional[Sweep] = None
    capacity: Optional[Capacity] = None
    extra: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the run did on the way (re-measured points)
    #: What keeping this session valid took (``environment.SESSION_FACTS``: re-measured, a
    #: replaced launch), stored in a recorded session's ``Fingerprint.provenance``.
    provenance: dict[str, str] = field(default_factory=dict)
    #: Set when the runs were read from another tool's result file (``goodput.judge_file``).
    source: Optional[ResultSource] = None

    @property
    def result(self) -> RunResult:
        """The headline run: the last repeat, or the highest-load sweep point."""
        return self.runs[-1]

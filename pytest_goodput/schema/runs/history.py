"""The main branch's history of one test: one JSON Lines entry per recorded run (the file format).

Baselines keep a few sessions for run-to-run noise; the history keeps hundreds of headline
numbers, one entry per recording on main, so that slow creep and change points across
commits can be found (``docs/history.md``). Pure pydantic models; ``store/history.py``
reads and writes them.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from pytest_goodput.schema.environment import Fingerprint

HISTORY_SCHEMA_VERSION = 1
HISTORY_KIND = "pytest-goodput-history"
#: Entries kept per test file; older ones are dropped when a write would exceed it.
DEFAULT_KEEP = 500


class HistoryEntry(BaseModel):
    """One recorded main-branch run of one test: its headline numbers and where it came from."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["pytest-goodput-history"] = HISTORY_KIND
    schema_version: Literal[1] = HISTORY_SCHEMA_VERSION
    nodeid: str
    recorded_at: str
    commit: Optional[str] = None
    environment: Fingerprint
    sessions: int = Field(1, ge=1, description="sessions the metrics are the median of")
    metrics: dict[str, float] = Field(
        default_factory=dict, description="headline numbers by metric path (median over sessions)")
    gated: list[str] = Field(default_factory=list, description="metrics the test gates on")
    tolerances: dict[str, float] = Field(
        default_factory=dict, description="each gated metric's tolerance as the test resolved it")
    verdicts: dict[str, str] = Field(
        default_factory=dict, description="each gated metric's verdict against the baseline this "
        "recording replaced (absent for a first recording); `regressed` marks a loss merged anyway: "
        "accepted, the creep window restarts there")

    @property
    def identity_key(self) -> tuple[tuple[str, str], ...]:
        """Hardware, model and scenario: only entries with equal keys form one series."""
        return tuple(sorted(self.environment.identity.items()))


class TrendPoint(BaseModel):
    """One point of a trend chart: a main-branch run, or (last) the run being judged."""

    model_config = ConfigDict(extra="forbid")

    label: str
    value: float
    current: bool = False


class Trend(BaseModel):
    """A metric's recent history, shown in reports when it regressed or crept."""

    model_config = ConfigDict(extra="forbid")

    metric: str
    reason: Literal["crept", "regressed"]
    points: list[TrendPoint]
    start: Optional[float] = Field(None, description="the creep window's start level")
    tolerance: Optional[float] = None

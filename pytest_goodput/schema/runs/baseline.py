"""A stored baseline: one test's spec and a short history of its sessions (the file format).

Version 2 keeps each session's summary and shapes in a small reviewable JSON file and the
per-request samples beside it in a compressed columnar file that the JSON names by digest
(``docs/baselines.md``). Version 1 files (samples inline) still read. Pure pydantic models;
the store (``store/baseline.py``, ``store/samples_file.py``) reads and writes them.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.runs.session import Capacity, Session, Sweep

BASELINE_SCHEMA_VERSION = 2
BASELINE_KIND = "pytest-goodput-baseline"
#: Runs (sessions) kept per baseline file; older ones fall off when new ones are recorded.
#: Room for two recordings of the default five sessions.
DEFAULT_HISTORY = 10


class SamplesRef(BaseModel):
    """The samples file beside a baseline: its name (in the same directory) and SHA-256."""

    model_config = ConfigDict(extra="forbid")

    file: str
    sha256: str


class BaselineFile(BaseModel):
    """A baseline in memory: every session with its samples, whichever version was read."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["pytest-goodput-baseline"] = BASELINE_KIND
    schema_version: int = BASELINE_SCHEMA_VERSION
    nodeid: str
    spec: dict[str, Any]
    spec_hash: str
    samples: Optional[SamplesRef] = Field(None, description="version 2: the samples file")
    sessions: list[Session] = Field(default_factory=list)

    @property
    def latest(self) -> Session:
        return self.sessions[-1]


class BaselineRunV1(BaseModel):
    """A session as version 1 stored it, samples inline."""

    model_config = ConfigDict(extra="forbid")

    recorded_at: str
    environment: Fingerprint
    summary: dict[str, Optional[float]] = Field(default_factory=dict)
    samples: list[Samples] = Field(default_factory=list)
    frontier: Optional[list[dict[str, Any]]] = None
    capacity: Optional[dict[str, Any]] = None

    def session(self) -> Session:
        return Session(recorded_at=self.recorded_at, environment=self.environment,
                       summary=dict(self.summary), samples=list(self.samples),
                       sweep=Sweep(frontier=self.frontier) if self.frontier is not None else None,
                       capacity=Capacity.model_validate(self.capacity) if self.capacity is not None else None)


class BaselineFileV1(BaseModel):
    """Version 1 of the file: one JSON document, every sample inline."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["pytest-goodput-baseline"] = BASELINE_KIND
    schema_version: Literal[1] = 1
    nodeid: str
    spec: dict[str, Any]
    spec_hash: str
    runs: list[BaselineRunV1] = Field(default_factory=list)

    def upgraded(self) -> BaselineFile:
        return BaselineFile(nodeid=self.nodeid, spec=self.spec, spec_hash=self.spec_hash,
                            sessions=[r.session() for r in self.runs])

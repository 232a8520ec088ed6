"""A stored baseline: one test's spec and a short history of its runs (the file format).

Pure pydantic models; the store (``store/baseline.py``) reads and writes them.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.results import Samples

BASELINE_SCHEMA_VERSION = 1
BASELINE_KIND = "pytest-goodput-baseline"
#: Runs (sessions) kept per baseline file; older ones fall off when new ones are recorded.
#: Room for two recordings of the default five sessions.
DEFAULT_HISTORY = 10

class BaselineRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recorded_at: str
    environment: Fingerprint
    summary: dict[str, Optional[float]] = Field(default_factory=dict)
    samples: list[Samples] = Field(
        default_factory=list, description="one entry per repeat, or per sweep point"
    )
    frontier: Optional[list[dict[str, Any]]] = None
    capacity: Optional[dict[str, Any]] = None


class BaselineFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["pytest-goodput-baseline"] = BASELINE_KIND
    schema_version: int = BASELINE_SCHEMA_VERSION
    nodeid: str
    spec: dict[str, Any]
    spec_hash: str
    runs: list[BaselineRun] = Field(default_factory=list)

    @property
    def latest(self) -> BaselineRun:
        return self.runs[-1]

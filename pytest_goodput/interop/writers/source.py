"""What every writer reads: one test's runs, its outcome when judged, where it ran (pure).

The plugin exports a session's tests with their outcomes; ``run`` exports its runs (no
outcome: nothing was compared); ``compare`` the new side's tests with the outcomes it judged.
A writer returns :class:`ExportFile` texts; the caller writes them (atomically, redacted).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Optional

from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.results import RequestRecord, RunResult

#: The tool name every export carries (llm-d's ``tool``, PyTorch's ``benchmark.name``).
TOOL = "pytest-goodput"
_NAMESPACE = uuid.UUID("6f0e3c52-2b1a-5d1e-9a57-70a1d6a8e5c1")
#: The environment's keys an export may carry: never an engine's command line or URL.
ENV_KEYS = ("hardware", "engine", "engine_version", "plugin_version", "git_commit", "client_cpu")


class ExportError(ValueError):
    """Results a format cannot hold (e.g. a sketched run for a per-request format)."""


@dataclass(frozen=True)
class ExportedTest:
    """One test as exported: its runs (repeats, sweep points, probes) and, when judged, its outcome."""

    nodeid: str
    runs: tuple[RunResult, ...]
    outcome: Optional[TestOutcome] = None
    #: The flat environment (``Fingerprint.flat()``): model, hardware, engine provenance.
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.environment.get("model") or "unknown"

    @property
    def engine(self) -> str:
        return self.environment.get("engine") or "unknown"

    @property
    def exported_environment(self) -> dict[str, str]:
        """The environment as exports carry it (:data:`ENV_KEYS` that are set)."""
        return {k: self.environment[k] for k in ENV_KEYS if self.environment.get(k)}


@dataclass(frozen=True)
class ExportFile:
    """One document of an export. ``label`` None: the document is written at PATH itself;
    otherwise at PATH with the label inserted before its extension (one file per run)."""

    label: Optional[str]
    text: str


def measured(run: RunResult) -> list[RequestRecord]:
    """The run's measured requests (warm-up left out), as every metric counts them."""
    return [r for r in run.requests if not r.warmup]


def run_id(*parts: object) -> str:
    """A stable id (UUID5, hex) of what identifies a document: the same run exports the same id."""
    return uuid.uuid5(_NAMESPACE, "\x1f".join(str(p) for p in parts)).hex


def slug(text: str, limit: int = 64) -> str:
    """``tests/test_x.py::test_chat[a]`` → ``test_x-test_chat-a``: file-name and slug safe."""
    tail = text.rsplit("/", 1)[-1].replace(".py::", "-")
    out = re.sub(r"[^A-Za-z0-9_.]+", "-", tail).strip("-.") or "run"
    return out[:limit].rstrip("-.")


def labelled_runs(tests: list[ExportedTest]) -> list[tuple[Optional[str], ExportedTest, int]]:
    """Every run of every test with its file label: None when the export holds one run only,
    else ``<test slug>-<run number>`` (runs numbered from 1 within their test)."""
    pairs = [(t, i) for t in tests for i in range(len(t.runs))]
    if len(pairs) == 1:
        return [(None, pairs[0][0], 0)]
    return [(f"{slug(t.nodeid, 120)}-{i + 1}", t, i) for t, i in pairs]

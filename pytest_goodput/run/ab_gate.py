"""A/B mode in the pytest gate: the rounds' runs as the one judge's test outcome.

The I/O around ``judge.sequential.ab_outcome``: each engine's environment is fingerprinted as a
baseline's would be, and each side's server metrics summarised. Nothing is read from or
written to the baseline store. ``run.ab.measure_ab`` makes the rounds; this module does not
load the load generator, so the pytest session can import it at collection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from pytest_goodput.engines.engine import Engine
from pytest_goodput.judge.attribution import with_attribution
from pytest_goodput.judge.sequential.ab_outcome import ab_outcome
from pytest_goodput.run.server import server_summary
from pytest_goodput.schema.outcomes.ab import ABResult
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.store.fingerprint import collect


@dataclass
class ABMeasured:
    """An A/B run and each side's runs from the rounds that were judged."""

    result: ABResult
    base_runs: list[RunResult] = field(default_factory=list)
    head_runs: list[RunResult] = field(default_factory=list)
    last_head: Optional[RunResult] = None  # the last head run, from a dropped round too
    last_base_sweep: list[RunResult] = field(default_factory=list)  # a sweep: the last judged round's points
    last_head_sweep: list[RunResult] = field(default_factory=list)

    @property
    def head(self) -> Session:
        """The head's runs as the test's session (the JSON report keeps its records)."""
        assert self.result.spec is not None
        return Session(spec=self.result.spec, results=list(self.head_runs), notes=list(self.result.notes))


def describe(engine: Engine) -> str:
    """An engine in a few words: its command, URL or simulator knobs (already redacted)."""
    p = engine.provenance
    if "engine_cmd" in p:
        return p["engine_cmd"]
    if "engine_url" in p:
        return p["engine_url"]
    return "simulator" + (f" {p['engine_flags']}" if p.get("engine_flags") else "")


def gate_ab(nodeid: str, measured: ABMeasured, base: Engine, head: Engine, *,
            strict: bool = False, hardware: Optional[str] = None, cwd: Optional[Path] = None,
            location: Optional[tuple[str, int]] = None, notes: tuple[str, ...] = ()) -> TestOutcome:
    """The test's outcome: the paired verdicts, the head's SLOs, both engines' environments."""
    spec = measured.result.spec
    assert spec is not None
    envs = [collect(model=e.model or "?", spec_hash=spec.identity_hash(), hardware=hardware,
                    engine=e.provenance, cwd=str(cwd) if cwd else None) for e in (base, head)]
    outcome = ab_outcome(nodeid, measured.result, measured.head_runs, measured.base_runs,
                         base=describe(base), head=describe(head), base_env=envs[0], head_env=envs[1],
                         strict=strict, location=location,
                         sweeps=(measured.last_base_sweep, measured.last_head_sweep))
    cur, old = server_summary(measured.head_runs), server_summary(measured.base_runs)
    update: dict = {"notes": [*outcome.notes, *notes]}
    if cur or old:
        update["server"] = {"current": cur or None, "baseline": old or None}
    return with_attribution(outcome.model_copy(update=update))

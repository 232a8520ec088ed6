"""Gate one measurement against its stored baseline: load it, judge, and record in update mode.

The I/O around the pure judge: the baseline store, the environment fingerprint (a git
subprocess), the atomic write of a new baseline. The pytest session calls it per test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from pytest_goodput.engines.engine import Engine
from pytest_goodput.judge.evidence import from_baseline, from_measurement
from pytest_goodput.judge.judge import Policy, judge
from pytest_goodput.schema.baseline import DEFAULT_HISTORY, BaselineFile, BaselineRun
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.evidence import Evidence
from pytest_goodput.schema.measurement import Measurement
from pytest_goodput.schema.outcome import TestOutcome
from pytest_goodput.store import baseline as store
from pytest_goodput.store.fingerprint import collect


@dataclass
class Gated:
    """What gating one test did: its outcome, and the baseline it wrote or why it did not."""

    outcome: TestOutcome
    written: Optional[Path] = None
    skipped: list[str] = field(default_factory=list)


def gate(
    nodeid: str,
    m: Measurement,
    engine: Engine,
    *,
    baseline_dir: Path,
    policy: Policy,
    location: Optional[tuple[str, int]] = None,
    hardware: Optional[str] = None,
    history: int = DEFAULT_HISTORY,
    cwd: Optional[Path] = None,
) -> Gated:
    """Judge ``m`` against the stored baseline of ``nodeid``; in update mode record it."""
    spec = m.spec
    env = collect(model=engine.model or "?", spec_hash=spec.identity_hash(), hardware=hardware,
                  engine=engine.provenance, cwd=str(cwd) if cwd else None)
    path = store.path_for(baseline_dir, nodeid)
    use_store = policy.compare or policy.update
    base: Optional[BaselineFile] = None
    if use_store:
        try:
            base = store.load(path, nodeid)
        except store.BaselineError as exc:
            return Gated(TestOutcome(nodeid=nodeid, location=location, scenario=spec.scenario,
                                     error=str(exc)))
    current = from_measurement(m, env)
    baseline = from_baseline(base, spec) if base is not None and base.runs else None
    outcome = judge(nodeid, current, baseline,
                    Policy(compare=use_store, strict=policy.strict, tolerance=policy.tolerance,
                           update=policy.update),
                    location=location)
    if not policy.update:
        return Gated(outcome)
    return _record(path, nodeid, current, env, base, outcome, history)


def _record(path: Path, nodeid: str, current: Evidence, env: Fingerprint,
            base: Optional[BaselineFile], outcome: TestOutcome, history: int) -> Gated:
    """Only a valid run that met its SLOs becomes a baseline."""
    if not outcome.client_valid:
        return Gated(outcome, skipped=[f"{nodeid}: client set the pace, baseline not recorded"])
    if outcome.slo_failed:
        broken = ", ".join(o.name for o in outcome.slo_failed)
        return Gated(outcome, skipped=[f"{nodeid}: SLO failed ({broken}), baseline not recorded"])
    run = BaselineRun(
        recorded_at=store.now_iso(),
        environment=env,
        summary=current.summary,
        samples=current.latest,
        frontier=current.frontier,
        capacity=current.capacity,
    )
    store.record(path, nodeid=nodeid, spec=current.spec.model_dump(mode="json"),
                 spec_hash=current.spec_hash, run=run, existing=base, history=history)
    return Gated(outcome.model_copy(update={"baseline_status": "updated"}), written=path)


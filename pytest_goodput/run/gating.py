"""Gate one measurement against its stored baseline: load it, judge, and record in update mode.

The I/O around the pure judge: the baseline store, the environment fingerprint (a git
subprocess), the atomic write of a new baseline. The pytest session calls it per test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from pytest_goodput.engines.engine import Engine
from pytest_goodput.judge.attribution import with_attribution
from pytest_goodput.judge.evidence import from_baseline, from_session, from_sessions, judged
from pytest_goodput.judge.sequential.head_launches import judge_look
from pytest_goodput.interop.readers.side import definition_mismatch
from pytest_goodput.judge.judge import Policy, judge, metric_defs
from pytest_goodput.measure.sketched import sketch_note
from pytest_goodput.run.launches import refusal
from pytest_goodput.run.server import from_summary, server_summary, to_summary, without_server_view
from pytest_goodput.schema.runs.baseline import DEFAULT_HISTORY, BaselineFile
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.outcomes.shapes import CapacityOutcome
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.store import baseline as store
from pytest_goodput.store.files import WriteError
from pytest_goodput.store.fingerprint import collect

#: Sessions one --goodput-update-baseline records when a test has no baseline yet: enough
#: for the run-to-run spread to be measured, not assumed (docs/decisions.md).
DEFAULT_SESSIONS = 5


@dataclass
class Gated:
    """What gating one test did: its outcome, and the baseline files it wrote or why not."""

    outcome: TestOutcome
    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: Measuring the PR over several launches: whether this look decided the test (a further
    #: launch would not be measured); always True for a single launch.
    decided: bool = True


def gate(
    nodeid: str,
    m: Session,
    engine: Engine,
    *,
    baseline_dir: Path,
    policy: Policy,
    location: Optional[tuple[str, int]] = None,
    hardware: Optional[str] = None,
    history: int = DEFAULT_HISTORY,
    cwd: Optional[Path] = None,
    earlier: Sequence[Session] = (),
    notes: Sequence[str] = (),
    planned: int = 1,
) -> Gated:
    """Judge ``m`` against the stored baseline of ``nodeid``; in update mode record it.

    ``earlier``: the sessions measured before ``m`` (oldest first): in update mode for the
    same baseline, when gating the earlier engine launches of the PR (``planned`` > 1: the
    PR is measured over up to that many launches, judged look by look,
    ``judge/sequential/head_launches.py``). Every session's runs are judged against the SLOs; in update
    mode all of them are recorded, or none (only passing runs become baselines); a session the
    client paced was already re-measured, replaced or left out (``run/launches.py``).
    """
    spec = m.spec
    assert spec is not None, "the runner's session carries its spec"
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
                                     error=str(exc), notes=list(notes)))
    # SLOs and client validity are judged on every session's runs, not only the last.
    current = from_session(m, env, at=store.now_iso(), slo_results=[r for s in (*earlier, m) for r in s.results])
    baseline = from_baseline(base, spec) if base is not None and base.sessions else None
    if baseline is not None and (why := definition_mismatch(
            baseline, current, [d.path for d in metric_defs(spec, policy.tolerance)])) is not None:
        return Gated(TestOutcome(nodeid=nodeid, location=location, scenario=spec.scenario,
                                 error=f"cannot compare with the baseline: {why}", notes=list(notes)))
    judging = Policy(compare=use_store, strict=policy.strict, tolerance=policy.tolerance,
                     update=policy.update)
    decided = True
    if planned > 1 and not policy.update and baseline is not None and m.kind == "runs":
        head = from_sessions([*earlier, m], env, at=current.recorded_at[-1])
        outcome, decided = judge_look(nodeid, head, baseline, judging, planned, location=location)
    else:
        outcome = judge(nodeid, current, baseline, judging, location=location)
    outcome = with_attribution(outcome.model_copy(update=_sides(m, base, notes=[*outcome.notes, *notes])))
    if not policy.update:
        return Gated(outcome, decided=decided)
    return _record(path, nodeid, current, [*(judged(e, env) for e in earlier), *current.sessions],
                   env, base, outcome, history)


def _sides(m: Session, base: Optional[BaselineFile], notes: list[str]) -> dict[str, Any]:
    """What reports put side by side beyond the verdicts: the baseline's spec, the engine's
    own metrics and the capacity searches of both runs."""
    latest = base.latest if base is not None and base.sessions else None
    sketched = {n for n in (sketch_note(r) for r in m.results) if n is not None}
    update: dict[str, Any] = {"notes": [*notes, *sorted(sketched)]}
    if latest is not None:
        update["baseline_spec"] = base.spec if base is not None else None
    current = server_summary(m.results) if m.kind != "capacity" else {}
    baseline = from_summary(latest.summary) if latest is not None else {}
    if current or baseline:
        update["server"] = {"current": current or None, "baseline": baseline or None}
    if m.capacity is not None:
        update["capacity"] = CapacityOutcome(current=m.capacity,
                                             baseline=latest.capacity if latest is not None else None)
    return update


def _record(path: Path, nodeid: str, side: Side, sessions: list[Session], env: Fingerprint,
            base: Optional[BaselineFile], outcome: TestOutcome, history: int) -> Gated:
    """Only valid sessions that met their SLOs become a baseline: all of ``sessions`` (``side``'s
    launches, judged, oldest first), or none (an invalid session was already re-measured,
    replaced or left out: ``run/launches.py``); each keeps what that took in its provenance."""
    if not outcome.client_valid:
        return Gated(outcome, skipped=[refusal(nodeid, sessions)])
    if outcome.slo_failed:
        broken = ", ".join(o.name for o in outcome.slo_failed)
        return Gated(outcome, skipped=[f"{nodeid}: SLO failed ({broken}), baseline not recorded"])
    doc = base
    for new in sessions:
        run = new.model_copy(update={
            "recorded_at": store.now_iso(),
            "environment": env.model_copy(update={"provenance": {**env.provenance, **new.provenance}}),
            "summary": {**new.summary, **(to_summary(server_summary(new.results)) if new.capacity is None else {})},
            # Stored: the frontier, not every point (the samples keep them).
            "sweep": new.sweep.model_copy(update={"points": None, "saturation": None}) if new.sweep else None,
        })
        try:
            doc = store.record(path, nodeid=nodeid, spec=side.spec.model_dump(mode="json"),
                               spec_hash=side.spec_hash, run=run, existing=doc, history=history,
                               older=without_server_view)  # the report shows the newest's
        except WriteError as exc:  # e.g. a read-only baseline directory: a clean error outcome
            return Gated(outcome.model_copy(update={"error": f"baseline not recorded: {exc}"}))
    note = f"{len(sessions)} session(s) recorded" if len(sessions) > 1 else None
    update = {"baseline_status": "updated"}
    if note:
        update["notes"] = [*outcome.notes, note]
    return Gated(outcome.model_copy(update=update), written=[path])

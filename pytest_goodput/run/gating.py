"""One test's gate: its measured sessions judged against the stored baseline (or, in A/B mode,
against its base engine's rounds), recorded in update mode, taken through the history.

The I/O around the pure judge: the baseline store (read once per test), the environment
fingerprint (a git subprocess, once per test), the atomic write of a new baseline, the history
files. A test's outcome is built by the judge and completed here in one copy; a test measured
over several launches is judged look by look, and the look that decided it is its verdict
(never judged again). The pytest session makes one :class:`TestGate` per test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from pytest_goodput.engines.engine import Engine
from pytest_goodput.interop.readers.side import definition_mismatch
from pytest_goodput.judge.attribution import attributed
from pytest_goodput.judge.changepoints import DEFAULT_WINDOW
from pytest_goodput.judge.evidence import from_baseline, from_session, from_sessions, judged
from pytest_goodput.judge.judge import Policy, judge, metric_defs
from pytest_goodput.judge.noise.outliers import outlier_notes, recording_outliers
from pytest_goodput.judge.sequential.ab_outcome import ab_outcome
from pytest_goodput.judge.sequential.head_launches import judge_look
from pytest_goodput.measure.sketched import sketch_note
from pytest_goodput.run.history import HistoryStep, history_step
from pytest_goodput.run.launches import refusal
from pytest_goodput.run.engine_view import from_summary, server_summary, to_summary, without_server_view
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.outcomes.ab import ABResult
from pytest_goodput.schema.outcomes.cost import TestCost
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.outcomes.shapes import CapacityOutcome
from pytest_goodput.schema.runs.baseline import DEFAULT_HISTORY, BaselineFile
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.store import baseline as store
from pytest_goodput.store.files import WriteError
from pytest_goodput.store.fingerprint import collect

#: Sessions one --goodput-update-baseline records when a test has no baseline yet: enough
#: for the run-to-run spread to be measured, not assumed (docs/decisions.md).
DEFAULT_SESSIONS = 5


@dataclass
class ABMeasured:
    """An A/B run and each side's runs from the rounds that were judged (``run/ab.py``)."""

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


@dataclass(frozen=True)
class HistoryPlace:
    """Where a test's history lives and what the gate does with it: recorded with a baseline,
    or the creep gate (``--goodput-history-gate``) over its last ``window`` runs."""

    directory: Path
    gate: bool = False
    window: int = DEFAULT_WINDOW


class TestGate:
    """One test's gate. What it did beyond the outcome: ``written`` (the baseline file, update
    mode), ``skipped`` (why a recording wrote nothing), ``errors`` (the session's)."""

    __test__ = False  # not a pytest test class

    def __init__(self, nodeid: str, spec: ScenarioSpec, engine: Engine, *, baseline_dir: Path,
                 policy: Policy, hardware: Optional[str] = None, history: int = DEFAULT_HISTORY,
                 cwd: Optional[Path] = None, planned: int = 1,
                 trail: Optional[HistoryPlace] = None) -> None:
        self.nodeid, self.spec, self.policy, self.planned = nodeid, spec, policy, planned
        self._history, self._trail, self._cwd, self._hardware = history, trail, cwd, hardware
        self.env = self._fingerprint(engine)
        self.path = store.path_for(baseline_dir, nodeid)
        self.written: Optional[Path] = None
        self.skipped: Optional[str] = None
        self.errors: list[str] = []
        self._stored: Optional[tuple[Optional[BaselineFile], Optional[str]]] = None
        self._look: Optional[tuple[list[Session], TestOutcome, bool]] = None
        self._side: Optional[Side] = None  # the judged look's current side
        self._recorded: Optional[BaselineFile] = None

    def _fingerprint(self, engine: Engine) -> Fingerprint:
        return collect(model=engine.model or "?", spec_hash=self.spec.identity_hash(), hardware=self._hardware,
                       engine=engine.provenance, cwd=str(self._cwd) if self._cwd else None)

    def _baseline(self) -> tuple[Optional[BaselineFile], Optional[str]]:
        """The stored baseline file (None: none, or not read in this mode) or why it cannot be
        read; read once."""
        if self._stored is None:
            self._stored = (None, None)
            if self.policy.compare or self.policy.update:
                try:
                    self._stored = (store.load(self.path, self.nodeid), None)
                except store.BaselineError as exc:
                    self._stored = (None, str(exc))
        return self._stored

    # --- judging ---------------------------------------------------------------------------
    def decides(self, sessions: Sequence[Session]) -> bool:
        """Whether the launches measured so far (oldest first) decide the test: a further
        launch would not be measured (``judge/sequential/head_launches.py``)."""
        return self._judged(sessions)[1]

    def _judged(self, sessions: Sequence[Session]) -> tuple[TestOutcome, bool]:
        """The verdict on ``sessions`` (the newest last) and whether it decides the test; a
        look on the same sessions is judged once."""
        if self._look is not None and len(self._look[0]) == len(sessions) and all(
                a is b for a, b in zip(self._look[0], sessions)):
            return self._look[1], self._look[2]
        spec = self.spec
        base, error = self._baseline()
        decided = True
        if error is not None:
            outcome = TestOutcome(nodeid=self.nodeid, scenario=spec.scenario, error=error)
        else:
            outcome, decided = self._verdict(sessions, base)
        self._look = (list(sessions), outcome, decided)
        return outcome, decided

    def _verdict(self, sessions: Sequence[Session], base: Optional[BaselineFile]) -> tuple[TestOutcome, bool]:
        m, spec, policy = sessions[-1], self.spec, self.policy
        # SLOs and client validity are judged on every session's runs, not only the last.
        current = self._side = from_session(m, self.env, at=store.now_iso(),
                                            slo_results=[r for s in sessions for r in s.results])
        baseline = from_baseline(base, spec) if base is not None and base.sessions else None
        if baseline is not None and (why := definition_mismatch(
                baseline, current, [d.path for d in metric_defs(spec, policy.tolerance)])) is not None:
            return TestOutcome(nodeid=self.nodeid, scenario=spec.scenario,
                               error=f"cannot compare with the baseline: {why}"), True
        judging = Policy(compare=policy.compare or policy.update, strict=policy.strict,
                         tolerance=policy.tolerance, update=policy.update)
        if self.planned > 1 and not policy.update and baseline is not None and m.kind == "runs":
            head = from_sessions(list(sessions), self.env, at=current.recorded_at[-1])
            return judge_look(self.nodeid, head, baseline, judging, self.planned)
        return judge(self.nodeid, current, baseline, judging), True

    # --- the outcome -----------------------------------------------------------------------
    def finish(self, sessions: Sequence[Session], *, notes: Sequence[str] = (),
               location: Optional[tuple[str, int]] = None, cost: Optional[TestCost] = None,
               again: str = "") -> TestOutcome:
        """The test's outcome: the verdict on ``sessions`` (every launch measured, oldest
        first) with what reports put beside it, the baseline recorded in update mode, the
        history step; completed in one copy. ``again``: the command that records the test
        afresh (named by the notes on an outlying recorded session)."""
        outcome, _ = self._judged(sessions)
        if outcome.error is not None:  # the baseline could not be read or compared
            return outcome.model_copy(update={"location": location, "notes": [*notes], "cost": cost})
        m = sessions[-1]
        base, _ = self._baseline()
        latest = base.latest if base is not None and base.sessions else None
        update = _sides(m, base, latest)
        sketched = sorted({n for n in (sketch_note(r) for r in m.results) if n is not None})
        comparisons, whose = attributed(outcome.comparisons, update.get("server"))
        status, error, recorded, step = outcome.baseline_status, None, [], HistoryStep()
        if self.policy.update:
            status, error, recorded = self._record(sessions, base, outcome)
        if error is None and self._trail is not None:
            step = history_step(outcome, self.spec, sessions, directory=self._trail.directory,
                                record=self.policy.update, written=self.written is not None,
                                gate=self._trail.gate, tolerance=self.policy.tolerance, window=self._trail.window)
            self.errors += step.errors
        outliers = self._outliers(len(sessions), again) if self.written is not None else []
        return outcome.model_copy(update={
            **update, "location": location, "baseline_status": status,
            "comparisons": [*comparisons, *step.comparisons], "trends": [*outcome.trends, *step.trends],
            "notes": [*outcome.notes, *notes, *sketched, *whose, *recorded, *step.notes, *outliers],
            "error": error or step.error, "cost": cost})

    def _record(self, sessions: Sequence[Session], base: Optional[BaselineFile],
                outcome: TestOutcome) -> tuple[str, Optional[str], list[str]]:
        """Only valid sessions that met their SLOs become a baseline: all of ``sessions``
        (oldest first), or none (an invalid session was already re-measured, replaced or left
        out: ``run/launches.py``); each keeps what that took in its provenance. Returns the
        baseline status, an error and the notes."""
        if not outcome.client_valid:
            self.skipped = refusal(self.nodeid, sessions)
            return outcome.baseline_status, None, []
        if outcome.slo_failed:
            broken = ", ".join(o.name for o in outcome.slo_failed)
            self.skipped = f"{self.nodeid}: SLO failed ({broken}), baseline not recorded"
            return outcome.baseline_status, None, []
        spec = self.spec.model_dump(mode="json")
        doc = base
        newest = self._side.sessions if self._side is not None else []
        for new in (*(judged(e, self.env) for e in sessions[:-1]), *newest):
            run = new.model_copy(update={
                "recorded_at": store.now_iso(),
                "environment": self.env.model_copy(update={"provenance": {**self.env.provenance, **new.provenance}}),
                "summary": {**new.summary,
                            **(to_summary(server_summary(new.results)) if new.capacity is None else {})},
                # Stored: the frontier, not every point (the samples keep them).
                "sweep": new.sweep.model_copy(update={"points": None, "saturation": None}) if new.sweep else None,
            })
            try:
                doc = store.record(self.path, nodeid=self.nodeid, spec=spec, spec_hash=self.spec.identity_hash(),
                                   run=run, existing=doc, history=self._history,
                                   older=without_server_view)  # the report shows the newest's
            except WriteError as exc:  # e.g. a read-only baseline directory: a clean error outcome
                return outcome.baseline_status, f"baseline not recorded: {exc}", []
        self.written, self._recorded = self.path, doc
        return "updated", None, [f"{len(sessions)} session(s) recorded"] if len(sessions) > 1 else []

    def _outliers(self, recorded: int, again: str) -> list[str]:
        """Sessions of the baseline just written that stand out from the others, named with
        the command that records it again (the user decides; nothing is dropped)."""
        if self._recorded is None:
            return []
        kept = from_baseline(self._recorded, self.spec).history
        found = recording_outliers(kept, metric_defs(self.spec, self.policy.tolerance))
        return outlier_notes(found, min(recorded, len(kept)), again) if found else []

    def finish_ab(self, measured: ABMeasured, base: Engine, head: Engine, *, notes: Sequence[str] = (),
                  location: Optional[tuple[str, int]] = None, cost: Optional[TestCost] = None) -> TestOutcome:
        """An A/B test's outcome: the paired verdicts, the head's SLOs, both engines'
        environments and server numbers; nothing read from or written to the store."""
        outcome = ab_outcome(self.nodeid, measured.result, measured.head_runs, measured.base_runs,
                             base=describe(base), head=describe(head), base_env=self._fingerprint(base),
                             head_env=self.env, strict=self.policy.strict, location=location,
                             sweeps=(measured.last_base_sweep, measured.last_head_sweep))
        cur, old = server_summary(measured.head_runs), server_summary(measured.base_runs)
        server = {"current": cur or None, "baseline": old or None} if cur or old else None
        comparisons, whose = attributed(outcome.comparisons, server)
        recording = ["A/B test: compared with its base engine, no baseline recorded"] if self.policy.update else []
        return outcome.model_copy(update={
            **({"server": server} if server else {}), "comparisons": comparisons,
            "notes": [*outcome.notes, *notes, *whose, *recording], "cost": cost})


def _sides(m: Session, base: Optional[BaselineFile], latest: Optional[Session]) -> dict[str, Any]:
    """What reports put side by side beyond the verdicts: the baseline's spec, the engine's
    own metrics and the capacity searches of both runs."""
    update: dict[str, Any] = {}
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


__all__ = ["DEFAULT_SESSIONS", "ABMeasured", "HistoryPlace", "TestGate", "describe"]

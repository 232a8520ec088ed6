"""The history around one gated test: recording main-branch runs and the creep gate.

The gate (``run/gating.py``) takes :func:`history_step` after judging a test; ``python -m pytest_goodput
history`` reads the same files through the same helpers, so the command and the gate
cannot disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Optional, Sequence

from pytest_goodput.judge.changepoints import DEFAULT_WINDOW, ChangePointsUnavailable, Series, creep_gate
from pytest_goodput.judge.judge import metric_defs
from pytest_goodput.measure.headline import session_metrics
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.history import HistoryEntry, Trend
from pytest_goodput.schema.outcomes.comparison import MetricComparison
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.store import history as store


def label(entry: HistoryEntry, index: int) -> str:
    """How a run is named: its commit (12 characters) or, without one, its position."""
    return entry.commit[:12] if entry.commit else f"run {index + 1}"


def newest_identity(entries: Sequence[HistoryEntry]) -> list[HistoryEntry]:
    """The entries sharing the newest entry's identity (hardware, model, scenario)."""
    if not entries:
        return []
    key = entries[-1].identity_key
    return [e for e in entries if e.identity_key == key]


def series_of(entries: Sequence[HistoryEntry], path: str) -> Optional[Series]:
    """A metric's series over ``entries`` (runs without the metric skipped); None if empty. A
    run is accepted for the creep window when its recording was judged *regressed* on it."""
    runs = [(label(e, i), e.metrics[path], e.verdicts.get(path) == "regressed")
            for i, e in enumerate(entries) if path in e.metrics]
    if not runs:
        return None
    return Series(labels=[r[0] for r in runs], values=[r[1] for r in runs],
                  accepted=[r[2] for r in runs])


class HistoryStep(NamedTuple):
    """What the history adds to one test's outcome: the creep gate's comparisons, trend charts
    and warnings, or an error that fails the test; ``errors``: the session's (a history that
    could not be written)."""

    comparisons: Sequence[MetricComparison] = ()
    trends: Sequence[Trend] = ()
    notes: Sequence[str] = ()
    error: Optional[str] = None
    errors: Sequence[str] = ()


def apply_history_gate(outcome: TestOutcome, spec: ScenarioSpec, directory: Path, *,
                       tolerance: Optional[float] = None, window: int = DEFAULT_WINDOW) -> HistoryStep:
    """The creep gate for one pull-request run: its gated metrics against the test's history
    of the same identity. Crept metrics become *regressed* comparisons (method ``creep``);
    they and metrics already regressed get a trend chart; damaged history lines are warned
    about. Raises :class:`ChangePointsUnavailable` without the ``history`` extra."""
    read = store.read(store.path_for(directory, outcome.nodeid), outcome.nodeid)
    identity = Fingerprint.from_flat(outcome.current_env).identity
    entries = [e for e in read.entries if e.environment.identity == identity]
    defs = metric_defs(spec, tolerance)
    series = {d.path: s for d in defs if (s := series_of(entries, d.path)) is not None}
    comparisons, trends = creep_gate(
        series, dict(outcome.key_metrics), [(d.path, d.direction, d.tolerance) for d in defs],
        window=window, regressed=[c.metric for c in outcome.regressed])
    return HistoryStep(comparisons, trends, list(read.warnings))


def history_step(outcome: TestOutcome, spec: ScenarioSpec, sessions: Sequence[Session], *,
                 directory: Path, record: bool, written: bool, gate: bool,
                 tolerance: Optional[float] = None, window: int = DEFAULT_WINDOW) -> HistoryStep:
    """What the history does after one test is judged (``outcome``, read only): in update
    mode, append the recorded sessions (when the baseline was ``written``) with the gated
    metrics' verdicts against the baseline they replace; with the creep gate on, judge the
    run against the history."""
    if record and written:
        defs = metric_defs(spec, tolerance)
        tolerances = {d.path: d.tolerance for d in defs}
        try:
            store.record(directory, outcome.nodeid, [session_metrics(m) for m in sessions],
                         Fingerprint.from_flat(outcome.current_env), tolerances=tolerances,
                         verdicts={c.metric: c.verdict for c in outcome.comparisons
                                   if c.metric in tolerances})
        except OSError as exc:
            return HistoryStep(errors=[f"{outcome.nodeid}: history not recorded: {exc}"])
        return HistoryStep()
    if not gate or record or outcome.error:
        return HistoryStep()
    try:
        return apply_history_gate(outcome, spec, directory, tolerance=tolerance, window=window)
    except (ChangePointsUnavailable, store.HistoryError) as exc:
        return HistoryStep(error=f"--goodput-history-gate: {exc}")

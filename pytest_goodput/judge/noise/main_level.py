"""Main's level over a baseline's sessions: where main changed, and a lone disturbed session (pure).

Kept one session per push (``--goodput-sessions=1 --goodput-history=N``), a baseline's
sessions are a time series of main. A change merged on main puts sessions of two levels in
one baseline; their spread is then the step itself, and every later verdict reads
*underpowered* until the step fills the window. So before judging, the sessions are read as
a series (oldest first), on each gated metric's analysis scale (``spread.scale_of``):

1. **A lone disturbed session** — one session, neither the oldest nor the newest, far from
   all the others (``recording.session_outliers``: leave-one-out prediction interval,
   Bonferroni at ``recording.FAMILY_ALPHA``, and beyond the metric's tolerance) — is named
   and set aside for the whole test: its neighbours on both sides agree, so main did not move.
2. **A step** — for each split k of the S sessions left, the mean after against the mean
   before: t = d / (σ·√(1/k + 1/(S−k))), σ the pooled within-segment SD (ν = S − 2) shrunk
   towards a prior of the metric's launch and day-to-day spread (the registry's ``run_cv``
   and ``day_cv``, worth ``PRIOR_RUNS`` sessions; the prior only widens). A step is a split
   whose |t| passes Student's t at ``STEP_ALPHA`` two-sided, Bonferroni over the S − 1
   splits, *and* whose change is beyond the metric's tolerance (a step the gate tolerates
   does not blind it). Fewer than ``MIN_SESSIONS`` sessions: no step is looked for.

The decision is per test: the newest step over the gated metrics is where main changed,
and every metric is judged against the sessions since it (one merge moves several metrics;
judging each against its own window would judge one PR against several mains). The newest
session can be a step of its own (judged against it alone) — from one session a step and a
disturbed push cannot be told apart, and the PR is built on main as it is now.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from pytest_goodput import stats
from pytest_goodput.judge.noise.recording import FAMILY_ALPHA, describe, session_outliers
from pytest_goodput.judge.noise.spread import PRIOR_RUNS, fmt_on_scale, scale_of
from pytest_goodput.judge.scalar.values import Sessions, group_value
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.schema import registry

#: Chance that an unchanged main shows a step on one metric, split over the splits.
STEP_ALPHA = 0.01
#: Fewest sessions a step is looked for in: with two, a step and noise cannot be told apart.
MIN_SESSIONS = 3
#: Every note of this module starts so (reports pick them out of the other notes).
MAIN_LEVEL_NOTE = "main's level"


@dataclass(frozen=True)
class Step:
    """A change of main's level on one metric: sessions ``at``.. (0-based) against those before."""

    metric: str
    at: int
    change: float
    t: float
    limit: float


@dataclass
class MainLevel:
    """What the series of sessions showed: the sessions to judge against and why."""

    sessions: int
    kept: list[int] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    set_aside: dict[int, list[str]] = field(default_factory=dict)

    @property
    def moved(self) -> bool:
        return bool(self.steps or self.set_aside)

    @property
    def since(self) -> int:
        """The first session of main's current level (0: no step)."""
        return max((s.at for s in self.steps), default=0)


def _ys(values: Sequence[Optional[float]], scale: str) -> list[Optional[float]]:
    if scale == "log":
        return [math.log(v) if v is not None and math.isfinite(v) and v > 0 else None for v in values]
    return [v if v is not None and math.isfinite(v) else None for v in values]


def _prior(defn: MetricDef, centre: float, scale: str) -> float:
    info = registry.metric(defn.path)
    cv = math.hypot(info.run_cv, info.day_cv)
    return cv * abs(centre) if scale == "relative" else cv


def metric_step(values: Sequence[Optional[float]], defn: MetricDef, *,
                alpha: float = STEP_ALPHA, prior_runs: float = PRIOR_RUNS) -> Optional[Step]:
    """The most significant step of one metric over its sessions' values (oldest first), or
    None: a session without a regular value (failures, not measured) means no step is read."""
    scale = scale_of(defn.path)
    if scale == "absolute":
        return None
    ys = _ys(values, scale)
    if len(ys) < MIN_SESSIONS or any(y is None for y in ys):
        return None
    y = np.asarray(ys, dtype=float)
    n = len(y)
    prior = _prior(defn, float(np.mean(y)), scale)
    best: Optional[Step] = None
    for k in range(1, n):
        a, b = y[:k], y[k:]
        ss = float(np.sum((a - a.mean()) ** 2) + np.sum((b - b.mean()) ** 2))
        nu = n - 2
        s2 = ss / nu if nu > 0 else 0.0
        if nu > 0 and s2 >= prior**2:
            var, df = s2, float(nu)
        else:
            var, df = (prior_runs * prior**2 + ss) / (prior_runs + nu), prior_runs + nu
        se = math.sqrt(var * (1.0 / k + 1.0 / (n - k)))
        d = float(b.mean() - a.mean())
        t = d / se if se > 0 else math.inf
        crit = stats.t_ppf(1.0 - alpha / (2.0 * (n - 1)), df)
        change = math.expm1(d) if scale == "log" else d / float(a.mean()) if a.mean() else math.inf
        limit = math.expm1(crit * se) if scale == "log" else crit * se / abs(float(a.mean()))
        if abs(t) > crit and abs(change) > defn.tolerance and (best is None or abs(t) > abs(best.t)):
            best = Step(defn.path, k, change, t, limit)
    return best


def main_level(sessions: Sessions, defs: Sequence[MetricDef]) -> MainLevel:
    """The sessions to judge against: a lone disturbed session set aside, then those since the
    newest step over the gated metrics (the error rate is judged as counts, never cut)."""
    n = len(sessions)
    level = MainLevel(n, list(range(n)))
    defs = [d for d in defs if d.path != "error_rate"]
    if n < MIN_SESSIONS:
        return level
    values = {d.path: [group_value(s, d.path) for s in sessions] for d in defs}
    for d in defs:
        for o in session_outliers(values[d.path], d, alpha=FAMILY_ALPHA):
            if 1 < o.session < n:  # neighbours on both sides: a transient, not a step
                level.set_aside.setdefault(o.session - 1, []).append(describe(o))
    level.kept = [i for i in range(n) if i not in level.set_aside]
    for d in defs:
        step = metric_step([values[d.path][i] for i in level.kept], d)
        if step is not None:
            level.steps.append(Step(step.metric, level.kept[step.at], step.change, step.t, step.limit))
    level.kept = [i for i in level.kept if i >= level.since]
    return level


def _when(i: int, labels: Sequence[Optional[str]]) -> str:
    label = labels[i] if i < len(labels) else None
    return f"session {i + 1}" + (f" ({label})" if label else "")


def level_notes(level: MainLevel, sessions: Sessions, defs: Sequence[MetricDef],
                labels: Sequence[Optional[str]]) -> list[str]:
    """The notes an outcome carries when main moved: where and by how much, which session was
    set aside, and main's level over the kept sessions, one line per gated metric.
    ``labels``: each session's commit or recorded_at (None: unknown)."""
    if not level.moved:
        return []
    notes = []
    for i, why in sorted(level.set_aside.items()):
        notes.append(f"{MAIN_LEVEL_NOTE}: {_when(i, labels)} of {level.sessions} set aside as a lone "
                     f"disturbed session (its neighbours agree): {'; '.join(why)}")
    if level.steps:
        at = level.since
        moved = "; ".join(f"{registry.metric(s.metric).label} {_signed(s.change)}"
                          for s in level.steps if s.at == at)
        kept = len(level.kept)
        notes.append(f"{MAIN_LEVEL_NOTE}: main changed by {moved} at {_when(at, labels)} of "
                     f"{level.sessions}; judged against the {kept} session{'s' if kept != 1 else ''} "
                     f"since (a PR is judged against main's current level, never exempted)")
    for d in defs:
        if d.path == "error_rate":
            continue
        vals = [group_value(sessions[i], d.path) for i in range(level.sessions)]
        shown = " → ".join(_fmt(v) + ("" if i in level.kept else "*") for i, v in enumerate(vals))
        notes.append(f"{MAIN_LEVEL_NOTE}: {registry.metric(d.path).label} over the sessions: {shown} "
                     f"(* not judged against)")
    return notes


def _signed(x: float) -> str:
    return ("+" if x >= 0 else "-") + fmt_on_scale("log", abs(x))


def _fmt(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.4g}"

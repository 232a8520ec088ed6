"""Main's level over a baseline's sessions: where main changed, and a lone disturbed session (pure).

Kept one session per push (``--goodput-sessions=1 --goodput-history=N``), a baseline's
sessions are a time series of main. A change merged on main puts sessions of two levels in
one baseline; their spread is then the step itself, and every later verdict reads
*underpowered* until the step fills the window. So before judging, the sessions are read as
a series (oldest first), on each gated metric's analysis scale (``spread.scale_of``):

1. **A lone disturbed session** — one session, neither the oldest nor the newest, far from
   all the others on a gated metric — is named and set aside for the whole test: its
   neighbours on both sides agree, so main did not move. Leave-one-out: its deviation d from
   the others' mean against the prediction interval of one more draw, t·σ·√(1 + 1/(S−1)),
   Bonferroni over the S sessions at ``LONE_ALPHA``, and beyond the metric's tolerance.
2. **A step** — for each split k of the S sessions left, the mean after against the mean
   before: t = d / (σ·√(1/k + 1/(S−k))), σ from the within-segment sum of squares (ν = S − 2).
   A step is a split whose |t| passes Student's t at ``STEP_ALPHA`` two-sided, Bonferroni
   over the S − 1 splits, *and* whose change is beyond the metric's tolerance (a step the
   gate tolerates does not blind it). Fewer than ``MIN_SESSIONS`` sessions: no step is read.

Both tests take σ as the measured SD or, when larger, the SD pooled with a prior of the
metric's launch and day-to-day spread (the registry's ``run_cv`` and ``day_cv``, worth
``PRIOR_RUNS`` sessions), on ν + ``PRIOR_RUNS`` degrees of freedom: from ν = 1-3 alone,
Student's t at these levels would hide a 25 % step. The verdicts then take the level from the
sessions since the step and the spread from every session kept before and after it, each
level centred on its own (``level_spreads``): a step moves main's level, not its noise.

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
from pytest_goodput.judge.noise.sittings import sitting_count
from pytest_goodput.judge.noise.spread import fmt_on_scale, scale_of
from pytest_goodput.judge.values import Sessions, group_value
from pytest_goodput.schema import registry
from pytest_goodput.judge.vocabulary import PRIOR_RUNS, MetricDef

#: Chance that an unchanged main shows a step on one metric, split over the splits.
STEP_ALPHA = 0.01
#: Chance that an unchanged main names a lone session on one metric, split over the sessions:
#: setting one aside costs one session of power, keeping a disturbed one blinds five pushes.
LONE_ALPHA = 0.05
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


def is_series(recorded_at: Sequence[Optional[str]], client_cpus: Sequence[Optional[str]],
              commits: Sequence[Optional[str]]) -> bool:
    """Whether the sessions are a series of main: two commits or more, or two sittings or more
    (``sittings``). Sessions recorded at once share one main: the recording names an outlier
    among them (``recording.py``) and the judge takes them as recorded."""
    return len({c for c in commits if c}) > 1 or (sitting_count(recorded_at, client_cpus) or 1) > 1


def _sigma(ss: float, nu: int, prior: float, prior_runs: float) -> tuple[float, float]:
    """(σ, degrees of freedom): the measured SD or, when larger, the one pooled with the prior
    (worth ``prior_runs`` sessions); always on ν + ``prior_runs`` degrees of freedom."""
    shrunk = math.sqrt((prior_runs * prior**2 + ss) / (prior_runs + nu))
    measured = math.sqrt(ss / nu) if nu > 0 else 0.0
    return max(measured, shrunk), prior_runs + nu


def _change(scale: str, d: float, centre: float) -> float:
    if scale == "log":
        return math.expm1(d)
    return d / centre if centre else math.inf


def metric_step(values: Sequence[Optional[float]], defn: MetricDef, *,
                alpha: float = STEP_ALPHA, prior_runs: float = PRIOR_RUNS) -> Optional[Step]:
    """The most significant step of one metric over its sessions' values (oldest first), or
    None: a session without a regular value (failures, not measured) means no step is read."""
    scale = scale_of(defn.path)
    ys = _ys(values, scale)
    if scale == "absolute" or len(ys) < MIN_SESSIONS or any(y is None for y in ys):
        return None
    y = np.asarray(ys, dtype=float)
    n = len(y)
    prior = _prior(defn, float(np.mean(y)), scale)
    best: Optional[Step] = None
    for k in range(1, n):
        a, b = y[:k], y[k:]
        ss = float(np.sum((a - a.mean()) ** 2) + np.sum((b - b.mean()) ** 2))
        sigma, df = _sigma(ss, n - 2, prior, prior_runs)
        se = sigma * math.sqrt(1.0 / k + 1.0 / (n - k))
        d = float(b.mean() - a.mean())
        t = d / se if se > 0 else math.inf
        crit = stats.t_ppf(1.0 - alpha / (2.0 * (n - 1)), df)
        change = _change(scale, d, float(a.mean()))
        if abs(t) > crit and abs(change) > defn.tolerance and (best is None or abs(t) > abs(best.t)):
            best = Step(defn.path, k, change, t, _change(scale, math.copysign(crit * se, d), float(a.mean())))
    return best


def lone_sessions(values: Sequence[Optional[float]], defn: MetricDef, *,
                  alpha: float = LONE_ALPHA, prior_runs: float = PRIOR_RUNS) -> dict[int, str]:
    """Sessions (0-based, neither the oldest nor the newest) far from all the others on one
    metric: leave-one-out, the prediction interval of one more draw, Bonferroni over the
    sessions, beyond the tolerance; by session, what it did in the report's words."""
    scale = scale_of(defn.path)
    ys = _ys(values, scale)
    if scale == "absolute" or len(ys) < MIN_SESSIONS + 1 or any(y is None for y in ys):
        return {}
    y = np.asarray(ys, dtype=float)
    n = len(y)
    prior = _prior(defn, float(np.mean(y)), scale)
    out = {}
    for i in range(1, n - 1):
        rest = np.delete(y, i)
        sigma, df = _sigma(float(np.sum((rest - rest.mean()) ** 2)), n - 2, prior, prior_runs)
        half = stats.t_ppf(1.0 - alpha / (2.0 * n), df) * sigma * math.sqrt(1.0 + 1.0 / (n - 1))
        d = float(y[i] - rest.mean())
        change = _change(scale, d, float(rest.mean()))
        if abs(d) > half and abs(change) > defn.tolerance:
            limit = _change(scale, math.copysign(half, d), float(rest.mean()))
            out[i] = (f"{registry.metric(defn.path).label} {_signed(change)} against the other {n - 1} "
                      f"(prediction limit {_signed(limit)}, tolerance {fmt_on_scale(scale, defn.tolerance)})")
    return out


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
        for i, why in lone_sessions(values[d.path], d).items():
            level.set_aside.setdefault(i, []).append(why)
    level.kept = [i for i in range(n) if i not in level.set_aside]
    for d in defs:
        step = metric_step([values[d.path][i] for i in level.kept], d)
        if step is not None:
            level.steps.append(Step(step.metric, level.kept[step.at], step.change, step.t, step.limit))
    level.kept = [i for i in level.kept if i >= level.since]
    return level


def level_spreads(level: MainLevel, sessions: Sessions,
                  defs: Sequence[MetricDef]) -> dict[str, tuple[float, int, str]]:
    """(s, ν, note) by metric: the session-to-session spread of every session not set aside,
    each segment between steps centred on its own level (ν = sessions − segments), then as
    the steps read it: the measured SD or, when larger, the one pooled with the metric's prior
    launch and day-to-day spread (``run_cv`` and ``day_cv``: a series' sessions are one a
    sitting; worth ``PRIOR_RUNS`` sessions), always on ν + ``PRIOR_RUNS``
    degrees of freedom (the verdict takes it as it is: ``spread._within_sitting`` with no
    prior runs of its own). A step moves main's level, not its noise: the sessions before it
    still measure the noise, so the few sessions since it set the level without costing the
    verdict its power; centring each level on its own costs a degree of freedom per level,
    which the prior's pseudo-sessions give back (docs/statistics.md, "Main's level")."""
    pool = [i for i in range(level.sessions) if i not in level.set_aside]
    cuts = sorted({s.at for s in level.steps})
    if not cuts:
        return {}
    segments = [[i for i in pool if lo <= i < hi] for lo, hi in zip([0] + cuts, cuts + [level.sessions])]
    segments = [g for g in segments if g]
    # One session since the step: the level is that session's, one draw of the launch and the
    # day, so Var(d) = 2σ² and the verdict says what sets it (the next push adds a second).
    alone = (f"; main's current level rests on the one session since its step (session {level.since + 1}): "
             f"the next push on main adds a second") if len(level.kept) == 1 else ""
    out: dict[str, tuple[float, int, str]] = {}
    for d in defs:
        scale = scale_of(d.path)
        if scale == "absolute":
            continue
        ss, n = 0.0, 0
        for g in segments:
            ys = _ys([group_value(sessions[i], d.path) for i in g], scale)
            if any(y is None for y in ys):
                break
            y = np.asarray(ys, dtype=float)
            if scale == "relative":  # on the scale of ``spread.on_scale``: relative to the level
                y = y / float(np.mean(y)) if np.mean(y) > 0 else y
            ss += float(np.sum((y - y.mean()) ** 2))
            n += len(y)
        else:
            nu = n - len(segments)
            if nu >= 1:
                sd, df = _sigma(ss, nu, _prior(d, 1.0, scale), PRIOR_RUNS)
                out[d.path] = (sd, int(df), f"run-to-run spread {fmt_on_scale(scale, sd)} across {n} baseline "
                                            f"sessions, each of main's levels centred on its own, with the "
                                            f"prior's {PRIOR_RUNS:g} sessions{alone}")
    return out


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
        shown = " -> ".join(_fmt(v) + ("" if i in level.kept else "*") for i, v in enumerate(vals))
        notes.append(f"{MAIN_LEVEL_NOTE}: {registry.metric(d.path).label} over the sessions: {shown} "
                     f"(* not judged against)")
    return notes


def _signed(x: float) -> str:
    return ("+" if x >= 0 else "-") + fmt_on_scale("log", abs(x))


def _fmt(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.4g}"

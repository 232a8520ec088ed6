"""Outlier sessions of a recorded baseline: named at recording time, never dropped (pure).

A baseline's sessions are draws of one session-to-session distribution; later verdicts take
their spread as the run-to-run noise. One session recorded on a bad minute (a neighbour's
build, a throttled CPU) inflates that spread and makes every later verdict of the metric
*underpowered* — honest, but nobody chose it. So at recording each session is held against
the others (leave-one-out): on the analysis scale of ``spread.scale_of``, its deviation d
from the others' mean is judged by the prediction interval of one more draw,
d ~ t_df · σ · √(1 + 1/n) with n the other sessions, σ their SD shrunk towards the
registry's prior as ``spread`` does it (the prior only ever widens). A session is an
outlier on a metric only when d lies outside the interval at a strict level (Bonferroni
over the sessions: a clean recording names a metric's session with probability at most
``FAMILY_ALPHA``) *and* the change is beyond the metric's tolerance, so noise smaller than
what the gate tolerates never names one. A value that failures made +∞ (or a rate of 0)
where most sessions have a regular one is an outlier by itself. The user decides what to
do: the session stays in the baseline (``docs/statistics.md``, "Recording: outlier sessions").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from pytest_goodput import stats
from pytest_goodput.judge.noise.spread import Scale, fmt_on_scale, scale_of
from pytest_goodput.judge.values import Sessions, group_value
from pytest_goodput.schema import registry
from pytest_goodput.judge.vocabulary import PRIOR_RUNS, MetricDef

#: Chance that a clean recording names a session on one metric, split over its sessions
#: (Bonferroni). Strict on purpose: at 1 % a noisy machine's clean recordings were named in
#: 4-5 % of cases (session values have heavier tails than normal); at 0.1 % in under 1 %,
#: and a 40 % slower session is still named from 5 sessions on (bench/recording_outliers.py).
FAMILY_ALPHA = 0.001
#: Fewest sessions the rule judges: with two, neither can be told from the other.
MIN_SESSIONS = 3
#: Every note naming an outlier starts so (reports pick them out of the other notes).
OUTLIER_NOTE = "outlier session recorded"


@dataclass(frozen=True)
class Outlier:
    """One session far from the others on one metric.

    ``session``: 1-based position among the ``sessions`` judged (oldest first); ``change``:
    the session against the others' centre on the metric's scale (relative, or absolute
    for the error rate; ±∞ when failures made the value +∞ or a rate is 0); ``limit``: the
    prediction limit of that change on the side it fell (±∞ never has one: None).
    """

    session: int
    sessions: int
    metric: str
    value: float
    others: float
    change: float
    limit: Optional[float]
    tolerance: float
    scale: Scale


def _on_scale(scale: Scale, value: Optional[float]) -> Optional[float]:
    """The value where the leave-one-out test works: log, or the value itself (attainment
    is compared relative to the others' centre afterwards; the error rate is absolute)."""
    if value is None or not math.isfinite(value):
        return None
    if scale == "log":
        return math.log(value) if value > 0 else None
    return value


def _change(scale: Scale, d: float, centre: float) -> float:
    """A deviation on the analysis scale as the change reports show."""
    if scale == "log":
        return math.expm1(d)
    if scale == "relative":
        return d / centre if centre > 0 else math.inf
    return d


def _centre(scale: Scale, ys: Sequence[float]) -> float:
    mean = float(np.mean(ys))
    return math.exp(mean) if scale == "log" else mean


def _sd(ys: Sequence[float], scale: Scale, machine_cv: float, prior_runs: float) -> tuple[float, float]:
    """(σ, degrees of freedom) of one session on the analysis scale: the others' SD shrunk
    towards the prior (``spread._variance`` without the current run's own noise)."""
    s = float(np.std(ys, ddof=1))
    nu = len(ys) - 1
    prior = machine_cv
    if scale == "relative":
        prior *= abs(float(np.mean(ys)))
    if s >= prior:
        return s, float(nu)
    return math.sqrt((prior_runs * prior**2 + nu * s**2) / (prior_runs + nu)), prior_runs + nu


def session_outliers(values: Sequence[Optional[float]], defn: MetricDef, *,
                     alpha: float = FAMILY_ALPHA, prior_runs: float = PRIOR_RUNS) -> list[Outlier]:
    """Outlier sessions of one metric, from the sessions' values (oldest first; None: not
    measured in that session). Fewer than ``MIN_SESSIONS`` regular values: none."""
    scale = scale_of(defn.path)
    machine_cv = registry.metric(defn.path).run_cv
    ys = [_on_scale(scale, v) for v in values]
    regular = [i for i, y in enumerate(ys) if y is not None]
    if len(regular) < MIN_SESSIONS:
        return []
    out: list[Outlier] = []
    worse_inf = {"lower": math.inf, "higher": -math.inf}[defn.direction]
    for i, v in enumerate(values):
        if v is None:
            continue
        others = [ys[j] for j in regular if j != i]
        y = ys[i]
        centre = _centre(scale, [o for o in others if o is not None])
        if y is None:
            # +∞ from failures (or a rate of 0) where most sessions have a regular value.
            if 2 * len(regular) > len([u for u in values if u is not None]):
                out.append(Outlier(i + 1, len(values), defn.path, v, centre, worse_inf, None,
                                   defn.tolerance, scale))
            continue
        rest = [o for o in others if o is not None]
        if len(rest) < MIN_SESSIONS - 1:
            continue
        d = y - float(np.mean(rest))
        sd, df = _sd(rest, scale, machine_cv, prior_runs)
        # Two-sided, Bonferroni over the sessions judged: FAMILY_ALPHA per metric.
        q = 1.0 - alpha / (2.0 * len(regular))
        half = stats.t_ppf(q, df) * sd * math.sqrt(1.0 + 1.0 / len(rest))
        change = _change(scale, d, centre)
        if abs(d) > half and abs(change) > defn.tolerance:
            limit = _change(scale, math.copysign(half, d), centre)
            out.append(Outlier(i + 1, len(values), defn.path, v, centre, change, limit,
                               defn.tolerance, scale))
    return out


def recording_outliers(sessions: Sessions, defs: Sequence[MetricDef], *,
                       alpha: float = FAMILY_ALPHA, prior_runs: float = PRIOR_RUNS) -> list[Outlier]:
    """Outlier sessions of a baseline (its sessions oldest first) on each gated metric, by
    session then metric; each session's value is ``values.group_value`` of its runs."""
    found = [o for d in defs
             for o in session_outliers([group_value(s, d.path) for s in sessions], d,
                                       alpha=alpha, prior_runs=prior_runs)]
    return sorted(found, key=lambda o: o.session)


def describe(o: Outlier) -> str:
    """What the session did on the metric, against the others, in the report's words."""
    info = registry.metric(o.metric)
    label = info.label
    n = o.sessions - 1
    if not math.isfinite(o.change):
        what = ("failures reach this percentile (+inf)" if info.direction == "lower"
                else f"{label} is 0")
        return f"{label}: {what} in this session, not in most of the other {n}"
    worse = (o.change > 0) == (info.direction == "lower")
    limit = _signed(o.scale, o.limit) if o.limit is not None else "none"
    return (f"{label} {_signed(o.scale, o.change)} ({'worse' if worse else 'better'}) against the "
            f"other {n} sessions (prediction limit {limit}, tolerance {fmt_on_scale(o.scale, o.tolerance)})")


def _signed(scale: Scale, x: float) -> str:
    return ("+" if x >= 0 else "-") + fmt_on_scale(scale, abs(x))


def outlier_notes(found: Sequence[Outlier], recorded_now: int, command: str) -> list[str]:
    """One note per outlier session, naming its metrics and how to record again.

    ``recorded_now``: how many of the newest sessions this run recorded (the rest were
    recorded before and kept); ``command``: the exact command that records the baseline again.
    """
    by_session: dict[int, list[Outlier]] = {}
    for o in found:
        by_session.setdefault(o.session, []).append(o)
    notes = []
    for k, group in sorted(by_session.items()):
        total = group[0].sessions
        when = "recorded now" if k > total - recorded_now else "recorded earlier"
        what = "; ".join(describe(o) for o in group)
        notes.append(f"{OUTLIER_NOTE}: session {k} of {total} ({when}): {what}. It is kept, "
                     f"and its spread widens every later verdict of these metrics; to record "
                     f"the baseline again: {command}")
    return notes

"""Power planning: the noise a baseline holds, split by its source, and what the gate can
detect with one PR launch or with K (pure).

A baseline session is one engine launch measured ``R`` times (repeats). Its runs differ by
what varies *within* a launch (the requests' own noise, the run's moment); its sessions
differ by that and by what each launch brings (placement, warm-up, the allocator, clocks).
More requests per run shrink the first; only more launches shrink the second. On the
metric's analysis scale (``spread.scale_of``: log for latencies and rates, so SDs read as
relative changes), the split is a one-way random-effects analysis of the sessions' runs:

- within a launch: σ_w² = Σᵢ Σⱼ (yᵢⱼ − ȳᵢ)² / Σᵢ (Rᵢ − 1), the pooled variance of one
  run's value among the repeats of its session (needs a session with two or more runs);
- between launches: σ_b² = max(0, s² − σ_w² · mean(1/Rᵢ)), with s² the variance of the
  session values ȳᵢ (the gate's run-to-run spread), the part of it no repeat can average out.

The gate judges one PR launch against S baseline sessions: Var(d) = σ²·(1/K + 1/S) with
K = 1, σ² the session spread shrunk towards the registry's prior (``spread.half_width``).
Measuring the PR over K launches averages K draws of the launch level, so the plan states
the smallest worse change the gate could call regressed with one launch and the fewest
launches that bring it within the tolerance, or that none can (the baseline's own term
σ²/S, and a between-sitting term when the run is judged outside the baseline's sitting,
remain whatever K is: record more sessions, or in separate sittings).
``docs/statistics.md`` ("Power planning") has the formulas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import numpy as np

from pytest_goodput.judge.noise.sittings import Sittings
from pytest_goodput.judge.noise.spread import (DayTerm, Scale, day_term, detectable_change, half_width, on_scale,
                                               scale_of, session_spread)
from pytest_goodput.judge.values import Sessions, baseline_value, group_value
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.judge.vocabulary import CONFIDENCE, PRIOR_RUNS, MetricDef

#: The most PR launches a plan considers; beyond it, "more launches alone will not do".
MAX_LAUNCHES = 20
#: What a plan with more baseline sessions considers: up to this many sessions (a baseline
#: that keeps main's newest sessions holds 15–30 for one launch per push) and PR launches.
MAX_PLAN_SESSIONS = 30
PLAN_LAUNCHES = 8
#: A plan's K brings the detectable change this far within the tolerance (as the gate's own
#: advice on baseline sessions does), so it is not met only on paper.
MARGIN = 0.95

__all__ = ["MAX_LAUNCHES", "MAX_PLAN_SESSIONS", "NoiseSplit", "PLAN_LAUNCHES", "PlanRow", "noise_split",
           "plan_metric", "seconds_per_launch"]


@dataclass(frozen=True)
class NoiseSplit:
    """A metric's noise in a baseline, on its analysis scale (relative SDs for log scales).

    ``within``: SD of one run's value among the repeats of its launch (None: no session has
    two runs); ``between``: SD of a launch's own level, the within part taken out (None with
    fewer than two sessions); ``session``: SD of the session values, the gate's spread.
    """

    scale: Scale
    within: Optional[float]
    between: Optional[float]
    session: Optional[float]
    sessions: int
    repeats: float  # mean runs per session


def _run_values(sessions: Sessions, path: str, centre: float) -> list[list[float]]:
    scale = scale_of(path)
    out = []
    for s in sessions:
        ys = [on_scale(scale, group_value([r], path), centre) for r in s]
        kept = [y for y in ys if y is not None]
        if kept:
            out.append(kept)
    return out


def noise_split(sessions: Sessions, path: str) -> Optional[NoiseSplit]:
    """The within- and between-launch SDs of ``path`` in a baseline's sessions (module
    docstring); None when the metric has no finite value in them."""
    centre = baseline_value(sessions, path)
    if centre is None or not math.isfinite(centre) or centre <= 0 and scale_of(path) != "absolute":
        return None
    groups = _run_values(sessions, path, centre)
    if not groups:
        return None
    repeats = float(np.mean([len(g) for g in groups]))
    dof = sum(len(g) - 1 for g in groups)
    within = (math.sqrt(sum(float(np.sum((np.array(g) - np.mean(g)) ** 2)) for g in groups) / dof)
              if dof > 0 else None)
    s, _, _ = session_spread(path, sessions, centre)
    between = None
    if s is not None:
        inv_r = float(np.mean([1.0 / len(g) for g in groups]))
        between = math.sqrt(max(0.0, s * s - (within or 0.0) ** 2 * inv_r))
    return NoiseSplit(scale_of(path), within, between, s, len(sessions), repeats)


@dataclass(frozen=True)
class PlanRow:
    """What the gate can detect on one metric: with one PR launch (``one_launch``, a worse
    change on the metric's own scale), the launches that bring it within the tolerance
    (None: none up to ``MAX_LAUNCHES``), what it tends to with unlimited launches, and
    ``with_sessions``: the fewest PR launches (≤ ``PLAN_LAUNCHES``) that reach it with some
    number of baseline sessions up to ``MAX_PLAN_SESSIONS``, as (sessions, launches), the
    fewest sessions for those launches (None: none does)."""

    metric: str
    tolerance: float
    split: NoiseSplit
    one_launch: float
    launches: Optional[int]
    limit: float
    with_sessions: Optional[tuple[int, int]] = None


def _detectable_with(defn: MetricDef, split: NoiseSplit, k: int, confidence: float,
                     prior_runs: float, day: Optional[DayTerm]) -> float:
    # The request-level part of d: one launch's value pools R runs, each with σ_w of noise.
    w = (split.within or 0.0) / math.sqrt(max(split.repeats, 1.0))
    within_d = w * math.sqrt(1.0 / k + 1.0 / max(split.sessions, 1))
    machine = registry.metric(defn.path).run_cv
    h = half_width(within_d, machine, split.session, split.sessions - 1, split.sessions,
                   confidence, prior_runs, day, current_sessions=k)
    return detectable_change(split.scale, defn.direction, h, 0.0)


def plan_metric(sessions: Sessions, defn: MetricDef, *, confidence: float = CONFIDENCE,
                prior_runs: float = PRIOR_RUNS, sittings: Optional[Sittings] = None) -> Optional[PlanRow]:
    """The power plan of one gated metric against these baseline sessions (module docstring);
    None for the error rate (judged on exact counts, never underpowered) and for a metric
    the baseline has no finite value of. ``sittings``: how the PR run will stand to the
    baseline's sittings (None: inside one, as a recording checked the same hour)."""
    if defn.path == "error_rate":
        return None
    day, _ = day_term(defn.path, sittings)
    split = noise_split(sessions, defn.path)
    if split is None:
        return None
    one = _detectable_with(defn, split, 1, confidence, prior_runs, day)
    need = next((k for k in range(1, MAX_LAUNCHES + 1)
                 if _detectable_with(defn, split, k, confidence, prior_runs, day) < defn.tolerance * MARGIN),
                None)
    limit = _detectable_with(defn, split, 10**6, confidence, prior_runs, day)
    return PlanRow(defn.path, defn.tolerance, split, one, need, limit,
                   _with_sessions(defn, split, confidence, prior_runs, day))


def _with_sessions(defn: MetricDef, split: NoiseSplit, confidence: float, prior_runs: float,
                   day: Optional[DayTerm]) -> Optional[tuple[int, int]]:
    """(S, K): the fewest PR launches K ≤ PLAN_LAUNCHES, and for them the fewest baseline
    sessions S ≤ MAX_PLAN_SESSIONS (at least those recorded), whose detectable change is
    within the tolerance, the spread measured so far kept (as the gate's own advice on
    sessions assumes); None when no such pair does."""
    for k in range(1, PLAN_LAUNCHES + 1):
        for n in range(max(split.sessions, 2), MAX_PLAN_SESSIONS + 1):
            more = replace(split, sessions=n)
            if _detectable_with(defn, more, k, confidence, prior_runs, day) < defn.tolerance * MARGIN:
                return n, k
    return None


def seconds_per_launch(sessions: Sequence[Sequence[Samples]]) -> float:
    """Seconds of load one launch measured, on average: the sum of its runs' windows."""
    totals = [sum(r.window_s for r in s if math.isfinite(r.window_s)) for s in sessions if s]
    return float(np.mean(totals)) if totals else 0.0

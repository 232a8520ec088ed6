"""Run-to-run spread: how far a session's value moves on this machine by chance (pure).

The unit is the recorded session, not the repeat: repeats of one session share the
machine's state (neighbours, clocks, caches), so counting them as independent makes the
spread too small. The spread comes from the baseline's sessions only — never from the run
being judged, or an intermittent slowdown would widen its own noise estimate.

The change d between the current session and the baseline's mean is judged by a
prediction interval (``docs/statistics.md``): the current session is one more draw of the
session-to-session distribution, so Var(d) = σ²·(1 + 1/S) with S baseline sessions. σ² is
the sample variance of the baseline's session values (ν = S − 1 degrees of freedom; it
holds request-level and machine noise alike), shrunk towards a prior worth ν₀ pseudo-
sessions: the registry's machine spread plus the request-level noise the within-run
interval of this very comparison measured. The prior only ever widens: when the sessions
vary more than it assumes, they decide alone. With one baseline session the prior alone
decides, and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Optional

import numpy as np

from pytest_goodput import stats
from pytest_goodput.judge.noise.sittings import Sittings
from pytest_goodput.judge.values import Sessions, group_value
from pytest_goodput.judge.vocabulary import PRIOR_RUNS
from pytest_goodput.schema import registry

#: Weight of the between-sitting prior (``registry.DAY_CV``), in pseudo-sittings.
PRIOR_SITTINGS = 6.0


@dataclass(frozen=True)
class DayTerm:
    """The between-sitting part of Var(d) on the analysis scale, and its degrees of freedom."""

    var: float
    df: float

Scale = str  # "log" | "relative" | "absolute"


def scale_of(path: str) -> Scale:
    """The analysis scale: absolute for the error rate, relative for attainment, log otherwise."""
    if path == "error_rate":
        return "absolute"
    return "relative" if registry.metric(path).kind == "proportion" else "log"


def on_scale(scale: Scale, value: Optional[float], centre: float) -> Optional[float]:
    """A value on the analysis scale (None when it has none there)."""
    if value is None or not math.isfinite(value):
        return None
    if scale == "absolute":
        return value
    if scale == "relative":
        return value / centre
    return math.log(value) if value > 0 else None


def fmt_on_scale(scale: Scale, x: float) -> str:
    """A spread or change on its scale: percentage points (absolute) or a percent."""
    return f"{x * 100:.2f} pp" if scale == "absolute" else f"{x:.1%}"


def session_spread(path: str, sessions: Sessions, centre: float,
                   failure_value: float = math.inf) -> tuple[Optional[float], int, str]:
    """(s, ν, note): the measured SD of the baseline's session values on the analysis scale
    (None with fewer than two sessions), its degrees of freedom, and a note.

    ``failure_value``: the stand-in for a failed request in a percentile, so a session whose
    failures reach it is part of the spread (at its slowest rank), not left out of it.
    """
    scale = scale_of(path)
    ys = [y for y in (on_scale(scale, group_value(s, path, failure_value), centre)
                      for s in sessions) if y is not None]
    if len(ys) < 2:
        return None, 0, (f"{len(ys)} baseline session: run-to-run spread unknown, assumed "
                         f"{fmt_on_scale(scale, registry.metric(path).run_cv)} of machine noise")
    s = float(np.std(ys, ddof=1))
    return s, len(ys) - 1, f"run-to-run spread {fmt_on_scale(scale, s)} across {len(ys)} baseline sessions"


def day_term(path: str, sit: Optional[Sittings]) -> tuple[Optional[DayTerm], str]:
    """The between-sitting term of a run judged outside its baseline's only sitting, and a note.

    Sessions recorded in one sitting share its level, so their spread cannot show how far
    the level moves to another day or machine; the run judged there is one draw of that and
    the baseline's sitting another: Var = σ_day² · (1 + 1/D) with D = 1, σ_day the registry's
    prior worth ``PRIOR_SITTINGS`` sittings. Sessions from two or more sittings measure the
    between-sitting spread themselves (their spread holds it), and a run in a sitting of the
    baseline is judged by that sitting's spread alone.
    """
    if sit is None or not sit.current_new or sit.count > 1:
        return None, ""
    cv = registry.metric(path).day_cv
    if cv <= 0:
        return None, ""
    note = (f"the baseline's sessions share one sitting and this run is not in it: a "
            f"between-sitting spread of {fmt_on_scale(scale_of(path), cv)} is assumed (sessions "
            f"recorded on separate days or machines measure it)")
    return DayTerm(cv**2 * (1.0 + 1.0 / sit.count), PRIOR_SITTINGS), note


def _variance(within_sd: float, machine_sd: float, s: Optional[float], nu: int, sessions: int,
              prior_runs: float, day: Optional[DayTerm] = None,
              current_sessions: int = 1) -> tuple[float, float]:
    """(variance of d, its degrees of freedom) on one side (see the module docstring); a
    between-sitting term adds its variance, the degrees of freedom by Welch–Satterthwaite.
    ``current_sessions``: launches the judged side's value averages (K: Var = σ²·(1/K + 1/S))."""
    var, df = _within_sitting(within_sd, machine_sd, s, nu, sessions, prior_runs, current_sessions)
    if day is None or day.var <= 0 or not math.isfinite(var):
        return var, df
    total = var + day.var
    return total, total**2 / (var**2 / df + day.var**2 / day.df)


def _within_sitting(within_sd: float, machine_sd: float, s: Optional[float], nu: int,
                    sessions: int, prior_runs: float, current_sessions: int = 1) -> tuple[float, float]:
    k = 1.0 / max(current_sessions, 1) + 1.0 / max(sessions, 1)
    prior = machine_sd**2 * k + within_sd**2
    if s is None or nu < 1:  # ν = 0: a plan's one session, its spread measured elsewhere
        return prior, prior_runs
    measured = s**2 * k
    if prior_runs <= 0:  # the spread already holds its prior (main's levels): this run's own
        return max(measured, within_sd**2), float(nu)  # request-level noise is the floor
    if measured > prior:
        # The sessions say this machine is noisier than the prior assumes: the prior must not
        # talk the spread down, so the data alone decide (with their own few degrees of freedom).
        return measured, float(nu)
    return (prior_runs * prior + nu * measured) / (prior_runs + nu), prior_runs + nu


def half_width(within_sd: float, machine_sd: float, s: Optional[float], nu: int, sessions: int,
               confidence: float, prior_runs: float = PRIOR_RUNS,
               day: Optional[DayTerm] = None, current_sessions: int = 1) -> float:
    """Half-width of the prediction interval of d on one side (see the module docstring).

    ``within_sd``: the request-level SD of d on that side (the within-run interval over its
    normal quantile); ``machine_sd``: the registry's prior machine spread of one session;
    ``current_sessions``: launches the judged value averages (a power plan's K; the gate: 1).
    """
    var, df = _variance(within_sd, machine_sd, s, nu, sessions, prior_runs, day, current_sessions)
    return stats.t_ppf(0.5 + confidence / 2.0, df) * math.sqrt(var)


#: Most baseline sessions a suggestion to record more will name.
MAX_SUGGESTED_SESSIONS = 20
#: Most PR launches a suggestion will name (``--goodput-head-launches``' ceiling).
MAX_SUGGESTED_LAUNCHES = 20


def sessions_needed(within_sd: float, machine_sd: float, s: Optional[float], have: int,
                    scale: str, direction: str, tolerance: float, confidence: float,
                    prior_runs: float, day: Optional[DayTerm] = None, current_sessions: int = 1) -> Optional[int]:
    """Baseline sessions that would bring the detectable change within the tolerance, at the
    spread measured so far; None when no number of sessions would (the current session's
    own spread remains)."""
    for n in range(have + 1, have + MAX_SUGGESTED_SESSIONS + 1):
        h = half_width(within_sd, machine_sd, s, n - 1, n, confidence, prior_runs, day, current_sessions)
        if detectable_change(scale, direction, h, 0.0) < tolerance * 0.95:
            return n
    return None


def launches_needed(within_sd: float, machine_sd: float, s: Optional[float], have: int,
                    scale: str, direction: str, tolerance: float, confidence: float,
                    prior_runs: float, day: Optional[DayTerm] = None,
                    current_sessions: int = 1) -> Optional[tuple[int, int]]:
    """Where baseline sessions alone cannot do it (the PR's own launch is one draw of the
    launch level): the fewest PR launches K, then baseline sessions n (at least ``have``), that
    would bring the detectable change within the tolerance at the spread measured so far;
    None when none would (the request-level or between-sitting share remains)."""
    def within(k: int, n: int) -> bool:
        h = half_width(within_sd, machine_sd, s, n - 1, n, confidence, prior_runs, day, k)
        return detectable_change(scale, direction, h, 0.0) < tolerance * 0.95

    most = have + MAX_SUGGESTED_SESSIONS  # the detectable change shrinks with both K and n
    for k in range(current_sessions + 1, MAX_SUGGESTED_LAUNCHES + 1):
        if within(k, most):
            return k, next(n for n in range(have, most + 1) if within(k, n))
    return None


def spread_df(within_sd: float, machine_sd: float, s: Optional[float], nu: int, sessions: int,
              prior_runs: float = PRIOR_RUNS, day: Optional[DayTerm] = None,
              current_sessions: int = 1) -> float:
    """Degrees of freedom of the variance behind :func:`half_width` (those of its t)."""
    return _variance(within_sd, machine_sd, s, nu, sessions, prior_runs, day, current_sessions)[1]


def chi2_ppf(q: float, df: float) -> float:
    """Quantile of the chi-square distribution (Wilson–Hilferty: within 1 % from 3 degrees of freedom on, 2.5 % at 1)."""
    z = NormalDist().inv_cdf(q)
    c = 2.0 / (9.0 * df)
    return df * max(0.0, 1.0 - c + z * math.sqrt(c)) ** 3


def power_bound(df: float, alpha: float) -> float:
    """Factor turning a half-width into a one-sided (1 − alpha) lower confidence bound of it.

    The variance behind a half-width is an estimate with ``df`` degrees of freedom
    (ν·σ̂²/σ² ~ χ²_ν), so σ ≥ σ̂·√(ν / χ²_{ν, 1−alpha}) with confidence 1 − alpha.
    """
    return math.sqrt(df / chi2_ppf(1.0 - alpha, df))


def prior_dominates(nu: int, prior_runs: float = PRIOR_RUNS) -> bool:
    """The prior outweighs the sessions: they measured fewer degrees of freedom (S − 1) than
    the prior's pseudo-sessions, e.g. one or two baseline sessions at ``PRIOR_RUNS`` = 3."""
    return nu < prior_runs


def power_factor(df: float, nu: int, alpha: float, prior_runs: float = PRIOR_RUNS) -> float:
    """Factor on the worse half-width before it is held against the tolerance (underpowered).

    The half-width is the critical value of this very comparison: a worse change of that size
    reads *regressed* half of the time, whatever the true spread (the current run's noise is
    symmetric about it). When the sessions measured the spread, it may lie beyond the
    tolerance only by their sampling error, and :func:`power_bound` gives that benefit of the
    doubt. When the prior dominates there is no sampling error to grant: the prior is an
    assumption, not a measurement, so the half-width is taken as it is (factor 1).
    """
    return 1.0 if prior_dominates(nu, prior_runs) else power_bound(df, alpha)


def detectable_change(scale: str, direction: str, worse_half: float, tolerance: float) -> float:
    """The smallest worse change the rule could call *regressed*: the tolerance, or the worse
    half-width of the interval when that is larger (on the change's own scale)."""
    if scale == "log":
        h = math.expm1(worse_half) if direction == "lower" else -math.expm1(-worse_half)
    else:
        h = worse_half
    return max(tolerance, h)


def z_of(confidence: float) -> float:
    """The normal quantile that turns a two-sided interval's half-width into an SD."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)

"""Regression verdicts: baseline sessions vs current runs, per metric (pure).

A metric *regressed* only when its change is both practically significant (the point
estimate is worse than the tolerance) and statistically significant (the confidence
interval of the change lies entirely on the worse side of zero). The interval combines
within-run noise (requests, from ``intervals``) with run-to-run noise (machine state,
from ``spread``: the baseline's sessions, shrunk towards the registry's prior). Runs of
one spec replay one schedule, so with ``paired=True`` request i of every run is compared
with request i of the others. Every verdict states its power: the smallest worse change it
could have judged *regressed*; when that exceeds the tolerance the verdict is
*underpowered* and says what would fix it. ``docs/statistics.md`` gives every formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping, Optional, Sequence

from pytest_goodput.judge.scalar.error_rate import error_rate_comparison
from pytest_goodput.judge.scalar.failures import failure_floor, stand_ins
from pytest_goodput.judge.scalar.intervals import Kind, paired_half_widths, unpaired_interval
from pytest_goodput.judge.noise.sittings import Sittings
from pytest_goodput.judge.noise.spread import (
    DayTerm,
    day_term,
    detectable_change,
    fmt_on_scale,
    half_width,
    launches_needed,
    power_factor,
    prior_dominates,
    scale_of,
    session_spread,
    sessions_needed,
    spread_df,
    z_of,
)
from pytest_goodput.judge.values import (
    Sessions,
    as_sessions,
    baseline_value,
    common_prefix,
    group_value,
    metric_value,
    pairable,
    pooled,
)
from pytest_goodput.judge.vocabulary import CONFIDENCE, POWER_ALPHA, PRIOR_RUNS, MetricDef, decide
from pytest_goodput.schema import registry
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.runs.results import Samples

_UNBOUNDED = 1e9
NOT_MEASURED = "not measured in baseline nor current run"

__all__ = ["CONFIDENCE", "DEFAULT_METRICS", "PRIOR_RUNS", "MetricDef", "compare", "compare_metric",
           "decide", "default_run_cv", "metric_value", "pairable"]


#: The metrics the default gates of the scenarios use, with their default tolerances.
DEFAULT_METRICS: dict[str, MetricDef] = {
    p: MetricDef.of(p)
    for p in (
        "goodput.requests_per_s",
        "goodput.attainment",
        "throughput.output_tokens_per_s",
        "metrics.ttft_ms.p99",
        "metrics.tpot_ms.p99",
        "metrics.e2e_ms.p50",
    )
}


def _kind(path: str) -> tuple[Kind, Optional[float]]:
    """The registry's noise model of a comparable metric and, for percentiles, P."""
    info = registry.metric(path)
    if not (info.gateable or path == "error_rate"):
        raise ValueError(f"metric {path!r} cannot be recomputed from per-request samples")
    return info.kind, info.percentile  # type: ignore[return-value]


def default_run_cv(path: str) -> float:
    """The prior run-to-run CV of a metric (the registry's noise prior)."""
    return registry.metric(path).run_cv


# --- verdicts --------------------------------------------------------------------------


def _result(defn: MetricDef, verdict: str, *, base: Optional[float] = None,
            cur: Optional[float] = None, change: Optional[float] = None,
            interval: Optional[tuple[float, float]] = None, method: str = "", note: str = "") -> MetricComparison:
    return MetricComparison(
        metric=defn.path, direction=defn.direction, baseline=base, current=cur, change=change,
        interval=interval, tolerance=defn.tolerance, verdict=verdict,  # type: ignore[arg-type]
        method=method, note=note,
    )


def compare_metric(
    defn: MetricDef,
    baseline: Sequence[Samples] | Sessions,
    current_runs: Sequence[Samples],
    *,
    seed: int = 0,
    confidence: float = CONFIDENCE,
    run_cv: Optional[float] = None,
    significance: Literal["zero", "tolerance"] = "zero",
    paired: bool = False,
    prior_runs: float = PRIOR_RUNS,
    power_alpha: float = POWER_ALPHA,
    sittings: Optional[Sittings] = None,
    current_sessions: int = 1,
    spreads: Optional[Mapping[str, tuple[float, int, str]]] = None,
) -> MetricComparison:
    """Judge one metric: the current session's runs (k ≥ 1) against the baseline's sessions.

    ``baseline``: runs grouped by recorded session (oldest first), or a flat list of runs,
    each then its own session. ``paired``: every run replays one schedule (same spec and
    seed), so request i is compared with request i (:func:`pairable` must hold; otherwise
    the unpaired intervals). ``sittings``: how the sessions fall into sittings and whether
    the current run is in one (None: it is, as when a bench records and judges in one go).
    ``current_sessions``: the K launches the current runs come from (Var = σ²·(1/K + 1/S)).
    ``spreads``: (s, ν, note) by metric, measured beyond these sessions (main's sessions
    before its step, centred on their own level: ``judge/noise/main_level.py``).
    """
    if defn.path == "error_rate":  # exact limits on pooled counts (judge/scalar/error_rate.py)
        return error_rate_comparison(defn, baseline, current_runs, confidence=confidence,
                                     significance=significance)
    if not current_runs:
        raise ValueError("compare_metric needs at least one current run")
    path = defn.path
    sessions = as_sessions(baseline)
    base_runs = [r for s in sessions for r in s]
    kind, pct = _kind(path)
    scale = scale_of(path)
    fail, reached = stand_ins(kind, path, sessions, current_runs)
    if reached is not None and reached[1]:
        if reached[0] == len(sessions):
            return _result(defn, "pass", note="failures reach this percentile in every baseline "
                                              "session and in the current run")
        b_top = baseline_value(sessions, path, fail[0])
        return _result(defn, "regressed", base=b_top if b_top is not None and math.isfinite(b_top) else None,
                       note=f"failures (counted as +inf) reach this percentile in the current "
                            f"run and in {reached[0]} of {len(sessions)} baseline session(s)")
    b_val = baseline_value(sessions, path, fail[0]) if sessions else None
    c_val = group_value(current_runs, path, fail[1])
    if b_val is None and c_val is None:
        return _result(defn, "pass", note=NOT_MEASURED)
    if b_val is None:
        return _result(defn, "new", cur=c_val, note="no baseline value for this metric")
    if c_val is None:
        return _result(defn, "regressed", base=b_val, note="current run has no value: no successful requests")
    if math.inf in (b_val, c_val):  # no stand-in: failures only, not a single success
        if b_val == c_val:
            return _result(defn, "pass", note="failures reach this percentile in baseline and current runs")
        worse = c_val == math.inf
        return _result(defn, "regressed" if worse else "improved",
                       base=None if b_val == math.inf else b_val, cur=None if worse else c_val,
                       note=f"failures (counted as +inf) reach this percentile in the "
                            f"{'current' if worse else 'baseline'} run")
    out = _judge_values(defn, sessions, base_runs, current_runs, b_val, c_val, kind, pct, scale,
                        fail, seed=seed, confidence=confidence, run_cv=run_cv,
                        significance=significance, paired=paired, prior_runs=prior_runs,
                        power_alpha=power_alpha, sittings=sittings,
                        current_sessions=current_sessions, spread=(spreads or {}).get(path))
    return failure_floor(out, reached, fail, len(sessions))


def _judge_values(defn: MetricDef, sessions: Sessions, base_runs: list[Samples],
                  current_runs: Sequence[Samples], b_val: float, c_val: float, kind: Kind,
                  pct: Optional[float], scale: str, fail: tuple[float, float], *, seed: int,
                  confidence: float, run_cv: Optional[float],
                  significance: Literal["zero", "tolerance"], paired: bool, prior_runs: float,
                  power_alpha: float, sittings: Optional[Sittings],
                  current_sessions: int = 1,
                  spread: Optional[tuple[float, int, str]] = None) -> MetricComparison:
    """The verdict on two finite values: the change, its within-run interval, the spread."""
    path = defn.path
    if scale != "absolute" and b_val <= 0:
        if c_val == b_val:
            return _result(defn, "pass", base=b_val, cur=c_val, change=0.0, note="baseline is 0")
        verdict = "improved" if (defn.direction == "higher") == (c_val > b_val) else "regressed"
        return _result(defn, verdict, base=b_val, cur=c_val,
                       note="baseline is 0: relative change undefined, judged by direction only")
    if scale == "log" and c_val <= 0:
        verdict = "regressed" if defn.direction == "higher" else "improved"
        return _result(defn, verdict, base=b_val, cur=c_val, change=-1.0,
                       note="current value is 0: judged by direction only")
    change = c_val - b_val if scale == "absolute" else c_val / b_val - 1.0
    d = change if scale != "log" else math.log(c_val / b_val)
    halves, method = None, "paired bootstrap"
    if paired and pairable(base_runs, current_runs):
        halves = paired_half_widths(kind, pct, path, base_runs, current_runs, d, b_val,
                                    confidence, seed, fail=fail)
    elif paired:
        halves, method = _prefix_half_widths(kind, pct, path, scale, base_runs, current_runs,
                                             confidence, seed, fail)
    if halves is not None:
        a_lo, a_hi = halves
    else:
        base_s, cur_s = pooled(base_runs), pooled(current_runs)
        assert base_s is not None and cur_s is not None
        lo_w, hi_w, method = unpaired_interval(kind, pct, path, defn.direction, cur_s, base_s,
                                               c_val, b_val, confidence, seed, fail)
        a_lo, a_hi = max(0.0, d - lo_w), max(0.0, hi_w - d)  # within-run half-widths
    z = z_of(confidence)
    s, nu, note = spread if spread is not None else session_spread(path, sessions, b_val, fail[0])
    day, day_note = day_term(path, sittings)
    note = f"{note}; {day_note}" if day_note else note
    return rule(defn, base=b_val, cur=c_val, change=change, d=d, scale=scale,
                within=(a_lo / z if math.isfinite(a_lo) else math.inf,
                        a_hi / z if math.isfinite(a_hi) else math.inf),
                machine=registry.metric(path).run_cv if run_cv is None else run_cv,
                spread=(s, nu), sessions=len(sessions), confidence=confidence,
                current_sessions=current_sessions,
                prior_runs=0.0 if spread is not None else prior_runs, significance=significance,
                method=method, note=note,
                can_be_underpowered=path != "error_rate", power_alpha=power_alpha, day=day)


def _prefix_half_widths(kind: Kind, pct: Optional[float], path: str, scale: str,
                        base_runs: Sequence[Samples], current_runs: Sequence[Samples],
                        confidence: float, seed: int, fail: tuple[float, float] = (math.inf, math.inf)
                        ) -> tuple[Optional[tuple[float, float]], str]:
    """Paired half-widths from the requests every run measured (runs bounded by duration).

    The half-widths are taken around the cut runs' own contrast, then applied to the full
    runs' change: the workload's request-to-request variation still cancels between the
    sides, which the unpaired intervals cannot see (they treat one schedule as two draws).
    """
    cut = common_prefix(base_runs, current_runs)
    if cut is None:
        return None, "paired bootstrap"
    tb, tc = cut
    bv, cv = group_value(tb, path, fail[0]), group_value(tc, path, fail[1])
    if bv is None or cv is None or not (math.isfinite(bv) and math.isfinite(cv)):
        return None, "paired bootstrap"
    if scale == "absolute":
        d = cv - bv
    elif scale == "relative":
        d = cv / bv - 1.0 if bv > 0 else math.nan
    else:
        d = math.log(cv / bv) if bv > 0 and cv > 0 else math.nan
    if not math.isfinite(d):
        return None, "paired bootstrap"
    halves = paired_half_widths(kind, pct, path, tb, tc, d, bv, confidence, seed, fail=fail)
    return halves, f"paired bootstrap (first {len(tb[0].ok)} requests)"


def rule(defn: MetricDef, *, base: float, cur: float, change: float, d: float, scale: str,
         within: tuple[float, float], machine: float, spread: tuple[Optional[float], int],
         sessions: int, confidence: float = CONFIDENCE, prior_runs: float = PRIOR_RUNS,
         significance: Literal["zero", "tolerance"] = "zero", method: str = "", note: str = "",
         can_be_underpowered: bool = True, power_alpha: float = POWER_ALPHA,
         day: Optional[DayTerm] = None, current_sessions: int = 1) -> MetricComparison:
    """The verdict on one change ``d`` (on its analysis scale) and the power behind it.

    ``within``: the request-level SD of d below and above it; ``spread``: the baseline's
    measured session SD and its degrees of freedom (None, 0 with one session); ``day``: the
    between-sitting term when the run is judged outside the baseline's sitting. Scalars,
    frontier points and capacities are all judged here, by one rule.

    *Underpowered* needs evidence: the smallest detectable change rests on a variance
    estimated from a few sessions, so it is compared with the tolerance at its one-sided
    (1 − ``power_alpha``) lower confidence bound; a resolution beyond the tolerance only
    within its own sampling error is a note, not a verdict.
    """
    s, nu = spread
    k = current_sessions
    h_lo = half_width(within[0], machine, s, nu, sessions, confidence, prior_runs, day, k)
    h_hi = half_width(within[1], machine, s, nu, sessions, confidence, prior_runs, day, k)
    lo, hi = d - h_lo, d + h_hi
    worse_half = h_hi if defn.direction == "lower" else h_lo
    within_worse = within[1] if defn.direction == "lower" else within[0]
    if scale == "log":
        lo, hi = math.expm1(lo), math.expm1(hi)
    lo, hi = max(lo, -_UNBOUNDED), min(hi, _UNBOUNDED)  # finite: results are JSON
    verdict = decide(defn.direction, change, (lo, hi), defn.tolerance, significance)
    detectable = detectable_change(scale, defn.direction, worse_half, defn.tolerance)
    df = spread_df(within_worse, machine, s, nu, sessions, prior_runs, day, k)
    prior = prior_dominates(nu, prior_runs)
    at_least = detectable_change(scale, defn.direction, worse_half * power_factor(df, nu, power_alpha, prior_runs), 0.0)
    if (verdict in ("pass", "inconclusive") and detectable > defn.tolerance and can_be_underpowered
            and at_least <= defn.tolerance):
        note = (f"{note}; resolution {fmt_on_scale(scale, detectable)} is beyond the tolerance "
                f"only within the sampling error of its own estimate ({df:g} degrees of freedom)")
    # The error rate is compared in every test as a safety net; its resolution is bounded by
    # the request count (0 failures in 300 cannot prove a rate below ~1.5 %), so it is never
    # called underpowered — the max_error_rate SLO is what holds it to a limit.
    if verdict in ("pass", "inconclusive") and at_least > defn.tolerance and can_be_underpowered:
        # What more sessions or launches would do, with the prior worth its pseudo-sessions again
        # (``prior_runs`` 0: this spread already held it; the suggestion adds sessions to it).
        args = (within_worse, machine, s, sessions, scale, defn.direction, defn.tolerance, confidence,
                prior_runs if prior_runs > 0 else PRIOR_RUNS, day, k)
        need = sessions_needed(*args) if math.isfinite(within_worse) else None
        more = launches_needed(*args) if math.isfinite(within_worse) and not need else None
        fix = (f"record {need - sessions} more baseline session(s) ({need} in all)" if need
               else f"more baseline sessions alone will not do: measure the PR over {more[0]} engine "
                    f"launches (--goodput-head-launches) against {more[1]} baseline sessions, use A/B "
                    "mode (base and head in one job) or a larger tolerance" if more
               else "more baseline sessions alone will not do: use more requests, A/B mode "
                    "(base and head in one job) or a larger tolerance")
        if day is not None and not need:
            fix += ("; or record baseline sessions in separate sittings (other days or "
                    "machines), which measure the between-sitting spread instead of assuming it")
        why = (f"with {sessions} baseline session(s) the prior spread dominates" if prior else
               f"at least {fmt_on_scale(scale, at_least)} with {1 - power_alpha:.0%} confidence")
        note = (f"{note}; could only detect a worse change beyond {fmt_on_scale(scale, detectable)} "
                f"({why}): {fix}")
        verdict = "underpowered"
    return MetricComparison(
        metric=defn.path, direction=defn.direction, baseline=base, current=cur, change=change,
        interval=(lo, hi), tolerance=defn.tolerance, verdict=verdict,  # type: ignore[arg-type]
        method=f"{method} + sessions t(ν={df:g})".lstrip(" +"), note=note,
        detectable=detectable,
        scale="absolute" if scale == "absolute" else "relative",
    )


def _error_rate(runs: Sequence[Samples]) -> Optional[float]:
    p = pooled(runs)
    return metric_value(p, "error_rate") if p is not None else None


def compare(
    baseline: Sequence[Samples] | Sessions,
    current_runs: Sequence[Samples],
    metrics: Iterable[MetricDef],
    *,
    seed: int = 0,
    **options: object,
) -> list[MetricComparison]:
    """Compare every metric, and the error rate always; metrics measured on neither side
    (e.g. goodput without SLOs) are left out.

    A latency is never *improved* while failures rose: requests that failed cannot have
    been fast, so the improvement may be survivors' bias.
    """
    sessions = as_sessions(baseline)
    defs = list(metrics)
    if all(d.path != "error_rate" for d in defs):
        defs.append(MetricDef.of("error_rate"))
    b_err = _error_rate([r for s in sessions for r in s])
    c_err = _error_rate(current_runs)
    rose = b_err is not None and c_err is not None and c_err > b_err
    out = []
    for i, defn in enumerate(defs):
        c = compare_metric(defn, sessions, current_runs, seed=seed + i, **options)  # type: ignore[arg-type]
        if c.baseline is None and c.current is None and c.note == NOT_MEASURED:
            continue
        if rose and c.verdict == "improved" and registry.metric(defn.path).unit == "ms":
            c = c.model_copy(update={"verdict": "pass", "note": (
                f"{c.note}; not counted as improved: the error rate rose from "
                f"{b_err:.1%} to {c_err:.1%}").lstrip("; ")})
        out.append(c)
    return out

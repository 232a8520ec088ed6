"""The error rate's verdict: failure counts of the baseline against the current runs (pure).

Failures are rare counts (0–5 in a run of a few hundred requests), where the generic path
goes wrong: its session spread is 0 when every baseline session had 0 failures, and the
normal tail of a score interval is too thin for a count of 2 or 3, so an A/A pair with the
same true rate read *regressed* in 7.5 % of trials at 20 requests. Here the counts are
pooled per side (every baseline session, every current run) and the difference of the two
rates gets exact limits: each side's Clopper–Pearson interval, combined by MOVER
(Newcombe's square-and-add). When the baseline's sessions differ by more than binomial
noise, both sides are widened by the quasi-binomial dispersion the sessions show (never
narrowed). The verdict is ``vocabulary.decide``'s rule; the error rate is never
*underpowered* (the ``max_error_rate`` SLO holds it to a limit). ``docs/statistics.md``,
"Error rate at small counts", gives the formula and the bench behind it.
"""

from __future__ import annotations

import math
from typing import Literal, Optional, Sequence

from pytest_goodput.judge.values import Sessions, as_sessions, failures
from pytest_goodput.judge.vocabulary import MetricDef, decide
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.stats import t_ppf, z_value
from pytest_goodput.stats.binomial import clopper_pearson_interval, dispersion

__all__ = ["counts", "error_rate_comparison", "widening"]

Counts = tuple[int, int]  # (failed, issued)


def counts(runs: Sequence[Samples]) -> Counts:
    """(failed, issued) measured requests of runs pooled."""
    per = [failures(r) for r in runs]
    return sum(k for k, _ in per), sum(n for _, n in per)


def widening(phi: float, nu: int, confidence: float) -> float:
    """Factor on both sides' binomial distances for a dispersion φ estimated with ν degrees
    of freedom: w² = 1 + (φ − 1)·(t_ν / z)², 1 when φ ≤ 1 or unknown (ν = 0).

    The binomial part of the variance is known from the counts (its exact limits); only the
    excess φ − 1, the rate moving between sessions, is estimated from the sessions, so it
    takes Student's quantile with their few degrees of freedom.
    """
    if phi <= 1.0 or nu < 1:
        return 1.0
    q = 0.5 + confidence / 2.0
    return math.sqrt(1.0 + (phi - 1.0) * (t_ppf(q, nu) / z_value(confidence)) ** 2)


def _lower(k1: int, n1: int, p2: float, u2: float, w: float, confidence: float) -> float:
    """Lower MOVER limit of p1 − p2 given the baseline's rate and exact upper limit."""
    p1 = k1 / n1
    l1 = clopper_pearson_interval(k1, n1, confidence)[0]
    return max(-1.0, p1 - p2 - w * math.hypot(p1 - l1, u2 - p2))


def _detectable(b: Counts, n_c: int, u2: float, w: float, tolerance: float, bound: float,
                confidence: float) -> Optional[float]:
    """The smallest increase the rule could call *regressed* with these baseline counts: the
    change of the fewest current failures (of ``n_c``) that would be (None: no count would)."""
    p2 = b[0] / b[1]

    def regressed(k: int) -> bool:
        return k / n_c - p2 > tolerance and _lower(k, n_c, p2, u2, w, confidence) > bound

    if not regressed(n_c):
        return None
    lo, hi = -1, n_c  # the lower limit grows with k: lo never reads regressed, hi always does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if regressed(mid) else (mid, hi)
    return hi / n_c - p2


def error_rate_comparison(
    defn: MetricDef,
    baseline: Sequence[Samples] | Sessions,
    current_runs: Sequence[Samples],
    *,
    confidence: float,
    significance: Literal["zero", "tolerance"] = "zero",
) -> MetricComparison:
    """The error rate of the current runs against the baseline's sessions, on pooled counts
    (the change in absolute fractions; see the module docstring), judged by the one
    verdict rule (``vocabulary.decide``)."""
    if not current_runs:
        raise ValueError("compare_metric needs at least one current run")
    sessions = as_sessions(baseline)
    per_session = [counts(s) for s in sessions]
    kb, nb = sum(k for k, _ in per_session), sum(n for _, n in per_session)
    kc, nc = counts(current_runs)

    def result(verdict: str, **fields: object) -> MetricComparison:
        return MetricComparison(metric=defn.path, direction=defn.direction,  # type: ignore[arg-type]
                                tolerance=defn.tolerance, verdict=verdict,  # type: ignore[arg-type]
                                scale="absolute", **fields)  # type: ignore[arg-type]

    if nb == 0 and nc == 0:
        return result("pass", note="not measured in baseline nor current run")
    if nb == 0:
        return result("new", current=kc / nc, note="no baseline value for this metric")
    if nc == 0:
        return result("regressed", baseline=kb / nb, note="current run has no measured requests")
    b_val, c_val = kb / nb, kc / nc
    change = c_val - b_val
    phi, nu = dispersion(per_session)
    w = widening(phi, nu, confidence)
    l2, u2 = clopper_pearson_interval(kb, nb, confidence)
    u1 = clopper_pearson_interval(kc, nc, confidence)[1]
    interval = (_lower(kc, nc, b_val, u2, w, confidence),
                min(1.0, change + w * math.hypot(u1 - c_val, b_val - l2)))
    verdict = decide(defn.direction, change, interval, defn.tolerance, significance)
    bound = defn.tolerance if significance == "tolerance" else 0.0
    detectable = _detectable((kb, nb), nc, u2, w, defn.tolerance, bound, confidence)
    if len(sessions) < 2:
        spread = "1 baseline session: how much the rate moves between sessions is unknown, binomial assumed"
    elif w > 1.0:
        spread = (f"the {len(sessions)} baseline sessions differ {phi:.2g}× more than binomial "
                  f"noise: interval widened ×{w:.2f}")
    else:
        spread = f"the {len(sessions)} baseline sessions differ within binomial noise"
    note = f"{kc}/{nc} failed against {kb}/{nb} in the baseline; {spread}"
    if detectable is None:
        note += f"; no failure count in {nc} requests could read regressed"
    return result(verdict, baseline=b_val, current=c_val, change=change, interval=interval,
                  method="exact (Clopper–Pearson, MOVER)" + (f" × {w:.2f} dispersion" if w > 1.0 else ""),
                  note=note, detectable=None if detectable is None else max(defn.tolerance, detectable))

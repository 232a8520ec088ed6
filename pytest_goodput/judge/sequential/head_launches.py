"""Measuring the PR over several engine launches, stopping as soon as the gate is decided (pure).

Between launches a serving engine's level moves (placement, warm-up, allocator, clocks): a
launch is one draw of it, and against S baseline sessions one PR launch leaves
Var(d) = σ²·(1 + 1/S). Measured over K launches, the PR's level is a mean of K draws,
Var(d_K) = σ²·(1/K + 1/S). Launches cost minutes on GPUs, so they are taken one at a time:
launch, measure, judge; stop when the test is decided or the budget of ``planned`` launches
is spent.

Looking after every launch spends the false-alarm budget more than once, so each look gets
its share by a Lan–DeMets spending function over the information of its launches,
I_k = 1 / (1/k + 1/S) (the current mean's statistics are a Brownian motion in I: the baseline's
share is common to every look). Two decisions end the test early, on two budgets as A/B mode
does (``judge/sequential/stopping.py``):

- *regressed* at look k: the verdict rule at two-sided confidence 1 − 2·α_k, α_k the look's
  nominal one-sided level of the gate's α = (1 − confidence)/2, spent late
  (O'Brien–Fleming-like: the last look keeps most of it);
- *cleared*: the interval's worse end within the tolerance at one-sided level γ_k, the
  look's share of ``CLEAR_ALPHA`` spent evenly (Pocock-like: an unchanged engine is let go
  early), for every gated metric.

The test is decided when a gated metric is regressed (it fails whatever the others read) or
every gated metric is cleared or futile: no remaining launch could clear it and its
conditional power to regress by the last look is below ``HeadRule.futility``. Otherwise the
next launch is measured, and the last look's verdicts stand as the gate's.
``docs/statistics.md`` ("Head launches") has the derivation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Optional

from pytest_goodput.judge.judge import Policy, judge, metric_defs
from pytest_goodput.judge.noise.spread import half_width, scale_of, session_spread
from pytest_goodput.judge.values import baseline_value
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.outcomes.outcome import MetricComparison, TestOutcome
from pytest_goodput.stats.spending import Spending, nominal_levels
from pytest_goodput.judge.vocabulary import CONFIDENCE

#: One-sided chance that a change of exactly the tolerance is cleared (A/B mode's).
CLEAR_ALPHA = 0.05
#: The most launches one test may be measured over.
MAX_HEAD_LAUNCHES = 20
#: Verdicts that end the test as failing at any look.
_REGRESSED = "regressed"

__all__ = ["CLEAR_ALPHA", "DEFAULT_HEAD_RULE", "HeadLook", "HeadRule", "MAX_HEAD_LAUNCHES", "cleared",
           "conditional_power", "judge_look", "look", "out_of_reach", "settle"]


@dataclass(frozen=True)
class HeadRule:
    """How the looks spend their budgets and when a metric stops being waited for.

    ``regress`` / ``clear``: the spending function of each side's budget over the looks;
    ``futility``: a metric no remaining launch could clear is not waited for once its chance
    to be called *regressed* at the last look, should it go on as it has gone so far, is
    below this (1: never waited for, the first rule; 0: always waited for). Futility stops
    end in a verdict that does not fail, so they can only lower false alarms.
    """

    regress: Spending = "obf"
    clear: Spending = "pocock"
    futility: float = 0.10

    def describe(self) -> str:
        return (f"regressed {self.regress}, cleared {self.clear}, futility below "
                f"{self.futility:.0%} conditional power")


#: Chosen by ``bench/head_launches.py`` (docs/decisions.md, "Head launches: spent late, waited
#: for while a regression is still possible").
DEFAULT_HEAD_RULE = HeadRule()


@dataclass(frozen=True)
class HeadLook:
    """Look ``k`` of ``planned`` against ``sessions`` baseline sessions: the two-sided
    confidence its regressed verdicts are judged at, and the one its clearing is judged at."""

    k: int
    planned: int
    regress_confidence: float
    clear_confidence: float

    @property
    def last(self) -> bool:
        return self.k >= self.planned


def look(k: int, planned: int, sessions: int, confidence: float = CONFIDENCE,
         clear_alpha: float = CLEAR_ALPHA, rule: HeadRule = DEFAULT_HEAD_RULE) -> HeadLook:
    """The levels of look ``k`` (1-based) of ``planned`` against ``sessions`` baseline sessions.

    With one planned launch the look is the gate's own: the whole budget at once.
    """
    if not 1 <= k <= planned <= MAX_HEAD_LAUNCHES:
        raise ValueError(f"look {k} of {planned}: launches must satisfy 1 ≤ k ≤ planned ≤ {MAX_HEAD_LAUNCHES}")
    alpha = (1.0 - confidence) / 2.0
    if planned == 1:
        return HeadLook(1, 1, confidence, 1.0 - 2.0 * clear_alpha)
    s = max(sessions, 1)
    info = [1.0 / (1.0 / j + 1.0 / s) for j in range(1, planned + 1)]
    fractions = [i / info[-1] for i in info]
    # A look that spends (almost) nothing is held to a level of 1e-12, not to certainty.
    a_k = max(nominal_levels(fractions, alpha, rule.regress)[k - 1], 1e-12)
    g_k = max(nominal_levels(fractions, clear_alpha, rule.clear)[k - 1], 1e-12)
    return HeadLook(k, planned, 1.0 - 2.0 * a_k, 1.0 - 2.0 * g_k)


def _worse_end(c: MetricComparison) -> Optional[float]:
    if c.interval is None:
        return None
    return c.interval[1] if c.direction == "lower" else -c.interval[0]


def cleared(at_clear_level: TestOutcome) -> set[str]:
    """Metrics whose interval at the clearing level has its worse end within the tolerance:
    a change as large as the tolerance is ruled out at the look's clearing share."""
    out = set()
    for c in at_clear_level.comparisons:
        worse = _worse_end(c)
        if worse is not None and worse <= c.tolerance and c.verdict != _REGRESSED:
            out.add(c.metric)
    return out


def out_of_reach(projected: TestOutcome) -> set[str]:
    """Metrics that no remaining launch could clear: judged as if the data were measured over
    every planned launch, at the last look's clearing level, their detectable change still
    exceeds the tolerance (a between-sitting prior or the baseline's own spread that launches
    of the PR do not shrink), so even an unchanged engine could not be cleared."""
    return {c.metric for c in projected.comparisons
            if c.detectable is not None and c.detectable > c.tolerance}


def settle(at_regress_level: TestOutcome, at_clear_level: TestOutcome,
           lk: HeadLook, futile: frozenset[str] | set[str] = frozenset()) -> tuple[TestOutcome, bool]:
    """The outcome of look ``lk`` and whether the test is decided there.

    The verdicts are the regress level's; a metric cleared at the clearing level reads
    *pass* (its change is shown within the tolerance at the look's share of the clearing
    budget), whatever its power at the stricter regress level. Decided: a metric regressed,
    or every compared metric cleared or ``futile`` (:func:`out_of_reach`: not waited for).
    """
    compared = list(at_regress_level.comparisons)
    if not compared or at_regress_level.baseline_status != "compared" or lk.planned == 1:
        return at_regress_level, True  # the gate's single look, or nothing more launches decide
    done_clear = cleared(at_clear_level)
    # What more launches can settle: metrics with an interval. The error rate is compared on
    # exact counts as a safety net (0 failures in 200 never clear +0.5 pp), so it ends the
    # test when it regresses but is not waited for; so does the output guard's agreement.
    pending = {c.metric for c in compared
               if c.interval is not None and c.metric not in ("error_rate", registry.OUTPUT_AGREEMENT)}
    out = []
    for c in compared:
        if c.metric in done_clear and c.verdict in ("pass", "underpowered", "inconclusive"):
            note = (f"{c.note}; cleared at launch {lk.k} of {lk.planned}: the worse end of its "
                    f"{lk.clear_confidence:.3g}-confidence interval is within the tolerance").lstrip("; ")
            c = c.model_copy(update={"verdict": "pass", "note": note})
        out.append(c)
    regressed = any(c.verdict == _REGRESSED for c in out)
    waited = pending - set(futile)
    decided = regressed or waited <= done_clear
    unreachable = sorted(pending & set(futile) - done_clear)
    why = ("a metric regressed" if regressed
           else "every gated metric cleared" if decided and not unreachable
           else "every other gated metric cleared; more launches could not clear "
                + ", ".join(unreachable) if decided
           else "undecided: the budget is spent" if lk.last else "undecided")
    notes = [*at_regress_level.notes,
             f"measured over {lk.k} engine launch(es) of at most {lk.planned} ({why}); verdicts at "
             f"{lk.regress_confidence:.4g} two-sided confidence, this look's share of the gate's "
             "false-alarm budget"]
    return at_regress_level.model_copy(update={"comparisons": out, "notes": notes}), decided


def conditional_power(worse: float, sigma: float, spread: Optional[float], machine: float, k: int,
                      planned: int, sessions: int, tolerance: float, last_confidence: float) -> float:
    """The chance that a metric reads *regressed* at the last look if the remaining launches
    go on as the first ``k`` went (stochastic curtailment under the current trend).

    ``worse``: the change so far on the analysis scale, positive when worse; ``sigma``: the SD
    of one launch's level; ``spread``: the baseline's measured session SD (None: unknown);
    ``tolerance`` on the analysis scale. The last look's mean is d_K = d_k + (K − k)/K · (x̄ − d_k)
    with x̄ the mean of K − k more launches, so under the trend d_K − d_k ~ N(0, σ²(K − k)/K²);
    it reads regressed beyond c_K = max(tolerance, h_K), h_K the last look's half-width.
    """
    if k >= planned:
        return 0.0
    h_last = half_width(0.0, machine, spread, max(sessions - 1, 0), sessions, last_confidence,
                        current_sessions=planned)
    threshold = max(tolerance, h_last)
    sd = sigma * math.sqrt(planned - k) / planned
    if sd <= 0:
        return 1.0 if worse > threshold else 0.0
    return 1.0 - NormalDist().cdf((threshold - worse) / sd)


def _on_scale(scale: str, change: float) -> Optional[float]:
    if scale == "log":
        return math.log1p(change) if change > -1 else None
    return change


def unlikely_to_regress(current: Side, baseline: Side, outcome: TestOutcome, planned: int,
                        confidence: float, tolerance: Optional[float], below: float) -> set[str]:
    """Gated metrics whose :func:`conditional_power` is below ``below`` (log and relative
    scales; the error rate and frontier metrics are never in it)."""
    k = len(current.history)
    defs = {d.path: d for d in metric_defs(current.spec, tolerance)}
    out = set()
    for c in outcome.comparisons:
        d = defs.get(c.metric)
        scale = scale_of(c.metric) if d is not None else "absolute"
        if d is None or scale == "absolute" or c.change is None or not math.isfinite(c.change):
            continue
        centre = baseline_value(baseline.history, c.metric)
        worse = _on_scale(scale, c.change)
        if centre is None or not math.isfinite(centre) or worse is None:
            continue
        s, _, _ = session_spread(c.metric, baseline.history, centre)
        machine = registry.metric(c.metric).run_cv
        sigma = max(s or 0.0, machine)
        tol = _on_scale(scale, c.tolerance) or c.tolerance
        sign = 1.0 if c.direction == "lower" else -1.0
        power = conditional_power(sign * worse, sigma, s, machine, k, planned, len(baseline.history),
                                  tol, confidence)
        if power < below:
            out.add(c.metric)
    return out


def judge_look(nodeid: str, current: Side, baseline: Side, policy: Policy, planned: int, *,
               location: Optional[tuple[str, int]] = None, seed: int = 0,
               rule: HeadRule = DEFAULT_HEAD_RULE) -> tuple[TestOutcome, bool]:
    """Look k of ``planned`` (k: the launches in ``current.history``): the verdicts at the look's
    share of the false-alarm budget, the metrics cleared at its share of the clearing budget,
    those no remaining launch could clear (the data judged as if measured over every planned
    launch) and, of these, the ones whose chance to regress by the last look is below the
    rule's futility, and whether the test is decided. The gate and the bench both judge
    through it."""
    sessions = len(baseline.history)
    lk = look(len(current.history), planned, sessions, policy.confidence, rule=rule)
    last = look(planned, planned, sessions, policy.confidence, rule=rule)
    at_regress = judge(nodeid, current, baseline, replace(policy, confidence=lk.regress_confidence),
                       location=location, seed=seed)
    if planned == 1:
        return at_regress, True
    at_clear = judge(nodeid, current, baseline, replace(policy, confidence=lk.clear_confidence),
                     location=location, seed=seed)
    projected = judge(nodeid, current, baseline, replace(policy, confidence=last.clear_confidence,
                                                         current_sessions=planned), location=location, seed=seed)
    futile = out_of_reach(projected)
    if futile and rule.futility < 1.0:
        futile &= unlikely_to_regress(current, baseline, at_regress, planned, last.regress_confidence,
                                      policy.tolerance, rule.futility) | _no_trend(at_regress, current)
    return settle(at_regress, at_clear, lk, futile)


def _no_trend(outcome: TestOutcome, current: Side) -> set[str]:
    """Metrics conditional power does not apply to (the error rate, frontiers, capacities:
    not among the gated per-run metrics): out of reach, they are not waited for."""
    gated = {d.path for d in metric_defs(current.spec)} - {"error_rate"}
    return {c.metric for c in outcome.comparisons if c.metric not in gated}

"""A/B mode's paired analysis: base and head, round by round, and when to stop (pure).

Each round runs the same spec (same seed: same prompts and schedule) once on the base
engine and once on the head engine, in an order drawn per round, so both sides of a round
share the machine's state of that moment. Per gated metric the round's change is
d_r = log(head_r / base_r) (head_r / base_r − 1 for attainment, head_r − base_r for the
error rate: the registry's analysis scale). The rounds' mean change gets a Student-t
interval; the verdict is the gate's rule (``verdicts.decide``).

Sequential stopping: from ``min_rounds`` on, after every round, the run stops once every
gated metric is decided — its interval entirely beyond the tolerance on the worse side
(regressed), or its worse end within the tolerance (cleared: pass or improved) — or as soon
as one metric is decided regressed (the build fails whatever the rest says). Each side has
its own error budget, spent over the looks (``judge.sequential.stopping``): the gate's α for
*regressed*, so looking after every round cannot raise false alarms above it, and
``clear_alpha`` for *cleared*. ``docs/statistics.md`` ("A/B mode") has the formulas;
``docs/decisions.md`` why these boundaries.

A round where failures reached a percentile (+∞) is never left out, which would keep only
the head's good rounds: a head failure is worse than any value (never cleared, its lower
end the worst the t interval allows), a base failure no evidence against the head. So
adding failures to the head, or slowing it, never improves a verdict
(``docs/statistics.md``, "A/B: failure rounds and boundaries").
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_goodput.judge.evidence import samples_of
from pytest_goodput.judge.noise.spread import scale_of
from pytest_goodput.judge.sequential.stopping import DEFAULT_RULE, RULES, StoppingRule
from pytest_goodput.judge.values import metric_value
from pytest_goodput.schema import registry
from pytest_goodput.schema.outcomes.ab import ABResult, ABRound, Order
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats.student import t_ppf
from pytest_goodput.judge.vocabulary import CONFIDENCE, MetricDef, decide

#: Defaults of the command line: rounds before the first look, and the most rounds
#: (chosen by measurement under drift: docs/decisions.md, "A/B mode: alpha spending").
MIN_ROUNDS = 4
MAX_ROUNDS = 12

__all__ = ["DEFAULT_RULE", "MAX_ROUNDS", "MIN_ROUNDS", "RULES", "Paired", "StoppingRule", "analyse",
           "check_rounds", "compare_paired", "looks", "paired_changes", "round_order", "round_values",
           "with_error_rate", "worst_lower_end"]


def round_order(seed: int, r: int) -> Order:
    """Which engine runs first in round ``r`` (1-based), balanced in pairs of rounds.

    Rounds 2k-1 and 2k are one pair: a fair coin from ``Random(f"ab-order {seed} {k}")`` says
    whether the pair is base-head, head-base or head-base, base-head. So after every even round
    each engine went first in exactly half of them (a steady drift over a job cancels), and
    which half is random. ``run.ab.run_ab`` draws ``seed`` afresh per job.
    """
    k = (r + 1) // 2
    base_first = random.Random(f"ab-order {seed} {k}").random() < 0.5
    if r % 2 == 0:
        base_first = not base_first
    return "base-head" if base_first else "head-base"


def check_rounds(min_rounds: int, max_rounds: int) -> None:
    """``min_rounds`` ≥ 2 (an interval needs a spread) and ≤ ``max_rounds`` ≤ 1000."""
    if min_rounds < 2:
        raise ValueError(f"--min-rounds: {min_rounds} is too few: a spread needs at least 2 rounds")
    if max_rounds < min_rounds:
        raise ValueError(f"--max-rounds: {max_rounds} is below --min-rounds {min_rounds}")
    if max_rounds > 1000:
        raise ValueError(f"--max-rounds: {max_rounds} is too many (at most 1000)")


def looks(min_rounds: int, max_rounds: int) -> int:
    """The most looks the stopping rule can take: one after each round from ``min_rounds`` on."""
    return max_rounds - min_rounds + 1


def with_error_rate(defs: Sequence[MetricDef]) -> list[MetricDef]:
    """The gated metrics and, as in every comparison, the error rate."""
    out = list(defs)
    if all(d.path != "error_rate" for d in out):
        out.append(MetricDef.of("error_rate"))
    return out


def round_values(base: RunResult, head: RunResult,
                 defs: Sequence[MetricDef]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Each metric's value on the round's base run and head run, from per-request samples
    (the gate's definitions: failures rank as +∞ in percentiles)."""
    b, h = samples_of([base])[0], samples_of([head])[0]
    return ({d.path: metric_value(b, d.path) for d in defs},
            {d.path: metric_value(h, d.path) for d in defs})


def _d(scale: str, b: float | None, h: float | None) -> float | None:
    """One round's change on the analysis scale (None: not defined for this pair)."""
    if b is None or h is None or not (math.isfinite(b) and math.isfinite(h)):
        return None
    if scale == "absolute":
        return h - b
    if scale == "relative":
        return h / b - 1.0 if b > 0 else None
    return math.log(h / b) if b > 0 and h > 0 else None


@dataclass
class Paired:
    """A metric's kept rounds: the finite changes d_r (with both sides' values), and the rounds
    where failures reached the percentile (+∞): on the head only (``head_failed``), on the
    base only (``base_failed``), on both (``both_failed``); ``skipped``: rounds with a value
    that cannot be compared at all (one side unmeasured, 0 on the log scale)."""

    ds: list[float] = field(default_factory=list)
    bs: list[float] = field(default_factory=list)
    hs: list[float] = field(default_factory=list)
    head_failed: list[float] = field(default_factory=list)  # their base values
    base_failed: int = 0
    both_failed: int = 0
    skipped: int = 0


def paired_changes(path: str, rounds: Sequence[ABRound]) -> Paired:
    """The metric's rounds, sorted by what they can say (see ``Paired``)."""
    scale = scale_of(path)
    out = Paired()
    for r in rounds:
        if r.dropped:
            continue
        b, h = r.base.get(path), r.head.get(path)
        d = _d(scale, b, h)
        if d is not None:
            out.ds.append(d)
            out.bs.append(b)  # type: ignore[arg-type]
            out.hs.append(h)  # type: ignore[arg-type]
        elif b == math.inf and h == math.inf:
            out.both_failed += 1
        elif h == math.inf and b is not None and math.isfinite(b):
            out.head_failed.append(b)
        elif b == math.inf and h is not None and math.isfinite(h):
            out.base_failed += 1
        else:
            out.skipped += b is not None or h is not None
    return out


def worst_lower_end(es: Sequence[float], m: int, tq: float) -> float:
    """The highest lower end ē − tq · s / √n a t interval can have when ``m`` of its n values
    are free (rounds where the head's failures reached the percentile) and the others are
    ``es`` (worse positive): the free values are put where they raise the lower end most.

    Since a free value may take the value a finite round had, turning a round into a
    failure can never lower this end; it is unbounded (+∞) once the free values are enough
    to outweigh the spread they add, e.g. when every round failed.
    """
    k, n = len(es), len(es) + m
    if k == 0:
        return math.inf
    if m == 0:
        mean = math.fsum(es) / k
        return mean - tq * math.sqrt(math.fsum((e - mean) ** 2 for e in es) / (k - 1)) / math.sqrt(k)
    mu = math.fsum(es) / k
    ss = math.fsum((e - mu) ** 2 for e in es)
    # Free values at μ + u: mean μ + m u / n, SS + k m u² / n about it; d/du = 0 where
    # u² (1 − (n − 1) m / (tq² k)) = SS (n − 1) n / (tq² k²).
    a = 1.0 - (n - 1) * m / (tq * tq * k)
    if a <= 0.0:
        return math.inf if ss > 0 or a < 0 else mu
    u = math.sqrt(ss * (n - 1) * n / (tq * tq * k * k * a))
    return mu + m * u / n - tq * math.sqrt((ss + k * m * u * u / n) / (n - 1)) / math.sqrt(n)


def _centre(scale: str, xs: list[float]) -> float:
    if scale == "log":
        return math.exp(math.fsum(math.log(x) for x in xs) / len(xs))
    return math.fsum(xs) / len(xs)


def _to_change(scale: str, x: float) -> float:
    """exp(x) − 1 on the log scale (capped: a look's bound at very few rounds can be huge)."""
    return math.expm1(min(x, 700.0)) if scale == "log" else x


def _failed_rounds(defn: MetricDef, p: Paired, a: float, how: str, common: dict,
                   note: str) -> tuple[MetricComparison, bool]:
    """A metric whose head failed at the percentile in some rounds (+∞ there, the base finite).

    Those rounds are the worst evidence there is: the interval's worse end is unbounded, so
    the metric is never cleared nor improved, and its lower end is the worst one the t
    interval allows (``worst_lower_end``): *regressed* when it is off 0, decided when it is
    beyond the tolerance, else *inconclusive*.
    """
    scale = scale_of(defn.path)
    sign = -1.0 if defn.direction == "higher" else 1.0
    m, n = len(p.head_failed), len(p.ds) + len(p.head_failed)
    note = "; ".join(filter(None, (note, f"failures (+inf) reach this percentile on the head in {m} "
                                         f"round(s) where the base's do not: counted worse, never left out")))
    base = _centre(scale, p.bs + p.head_failed)
    if n < 2:
        note = f"{note}; {n} round(s) compared: an interval needs 2"
        return MetricComparison(**common, baseline=base, verdict="inconclusive", note=note,
                                method="paired rounds"), False
    lo_e = worst_lower_end([sign * d for d in p.ds], m, t_ppf(1.0 - a, n - 1))
    if scale == "log":
        worse_lo = math.expm1(min(lo_e, 700.0)) if sign > 0 else -math.expm1(-min(lo_e, 700.0))
    else:
        worse_lo = lo_e
    shown = "+inf" if math.isinf(worse_lo) else (f"{worse_lo:+.1%}" if scale != "absolute" else f"{worse_lo:+.4g}")
    note = f"{note}; the change's worse end is at least {shown}"
    return MetricComparison(
        **common, baseline=base, verdict="regressed" if worse_lo > 0 else "inconclusive",  # type: ignore[arg-type]
        note=note, method=f"paired rounds t(ν={n - 1}), {m} failed round(s) at their worst, {how}",
    ), worse_lo > defn.tolerance


def _base_only(defn: MetricDef, p: Paired, common: dict, note: str) -> MetricComparison | None:
    """No finite pair and no head failure: the base's failures, or both sides', reached the
    percentile in every compared round. None when there are finite rounds to judge."""
    if p.ds or p.head_failed or not (p.base_failed or p.both_failed):
        return None
    if p.base_failed and not p.both_failed:
        verdict, why = "improved", "failures (+inf) reach this percentile on the base in every round, never on the head"
    else:
        verdict, why = "pass", "failures (+inf) reach this percentile on the base in every round"
    note = "; ".join(filter(None, (note, why)))
    return MetricComparison(**common, verdict=verdict, note=note, method="paired rounds")  # type: ignore[arg-type]


def compare_paired(defn: MetricDef, rounds: Sequence[ABRound], *, confidence: float = CONFIDENCE,
                   n_looks: int = 1, rule: StoppingRule | None = None, min_rounds: int = MIN_ROUNDS,
                   max_rounds: int = MAX_ROUNDS) -> tuple[MetricComparison | None, bool]:
    """The metric's comparison over the rounds so far and whether it is decided.

    None when no round measured it on either side (e.g. goodput without SLOs). Decided:
    the interval lies entirely beyond the tolerance on the worse side, or its worse end at
    the cleared side's level is within the tolerance. A pass not cleared is *underpowered*
    (the error rate excepted, as in the gate); a change worse than the tolerance whose
    interval reaches 0 is *inconclusive*. Levels: ``rule``'s at this look of the looks
    ``min_rounds`` … ``max_rounds``; without a rule, (1 − confidence) / ``n_looks`` two-sided
    for both (Bonferroni).

    A round where failures reached the percentile (+∞) is never left out: on the head only,
    it is worse than any value (``_failed_rounds``); where the base failed, the head is not
    worse there and the round adds nothing against the head (its interval is that of the
    other rounds); every round a base failure, the head is *improved*, or ties *pass*.
    """
    scale = scale_of(defn.path)
    p = paired_changes(defn.path, rounds)
    ds, bs, hs, skipped = p.ds, p.bs, p.hs, p.skipped
    if not ds and not skipped and not p.head_failed and not p.base_failed and not p.both_failed:
        return None, True
    note = f"{skipped} round(s) without a comparable value left out" if skipped else ""
    if p.base_failed or p.both_failed:
        note = "; ".join(filter(None, (note, f"failures (+inf) reach this percentile on the base in "
                                             f"{p.base_failed + p.both_failed} round(s) (on both sides in "
                                             f"{p.both_failed}): the head is not worse there")))
    n = len(ds) + len(p.head_failed)
    common = {"metric": defn.path, "direction": defn.direction, "tolerance": defn.tolerance,
              "scale": "absolute" if scale == "absolute" else "relative"}
    only = _base_only(defn, p, common, note)
    if only is not None:
        return only, True
    if rule is None:
        a = b = (1.0 - confidence) / 2.0 / n_looks
        how = f"{1 - 2 * a:.2%} per look (Bonferroni over {n_looks})"
    else:
        a, b = rule.levels(n, min_rounds, max_rounds, confidence)
        how = f"look at {n} of {max_rounds} rounds: {1 - 2 * a:.3%} two-sided, cleared at {1 - b:.2%} one-sided"
    if p.head_failed:
        return _failed_rounds(defn, p, a, how, common, note)
    n = len(ds)
    if n < 2:
        note = "; ".join(filter(None, (note, f"{n} round(s) compared: an interval needs 2")))
        return MetricComparison(**common, verdict="inconclusive", note=note,  # type: ignore[arg-type]
                                method="paired rounds"), False
    mean = math.fsum(ds) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in ds) / (n - 1))
    half = t_ppf(1.0 - a, n - 1) * sd / math.sqrt(n)
    lo, hi = _to_change(scale, mean - half), _to_change(scale, mean + half)
    change = _to_change(scale, mean)
    sign = -1.0 if defn.direction == "higher" else 1.0  # sign * change > 0: worse
    w_lo = min(sign * lo, sign * hi)
    beyond = w_lo > defn.tolerance
    clear_half = half if b == a else t_ppf(1.0 - b, n - 1) * sd / math.sqrt(n)
    cleared = max(sign * _to_change(scale, mean - clear_half),
                  sign * _to_change(scale, mean + clear_half)) <= defn.tolerance
    verdict = decide(defn.direction, change, (lo, hi), defn.tolerance)
    if verdict == "pass" and not cleared and defn.path != "error_rate":
        verdict = "underpowered"
        note = "; ".join(filter(None, (note, "the interval's worse end is beyond the tolerance")))
    worse_half = half
    if scale == "log":
        worse_half = _to_change(scale, half) if defn.direction == "lower" else -math.expm1(-half)
    return MetricComparison(
        **common, baseline=_centre(scale, bs), current=_centre(scale, hs), change=change,  # type: ignore[arg-type]
        interval=(lo, hi), verdict=verdict, note=note,  # type: ignore[arg-type]
        method=f"paired rounds t(ν={n - 1}), {how}",
        detectable=max(defn.tolerance, worse_half),
    ), beyond or cleared


def _no_survivor_improvement(comparisons: list[MetricComparison]) -> list[MetricComparison]:
    """No latency is *improved* while the error rate rose (survivors' bias, as in the gate)."""
    err = next((c for c in comparisons if c.metric == "error_rate"), None)
    if err is None or err.change is None or err.change <= 0:
        return comparisons
    return [c.model_copy(update={"verdict": "pass", "note": "; ".join(filter(None, (
        c.note, f"not counted as improved: the error rate rose by {err.change * 100:.2f} pp")))})
            if c.verdict == "improved" and registry.metric(c.metric).unit == "ms" else c
            for c in comparisons]


def analyse(rounds: Sequence[ABRound], defs: Sequence[MetricDef], *,
            min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS,
            confidence: float = CONFIDENCE, seed: int = 0,
            spec: ScenarioSpec | None = None, rule: StoppingRule = DEFAULT_RULE) -> tuple[ABResult, bool]:
    """The comparison after the rounds so far, and whether to stop.

    Stops at a look (``min_rounds`` kept rounds or more) when every metric is decided or
    one is decided *regressed*, and in any case once ``max_rounds`` rounds were run
    (dropped ones included). ``defs`` are the gated metrics; the error rate is added.
    ``rule``: each side's error budget and how it is spent over the looks.
    """
    check_rounds(min_rounds, max_rounds)
    n_looks = looks(min_rounds, max_rounds)
    kept = [r for r in rounds if not r.dropped]
    comparisons: list[MetricComparison] = []
    decided: dict[str, bool] = {}
    for defn in with_error_rate(defs):
        c, ok = compare_paired(defn, rounds, confidence=confidence, n_looks=n_looks, rule=rule,
                               min_rounds=min_rounds, max_rounds=max_rounds)
        if c is not None:
            comparisons.append(c)
            decided[defn.path] = ok
    comparisons = _no_survivor_improvement(comparisons)
    stop, reason = False, ""
    regressed = [c.metric for c in comparisons if c.verdict == "regressed" and decided[c.metric]]
    open_ = [m for m, ok in decided.items() if not ok]
    if len(kept) >= min_rounds:
        if regressed:
            stop, reason = True, (f"{', '.join(regressed)} regressed beyond the tolerance over "
                                  "the whole interval")
        elif not open_ and comparisons:
            stop, reason = True, "every gated metric decided"
    decided_stop = stop
    if not stop and len(rounds) >= max_rounds:
        stop = True
        reason = (f"round limit {max_rounds} reached; undecided: {', '.join(open_)}" if open_
                  else f"round limit {max_rounds} reached")
        if len(kept) < min_rounds:
            reason += f"; only {len(kept)} round(s) kept (at least {min_rounds} needed)"
    a, b = rule.levels(len(kept), min_rounds, max_rounds, confidence)
    result = ABResult(
        spec=spec, seed=seed, confidence=confidence, looks=n_looks, alpha_per_look=2.0 * a,
        clear_alpha_per_look=b, stopping=rule.describe(confidence),
        min_rounds=min_rounds, max_rounds=max_rounds,
        rounds_used=len(kept), rounds_dropped=len(rounds) - len(kept),
        decided=decided_stop, stopped_early=stop and len(rounds) < max_rounds, stop_reason=reason,
        comparisons=comparisons, rounds=list(rounds),
    )
    return result, stop

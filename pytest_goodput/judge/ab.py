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
its own error budget, spent over the looks (``judge.stopping``): the gate's α for
*regressed*, so looking after every round cannot raise false alarms above it, and
``clear_alpha`` for *cleared*. ``docs/statistics.md`` ("A/B mode") has the formulas;
``docs/decisions.md`` why these boundaries.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from pytest_goodput.judge.evidence import samples_of
from pytest_goodput.judge.spread import scale_of
from pytest_goodput.judge.stopping import DEFAULT_RULE, RULES, StoppingRule
from pytest_goodput.judge.values import metric_value
from pytest_goodput.judge.verdicts import CONFIDENCE, MetricDef, decide
from pytest_goodput.schema import registry
from pytest_goodput.schema.ab import ABResult, ABRound, Order
from pytest_goodput.schema.outcome import MetricComparison
from pytest_goodput.schema.results import RunResult
from pytest_goodput.schema.spec import ScenarioSpec
from pytest_goodput.stats.student import t_ppf

#: Defaults of the command line: rounds before the first look, and the most rounds
#: (chosen by measurement under drift: docs/decisions.md, "A/B mode: alpha spending").
MIN_ROUNDS = 4
MAX_ROUNDS = 12

__all__ = ["DEFAULT_RULE", "MAX_ROUNDS", "MIN_ROUNDS", "RULES", "StoppingRule", "analyse", "check_rounds",
           "compare_paired", "looks", "paired_changes", "round_order", "round_values", "with_error_rate"]


def round_order(seed: int, r: int) -> Order:
    """Which engine runs first in round ``r`` (1-based): a fair coin from ``Random(seed + r)``."""
    return "base-head" if random.Random(seed + r).random() < 0.5 else "head-base"


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


def paired_changes(path: str, rounds: Sequence[ABRound]) -> tuple[list[float], list[float], list[float], int]:
    """(d_r, base_r, head_r) over the kept rounds that measured ``path`` on both sides, and
    how many kept rounds had a value on one side that cannot be compared (e.g. a P99 of +∞)."""
    scale = scale_of(path)
    ds: list[float] = []
    bs: list[float] = []
    hs: list[float] = []
    skipped = 0
    for r in rounds:
        if r.dropped:
            continue
        b, h = r.base.get(path), r.head.get(path)
        d = _d(scale, b, h)
        if d is None:
            skipped += b is not None or h is not None
            continue
        ds.append(d)
        bs.append(b)  # type: ignore[arg-type]
        hs.append(h)  # type: ignore[arg-type]
    return ds, bs, hs, skipped


def _centre(scale: str, xs: list[float]) -> float:
    if scale == "log":
        return math.exp(math.fsum(math.log(x) for x in xs) / len(xs))
    return math.fsum(xs) / len(xs)


def _to_change(scale: str, x: float) -> float:
    """exp(x) − 1 on the log scale (capped: a look's bound at very few rounds can be huge)."""
    return math.expm1(min(x, 700.0)) if scale == "log" else x


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
    """
    scale = scale_of(defn.path)
    ds, bs, hs, skipped = paired_changes(defn.path, rounds)
    if not ds and not skipped:
        return None, True
    note = f"{skipped} round(s) without a comparable value left out" if skipped else ""
    n = len(ds)
    common = {"metric": defn.path, "direction": defn.direction, "tolerance": defn.tolerance,
              "scale": "absolute" if scale == "absolute" else "relative"}
    if n < 2:
        note = "; ".join(filter(None, (note, f"{n} round(s) compared: an interval needs 2")))
        return MetricComparison(**common, verdict="inconclusive", note=note,  # type: ignore[arg-type]
                                method="paired rounds"), False
    if rule is None:
        a = b = (1.0 - confidence) / 2.0 / n_looks
        how = f"{1 - 2 * a:.2%} per look (Bonferroni over {n_looks})"
    else:
        a, b = rule.levels(n, min_rounds, max_rounds, confidence)
        how = f"look at {n} of {max_rounds} rounds: {1 - 2 * a:.3%} two-sided, cleared at {1 - b:.2%} one-sided"
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

"""Change points and the creep gate on simulated main-branch histories.

Each series is 60 main-branch runs of one gated metric. Per-run values follow the
registry's prior run-to-run spread (``MetricInfo.run_cv``) the way a shared CI machine
moves them: lognormal noise of that CV, correlated from one run to the next (AR(1),
rho 0.3: a machine's state outlasts a run), and 5 % of runs on a noisy neighbour, worse by
a further half-normal of three CVs. Two series kinds:

- *scenario*: one step of -8 % (worse) at run 20, then a creep of five -2 % steps at runs
  35, 38, 41, 44 and 47 (each below the 5 % tolerance; together -9.6 %). The creep first
  passes the tolerance at run 41 (1 - 0.98^3 = 5.9 %).
  The step is recorded with the gate's verdict *regressed* (merged anyway: accepted).
- *unaccepted step*: the same series with the step called only *inconclusive*: nobody
  accepted it, so the creep gate should fail the pull requests after it (runs 21-34).
- *step then creep* (issue 31, item 9): TTFT P99, flat for 20 runs, a +18 % step at run 20
  (tolerance 15 %) called inconclusive, then +1 % per run for 15 runs (runs 21-35): 37 %
  above the old level at the end.
- *flat*: the same noise and no change at all.

What is measured (``docs/performance.md`` records the figures):

- the -8 % step found by ``detect`` on the whole series at its run (±1);
- the creep gate (:func:`pytest_goodput.judge.changepoints.creep`) evaluated for a pull
  request at every run i with runs 0..i-1 as main: the first run from 35 on where it
  fails, how often it fails before the creep passes the tolerance (runs 25-40, after the
  step has settled), and how often from run 41 on;
- false change points on flat series per 100 runs, with a 95 % Wilson interval, and the
  creep gate's false failures per pull request on flat series.

    python bench/history_changepoints.py                 # about 2 minutes on 2 cores
    python bench/history_changepoints.py --trials 400    # tighter intervals

Against a version whose ``creep`` takes no ``accepted`` (every sharp step restarted the
window) the verdicts are ignored, so the same command measures the old rule.
"""

from __future__ import annotations

import argparse
import inspect
import time
from typing import Literal, Optional, Sequence

import numpy as np

from pytest_goodput.judge.changepoints import Settings, creep, detect
from pytest_goodput.schema import registry
from pytest_goodput.stats.binomial import wilson_interval

RUNS = 60
STEP_AT, STEP = 20, -0.08
CREEP_AT, CREEP_STEP = (35, 38, 41, 44, 47), -0.02
CROSSES_AT = 41  # the third creep step: 1 - 0.98^3 = 5.9 % > 5 %
METRICS = ("goodput.requests_per_s", "metrics.tpot_ms.p50")
#: Issue 31 item 9: a +18 % step the gate called inconclusive, then +1 % per run.
CASE_METRIC, CASE_STEP, CASE_CREEP, CASE_CREEP_RUNS = "metrics.ttft_ms.p99", 0.18, 0.01, 15
_VERDICTS = "accepted" in inspect.signature(creep).parameters


def noise(rng: np.random.Generator, cv: float, n: int) -> np.ndarray:
    """Multiplicative per-run noise: AR(1) lognormal of CV ``cv`` plus noisy-neighbour runs."""
    rho = 0.3
    e = rng.normal(0.0, cv, n)
    ar = np.empty(n)
    ar[0] = e[0]
    for i in range(1, n):
        ar[i] = rho * ar[i - 1] + np.sqrt(1 - rho * rho) * e[i]
    slow = (rng.random(n) < 0.05) * np.abs(rng.normal(0.0, 3 * cv, n))
    return np.exp(ar - slow)  # a noisy neighbour makes a run worse (lower is read as worse)


def levels(direction: Literal["higher", "lower"]) -> np.ndarray:
    """The true level of each run in the scenario: losses are worse in the metric's direction."""
    worse = np.ones(RUNS)
    worse[STEP_AT:] *= 1 + STEP
    for at in CREEP_AT:
        worse[at:] *= 1 + CREEP_STEP
    return worse if direction == "higher" else 1 / worse


def series(rng: np.random.Generator, info: registry.MetricInfo, flat: bool) -> list[float]:
    level = np.ones(RUNS) if flat else levels(info.direction)
    n = noise(rng, info.run_cv, RUNS)
    if info.direction == "lower":
        n = 1 / n  # worse means higher for a latency
    return list(100.0 * level * n)


def gate_fails(values: list[float], info: registry.MetricInfo, start: int,
               accepted: Optional[Sequence[bool]] = None, stop: int = RUNS) -> list[int]:
    """Runs ``start`` ≤ i < ``stop`` at which the creep gate fails a pull request measuring
    values[i]; ``accepted[j]``: the gate called main run j regressed when it was recorded."""
    out = []
    for i in range(start, stop):
        extra = {"accepted": list(accepted or ())[:i]} if _VERDICTS else {}
        c = creep(values[:i], values[i], direction=info.direction, tolerance=info.tolerance, **extra)
        if c is not None and c.crept:
            out.append(i)
    return out


def step_accepted() -> list[bool]:
    """The -8 % step's recording was called regressed (and merged): accepted."""
    return [i == STEP_AT for i in range(RUNS)]


def scenario(info: registry.MetricInfo, trials: int, seed: int, settings: Settings) -> None:
    found, extra, first, early, late, late_n = 0, 0, [], 0, 0, 0
    for t in range(trials):
        values = series(np.random.default_rng(seed + t), info, flat=False)
        points = [p.index for p in detect(values, settings)]
        found += any(abs(p - STEP_AT) <= 1 for p in points)
        extra += sum(1 for p in points if abs(p - STEP_AT) > 1
                     and not CREEP_AT[0] - 1 <= p <= CREEP_AT[-1] + 1)
        fails = gate_fails(values, info, 25, step_accepted())
        after = [i for i in fails if i >= CREEP_AT[0]]
        first.append(after[0] if after else None)
        early += sum(1 for i in fails if i < CROSSES_AT)
        late += sum(1 for i in fails if i >= CROSSES_AT)
        late_n += RUNS - CROSSES_AT
    lo, hi = wilson_interval(found, trials)
    print(f"  -8 % step at run {STEP_AT} found within ±1: {found}/{trials} "
          f"({found / trials:.1%}, 95 % Wilson [{lo:.1%}, {hi:.1%}]); "
          f"change points outside the step and the creep: {extra}")
    caught = [f for f in first if f is not None]
    delays = np.array(caught) - CROSSES_AT
    print(f"  creep gate: fails at least once from run {CREEP_AT[0]} on in {len(caught)}/{trials} series; "
          f"first failure at run {np.median(caught) if caught else float('nan'):.0f} (median; "
          f"runs after the creep passed the tolerance: P10 {np.percentile(delays, 10):.0f}, "
          f"P50 {np.median(delays):.0f}, P90 {np.percentile(delays, 90):.0f})")
    print(f"  creep gate: fails {early} of {trials * (CROSSES_AT - 25)} pull requests at runs 25-40 "
          f"(creep below the tolerance) and {late}/{late_n} ({late / late_n:.1%}) from run {CROSSES_AT} on")


def unaccepted(info: registry.MetricInfo, trials: int, seed: int) -> None:
    """The scenario's -8 % step called inconclusive: the pull requests of runs 21-34 should fail."""
    prs = CREEP_AT[0] - (STEP_AT + 1)
    caught = 0
    for t in range(trials):
        values = series(np.random.default_rng(seed + t), info, flat=False)
        caught += len(gate_fails(values, info, STEP_AT + 1, None, stop=CREEP_AT[0]))
    lo, hi = wilson_interval(caught, trials * prs)
    print(f"  unaccepted -8 % step (called inconclusive): creep gate fails {caught}/{trials * prs} "
          f"pull requests at runs {STEP_AT + 1}-{CREEP_AT[0] - 1} ({caught / (trials * prs):.1%}, "
          f"95 % Wilson [{lo:.1%}, {hi:.1%}])")


def step_then_creep(trials: int, seed: int) -> None:
    """Issue 31 item 9: TTFT P99 +18 % at run 20 (inconclusive), then +1 % per run."""
    info = registry.metric(CASE_METRIC)
    runs = STEP_AT + 1 + CASE_CREEP_RUNS
    worse = np.ones(runs)
    worse[STEP_AT:] *= 1 + CASE_STEP
    for j in range(1, CASE_CREEP_RUNS + 1):
        worse[STEP_AT + j:] *= 1 + CASE_CREEP
    flagged = last10 = ends = 0
    for t in range(trials):
        rng = np.random.default_rng(seed + 20_000 + t)
        values = list(100.0 * worse / noise(rng, info.run_cv, runs))  # a latency: worse is higher
        fails = gate_fails(values, info, STEP_AT + 1, None, stop=runs)
        flagged += len(fails)
        last10 += sum(1 for i in fails if i >= runs - 10)
        ends += runs - 1 in fails
    n = trials * CASE_CREEP_RUNS
    print(f"{info.label} (tolerance {info.tolerance:.0%}, run CV {info.run_cv:.1%}): +{CASE_STEP:.0%} at run "
          f"{STEP_AT} called inconclusive, then +{CASE_CREEP:.0%} per run to {worse[-1] - 1:+.0%}:")
    print(f"  creep gate fails {flagged}/{n} pull requests at runs {STEP_AT + 1}-{runs - 1} "
          f"({flagged / n:.1%}); the last 10: {last10}/{trials * 10} ({last10 / (trials * 10):.1%}); "
          f"the newest: {ends}/{trials}")


def flat(info: registry.MetricInfo, trials: int, seed: int, settings: Settings) -> None:
    points = 0
    gate = 0
    prs = 0
    for t in range(trials):
        values = series(np.random.default_rng(seed + 10_000 + t), info, flat=True)
        points += len(detect(values, settings))
        gate += len(gate_fails(values, info, 10))
        prs += RUNS - 10
    runs = trials * RUNS
    lo, hi = wilson_interval(points, runs)
    print(f"  flat: {points} false change points in {runs} runs = {100 * points / runs:.2f} per 100 runs "
          f"(95 % Wilson [{100 * lo:.2f}, {100 * hi:.2f}])")
    glo, ghi = wilson_interval(gate, prs)
    print(f"  flat: creep gate failed {gate} of {prs} pull requests ({gate / prs:.2%}, "
          f"95 % Wilson [{glo:.2%}, {ghi:.2%}])")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100, help="series per kind and metric")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-pvalue", type=float, default=Settings.max_pvalue)
    ap.add_argument("--min-magnitude", type=float, default=Settings.min_magnitude)
    args = ap.parse_args()
    settings = Settings(max_pvalue=args.max_pvalue, min_magnitude=args.min_magnitude)
    print(f"{RUNS} runs per series, {args.trials} series per kind and metric; change points at "
          f"p ≤ {settings.max_pvalue:g}, magnitude ≥ {settings.min_magnitude:.0%}; creep window 20; "
          + ("the window restarts at a regression the gate called" if _VERDICTS
             else "the window restarts at any sharp step (no verdicts)"))
    started = time.perf_counter()
    for path in METRICS:
        info = registry.metric(path)
        print(f"{info.label} ({info.direction} is better, run CV {info.run_cv:.1%}, "
              f"tolerance {info.tolerance:.0%}):")
        scenario(info, args.trials, args.seed, settings)
        unaccepted(info, args.trials, args.seed)
        flat(info, args.trials, args.seed, settings)
    step_then_creep(args.trials, args.seed)
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

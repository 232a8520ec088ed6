"""A/B mode on engines whose level moves between launches: rounds on one launch of each
engine, or each round relaunched (``--relaunch``, ``--goodput-ab-relaunch``).

Each engine launch draws a level (lognormal, launch-to-launch CV 5, 10 or 15 %) on every
latency and the inverse on goodput; each run adds the round's machine moment (1 %, shared by
both sides of a round: they run back to back) and the metric's request-level noise (as
``bench/head_launches.py``: P50s ≈ 0.5 %, P99s ≈ 2 %). *Shared*: one launch of each engine
serves every round (the default when both engines fit); *relaunched*: every round is a fresh
launch of each, so the paired rounds' spread holds the launch-to-launch spread. The rounds
are judged by the A/B judge itself (``judge.sequential.ab.analyse``, the default stopping rule: paired t,
Pocock-type spending on both sides, 5 % clearing budget), look by look until it stops.
Arms: A/A and the head ``--effect`` slower. Printed: how often the test fails, with 95 %
Wilson intervals, the mean rounds and the mean engine launches (two per round relaunched)::

    python bench/ab_relaunch.py --aa-trials 1000 --trials 400 --max-rounds 12,24
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import sys
import time

import numpy as np

from pytest_goodput.judge.sequential.ab import analyse
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.schema import registry
from pytest_goodput.schema.outcomes.ab import ABRound
from pytest_goodput.stats import wilson_interval

GATED = (("goodput.requests_per_s", 0.003), ("metrics.ttft_ms.p50", 0.006), ("metrics.ttft_ms.p99", 0.02),
         ("metrics.tpot_ms.p50", 0.004), ("metrics.tpot_ms.p99", 0.012))
SIGNS = np.array([-1.0 if registry.metric(p).direction == "higher" else 1.0 for p, _ in GATED])
NOISE = np.array([sd for _, sd in GATED])


def _level(rng: np.random.Generator, cv: float) -> float:
    s2 = math.log1p(cv * cv)
    return float(rng.normal(-s2 / 2.0, math.sqrt(s2)))


def trial(args: tuple[int, float, float, bool, int, int]) -> tuple[bool, int]:
    """One A/B test: (it failed, rounds run)."""
    t, cv, effect, relaunch, min_rounds, max_rounds = args
    rng = np.random.default_rng([20261204, t, int(cv * 1000), int(effect * 1000)])
    defs = [MetricDef.of(p, registry.metric(p).tolerance) for p, _ in GATED]
    shared = (_level(rng, cv), _level(rng, cv))
    rounds: list[ABRound] = []
    for r in range(1, max_rounds + 1):
        lb, lh = (_level(rng, cv), _level(rng, cv)) if relaunch else shared
        machine = rng.normal(0.0, 0.01)
        base = SIGNS * lb + machine + rng.normal(0.0, NOISE)
        head = SIGNS * (lh + math.log(effect)) + machine + rng.normal(0.0, NOISE)
        rounds.append(ABRound(index=r, order="base-head",
                              base={p: 100.0 * math.exp(v) for (p, _), v in zip(GATED, base)},
                              head={p: 100.0 * math.exp(v) for (p, _), v in zip(GATED, head)}))
        res, stop = analyse(rounds, defs, min_rounds=min_rounds, max_rounds=max_rounds, seed=t)
        if stop:
            break
    return any(c.verdict == "regressed" for c in res.comparisons), len(rounds)


def _cell(res: list[tuple[bool, int]], relaunch: bool) -> str:
    k = sum(f for f, _ in res)
    lo, hi = wilson_interval(k, len(res))
    rounds = float(np.mean([n for _, n in res]))
    return f"{k / len(res):.1%} [{lo:.1%}, {hi:.1%}] | {rounds:.1f} | {2 * rounds if relaunch else 2:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400, help="trials of the regression arm per cell")
    ap.add_argument("--aa-trials", type=int, default=1000)
    ap.add_argument("--cvs", default="0.05,0.10,0.15", help="launch-to-launch CVs")
    ap.add_argument("--min-rounds", type=int, default=4)
    ap.add_argument("--max-rounds", default="12,24", help="round limits to compare")
    ap.add_argument("--effect", type=float, default=1.2)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    print(f"A/B on launches: {args.aa_trials} A/A and {args.trials} x{args.effect} trials a cell, "
          f"rounds {args.min_rounds}-max")
    print(f"| launch CV | rounds | max rounds | A/A fails | rounds | launches | x{args.effect:.2f} fails | "
          "rounds | launches |")
    print("|---|---|---|---|---|---|---|---|---|")
    t0 = time.monotonic()
    with mp.get_context("spawn").Pool(args.workers) as pool:
        for cv in (float(x) for x in args.cvs.split(",")):
            for max_rounds in (int(x) for x in args.max_rounds.split(",")):
                for relaunch in (False, True):
                    cells = [_cell(pool.map(trial, [(t, cv, effect, relaunch, args.min_rounds, max_rounds)
                                                    for t in range(n)], chunksize=20), relaunch)
                             for effect, n in ((1.0, args.aa_trials), (args.effect, args.trials))]
                    print(f"| {cv:.0%} | {'relaunched' if relaunch else 'shared'} | {max_rounds} | "
                          f"{cells[0]} | {cells[1]} |", flush=True)
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A/B round orders under a steady warm-up drift: one order for every job against a fresh one.

Each job is one ``run.ab.run_ab`` (4 to 12 rounds, the gate's sequential judge) on a machine
that gets ``--drift`` faster with every run of the job (a warming cache: run k's latencies
scale by (1 - drift)^k), with lognormal run-to-run noise ``--noise``; the head is
``--effect`` slower (TPOT P50, the gated metric). Two order rules, side by side on the same
noise seeds:

* **before**: a fair coin per round from ``Random(spec.seed + r)``, the spec's seed 0 for
  every job (the former rule: every job of a spec runs the same sequence);
* **after**: the product's rule, a fresh order seed per job and each engine first in one
  round of every pair (``judge.sequential.ab.round_order``).

Printed per rule: how often a +effect head is judged *regressed* (detection) and how often an
A/A job is (false alarms), with 95 % Clopper-Pearson intervals.

    python bench/ab_order.py --trials 400
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_drift import clopper_pearson  # noqa: E402

import pytest_goodput.run.ab as run_ab_module  # noqa: E402
from pytest_goodput.run.ab import run_ab  # noqa: E402
from pytest_goodput.schema.outcomes.ab import Order  # noqa: E402
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, RunResult, Window  # noqa: E402
from pytest_goodput.schema.scenario.spec import ScenarioSpec  # noqa: E402

METRIC = "metrics.tpot_ms.p50"
SPEC = ScenarioSpec(scenario="concurrency", concurrency=4, requests=40, isl=32, osl=16, seed=0,
                    gate=[METRIC])


def legacy_order(seed: int, r: int) -> Order:
    """The former rule: a fair coin from ``Random(seed + r)``, the spec's seed for every job."""
    return "base-head" if random.Random(seed + r).random() < 0.5 else "head-base"


def _run(tpot: float, n: int, rng: np.random.Generator) -> RunResult:
    values = tpot * rng.lognormal(0.0, 0.02, n)
    records = [RequestRecord(index=i, scheduled_at=0.0, ok=True, ttft_ms=50.0, tpot_ms=float(v), e2e_ms=200.0,
                             output_tokens=16, prompt_tokens=32) for i, v in enumerate(values)]
    return RunResult.model_construct(spec=SPEC, requests=records,
                                     window=Window(start=0.0, end=1.0, seconds=1.0),
                                     client=ClientHealth(valid=True, cpu_utilization=0.0))


def job(args: argparse.Namespace, t: int, effect: float, seed: int | None) -> bool:
    """One A/B job; True when the gated metric is judged regressed."""
    rng = np.random.default_rng(10_000 + t)
    runs = [0]

    def runner(_spec: ScenarioSpec, engine: Any) -> RunResult:
        k = runs[0]
        runs[0] += 1
        level = 10.0 * (1.0 - args.drift) ** k * rng.lognormal(0.0, args.noise)
        return _run(level * (effect if engine == "head" else 1.0), 40, rng)

    res = run_ab(SPEC, "base", "head", seed=seed, min_rounds=4, max_rounds=12,  # type: ignore[arg-type]
                 run=runner)
    return METRIC in res.regressed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--drift", type=float, default=0.03, help="each run this much faster")
    p.add_argument("--noise", type=float, default=0.03, help="run-to-run lognormal sigma")
    p.add_argument("--effect", type=float, default=1.07, help="the head's TPOT factor")
    args = p.parse_args()
    product = run_ab_module.round_order
    rules: dict[str, tuple[Callable[[int, int], Order], int | None]] = {
        "before (Random(spec.seed + r), seed 0 every job)": (legacy_order, SPEC.seed),
        "after (fresh seed per job, balanced pairs)": (product, None),
    }
    legacy_firsts = sum(legacy_order(SPEC.seed, r) == "base-head" for r in range(1, 13))
    print(f"drift {args.drift:.0%} per run, noise {args.noise:.0%}, head x{args.effect}, "
          f"{args.trials} jobs per cell; the former rule puts base first in {legacy_firsts} of 12 rounds")
    for name, (order, seed) in rules.items():
        run_ab_module.round_order = order  # type: ignore[assignment]
        for arm, effect in (("A/A", 1.0), (f"+{args.effect - 1:.0%}", args.effect)):
            hits = sum(job(args, t, effect, seed) for t in range(args.trials))
            lo, hi = clopper_pearson(hits, args.trials)
            print(f"{name:52s} {arm:5s} regressed {hits / args.trials:6.1%} "
                  f"[{lo:.1%}, {hi:.1%}]")
    run_ab_module.round_order = product  # type: ignore[assignment]


if __name__ == "__main__":
    main()

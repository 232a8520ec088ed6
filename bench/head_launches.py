"""Measuring the PR over several engine launches: false alarms, detection and launches spent.

An engine whose level moves between launches (placement, warm-up, allocator, clocks) by a
launch-to-launch CV of 5, 10 or 15 %: every session (baseline or PR) is one launch, a
lognormal factor on every latency, measured ``--repeats`` times (machine noise per run, 5 %
request noise; ``tests/judge_scenarios.py``). The baseline is ``--sessions`` launches. The
PR side is judged the way the gate judges it (``judge.head_launches.judge_look``, the
public ``judge()`` behind it): launch, measure, judge; stop when decided or when
``--planned`` launches are spent. Planned 1 is the gate's single launch. Arms: A/A, and every
TTFT and TPOT ``--effect`` slower (+20 %). Per cell it prints how often the test fails
(default mode), with a 95 % Wilson interval, and the mean launches measured::

    python bench/head_launches.py --trials 100
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from judge_scenarios import Workload, evidence, run, spec  # noqa: E402

from pytest_goodput.judge import Policy, fails  # noqa: E402
from pytest_goodput.judge.head_launches import judge_look  # noqa: E402
from pytest_goodput.stats import wilson_interval  # noqa: E402


def _launch(w: Workload, rng: np.random.Generator, cv: float, effect: float, repeats: int):  # type: ignore[no-untyped-def]
    s2 = math.log1p(cv * cv)
    level = math.exp(rng.normal(-s2 / 2.0, math.sqrt(s2))) * effect
    return [run(w, rng, machine_cv=0.01, ttft_factor=level, tpot_factor=level) for _ in range(repeats)]


def trial(args: tuple[int, float, float, int, int, int, int]) -> tuple[bool, int]:
    """One gated test: (it failed, launches measured)."""
    t, cv, effect, planned, sessions, repeats, requests = args
    rng = np.random.default_rng([20261202, t, int(cv * 1000)])
    w = Workload.draw(requests, t)
    sp = spec(requests, repeats=repeats, ttft_ms=10_000, tpot_ms=1_000, attainment=0.5)
    base = evidence(sp, [_launch(w, rng, cv, 1.0, repeats) for _ in range(sessions)])
    head: list = []
    arm_rng = np.random.default_rng([20261203, t, int(cv * 1000), int(effect * 1000)])
    while True:
        head.append(_launch(w, arm_rng, cv, effect, repeats))
        out, decided = judge_look("t::x", evidence(sp, head), base, Policy(), planned)
        if decided or len(head) >= planned:
            return fails(out, Policy()), len(head)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--cvs", default="0.05,0.10,0.15", help="launch-to-launch CVs")
    ap.add_argument("--planned", default="1,3,5", help="launch budgets to compare")
    ap.add_argument("--effect", type=float, default=1.2, help="the regression arm's slowdown")
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--requests", type=int, default=240)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    cvs = [float(x) for x in args.cvs.split(",")]
    budgets = [int(x) for x in args.planned.split(",")]
    print(f"head launches: {args.sessions} baseline launches x {args.repeats} runs of {args.requests} "
          f"requests; {args.trials} trials a cell; arms A/A and x{args.effect} on every TTFT and TPOT")
    print("| launch CV | planned | A/A fails | A/A launches (mean) | x%.2f fails | x%.2f launches (mean) |"
          % (args.effect, args.effect))
    print("|---|---|---|---|---|---|")
    t0 = time.monotonic()
    with mp.get_context("spawn").Pool(args.workers) as pool:
        for cv in cvs:
            for planned in budgets:
                cells = []
                for effect in (1.0, args.effect):
                    jobs = [(t, cv, effect, planned, args.sessions, args.repeats, args.requests)
                            for t in range(args.trials)]
                    res = pool.map(trial, jobs)
                    k = sum(f for f, _ in res)
                    lo, hi = wilson_interval(k, len(res))
                    cells.append(f"{k / len(res):.1%} [{lo:.1%}, {hi:.1%}] | "
                                 f"{np.mean([n for _, n in res]):.2f}")
                print(f"| {cv:.0%} | {planned} | {cells[0]} | {cells[1]} |", flush=True)
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The degradation gate over seeded trials: false alarms (A/A) and detection (a slowdown in the
run's last third), on the virtual-time simulator.

Each trial records ``--sessions`` baseline sessions and judges two current runs against them
with the product's own code: the records go through ``measure.metrics.summarize`` and
``measure.slices.time_slices``, each session's degradation through
``measure.degradation.session_degradation`` and the verdict through
``judge.shapes.degradation.degradation_comparison`` at the registry's tolerances. Every run meets a
machine that wanders (``sim.drift.SpeedSchedule``: CV ``--wander-cv``, correlation time
``--tau``, its own seed per run) and step jitter (``--noise-sigma``). The degraded run also
meets ``sim.degrade.DegradeSchedule``: its step time ramps to ``--slowdown`` over ``--ramp``
seconds from two thirds of the run on.

Open loop: Poisson ``--rate`` req/s (the default preset's knee is ≈ 16–17 req/s at ISL 128 /
OSL 64) for ``--duration`` s, slices of ``--slice`` s. Printed per arm: how often the test
fails (any degradation metric regressed), per metric, with 95 % Clopper–Pearson intervals.

    python bench/degradation_gate.py --trials 100
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from typing import Any, Callable, Optional

import numpy as np
from scipy.stats import beta

from pytest_goodput.judge.shapes.degradation import degradation_comparison
from pytest_goodput.measure.degradation import session_degradation
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.measure.slices import time_slices
from pytest_goodput.schema.registry import DEGRADATION, metric
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord
from pytest_goodput.schema.runs.slices import Slices
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.sim.degrade import DegradeSchedule
from pytest_goodput.sim.drift import SpeedSchedule
from pytest_goodput.sim.model import SimRequest, simulate
from pytest_goodput.sim.profile import SimProfile

ARMS = ("A/A", "last third slower")


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    lo = beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    hi = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def one_run(args: argparse.Namespace, seed: int, degrade: bool) -> Slices:
    """One simulated run's time slices: the seeded schedule, this run's machine, its jitter."""
    srng = np.random.default_rng(args.schedule_seed)
    n = int(args.rate * args.duration)
    arrivals = np.concatenate(([0.0], np.cumsum(srng.exponential(1.0 / args.rate, n - 1))))
    wander = SpeedSchedule(wander_cv=args.wander_cv, tau_s=args.tau, seed=seed)
    ramp = DegradeSchedule(args.slowdown, args.duration * 2 / 3, args.ramp) if degrade else None
    speed: Callable[[float], float] = (lambda t: wander(t) * ramp(t)) if ramp else wander  # type: ignore[misc]
    profile = SimProfile(noise_sigma=args.noise_sigma, seed=seed)
    lines = simulate(profile, [SimRequest(i, args.isl, args.osl, float(t)) for i, t in enumerate(arrivals)],
                     speed)
    records = [RequestRecord(index=i, ok=True, output_tokens=args.osl, prompt_tokens=args.isl,
                             token_count_source="usage", scheduled_at=x.arrival, sent_at=x.arrival,
                             first_token_at=x.token_times[0], last_token_at=x.token_times[-1],
                             end_at=x.token_times[-1], ttft_ms=1e3 * x.ttft, tpot_ms=1e3 * x.tpot,  # type: ignore[operator]
                             e2e_ms=1e3 * x.e2e)
               for i, x in enumerate(lines)]
    spec = ScenarioSpec(scenario="server", rate=args.rate, requests=n, isl=args.isl, osl=args.osl,
                        slice_s=args.slice)
    result = summarize(records, spec, ClientHealth(valid=True, cpu_utilization=0.1))
    return time_slices(result.requests, result.window, args.slice)


def trial(job: tuple[argparse.Namespace, int]) -> dict[str, Any]:
    args, t = job
    seeds = iter(range(1000 * (t + 1), 1000 * (t + 2)))
    base = [session_degradation([one_run(args, next(seeds), False)]) for _ in range(args.sessions)]
    out: dict[str, Any] = {}
    for arm in ARMS:
        cur = [session_degradation([one_run(args, next(seeds), arm != "A/A")])]
        rows = [degradation_comparison(p, base, cur, metric(p).tolerance) for p in DEGRADATION]
        out[arm] = {r.metric: r.verdict for r in rows if r is not None}
        out[arm]["values"] = {p: cur[0][p][0] for p in cur[0]}
    return out


def main(argv: Optional[list[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--sessions", type=int, default=3, help="baseline sessions per trial")
    p.add_argument("--rate", type=float, default=10.0)
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--slice", type=float, default=5.0)
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--noise-sigma", type=float, default=0.05)
    p.add_argument("--wander-cv", type=float, default=0.03)
    p.add_argument("--tau", type=float, default=30.0)
    p.add_argument("--slowdown", type=float, default=1.3, help="step-time multiplier at the end")
    p.add_argument("--ramp", type=float, default=5.0, help="seconds the slowdown ramps over")
    p.add_argument("--schedule-seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    t0 = time.process_time()
    start = time.perf_counter()
    with mp.Pool(args.workers) as pool:
        results = pool.map(trial, [(args, t) for t in range(args.trials)])
    wall = time.perf_counter() - start
    print(f"degradation gate: {args.trials} trials, {args.sessions} baseline sessions, Poisson "
          f"{args.rate:g} req/s for {args.duration:g} s, slices of {args.slice:g} s, wander CV "
          f"{args.wander_cv:g}, jitter {args.noise_sigma:g}; degraded: x{args.slowdown:g} from "
          f"{args.duration * 2 / 3:g} s over {args.ramp:g} s")
    for arm in ARMS:
        fails = sum(any(v == "regressed" for k, v in r[arm].items() if k != "values") for r in results)
        lo, hi = clopper_pearson(fails, args.trials)
        word = "false alarms" if arm == "A/A" else "detected"
        print(f"{arm:>18}: {word} {fails}/{args.trials} = {fails / args.trials:.1%} [{lo:.1%}, {hi:.1%}]")
        for path in DEGRADATION:
            k = sum(r[arm].get(path) == "regressed" for r in results)
            inc = sum(r[arm].get(path) == "inconclusive" for r in results)
            vals = [r[arm]["values"][path] for r in results if path in r[arm]["values"]]
            print(f"{'':>20}{metric(path).label:<32} regressed {k:>4}, inconclusive {inc:>4}; "
                  f"value median {np.median(vals):+.1%}, SD {np.std(vals, ddof=1):.1%}"
                  if len(vals) > 1 else f"{'':>20}{path}: not measured")
    print(f"wall {wall:.0f} s, CPU (main) {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()

"""Coverage of the within-run interval: does a 98 % interval of an A/A change hold 0 98 % of the time?

Request-level noise only (no machine state): pairs of runs of one schedule on the simulator
model (:mod:`pytest_goodput.sim.model`), each with its own step-jitter seed, compared by the
paired bootstrap the gate uses (:func:`pytest_goodput.judge.scalar.intervals.paired_half_widths`),
resampling request indices one by one (``block=1``: requests as independent draws) and in
moving blocks of consecutive requests (the gate's default, ``stats.default_block``).
Requests in flight together share the engine's batches and queue, so independent draws
make the interval too narrow; the block bootstrap should bring coverage to the claim. A
third column is the gate's whole interval (``compare_metric`` with ``--sessions`` baseline
sessions: the prediction interval whose run-to-run term also covers what every request of
a run shares, such as the engine's step-time noise, which no resampling of requests sees).
The "true" A/A change is taken as 0 (both runs come from the same distribution).

    python bench/interval_coverage.py                 # about 2 minutes on 2 cores
    python bench/interval_coverage.py --rate 14       # nearer the knee: more correlated
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import time
from typing import Any

import numpy as np

from pytest_goodput import stats
from pytest_goodput.judge.scalar.intervals import paired_half_widths
from pytest_goodput.judge.values import metric_value
from pytest_goodput.run.gating import DEFAULT_SESSIONS
from pytest_goodput.judge.scalar.verdicts import CONFIDENCE, MetricDef, compare_metric
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.sim.model import SimRequest, simulate
from pytest_goodput.sim.profile import SimProfile

METRICS = ("throughput.output_tokens_per_s", "metrics.ttft_ms.p99", "metrics.ttft_ms.p50",
           "metrics.tpot_ms.p50", "metrics.e2e_ms.mean")


def run(args: argparse.Namespace, seed: int) -> Samples:
    rng = np.random.default_rng(args.schedule_seed)
    arrivals = np.concatenate(([0.0], np.cumsum(rng.exponential(1.0 / args.rate, args.requests - 1))))
    lines = simulate(SimProfile(noise_sigma=args.noise_sigma, seed=seed),
                     [SimRequest(i, args.isl, args.osl, float(t)) for i, t in enumerate(arrivals)])
    n = len(lines)
    return Samples(window_s=float(arrivals[-1] - arrivals[0]), ok=[True] * n, good=None,
                   ttft_ms=[1e3 * x.ttft for x in lines], tpot_ms=[1e3 * x.tpot for x in lines],
                   e2e_ms=[1e3 * x.e2e for x in lines], output_tokens=[args.osl] * n,
                   prompt_tokens=[args.isl] * n)


def trial(job: tuple[argparse.Namespace, int]) -> dict[str, Any]:
    args, t = job
    seeds = range(10 * t + 1, 10 * t + 10)
    a, b = run(args, seeds[0]), run(args, seeds[1])
    sessions = [[a]] + [[run(args, s)] for s in seeds[2:2 + args.sessions - 1]]
    out: dict[str, Any] = {}
    for path in METRICS:
        info = registry.metric(path)
        va, vb = metric_value(a, path), metric_value(b, path)
        d = math.log(vb / va)
        for name, block in (("independent", 1), ("block", args.block)):
            h = paired_half_widths(info.kind, info.percentile, path, [a], [b], d, va, args.confidence,
                                   seed=t, block=block)
            out[(path, name)] = h is not None and d - h[0] <= 0.0 <= d + h[1]
        c = compare_metric(MetricDef.of(path), sessions, [b], seed=t, confidence=args.confidence,
                           paired=True)
        out[(path, "gate")] = c.interval is not None and c.interval[0] <= 0.0 <= c.interval[1]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=300)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--rate", type=float, default=8.0)
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--noise-sigma", type=float, default=0.05, help="per-step lognormal jitter")
    p.add_argument("--confidence", type=float, default=CONFIDENCE)
    p.add_argument("--schedule-seed", type=int, default=0)
    p.add_argument("--block", type=int, default=None, help="block length (default: the gate's)")
    p.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS, help="baseline sessions (gate column)")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    t0 = time.perf_counter()
    with mp.Pool(args.workers) as pool:
        res = pool.map(trial, [(args, t) for t in range(args.trials)], chunksize=4)
    n = len(res)
    print(f"interval coverage: {n} A/A pairs, {args.requests} requests at {args.rate:g} req/s, "
          f"jitter σ={args.noise_sigma:g}, claimed {args.confidence:.0%}, block length "
          f"{args.block or stats.default_block(args.requests)}")
    print(f"{'metric':<34}{'independent draws':>26}{'moving blocks':>26}"
          f"{f'gate, {args.sessions} sessions':>26}")
    for path in METRICS:
        cells = []
        for name in ("independent", "block", "gate"):
            k = sum(r[(path, name)] for r in res)
            lo, hi = stats.wilson_interval(k, n, 0.95)
            cells.append(f"{100 * k / n:5.1f}% [{100 * lo:4.1f}, {100 * hi:4.1f}]")
        print(f"{path:<34}{cells[0]:>26}{cells[1]:>26}{cells[2]:>26}")
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

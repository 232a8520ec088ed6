"""The gate's own error rates, measured on the virtual-time simulator.

Each trial draws a baseline history (``--history`` runs) and current runs (``--repeats``)
of the same scenario: ``--requests`` requests arriving as a Poisson stream at ``--rate``
(one fixed schedule, as the load generator precomputes it from the spec seed), served by
the simulator model (:mod:`pytest_goodput.sim.model`) with lognormal step jitter (a fresh
seed per run) and a per-run machine-state slowdown drawn from a lognormal. Two noise
settings (``--settings``):

* ``measured``: step jitter σ 0.01, run CV 0.2 % — reproduces the run-to-run spread of the
  real simulator measured by ``bench/gate_realtime.py`` (P99 TTFT CV ≈ 3 %, the rest < 0.5 %);
* ``stress``: step jitter σ 0.05, run CV 3 % — a noisy shared machine (P99 CV ≈ 5–8 %).

A/A: the current run is the same code. A/B: the current run is slowed by
``--goodput-slowdown`` (a ~10 % goodput drop under the bench's SLOs) or
``--ttft-slowdown`` (a ~20 % P99 TTFT rise); the realized true changes are printed. For
every gated metric it prints the rates of "regressed" (false alarms under A/A, detections
under A/B) with 95 % Wilson intervals, for the gate (paired: every run replays one
schedule) and for the naive rule "fail when the point estimate is worse than the
tolerance"; then the naive rule with its threshold tuned to the gate's detection in the
first setting, applied unchanged to every setting.

    python bench/gate_quality.py                       # both settings: about 2 minutes on 2 cores
    python bench/gate_quality.py --repeats 2           # the recommended gate: two current runs
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import time
from typing import Any

import numpy as np

from pytest_goodput.judge.verdicts import (
    CONFIDENCE,
    DEFAULT_METRICS,
    compare_metric,
    metric_value,
)
from pytest_goodput.schema.results import Samples
from pytest_goodput.sim.model import SimRequest, simulate
from pytest_goodput.sim.profile import SimProfile
from pytest_goodput.stats import wilson_interval

ARMS = ("A/A", "A/B goodput", "A/B ttft")
RULES = ("gate", "naive")


def one_run(args: argparse.Namespace, noise_seed: int, slowdown: float) -> Samples:
    """One simulated run of the bench scenario, as the per-request samples a baseline stores."""
    rng = np.random.default_rng(args.schedule_seed)
    arrivals = np.concatenate(([0.0], np.cumsum(rng.exponential(1.0 / args.rate, args.requests - 1))))
    profile = SimProfile(noise_sigma=args.noise_sigma, seed=noise_seed, slowdown=slowdown)
    lines = simulate(profile, [SimRequest(i, args.isl, args.osl, float(t)) for i, t in enumerate(arrivals)])
    ttft = [1e3 * x.ttft for x in lines]
    tpot = [1e3 * x.tpot for x in lines]
    e2e = [1e3 * x.e2e for x in lines]
    good = [a <= args.ttft_slo and b <= args.tpot_slo for a, b in zip(ttft, tpot)]
    window = max(x.token_times[-1] for x in lines) - float(arrivals[0])
    return Samples(window_s=window, ok=[True] * len(lines), good=good, ttft_ms=ttft, tpot_ms=tpot,
                   e2e_ms=e2e, output_tokens=[args.osl] * len(lines), prompt_tokens=[args.isl] * len(lines))


def _run_factor(rng: np.random.Generator, cv: float) -> float:
    """Machine-state slowdown: lognormal with mean 1 and coefficient of variation ``cv``."""
    s2 = math.log1p(cv * cv)
    return float(math.exp(rng.normal(-s2 / 2.0, math.sqrt(s2))))


SETTINGS: dict[str, tuple[float, float]] = {  # name: (run CV, step jitter σ)
    "measured": (0.002, 0.01),
    "stress": (0.03, 0.05),
}


def trial(job: tuple[argparse.Namespace, int]) -> dict[str, Any]:
    """One baseline history and three current runs (A/A and both A/B); verdicts by both rules."""
    args, t = job
    rng = np.random.default_rng([args.seed, t])
    seeds = iter(range(1_000_000 * (t + 1), 1_000_000 * (t + 2)))
    base = [one_run(args, next(seeds), _run_factor(rng, args.run_cv)) for _ in range(args.history)]
    arms = {"A/A": 1.0, "A/B goodput": args.goodput_slowdown, "A/B ttft": args.ttft_slowdown}
    out: dict[str, Any] = {}
    for arm, effect in arms.items():
        cur = [one_run(args, next(seeds), effect * _run_factor(rng, args.run_cv)) for _ in range(args.repeats)]
        for path, defn in DEFAULT_METRICS.items():
            gate = compare_metric(defn, base, cur, seed=t, confidence=args.confidence, paired=args.paired)
            sign = -1.0 if defn.direction == "higher" else 1.0
            naive = gate.change is not None and sign * gate.change > defn.tolerance
            out[(arm, path)] = {
                "gate": gate.verdict, "naive": "regressed" if naive else "pass",
                "worse": sign * (gate.change or 0.0), "value": metric_value(cur[0], path),
            }
    return out


def _fmt(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n, 0.95)
    return f"{100 * k / n:5.1f}% [{100 * lo:4.1f}, {100 * hi:4.1f}]"


def _report(args: argparse.Namespace, name: str, results: list[dict[str, Any]]) -> None:
    n = len(results)
    print(f"\n== {name}: run CV {args.run_cv:.1%}, step jitter σ={args.noise_sigma:g} ==")
    for arm in ARMS[1:]:
        for path in ("goodput.requests_per_s", "metrics.ttft_ms.p99"):
            aa = np.mean([r[("A/A", path)]["value"] for r in results])
            ab = np.mean([r[(arm, path)]["value"] for r in results])
            print(f"  true effect of {arm:<12} on {path:<24} {ab / aa - 1:+.1%}")
    print(f"{'metric':<32}{'arm':<13}" + "".join(f"{r + ' regressed':>26}" for r in RULES)
          + f"{'gate inconclusive':>26}")
    for path in DEFAULT_METRICS:
        for arm in ARMS:
            rows = [r[(arm, path)] for r in results]
            cells = "".join(f"{_fmt(sum(x[rule] == 'regressed' for x in rows), n):>26}" for rule in RULES)
            inc = _fmt(sum(x["gate"] == "inconclusive" for x in rows), n)
            print(f"{path:<32}{arm:<13}{cells}{inc:>26}")


def _threshold(res: list[dict[str, Any]], arm: str, path: str) -> float:
    """The naive threshold on the change that detects exactly as often as the gate."""
    det = np.mean([r[(arm, path)]["gate"] == "regressed" for r in res])
    worse = np.sort([r[(arm, path)]["worse"] for r in res])
    return float(np.quantile(worse, 1.0 - det)) if det > 0 else math.inf


def _naive_at_equal_detection(all_results: dict[str, list[dict[str, Any]]]) -> None:
    """The naive rule at the gate's detection: tuned per setting, and tuned once then reused."""
    first = next(iter(all_results))
    pairs = (("A/B goodput", "goodput.requests_per_s"), ("A/B ttft", "metrics.ttft_ms.p99"))
    print("\nnaive rule tuned to the gate's detection in each setting (threshold = the change "
          "quantile detecting as often):")
    for name, rs in all_results.items():
        for arm, path in pairs:
            thr = _threshold(rs, arm, path)
            fa = sum(r[("A/A", path)]["worse"] > thr for r in rs)
            gfa = sum(r[("A/A", path)]["gate"] == "regressed" for r in rs)
            print(f"  [{name:<8}] {path:<24} threshold {thr:+.1%}: naive A/A {_fmt(fa, len(rs))}"
                  f" | gate A/A {_fmt(gfa, len(rs))}")
    print(f"\nnaive rule tuned in '{first}', applied unchanged to every setting:")
    for arm, path in pairs:
        thr = _threshold(all_results[first], arm, path)
        for name, rs in all_results.items():
            n = len(rs)
            fa = sum(r[("A/A", path)]["worse"] > thr for r in rs)
            hit = sum(r[(arm, path)]["worse"] > thr for r in rs)
            gfa = sum(r[("A/A", path)]["gate"] == "regressed" for r in rs)
            ghit = sum(r[(arm, path)]["gate"] == "regressed" for r in rs)
            print(f"  {path:<24} threshold {thr:+.1%} [{name:<8}] naive A/A {_fmt(fa, n)}, "
                  f"detects {_fmt(hit, n)} | gate A/A {_fmt(gfa, n)}, detects {_fmt(ghit, n)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=600)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--rate", type=float, default=14.0, help="req/s; the default preset's knee is ~17")
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--ttft-slo", type=float, default=80.0, help="ms, per request (goodput)")
    p.add_argument("--tpot-slo", type=float, default=19.5, help="ms, per request (goodput)")
    p.add_argument("--history", type=int, default=3, help="baseline runs")
    p.add_argument("--repeats", type=int, default=1, help="current runs")
    p.add_argument("--settings", default="measured,stress", help=f"comma-separated: {', '.join(SETTINGS)}")
    p.add_argument("--run-cv", type=float, default=None, help="override: run-to-run CV of machine speed")
    p.add_argument("--noise-sigma", type=float, default=None, help="override: per-step lognormal jitter")
    p.add_argument("--no-paired", dest="paired", action="store_false",
                   help="judge with the unpaired (independent-sample) intervals")
    p.add_argument("--goodput-slowdown", type=float, default=1.10)
    p.add_argument("--ttft-slowdown", type=float, default=1.08)
    p.add_argument("--confidence", type=float, default=CONFIDENCE)
    p.add_argument("--schedule-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()

    t0 = time.perf_counter()
    print(f"gate quality: {args.trials} trials per setting, {args.requests} requests at {args.rate:g} "
          f"req/s, {args.history} baseline runs, {args.repeats} current run(s), "
          f"{'paired' if args.paired else 'unpaired'}, confidence {args.confidence:g}")
    all_results: dict[str, list[dict[str, Any]]] = {}
    for name in args.settings.split(","):
        run_cv, sigma = SETTINGS[name]
        a = argparse.Namespace(**vars(args))
        a.run_cv = run_cv if args.run_cv is None else args.run_cv
        a.noise_sigma = sigma if args.noise_sigma is None else args.noise_sigma
        with mp.Pool(args.workers) as pool:
            all_results[name] = pool.map(trial, [(a, t) for t in range(args.trials)], chunksize=8)
        _report(a, name, all_results[name])
    _naive_at_equal_detection(all_results)
    print(f"\nelapsed {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""How often recording names an outlier session: on clean recordings, and with one 40 % slower.

Sessions are simulated as ``bench/gate_quality.py`` does (the virtual-time simulator model, the
README marker's shape: ``--requests`` requests arriving as one fixed Poisson schedule at
``--rate``, ``--repeats`` runs per session, SLOs on TTFT and TPOT): each session has a
lognormal machine state shared by its repeats, each run a fresh jitter seed. An outlier
session runs with the simulator's ``slowdown`` knob at ``--outlier`` (every step 40 % slower,
as ``GOODPUT_SIM_SLOWDOWN=1.4`` would). Gated metrics: the server scenario's defaults with
SLOs (goodput, P99 TTFT, P99 TPOT), at their default tolerances.

A pool of clean sessions and one of slowed sessions are simulated once per noise setting;
each session's value of every gated metric is computed once (``values.group_value``, as
``judge.noise.outliers.recording_outliers`` does), and each trial draws its sessions from the pools
without replacement and runs ``judge.noise.outliers.session_outliers`` on their values, the rule
recording applies to the baseline it wrote.
Printed per noise setting and session count: the share of clean recordings that name any
session (the false-flag rate), and with the last session slowed, the share that name it
(detection) and the share that name a clean one. 95 % Wilson intervals.

    python bench/recording_outliers.py                  # about 15 minutes on a busy 2-core machine
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from pytest_goodput.judge.noise.outliers import FAMILY_ALPHA, Outlier, session_outliers
from pytest_goodput.judge.values import group_value
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.sim.model import SimRequest, simulate
from pytest_goodput.sim.profile import SimProfile
from pytest_goodput.stats import wilson_interval

GATED = ("goodput.requests_per_s", "metrics.ttft_ms.p99", "metrics.tpot_ms.p99")
SETTINGS: dict[str, tuple[float, float]] = {  # name: (session CV, step jitter σ), as gate_quality
    "measured": (0.002, 0.01),
    "stress": (0.03, 0.05),
}


def _factor(rng: np.random.Generator, cv: float) -> float:
    """Lognormal with mean 1 and coefficient of variation ``cv``."""
    s2 = math.log1p(cv * cv)
    return float(math.exp(rng.normal(-s2 / 2.0, math.sqrt(s2))))


def one_run(args: argparse.Namespace, jitter: float, seed: int, slowdown: float) -> Samples:
    """One simulated run, as the per-request samples a baseline stores."""
    srng = np.random.default_rng(args.schedule_seed)
    arrivals = np.concatenate(([0.0], np.cumsum(srng.exponential(1.0 / args.rate, args.requests - 1))))
    lines = simulate(SimProfile(noise_sigma=jitter, seed=seed, slowdown=slowdown),
                     [SimRequest(i, args.isl, args.osl, float(t)) for i, t in enumerate(arrivals)])
    ttft = [1e3 * x.ttft for x in lines]
    tpot = [1e3 * x.tpot for x in lines]
    good = [a <= args.ttft_slo and b <= args.tpot_slo for a, b in zip(ttft, tpot)]
    n = len(lines)
    return Samples(window_s=float(arrivals[-1] - arrivals[0]), ok=[True] * n, good=good,
                   ttft_ms=ttft, tpot_ms=tpot, e2e_ms=[1e3 * x.e2e for x in lines],
                   output_tokens=[args.osl] * n, prompt_tokens=[args.isl] * n)


def pool(args: argparse.Namespace, setting: str, size: int, effect: float, seed: int) -> list[list[Samples]]:
    """``size`` recorded sessions: a machine state per session, a jitter seed per run."""
    cv, jitter = SETTINGS[setting]
    rng = np.random.default_rng([args.seed, seed])
    out = []
    for k in range(size):
        state = _factor(rng, cv) * effect
        out.append([one_run(args, jitter, 1000 * seed + 10 * k + r, state * _factor(rng, cv / 3.0))
                    for r in range(args.repeats)])
    return out


def values_of(sessions: list[list[Samples]]) -> dict[str, list[float | None]]:
    """Every session's value of each gated metric (what the rule reads of a session)."""
    return {m: [group_value(s, m) for s in sessions] for m in GATED}


def named(values: dict[str, list[float | None]], defs: list[MetricDef], alpha: float) -> list[Outlier]:
    """``recording_outliers`` on sessions whose values are already computed."""
    return [o for d in defs for o in session_outliers(values[d.path], d, alpha=alpha)]


def _fmt(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n, 0.95)
    return f"{100 * k / n:5.1f}% [{100 * lo:4.1f}, {100 * hi:4.1f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=2000, help="recordings per row")
    p.add_argument("--pool", type=int, default=600, help="clean sessions simulated per setting")
    p.add_argument("--sessions", default="3,5,10", help="comma-separated session counts")
    p.add_argument("--outlier", type=float, default=1.4, help="slowdown of the outlier session")
    p.add_argument("--requests", type=int, default=200, help="as the README's marker")
    p.add_argument("--rate", type=float, default=8.0, help="req/s, as the README's marker")
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--ttft-slo", type=float, default=20.0, help="ms, per request (goodput)")
    p.add_argument("--tpot-slo", type=float, default=9.5, help="ms, per request (goodput)")
    p.add_argument("--repeats", type=int, default=2, help="runs per session: the README marker's")
    p.add_argument("--settings", default="measured,stress", help=f"comma-separated: {', '.join(SETTINGS)}")
    p.add_argument("--alpha", type=float, default=FAMILY_ALPHA, help="per metric, over its sessions")
    p.add_argument("--schedule-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args()
    counts = [int(s) for s in args.sessions.split(",")]
    defs = [MetricDef.of(path) for path in GATED]
    t0 = time.perf_counter()
    print(f"recording outliers: {args.requests} requests at {args.rate:g} req/s, {args.repeats} "
          f"run(s) per session, gated {', '.join(GATED)}; outlier slowdown x{args.outlier:g}; "
          f"alpha {args.alpha:g} per metric; {args.trials} recordings per row")
    for setting in args.settings.split(","):
        clean = values_of(pool(args, setting, args.pool, 1.0, 1))
        slowed = values_of(pool(args, setting, max(100, args.pool // 4), args.outlier, 2))
        sizes = len(clean[GATED[0]]), len(slowed[GATED[0]])
        rng = np.random.default_rng([args.seed, 3])
        cv, jitter = SETTINGS[setting]
        print(f"\n== {setting}: session CV {cv:.1%}, step jitter σ={jitter:g}; pools of "
              f"{sizes[0]} clean and {sizes[1]} slowed sessions ==")
        print(f"{'sessions':>8}  {'clean: any named':>24}  {'outlier named':>24}  {'clean one named':>24}"
              f"  metrics naming the outlier")
        for s in counts:
            false_clean = hits = wrong = 0
            by_metric: dict[str, int] = {m: 0 for m in GATED}
            for _ in range(args.trials):
                pick = rng.choice(sizes[0], size=s, replace=False)
                recording = {m: [clean[m][i] for i in pick] for m in GATED}
                false_clean += bool(named(recording, defs, args.alpha))
                j = int(rng.integers(sizes[1]))
                found = named({m: [*v[:-1], slowed[m][j]] for m, v in recording.items()}, defs, args.alpha)
                hit = [o for o in found if o.session == s]
                hits += bool(hit)
                wrong += any(o.session != s for o in found)
                for m in {o.metric for o in hit}:
                    by_metric[m] += 1
            n = args.trials
            metrics = ", ".join(f"{m.split('.')[-2] if m.startswith('metrics') else m} "
                                f"{100 * k / n:.0f}%" for m, k in by_metric.items())
            print(f"{s:>8}  {_fmt(false_clean, n):>24}  {_fmt(hits, n):>24}  {_fmt(wrong, n):>24}  {metrics}")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

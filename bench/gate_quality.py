"""The gate's own error rates, measured on the virtual-time simulator, at the defaults a user gets.

Each trial records a baseline the way ``--goodput-update-baseline`` does (``--sessions``
sessions, each ``--repeats`` runs) and then gates one current session (``--repeats`` runs)
per arm, all of the same scenario: ``--requests`` requests arriving as a Poisson stream at
``--rate`` (one fixed schedule, as the load generator precomputes it from the spec seed), of
mixed prompt lengths — ``--long-frac`` (20 %) of them ``--long-isl`` tokens long, the rest
``--isl``, the long ones dominating the TTFT tail — served by the simulator model (:mod:`pytest_goodput.sim.model`) with lognormal step jitter (a
fresh seed per run). Machine state is a lognormal slowdown per *session*, shared by its
repeats, plus a small one per run: repeats of one session are correlated, as on a real
machine. Two noise settings (``--settings``):

* ``measured``: step jitter σ 0.01, session CV 0.2 % — the run-to-run spread of the real
  simulator measured by ``bench/gate_realtime.py`` (P99 TTFT CV ≈ 3 %, the rest < 0.5 %);
* ``stress``: step jitter σ 0.05, session CV 3 % — a noisy shared machine.

Arms (each against the same baseline): A/A; goodput −10 % (the engine 10 % slower under the
bench's SLOs); P99 TTFT +20 %; P99 TPOT +20 %; error rate 0 → 2 % (random requests fail);
bimodal (half the requests 30 % slower); failures for latency (the slowest 4 % of requests
time out instead, with ``max_error_rate=0.05`` so the SLO allows it); short prompts slower
(the 80 % short requests get TTFT ×2.5 and TPOT +30 %, the long ones unchanged: a
regression most users feel, which the medians must catch). For each arm it prints
how often the gate judged the metric *regressed*, and how often the test failed — default
mode (a regression or a broken error-rate SLO) and strict mode (also inconclusive or
underpowered) — with 95 % Wilson intervals. Gated metrics: the server scenario's default
gate with per-request SLOs, from the registry (``registry.default_gate``: goodput, P50 and
P99 TTFT, P50 and P99 TPOT), and the error rate, which is always compared.

    python bench/gate_quality.py                         # defaults: ~25 min of 2 idle cores
    python bench/gate_quality.py --sessions 3 --trials 200

``--drift`` compares the stored-baseline gate with A/B mode on a machine whose speed drifts
between days and within a job (``bench/gate_drift.py``; ``docs/performance.md``):

    python bench/gate_quality.py --drift --trials 1000 --day-cv 0.05 --wander-cv 0.03
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_goodput.judge.sequential.ab import MAX_ROUNDS, MIN_ROUNDS
from pytest_goodput.judge.noise.spread import PRIOR_RUNS
from pytest_goodput.judge.scalar.verdicts import CONFIDENCE, POWER_ALPHA, MetricDef, compare
from pytest_goodput.run.gating import DEFAULT_SESSIONS
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.scenario.spec import build_spec
from pytest_goodput.sim.model import SimRequest, simulate
from pytest_goodput.sim.profile import SimProfile
from pytest_goodput.stats import wilson_interval

#: The bench's scenario as a marker would state it: a server test with per-request SLOs.
SPEC = build_spec(dict(scenario="server", rate=8.0, requests=240, repeats=2, isl=128, osl=64,
                       ttft_ms=20.0, tpot_ms=9.5))
#: What the gate judges for it: the registry's default gate, and the error rate (always).
GATED = (*registry.default_gate(SPEC), "error_rate")
SHORT_SLOWER = "short 80% slower"
ARMS = ("A/A", "goodput -10%", "P99 TTFT +20%", "P99 TPOT +20%", "errors 0->2%", "bimodal 50% x1.3",
        "failures for latency", SHORT_SLOWER)
#: The metric each arm is about (its detection row); the test-level rows count every metric.
ARM_METRIC = {"goodput -10%": "goodput.requests_per_s", "P99 TTFT +20%": "metrics.ttft_ms.p99",
              "P99 TPOT +20%": "metrics.tpot_ms.p99", "errors 0->2%": "error_rate",
              "bimodal 50% x1.3": "metrics.tpot_ms.p99", "failures for latency": "error_rate",
              SHORT_SLOWER: "metrics.ttft_ms.p50"}
SETTINGS: dict[str, tuple[float, float]] = {  # name: (session CV, step jitter σ)
    "measured": (0.002, 0.01),
    "stress": (0.03, 0.05),
}


def _factor(rng: np.random.Generator, cv: float) -> float:
    """Lognormal with mean 1 and coefficient of variation ``cv``."""
    s2 = math.log1p(cv * cv)
    return float(math.exp(rng.normal(-s2 / 2.0, math.sqrt(s2))))


def prompt_lengths(args: argparse.Namespace) -> np.ndarray:
    """Each request's ISL: a fixed ``long_frac`` of the schedule (chosen by the schedule seed,
    the same requests in every run) is ``long_isl`` tokens long, the rest ``isl``."""
    n, isl = args.requests, np.full(args.requests, args.isl)
    k = int(round(getattr(args, "long_frac", 0.0) * n))
    if k:
        isl[np.random.default_rng([args.schedule_seed, 1]).permutation(n)[:k]] = args.long_isl
    return isl


def one_run(args: argparse.Namespace, noise_seed: int, slowdown: float, arm: str,
            rng: np.random.Generator, speed: Callable[[float], float] | None = None) -> Samples:
    """One simulated run of the bench scenario, as the per-request samples a baseline stores;
    ``speed(t)``: the machine's drift over the run's virtual time (``--drift``)."""
    srng = np.random.default_rng(args.schedule_seed)
    arrivals = np.concatenate(([0.0], np.cumsum(srng.exponential(1.0 / args.rate, args.requests - 1))))
    profile = SimProfile(noise_sigma=args.noise_sigma, seed=noise_seed, slowdown=slowdown)
    isl = prompt_lengths(args)
    lines = simulate(profile, [SimRequest(i, int(isl[i]), args.osl, float(t)) for i, t in enumerate(arrivals)],
                     speed)
    ttft = np.array([1e3 * x.ttft for x in lines])
    tpot = np.array([1e3 * x.tpot for x in lines])
    e2e = np.array([1e3 * x.e2e for x in lines])
    ok = np.ones(len(lines), dtype=bool)
    n = len(lines)
    if arm == "bimodal 50% x1.3":
        slow = rng.random(n) < 0.5
        ttft, tpot, e2e = (np.where(slow, x * 1.3, x) for x in (ttft, tpot, e2e))
    elif arm == "errors 0->2%":
        ok &= rng.random(n) >= 0.02
    elif arm == "failures for latency":
        ok &= e2e < np.quantile(e2e, 0.96)
    elif arm == SHORT_SLOWER:  # the short prompts only: TTFT x2.5, every later token +30 %
        short = isl == args.isl
        decode = e2e - ttft
        ttft = np.where(short, ttft * 2.5, ttft)
        tpot = np.where(short, tpot * 1.3, tpot)
        e2e = np.where(short, ttft + decode * 1.3, e2e)
    good = (ttft <= args.ttft_slo) & (tpot <= args.tpot_slo) & ok
    window = float(arrivals[-1] - arrivals[0]) if n > 1 else 0.0
    none = lambda x: [float(v) if o else None for v, o in zip(x, ok)]  # noqa: E731
    return Samples(window_s=window, ok=ok.tolist(), good=good.tolist(), ttft_ms=none(ttft),
                   tpot_ms=none(tpot), e2e_ms=none(e2e),
                   output_tokens=[args.osl if o else 0 for o in ok], prompt_tokens=[int(x) for x in isl])


def session(args: argparse.Namespace, seeds: Any, rng: np.random.Generator, effect: float,
            arm: str) -> list[Samples]:
    """One recorded session: its repeats share the session's machine state."""
    state = _factor(rng, args.session_cv) * effect
    return [one_run(args, next(seeds), state * _factor(rng, args.session_cv / 3.0), arm, rng)
            for _ in range(args.repeats)]


def trial(job: tuple[argparse.Namespace, int]) -> dict[str, Any]:
    args, t = job
    rng = np.random.default_rng([args.seed, t])
    seeds = iter(range(1_000_000 * (t + 1), 1_000_000 * (t + 2)))
    base = [session(args, seeds, rng, 1.0, "A/A") for _ in range(args.sessions)]
    effects = {"goodput -10%": args.goodput_slowdown, "P99 TTFT +20%": args.ttft_slowdown,
               "P99 TPOT +20%": args.tpot_slowdown}
    defs = [MetricDef.of(p) for p in GATED]
    out: dict[str, Any] = {}
    for arm in ARMS:
        cur = session(args, seeds, rng, effects.get(arm, 1.0), arm)
        cs = {c.metric: c for c in compare(base, cur, defs, seed=t, confidence=args.confidence,
                                           paired=True, prior_runs=args.prior_runs,
                                           power_alpha=args.power_alpha)}
        failed = sum(not o for s in cur for o in s.ok)
        issued = sum(len(s.ok) for s in cur)
        slo_broken = failed > (0.05 if arm == "failures for latency" else 0.0) * issued
        verdicts = {m: c.verdict for m, c in cs.items()}
        out[arm] = {
            "verdicts": verdicts,
            "fails": slo_broken or "regressed" in verdicts.values(),
            "strict": slo_broken or any(v in ("regressed", "inconclusive", "underpowered")
                                        for v in verdicts.values()),
            "changes": {m: c.change for m, c in cs.items()},
            "detectable": {m: c.detectable for m, c in cs.items()},
        }
    return out


def _fmt(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n, 0.95)
    return f"{100 * k / n:5.1f}% [{100 * lo:4.1f}, {100 * hi:4.1f}]"


def _report(name: str, args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    n = len(results)
    print(f"\n== {name}: session CV {args.session_cv:.1%}, step jitter σ={args.noise_sigma:g}; "
          f"{n} trials ==")
    for arm in ARMS[1:]:
        m = ARM_METRIC[arm]
        ch = [r[arm]["changes"].get(m) for r in results]
        aa = [r["A/A"]["changes"].get(m) for r in results]
        ch = [c for c in ch if c is not None and math.isfinite(c)]
        aa = [c for c in aa if c is not None and math.isfinite(c)]
        if ch and aa:
            print(f"  realised change of {m:<24} under {arm:<22} {np.median(ch):+.1%} "
                  f"(A/A {np.median(aa):+.1%})")
    for m in GATED:
        det = [r["A/A"]["detectable"].get(m) for r in results]
        det = [d for d in det if d is not None]
        if det:
            scale = "pp" if m == "error_rate" else "%"
            q = np.quantile(det, [0.5, 0.9]) * 100
            print(f"  smallest detectable worse change of {m:<24} median {q[0]:.1f} {scale}, "
                  f"90th percentile {q[1]:.1f} {scale}")
    head = f"{'arm':<22}{'metric':<26}{'regressed':>24}{'underpowered':>24}"
    print(head)
    for arm in ARMS:
        for m in GATED:
            rows = [r[arm]["verdicts"].get(m) for r in results]
            print(f"{arm:<22}{m:<26}{_fmt(sum(v == 'regressed' for v in rows), n):>24}"
                  f"{_fmt(sum(v == 'underpowered' for v in rows), n):>24}")
    print(f"{'arm':<22}{'test fails (default)':>26}{'test fails (strict)':>26}")
    for arm in ARMS:
        print(f"{arm:<22}{_fmt(sum(r[arm]['fails'] for r in results), n):>26}"
              f"{_fmt(sum(r[arm]['strict'] for r in results), n):>26}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--requests", type=int, default=240, help="per run, as the README's marker")
    p.add_argument("--rate", type=float, default=8.0, help="req/s, as the README's marker (knee ~17)")
    p.add_argument("--isl", type=int, default=128, help="prompt tokens of the short requests")
    p.add_argument("--long-isl", type=int, default=512, help="prompt tokens of the long requests")
    p.add_argument("--long-frac", type=float, default=0.2, help="share of long requests")
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--ttft-slo", type=float, default=20.0, help="ms, per request (goodput)")
    p.add_argument("--tpot-slo", type=float, default=9.5, help="ms, per request (goodput)")
    p.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS, help="baseline sessions recorded")
    p.add_argument("--repeats", type=int, default=2, help="runs per session: the README marker's repeats")
    p.add_argument("--settings", default="measured,stress", help=f"comma-separated: {', '.join(SETTINGS)}")
    p.add_argument("--goodput-slowdown", type=float, default=1.10, help="about -10 %% goodput")
    p.add_argument("--ttft-slowdown", type=float, default=1.12, help="about +20 %% P99 TTFT")
    p.add_argument("--tpot-slowdown", type=float, default=1.12, help="about +20 %% P99 TPOT")
    p.add_argument("--confidence", type=float, default=CONFIDENCE)
    p.add_argument("--prior-runs", type=float, default=PRIOR_RUNS)
    p.add_argument("--power-alpha", type=float, default=POWER_ALPHA,
                   help="evidence needed to call a metric underpowered (one-sided alpha)")
    p.add_argument("--prior-scale", type=float, default=1.0,
                   help="multiply the registry's machine priors (to study their effect)")
    p.add_argument("--schedule-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--workers", type=int, default=2)
    d = p.add_argument_group("machine drift: stored baseline against A/B mode (bench/gate_drift.py)")
    d.add_argument("--drift", action="store_true", help="run the drift comparison instead")
    d.add_argument("--day-cv", type=float, default=0.05, help="CV of the machine's level per day")
    d.add_argument("--wander-cv", type=float, default=0.03, help="CV of the wander within a job")
    d.add_argument("--tau", type=float, default=30.0, help="s, correlation time of the wander")
    d.add_argument("--gap", type=float, default=2.0, help="s of idle machine between two runs")
    d.add_argument("--drift-sigma", type=float, default=0.01, help="step jitter σ under drift")
    d.add_argument("--power-trials", type=int, default=None,
                   help="trials that also run the effect arms (default: all; the rest A/A only)")
    d.add_argument("--modes", default="stored baseline,A/B", help="comma-separated: stored baseline, A/B")
    d.add_argument("--min-rounds", type=int, default=MIN_ROUNDS, help="A/B: rounds before the first look")
    d.add_argument("--max-rounds", type=int, default=MAX_ROUNDS, help="A/B: the most rounds")
    args = p.parse_args()
    if args.drift:
        import gate_drift

        args.noise_sigma = args.drift_sigma
        args.power_trials = args.trials if args.power_trials is None else args.power_trials
        print(f"gate quality under drift: {args.requests} requests at {args.rate:g} req/s; stored "
              f"baseline {args.sessions} sessions x {args.repeats} run(s), checked with one session; "
              f"A/B {args.min_rounds}-{args.max_rounds} rounds; {args.trials} trials per mode")
        gate_drift.main(args)
        return
    if args.prior_scale != 1.0:  # worker processes are forked: they inherit the patch
        original = registry.metric

        def scaled(name: str) -> registry.MetricInfo:
            info = original(name)
            return dataclasses.replace(info, run_cv=info.run_cv * args.prior_scale)

        registry.metric = scaled  # type: ignore[assignment]
    t0 = time.perf_counter()
    print(f"gate quality: {args.requests} requests at {args.rate:g} req/s ({args.long_frac:.0%} of ISL "
          f"{args.long_isl}, the rest {args.isl}), {args.sessions} baseline "
          f"sessions x {args.repeats} run(s), one current session, confidence {args.confidence:g}, "
          f"prior {args.prior_runs:g} pseudo-sessions x{args.prior_scale:g}, power alpha "
          f"{args.power_alpha:g}; gated: {', '.join(GATED)}")
    each_setting(args, trial, _report, t0)


def each_setting(args: argparse.Namespace, trial: Any, report: Any, t0: float) -> None:
    """Run ``trial`` over ``args.trials`` seeds at each named noise setting (``--settings``),
    on ``args.workers`` processes, and ``report`` each; then the seconds it all took."""
    for name in args.settings.split(","):
        a = argparse.Namespace(**vars(args))
        a.session_cv, a.noise_sigma = SETTINGS[name]
        with mp.Pool(args.workers) as pool:
            results = pool.map(trial, [(a, t) for t in range(args.trials)], chunksize=4)
        report(name, a, results)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Speculative decoding at low concurrency: how much the acceptance rate, TPOT and throughput
move between sessions, and the acceptance gate's A/A and detection.

Each session is one run of the simulator model (:mod:`pytest_goodput.sim.model`, virtual
time) with its own seed — the draft/accept draws and the step jitter — over one fixed
schedule: ``--requests`` requests of ``--isl``/``--osl`` tokens arriving as a Poisson stream
at ``--rate`` (low: a request or two in flight), ``--spec-tokens`` drafts per decode step,
each accepted with chance ``--accept``. It prints the CV across sessions of the acceptance
rate (accepted / draft tokens, the counters the simulator and vLLM expose), of P50 TPOT and
of output throughput; then, over ``--trials`` trials of ``--sessions`` baseline sessions
against one current session, how often the judge's acceptance comparison
(``judge/scalar/acceptance.py``, the registry's tolerance) reads *regressed* for an A/A and
for a current engine accepting ``--lower`` instead, with 95 % Wilson intervals.

    python bench/spec_acceptance.py
    python bench/spec_acceptance.py --rate 4 --trials 200
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pytest_goodput.judge.scalar.acceptance import SUMMARY_KEY, acceptance_comparison
from pytest_goodput.schema.registry import ACCEPTANCE, metric
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.sim.model import EngineModel, SimRequest
from pytest_goodput.sim.profile import SimProfile
from pytest_goodput.stats import wilson_interval


def one_session(args: argparse.Namespace, seed: int, accept: float) -> tuple[float, float, float]:
    """(acceptance rate, P50 TPOT ms, output tokens/s) of one simulated session."""
    srng = np.random.default_rng(args.schedule_seed)
    arrivals = np.concatenate(([0.0], np.cumsum(srng.exponential(1.0 / args.rate, args.requests - 1))))
    profile = SimProfile(spec_tokens=args.spec_tokens, spec_accept=accept, seed=seed,
                         noise_sigma=args.noise_sigma)
    model = EngineModel(profile)
    lines = model.simulate([SimRequest(i, args.isl, args.osl, float(t)) for i, t in enumerate(arrivals)])
    s = model.spec
    tpot = float(np.median([1e3 * x.tpot for x in lines]))
    span = max(x.arrival + x.e2e for x in lines) - float(arrivals[0])
    return s.accepted_tokens_total / s.draft_tokens_total, tpot, args.requests * args.osl / span


def _session(rate: float) -> Session:
    return Session(summary={SUMMARY_KEY: rate})


def _fmt(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n, 0.95)
    return f"{100 * k / n:5.1f}% [{100 * lo:4.1f}, {100 * hi:4.1f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=120)
    p.add_argument("--rate", type=float, default=1.0, help="req/s: low concurrency")
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--spec-tokens", type=int, default=3)
    p.add_argument("--accept", type=float, default=0.7)
    p.add_argument("--lower", type=float, default=0.6, help="the current engine's acceptance")
    p.add_argument("--noise-sigma", type=float, default=0.01)
    p.add_argument("--sessions", type=int, default=5)
    p.add_argument("--cv-sessions", type=int, default=40, help="sessions for the CV figures")
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--schedule-seed", type=int, default=0)
    args = p.parse_args()
    t0 = time.perf_counter()
    rows = np.array([one_session(args, 1000 + i, args.accept) for i in range(args.cv_sessions)])
    tol = metric(ACCEPTANCE).tolerance
    print(f"spec decoding: {args.requests} requests at {args.rate:g} req/s, ISL {args.isl}, OSL "
          f"{args.osl}, k={args.spec_tokens}, acceptance {args.accept:g}; {args.cv_sessions} sessions")
    for i, name in enumerate(("acceptance rate", "P50 TPOT (ms)", "output tokens/s")):
        col = rows[:, i]
        print(f"  {name:<18} mean {col.mean():9.4g}   CV across sessions {col.std(ddof=1) / col.mean():6.2%}")
    lower = np.array([one_session(args, 9000 + i, args.lower)[0] for i in range(args.trials)])
    aa_cur = np.array([one_session(args, 5000 + i, args.accept)[0] for i in range(args.trials)])
    print(f"  acceptance {args.lower:g}: realised mean {lower.mean():.4g} "
          f"({lower.mean() / rows[:, 0].mean() - 1:+.1%})")
    rng = np.random.default_rng(1)
    aa = lo = 0
    for t in range(args.trials):
        base = [_session(float(v)) for v in rng.choice(rows[:, 0], args.sessions, replace=False)]
        a = acceptance_comparison(base, [_session(float(aa_cur[t]))], tol)
        b = acceptance_comparison(base, [_session(float(lower[t]))], tol)
        aa += a is not None and a.verdict == "regressed"
        lo += b is not None and b.verdict == "regressed"
    print(f"  {args.sessions} baseline sessions vs 1, tolerance {tol:.0%}, {args.trials} trials: "
          f"A/A regressed {_fmt(aa, args.trials)}; acceptance {args.accept:g} -> {args.lower:g} "
          f"regressed {_fmt(lo, args.trials)}")
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Is the stated power true? The detection rate at the stated ``detectable``, by simulation.

Every comparison states ``detectable``: the worse change it would call *regressed* half of
the time. For S = 1, 2, 5 and 10 baseline sessions and four metrics (P99 TTFT, P99 TPOT,
output throughput, the error rate) each trial

1. draws S baseline sessions (one run of ``--requests`` requests each) and one current
   run from one workload, with a known between-session spread (a per-session factor on
   every latency, and on throughput, lognormal with ``SPREAD``) and per-request noise;
   error-rate cells draw failures at 1 % with a between-session SD of 0.2 pp;
2. judges the A/A pair with ``verdicts.compare(..., paired=True)`` (no sittings term) and
   reads the stated ``detectable`` and whether it says *underpowered*;
3. draws a new current run (same baseline) carrying a true change equal to that trial's
   stated detectable, and one carrying a change equal to the tolerance, and records
   whether each reads *regressed*.

Printed per cell: the median stated detectable, the detection rate at it (target 50 % ± 10
points) and at the tolerance, with 95 % Wilson intervals, and — when the detection rate at
the tolerance is below 50 % (the true detectable exceeds the tolerance) — how often the
A/A trial said *underpowered* (it should, most of the time), and the detection rate at the
tolerance among the trials that claimed adequate power. ``--judge`` adds one arm (five
sessions, P99 TTFT) through the public ``judge()`` with Side objects.

Trials are seeded per cell, so the code before a change sees the same trials as after:

    nice python bench/power_calibration.py --trials 200
    mkdir -p before && git archive <commit> pytest_goodput | tar -x -C before
    PYTHONPATH=before nice python bench/power_calibration.py --trials 200
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import time
from typing import Optional

import numpy as np

from pytest_goodput.judge.scalar.verdicts import MetricDef, compare
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.stats.binomial import wilson_interval

TTFT, TPOT, TPUT, ERR = ("metrics.ttft_ms.p99", "metrics.tpot_ms.p99",
                         "throughput.output_tokens_per_s", "error_rate")
LATENCY = [MetricDef.of(p) for p in (TTFT, TPOT, TPUT)]
#: True between-session SD (log scale) of every latency and of throughput.
SPREAD = {TTFT: 0.05, TPOT: 0.03, TPUT: 0.02}
REQUEST_CV = 0.05
FAIL_RATE, FAIL_SD = 0.01, 0.002
OSL = 64
SESSIONS = (1, 2, 5, 10)


def run(rng: np.random.Generator, base_ttft: np.ndarray, base_tpot: np.ndarray, *,
        factors: Optional[dict[str, float]] = None, fail_rate: float = 0.0) -> Samples:
    """One session's run: the workload, a session factor per metric, request noise; a
    factor multiplies TTFT, TPOT and the window (dividing throughput); failures at ``fail_rate``."""
    f = factors or {}
    n = base_ttft.size
    m = {p: math.exp(rng.normal(0.0, sd)) for p, sd in SPREAD.items()}
    ttft = base_ttft * m[TTFT] * np.exp(rng.normal(0.0, REQUEST_CV, n)) * f.get(TTFT, 1.0)
    tpot = base_tpot * m[TPOT] * np.exp(rng.normal(0.0, REQUEST_CV, n)) * f.get(TPOT, 1.0)
    ok = rng.random(n) >= fail_rate if fail_rate > 0 else np.ones(n, dtype=bool)
    window = 30.0 * m[TPUT] * f.get(TPUT, 1.0)
    e2e = ttft + (OSL - 1) * tpot
    return Samples(window_s=float(window), ok=ok.tolist(), good=ok.tolist(),
                   ttft_ms=[float(v) if o else None for v, o in zip(ttft, ok)],
                   tpot_ms=[float(v) if o else None for v, o in zip(tpot, ok)],
                   e2e_ms=[float(v) if o else None for v, o in zip(e2e, ok)],
                   output_tokens=[OSL if o else 0 for o in ok], prompt_tokens=[128] * n)


def session_rate(rng: np.random.Generator) -> float:
    return float(np.clip(rng.normal(FAIL_RATE, FAIL_SD), 0.0, 1.0))


def factor(path: str, change: float) -> float:
    """The multiplier that makes ``path`` worse by ``change`` (relative)."""
    return 1.0 / (1.0 - change) if path == TPUT else 1.0 + change


def trial(args: tuple[int, str, int, int]) -> dict[str, tuple]:
    """One trial of one cell: {metric: (detectable, underpowered, hit at it, hit at tol)}."""
    sessions, kind, requests, seed = args
    rng = np.random.default_rng([sessions, 0 if kind == "latency" else 1, seed])
    base_ttft = rng.lognormal(math.log(40.0), 0.35, requests)
    base_tpot = rng.lognormal(math.log(12.0), 0.35 / 3, requests)
    out: dict[str, tuple] = {}
    if kind == "latency":
        base = [[run(rng, base_ttft, base_tpot)] for _ in range(sessions)]
        aa = {c.metric: c for c in compare(base, [run(rng, base_ttft, base_tpot)], LATENCY,
                                           seed=seed, paired=True)}
        det = {p: aa[p].detectable for p in SPREAD}
        hit = {c.metric: c.verdict == "regressed" for c in compare(
            base, [run(rng, base_ttft, base_tpot, factors={p: factor(p, det[p]) for p in SPREAD})],
            LATENCY, seed=seed + 1, paired=True)}
        tol = {c.metric: c.verdict == "regressed" for c in compare(
            base, [run(rng, base_ttft, base_tpot,
                       factors={d.path: factor(d.path, d.tolerance) for d in LATENCY})],
            LATENCY, seed=seed + 2, paired=True)}
        for p in SPREAD:
            out[p] = (det[p], aa[p].verdict == "underpowered", hit[p], tol[p])
        return out
    defs = [MetricDef.of(ERR)]
    base = [[run(rng, base_ttft, base_tpot, fail_rate=session_rate(rng))] for _ in range(sessions)]
    aa = compare(base, [run(rng, base_ttft, base_tpot, fail_rate=session_rate(rng))], defs,
                 seed=seed, paired=True)[0]
    det = aa.detectable if aa.detectable is not None else math.nan
    hits = []
    for change in (det, defs[0].tolerance):
        if not math.isfinite(change):
            hits.append(False)
            continue
        c = compare(base, [run(rng, base_ttft, base_tpot, fail_rate=session_rate(rng) + change)],
                    defs, seed=seed + 1, paired=True)[0]
        hits.append(c.verdict == "regressed")
    out[ERR] = (det, aa.verdict == "underpowered", hits[0], hits[1])
    return out


def judge_trial(args: tuple[int, int, int]) -> tuple[float, bool, bool]:
    """One trial through ``judge()`` with Sides (P99 TTFT of a server test)."""
    from pytest_goodput.judge import Policy, judge
    from pytest_goodput.schema.runs.side import Side
    from pytest_goodput.schema.scenario.spec import build_spec

    sessions, requests, seed = args
    sp = build_spec(dict(scenario="server", rate=8.0, requests=requests, isl=128, osl=OSL,
                         ttft_ms=10_000, tpot_ms=1_000, attainment=0.5, max_error_rate=0.05))

    def ev(hist: list[list[Samples]]) -> Side:
        return Side.of_samples(sp, hist)

    rng = np.random.default_rng([sessions, 2, seed])
    bt = rng.lognormal(math.log(40.0), 0.35, requests)
    bp = rng.lognormal(math.log(12.0), 0.35 / 3, requests)
    base = ev([[run(rng, bt, bp)] for _ in range(sessions)])

    def ttft(factors: Optional[dict[str, float]]):
        out = judge("t::x", ev([[run(rng, bt, bp, factors=factors)]]), base, Policy())
        return next(c for c in out.comparisons if c.metric == TTFT)

    aa = ttft(None)
    hit = ttft({TTFT: factor(TTFT, aa.detectable)}).verdict == "regressed"
    return aa.detectable, aa.verdict == "underpowered", hit


def rate(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n, 0.95)
    return f"{k / n:6.1%} [{lo:5.1%}, {hi:5.1%}]" if n else "   n/a"


def report(path: str, sessions: int, rows: list[tuple]) -> str:
    det = np.array([r[0] for r in rows], dtype=float)
    n = len(rows)
    hit = sum(r[2] for r in rows)
    at_tol = sum(r[3] for r in rows)
    tol = MetricDef.of(path).tolerance
    scale = (lambda x: f"{x * 100:.2f} pp") if path == ERR else (lambda x: f"{x:.1%}")
    line = (f"{path:32s} S={sessions:<3d} detectable median {scale(float(np.nanmedian(det))):>8s}"
            f"  at it {rate(hit, n)}  at tol {rate(at_tol, n)}")
    if at_tol < n / 2 and path == ERR:
        line += "  (the error rate is never underpowered: its SLO holds it)"
    elif at_tol < n / 2:  # the true detectable exceeds the tolerance
        up = sum(r[1] for r in rows)
        claimed = [r for r in rows if not r[1]]
        line += (f"  underpowered {rate(up, n)}; caught at tol when claiming power "
                 f"{rate(sum(r[3] for r in claimed), len(claimed))}")
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sessions", type=int, nargs="+", default=list(SESSIONS))
    ap.add_argument("--metrics", choices=("latency", "error"), nargs="+", default=["latency", "error"])
    ap.add_argument("--judge", action="store_true", help="add the judge() arm (5 sessions, P99 TTFT)")
    a = ap.parse_args()
    t0 = time.time()
    print(f"trials {a.trials} per cell, {a.requests} requests per run, spread {SPREAD} "
          f"(log SD), request CV {REQUEST_CV}, error cells {FAIL_RATE:.0%} ± {FAIL_SD * 100:.1f} pp")
    with mp.Pool(a.workers) as pool:
        for kind in a.metrics:
            for s in a.sessions:
                res = pool.map(trial, [(s, kind, a.requests, i) for i in range(a.trials)])
                for p in res[0]:
                    print(report(p, s, [r[p] for r in res]), flush=True)
        if a.judge:
            res = pool.map(judge_trial, [(5, a.requests, i) for i in range(a.trials)])
            print(report(TTFT, 5, [(d, u, h, False) for d, u, h in res]).split("  at tol")[0]
                  + "  (through judge())")
    print(f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Error-rate verdicts at small request counts: A/A false alarms and detection.

Each trial records a baseline of ``S`` sessions (one run of n requests each) and one
current run of n requests; every request fails independently with the true rate p (A/A:
the same p on both sides), and the pair goes through the public path the gate takes,
``verdicts.compare`` with ``paired=True`` (the error rate is always compared). A/A cells
count *regressed* verdicts (the gate's one-sided budget is 1 %), with a 95 % Wilson
interval; detection cells raise the current run's rate by +2 and +5 pp. Overdispersed rows
draw each session's (and the current run's) rate from a beta distribution with mean p and
the given SD between sessions: failures that come and go with the machine's state.

``--exact`` adds the A/A probability of *regressed* computed exactly (every pair of pooled
counts weighed by its binomial probability, no simulation noise) for two intervals of the
difference on the pooled counts: Newcombe's hybrid score (Wilson limits) and the exact
MOVER of Clopper–Pearson limits the gate uses (without the dispersion widening, which only
widens: an upper bound for the gate).

``--widening quasi`` (w = √φ, the plain quasi-binomial factor) and ``--widening none``
(binomial only) swap the gate's dispersion widening for a comparison.

Trials are seeded per cell, so the code before a change sees the same trials as after:

    python bench/error_rate_aa.py                         # the product as installed
    python bench/error_rate_aa.py --exact --trials 0      # the exact A/A table alone
    mkdir -p before && git archive <commit> pytest_goodput | tar -x -C before
    PYTHONPATH=before python bench/error_rate_aa.py       # the code of <commit>
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import time
from typing import Callable, Optional

import numpy as np

from pytest_goodput import stats
from pytest_goodput.judge.scalar.verdicts import compare
from pytest_goodput.schema.runs.results import Samples

#: (sessions, requests, baseline rate, increase, between-session SD) of every cell.
Cell = tuple[int, int, float, float, float]


def cells() -> list[Cell]:
    out: list[Cell] = [(s, n, p, 0.0, 0.0) for s in (5, 1) for n in (20, 50, 200)
                       for p in (0.0, 0.005, 0.01, 0.02)]
    out += [(s, 200, 0.01, inc, 0.0) for s in (5, 1) for inc in (0.02, 0.05)]
    out += [(5, 200, 0.01, 0.0, sd) for sd in (0.005, 0.01)]
    out += [(5, 200, 0.01, inc, 0.005) for inc in (0.02, 0.05)]
    return out


def run(fails: np.ndarray) -> Samples:
    n = fails.size
    ok = [not bool(f) for f in fails]
    lat: list[Optional[float]] = [10.0 if o else None for o in ok]
    return Samples(window_s=float(n), ok=ok, ttft_ms=lat, tpot_ms=lat, e2e_ms=lat,
                   output_tokens=[8 if o else 0 for o in ok], prompt_tokens=[16] * n)


def _rates(rng: np.random.Generator, p: float, sd: float, size: int) -> np.ndarray:
    if sd <= 0.0 or p <= 0.0:
        return np.full(size, p)
    c = p * (1.0 - p) / sd**2 - 1.0  # beta with mean p and SD sd
    return rng.beta(p * c, (1.0 - p) * c, size)


def _swap_widening(name: str) -> None:
    """Replace the gate's dispersion widening (a bench knob, to measure the alternatives)."""
    if name == "gate":
        return
    from pytest_goodput.judge.scalar import error_rate  # not in older versions

    error_rate.widening = (lambda phi, nu, conf: 1.0) if name == "none" else (  # type: ignore[assignment]
        lambda phi, nu, conf: math.sqrt(phi) if phi > 1.0 and nu >= 1 else 1.0)


def cell_verdicts(job: tuple[int, Cell, int, int, str]) -> dict[str, int]:
    """Verdict counts of one cell's trials (seeded by the cell's index)."""
    index, (sessions, n, p, inc, sd), trials, seed, widening = job
    _swap_widening(widening)
    rng = np.random.default_rng([seed, index])
    memo: dict[tuple[bytes, ...], str] = {}
    out: dict[str, int] = {}
    for t in range(trials):
        rates = _rates(rng, p, sd, sessions + 1)
        rates[-1] = min(1.0, rates[-1] + inc)
        draws = [rng.random(n) < r for r in rates]
        key = tuple(d.tobytes() for d in draws)
        if key not in memo:
            base, cur = [[run(d)] for d in draws[:-1]], run(draws[-1])
            memo[key] = compare(base, [cur], [], seed=t, paired=True)[0].verdict
        out[memo[key]] = out.get(memo[key], 0) + 1
    return out


def exact_false_alarm(interval: Callable[[int, int, int, int], tuple[float, float]], nb: int,
                      nc: int, p: float, tolerance: float = 0.005) -> float:
    """P(regressed) when both sides fail at rate p: Σ P(kb) P(kc) over the pairs read regressed."""
    pb, pc = stats.binom_pmf_all(nb, p), stats.binom_pmf_all(nc, p)
    total = 0.0
    for kb in np.flatnonzero(pb > 1e-12):
        for kc in np.flatnonzero(pc > 1e-12):
            if kc / nc - kb / nb > tolerance and interval(int(kc), nc, int(kb), nb)[0] > 0.0:
                total += pb[kb] * pc[kc]
    return float(total)


def exact_table() -> None:
    from pytest_goodput.stats.binomial import exact_difference_interval  # not in older versions

    methods = {"Newcombe (Wilson)": lambda a, b, c, d: stats.newcombe_interval(a, b, c, d, 0.98),
               "exact MOVER (Clopper–Pearson)": lambda a, b, c, d: exact_difference_interval(a, b, c, d, 0.98)}
    print("exact A/A P(regressed), pooled counts, 98 % intervals, tolerance 0.5 pp")
    print("| sessions × requests | true rate | " + " | ".join(methods) + " |")
    print("|---|---|" + "---|" * len(methods))
    for s in (5, 1):
        for n in (20, 50, 200):
            for p in (0.005, 0.01, 0.02, 0.05, 0.1):
                row = [f"{100 * exact_false_alarm(m, s * n, n, p):.2f} %" for m in methods.values()]
                print(f"| {s} × {n} | {p * 100:g} % | " + " | ".join(row) + " |")


def _fmt(k: int, n: int) -> str:
    lo, hi = stats.wilson_interval(k, n, 0.95)
    return f"{100 * k / n:.2f} % [{100 * lo:.2f}, {100 * hi:.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=2000, help="trials per cell (≥ 2000 for the record)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--widening", choices=("gate", "quasi", "none"), default="gate",
                    help="the dispersion widening (gate: w² = 1 + (φ−1)(t/z)²; quasi: √φ; none)")
    ap.add_argument("--exact", action="store_true", help="also the exact A/A table (needs this version's stats)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    todo = cells() if args.trials > 0 else []
    with mp.Pool(args.workers) as pool:
        res = pool.map(cell_verdicts, [(i, c, args.trials, args.seed, args.widening)
                                          for i, c in enumerate(todo)],
                       chunksize=1)
    if todo:
        print_cells(todo, res, args.trials, args.widening)
    if args.exact:
        exact_table()
    print(f"{time.perf_counter() - t0:.0f} s")


def print_cells(todo: list[Cell], res: list[dict[str, int]], trials: int, widening: str) -> None:
    print(f"error-rate verdicts, {trials} trials per cell, verdicts.compare(paired=True), widening {widening}")
    print("| sessions × requests | current run | true rate | session SD | regressed [95 % Wilson] | inconclusive | pass |")
    print("|---|---|---|---|---|---|---|")
    for (s, n, p, inc, sd), v in zip(todo, res):
        tot = sum(v.values())
        cur = f"+{inc * 100:g} pp" if inc else "A/A"
        print(f"| {s} × {n} | {cur} | {p * 100:g} % | {sd * 100:g} pp | {_fmt(v.get('regressed', 0), tot)} | "
              f"{100 * v.get('inconclusive', 0) / tot:.1f} % | {100 * v.get('pass', 0) / tot:.1f} % |")


if __name__ == "__main__":
    main()

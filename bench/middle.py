"""The middle of the distribution: is a slowdown of neither the median nor the tail gated?

Issue 41's case: 30 % of requests — neither the median nor the tail — get TTFT ×1.6–1.9 and
TPOT ×1.12; the gate of the day (P50 and P99 of TTFT and TPOT) failed it 0/10. Here the
slowed requests are those whose TTFT ranks between the median and the 80th percentile of
their run (``--band-lo``/``--band-hi``: the median request and the top fifth untouched),
each with its own TTFT factor drawn uniformly in [1.6, 1.9] and TPOT ×1.12 (its E2E
follows).

Each trial records a baseline as ``bench/gate_quality.py`` does (the server scenario of the
README's marker on the virtual-time simulator: ``--sessions`` sessions of ``--repeats`` runs,
machine state per session) and gates one A/A session and one middle session against it,
twice: with the gate of the day (``BEFORE``) and with the registry's default gate now
(``registry.default_gate``), through the public judge API (``verdicts.compare``, paired).
It prints, per gate, the A/A false-alarm rate of every gated metric and of the test, and
the middle case's detection per metric and per test, with 95 % Wilson intervals.

    python bench/middle.py                      # 400 trials, measured and stress noise
    python bench/middle.py --trials 100 --settings measured

The bound (printed per setting): the session-to-session SD σ of P90 TTFT over the trials'
baseline sessions (on the log scale), and the chance that a change of the median realised
middle change d is read *regressed* by a one-sided 1 % test of one session against S:
Student's t on S − 1 degrees of freedom (the gate when the sessions are noisier than its
prior: P(t′_{S−1}(d / (σ√(1 + 1/S))) > t_{S−1, 0.99}), noncentral t) and, as the ceiling no
rule can pass, the same test with σ known (normal). scipy computes both (a test dependency).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import math

import numpy as np
from scipy import stats as sps

from gate_quality import SETTINGS, SPEC, _fmt, each_setting, session
from pytest_goodput.judge.scalar.verdicts import CONFIDENCE, MetricDef, compare
from pytest_goodput.judge.values import group_value
from pytest_goodput.run.gating import DEFAULT_SESSIONS
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.results import Samples

#: The server scenario's default gate before the middle was gated (medians and P99s).
BEFORE = ("goodput.requests_per_s", "metrics.ttft_ms.p50", "metrics.ttft_ms.p99",
          "metrics.tpot_ms.p50", "metrics.tpot_ms.p99", "error_rate")
AFTER = (*registry.default_gate(SPEC), "error_rate")
ARMS = ("A/A", "middle 30%")
P90_TTFT = "metrics.ttft_ms.p90"
#: Baseline sessions the bound is shown for.
BOUND_SESSIONS = (5, 10, 15, 20, 30)


def middle(run: Samples, rng: np.random.Generator, band: tuple[float, float],
           ttft_factor: tuple[float, float], tpot_factor: float) -> Samples:
    """The run with the requests whose TTFT ranks inside ``band`` (fractions of the run)
    slowed: TTFT × U(``ttft_factor``), TPOT × ``tpot_factor``, E2E the sum of both."""
    ttft = np.array([np.nan if v is None else v for v in run.ttft_ms])
    tpot = np.array([np.nan if v is None else v for v in run.tpot_ms])
    e2e = np.array([np.nan if v is None else v for v in run.e2e_ms])
    rank = np.argsort(np.argsort(ttft)) / len(ttft)
    hit = (rank >= band[0]) & (rank < band[1])
    new_ttft = np.where(hit, ttft * rng.uniform(*ttft_factor, len(ttft)), ttft)
    new_tpot = np.where(hit, tpot * tpot_factor, tpot)
    new_e2e = np.where(hit, new_ttft + (e2e - ttft) * tpot_factor, e2e)
    back = lambda x: [None if np.isnan(v) else float(v) for v in x]  # noqa: E731
    return run.model_copy(update={"ttft_ms": back(new_ttft), "tpot_ms": back(new_tpot),
                                  "e2e_ms": back(new_e2e)})


def trial(job: tuple[argparse.Namespace, int]) -> dict[str, Any]:
    args, t = job
    rng = np.random.default_rng([args.seed, t])
    seeds = iter(range(1_000_000 * (t + 1), 1_000_000 * (t + 2)))
    base = [session(args, seeds, rng, 1.0, "A/A") for _ in range(args.sessions)]
    current = {"A/A": session(args, seeds, rng, 1.0, "A/A"),
               "middle 30%": [middle(r, rng, (args.band_lo, args.band_hi), (1.6, 1.9), 1.12)
                              for r in session(args, seeds, rng, 1.0, "A/A")]}
    out: dict[str, Any] = {"p90 logs": [math.log(group_value(b, P90_TTFT)) for b in base]}
    for gate, paths in args.gates.items():
        defs = [MetricDef.of(p) for p in paths]
        for arm, cur in current.items():
            cs = compare(base, cur, defs, seed=t, confidence=args.confidence, paired=True)
            out[(gate, arm)] = {"verdicts": {c.metric: c.verdict for c in cs},
                                "changes": {c.metric: c.change for c in cs}}
    return out


def _report(name: str, args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    n, gates = len(results), args.gates
    print(f"\n== {name}: session CV {args.session_cv:.1%}, step jitter σ={args.noise_sigma:g}; "
          f"{n} trials ==")
    print(f"{'metric':<26}{'gate':<8}{'A/A regressed':>24}{'middle regressed':>24}"
          f"{'middle change (median)':>24}")
    for m in dict.fromkeys(p for paths in gates.values() for p in paths):
        for gate, paths in gates.items():
            if m not in paths:
                continue
            aa = [r[(gate, "A/A")]["verdicts"].get(m) == "regressed" for r in results]
            mid = [r[(gate, "middle 30%")]["verdicts"].get(m) == "regressed" for r in results]
            ch = [r[(gate, "middle 30%")]["changes"].get(m) for r in results]
            ch = [c for c in ch if c is not None]
            print(f"{m:<26}{gate:<8}{_fmt(sum(aa), n):>24}{_fmt(sum(mid), n):>24}"
                  f"{np.median(ch) if ch else float('nan'):>+23.1%}")
    print(f"{'test fails':<34}{'A/A':>24}{'middle':>24}")
    for gate in gates:
        fails = {arm: sum("regressed" in r[(gate, arm)]["verdicts"].values() for r in results)
                 for arm in ARMS}
        print(f"{gate:<34}{_fmt(fails['A/A'], n):>24}{_fmt(fails['middle 30%'], n):>24}")
    says = [r[("after", "middle 30%")]["verdicts"].get(P90_TTFT) for r in results]
    print("P90 TTFT on the middle, after: " + ", ".join(f"{v} {says.count(v)}/{n}" for v in sorted(set(says), key=str)))
    _bound(results)


def _bound(results: list[dict[str, Any]]) -> None:
    """What any one-sided 1 % test of one session can read at the middle's P90 TTFT change."""
    sd = math.sqrt(float(np.mean([np.var(r["p90 logs"], ddof=1) for r in results])))
    ch = [r[("after", "middle 30%")]["changes"].get(P90_TTFT) for r in results]
    d = math.log1p(float(np.median([c for c in ch if c is not None])))
    print(f"bound: P90 TTFT session SD {sd:.1%} (log scale), median middle change {math.expm1(d):+.1%}; "
          "P(regressed) by baseline sessions S, sessions' t / sigma known:")
    for S in BOUND_SESSIONS:
        ncp = d / (sd * math.sqrt(1.0 + 1.0 / S))
        t_rule = sps.nct.sf(sps.t.ppf(0.99, S - 1), S - 1, ncp)
        known = sps.norm.sf(sps.norm.ppf(0.99) - ncp)
        print(f"  S = {S:>2}: {t_rule:6.1%} / {known:6.1%}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--requests", type=int, default=240, help="per run, as the README's marker")
    p.add_argument("--rate", type=float, default=8.0, help="req/s, as the README's marker")
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--long-isl", type=int, default=512)
    p.add_argument("--long-frac", type=float, default=0.2)
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--ttft-slo", type=float, default=20.0)
    p.add_argument("--tpot-slo", type=float, default=9.5)
    p.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--band-lo", type=float, default=0.5, help="slowed TTFT ranks from (fraction)")
    p.add_argument("--band-hi", type=float, default=0.8, help="slowed TTFT ranks to (fraction)")
    p.add_argument("--settings", default="measured,stress", help=f"comma-separated: {', '.join(SETTINGS)}")
    p.add_argument("--confidence", type=float, default=CONFIDENCE)
    p.add_argument("--schedule-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--also", action="append", default=[], metavar="PATH,PATH",
                   help="another gate to compare: the gate before plus these metrics (repeatable)")
    args = p.parse_args()
    args.gates = {"before": BEFORE, "after": AFTER,
                  **{f"+{x}": (*BEFORE, *x.split(",")) for x in args.also}}
    t0 = time.perf_counter()
    print(f"the middle gated: {args.requests} requests at {args.rate:g} req/s, {args.sessions} "
          f"baseline sessions x {args.repeats} runs, one current session; middle: TTFT ranks "
          f"{args.band_lo:.0%}-{args.band_hi:.0%} TTFT x1.6-1.9, TPOT x1.12\n"
          + "".join(f"\n{g}: {', '.join(paths)}" for g, paths in args.gates.items()))
    each_setting(args, trial, _report, t0)


if __name__ == "__main__":
    main()

"""Sweeps judged on latency at equal load: A/A false alarms and detection, through the public judge.

Hand-built open-loop sweeps (``tests/judge_scenarios.py``: one schedule replayed per point,
lognormal per-request latencies, a per-session machine factor; rates 2/4/8/16 req/s, each
point's window its requests over its rate) go through ``Side`` → ``judge()`` → ``fails()``.
Five baseline sessions; each trial draws them and one current sweep afresh.

An open loop's window is its arrival span, whatever the server does: throughput is the rate.

- *A/A*: the current sweep from the same server: the share of trials whose test fails.
- *TTFT ×1.5 at one point* (8 req/s): the share that fails.

Each is measured three ways side by side on the same draws: the gate (latency per point,
the sweep's comparisons sharing one false-alarm budget: Bonferroni on the *regressed*
decisions), the same without the correction (each comparison at the one-metric confidence),
and before latency was judged (throughput and the frontier's TPOT only, no correction).

    python bench/sweep_latency.py --trials 200
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from judge_scenarios import Workload, run, sweep_side  # noqa: E402

from pytest_goodput.judge import Policy, fails, judge  # noqa: E402

from pytest_goodput.judge.shapes import frontier  # noqa: E402
from pytest_goodput.schema.scenario.spec import build_spec  # noqa: E402
from pytest_goodput.stats.binomial import wilson_interval  # noqa: E402

LOADS = (2.0, 4.0, 8.0, 16.0)
REQUESTS = 200
SESSIONS = 5

def workloads(seed: int) -> list[Workload]:
    return [Workload(**{**Workload.draw(REQUESTS, seed=seed + k, tpot_ms=10.0 * (1 + load / 8)).__dict__,
                        "window_s": REQUESTS / load})
            for k, load in enumerate(LOADS)]

def trial(seed: int, ttft_at: dict[int, float], machine_cv: float, gate: list[str] | None) -> bool:
    rng = np.random.default_rng(seed)
    ws = workloads(seed * 10)
    kw = dict(scenario="sweep", sweep=list(LOADS), sweep_over="rate", requests=REQUESTS, isl=128, osl=64)
    spec = build_spec({**kw, **({"gate": gate} if gate else {})})
    base = [[run(w, rng, machine_cv=machine_cv) for w in ws] for _ in range(SESSIONS)]
    cur = [run(w, rng, machine_cv=machine_cv, ttft_factor=ttft_at.get(i, 1.0)) for i, w in enumerate(ws)]
    base = [[r.model_copy(update={"window_s": w.window_s}) for r, w in zip(s, ws)] for s in base]
    cur = [r.model_copy(update={"window_s": w.window_s}) for r, w in zip(cur, ws)]
    out = judge("bench.py::test_sweep", sweep_side(spec, [cur]), sweep_side(spec, base), Policy())
    return fails(out, Policy())

def rate(hits: int, n: int) -> str:
    lo, hi = wilson_interval(hits, n)
    return f"{hits / n:.1%} [{lo:.1%}, {hi:.1%}] ({hits}/{n})"

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--machine-cv", type=float, default=0.02, help="per-session machine factor's CV")
    ap.add_argument("--gate", nargs="*", default=None, help="the sweep's gate= (default: the registry's)")
    args = ap.parse_args()
    cases = {"A/A": {}, "TTFT x1.5 at 8 req/s": {2: 1.5}}
    views = {"the gate": [],
             "no correction": [mock.patch.object(frontier, "family_confidence", lambda c, m: c)],
             "before (thr+TPOT)": [mock.patch.object(frontier, "family_confidence", lambda c, m: c),
                                   mock.patch.object(sys.modules["pytest_goodput.judge.judge"],
                                                     "sweep_point_gate", lambda spec: ())]}
    print(f"{args.trials} trials, {SESSIONS} baseline sessions, rates {LOADS}, {REQUESTS} requests a point, "
          f"machine CV {args.machine_cv}, gate={args.gate or 'default'}")
    print(f"{'case':<22}" + "".join(f"{v:<30}" for v in views))
    t0 = time.perf_counter()
    for name, effect in cases.items():
        row = []
        for patches in views.values():
            with contextlib.ExitStack() as stack:
                for p in patches:
                    stack.enter_context(p)
                row.append(sum(trial(s, effect, args.machine_cv, args.gate) for s in range(args.trials)))
        print(f"{name:<22}" + "".join(f"{rate(h, args.trials):<30}" for h in row))
    print(f"wall {time.perf_counter() - t0:.0f} s")

if __name__ == "__main__":
    main()

"""Run-to-run spread of the embedded simulator in real time, and the gate on real runs.

Runs one server scenario end to end (``python -m pytest_goodput sim`` started by
:func:`pytest_goodput.engines.engine.simulator`, driven by :func:`pytest_goodput.run.runner.measure`),
same spec and seed every time, in four groups:

* ``fresh``: a new simulator process per run, at ``--rate`` (the gate bench's operating point);
* ``one-process``: repeats on a single simulator process, same rate;
* ``low``: fresh processes at ``--low-rate`` (far from the knee);
* ``slowed xF``: fresh processes started with ``simulator(slowdown=F)`` for each F in
  ``--slowdown`` (A/B changes).

It prints each group's per-metric run-to-run CV (SD / mean of the per-run values), then
feeds real runs through the gate (:func:`pytest_goodput.judge.scalar.verdicts.compare` with
:func:`pytest_goodput.judge.judge.metric_defs`): A/A = each ``fresh`` run against ``--history``
other runs at ``--rate``, A/B = each ``slowed`` run against every ``--history``-run window
of them. Runs are judged paired (``compare(..., paired=True)``): they replay one schedule. These trials share runs, so they are not independent: they confirm the
virtual-time bench (``bench/gate_quality.py``), they do not replace it.

    python bench/gate_realtime.py                 # about 5.5 minutes
    python bench/gate_realtime.py --save runs.json  # also keep the raw per-request samples
    python bench/gate_realtime.py --load a.json --load b.json   # re-judge saved runs
    python bench/gate_realtime.py --load a.json --repeats 2     # two current runs per trial
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import time

import numpy as np

from pytest_goodput.engines.engine import simulator
from pytest_goodput.judge.judge import metric_defs
from pytest_goodput.judge.scalar.verdicts import compare, metric_value
from pytest_goodput.run.runner import measure
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.scenario.spec import ScenarioSpec

METRICS = (
    "goodput.requests_per_s",
    "goodput.attainment",
    "throughput.output_tokens_per_s",
    "metrics.ttft_ms.p99",
    "metrics.tpot_ms.p99",
    "metrics.tpot_ms.p50",
    "metrics.e2e_ms.p50",
)


def bench_spec(rate: float, requests: int) -> ScenarioSpec:
    """The gate bench's scenario: Poisson arrivals, ISL 128 / OSL 64, per-request SLOs."""
    return ScenarioSpec(scenario="server", rate=rate, requests=requests, seed=0,
                        isl=128, osl=64, ttft_ms=80.0, tpot_ms=19.5)


def samples_of(spec: ScenarioSpec, **knobs: float) -> Samples:
    """One run on a fresh simulator process."""
    with simulator(**knobs) as engine:
        run = measure(spec, engine).result
    return Samples.from_records(run.requests, run.window.seconds)


def cv_row(name: str, runs: list[Samples]) -> str:
    cells = []
    for path in METRICS:
        vals = np.asarray([metric_value(s, path) or math.nan for s in runs])
        cv = float(np.std(vals, ddof=1) / np.mean(vals)) if len(vals) > 1 else math.nan
        cells.append(f"{np.mean(vals):9.2f} {100 * cv:5.2f}%")
    return f"{name:<22}{len(runs):>3} " + "".join(f"{c:>17}" for c in cells)


def verdict_counts(base: list[Samples], slowed: dict[str, list[Samples]], history: int,
                   spec: ScenarioSpec, repeats: int = 1) -> None:
    """A/A and A/B trials through the verdict engine, counted per gated metric."""
    defs = metric_defs(spec)
    n = len(base)
    trials: dict[str, list[tuple[str, list[Samples], list[Samples]]]] = {"A/A": []}
    if n >= history + repeats:
        for j in range(n):
            cur = [base[(j + i) % n] for i in range(repeats)]
            others = [base[(j + repeats + i) % n] for i in range(history)]
            trials["A/A"].append(("A/A", others, cur))
    for key, runs in slowed.items():
        arm = f"A/B {key}"
        trials[arm] = [(arm, base[j:j + history], list(c))
                       for c in itertools.combinations(runs, repeats) for j in range(n - history + 1)]
    for arm, rows in trials.items():
        if not rows:
            continue
        print(f"\n{arm}: {len(rows)} trials ({history} baseline runs vs {repeats} current run(s))")
        tally: dict[str, dict[str, int]] = {d.path: {} for d in defs}
        changes: dict[str, list[float]] = {d.path: [] for d in defs}
        for t, (_, b, c) in enumerate(rows):
            for comp in compare(b, c, defs, seed=t, paired=True):
                tally[comp.metric][comp.verdict] = tally[comp.metric].get(comp.verdict, 0) + 1
                if comp.change is not None:
                    changes[comp.metric].append(comp.change)
        for path, counts in tally.items():
            ch = changes[path]
            mean = f"{100 * float(np.mean(ch)):+.1f}%" if ch else "n/a"
            print(f"  {path:<28} mean change {mean:>7}  "
                  + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=14.0)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--fresh", type=int, default=8, help="runs, fresh process each")
    p.add_argument("--one-process", type=int, default=3, help="runs on one process")
    p.add_argument("--low-rate", type=float, default=9.0)
    p.add_argument("--low-requests", type=int, default=200)
    p.add_argument("--low", type=int, default=2, help="runs at the low rate, fresh process each")
    p.add_argument("--slowed", type=int, default=2, help="runs per slowdown, fresh process each")
    p.add_argument("--slowdown", default="1.10", help="comma-separated slowdown factors")
    p.add_argument("--history", type=int, default=3)
    p.add_argument("--repeats", type=int, default=1, help="current runs per trial")
    p.add_argument("--save", default=None, help="write every run's samples as JSON here")
    p.add_argument("--load", action="append", default=[], help="judge runs saved by --save (repeatable)")
    args = p.parse_args()

    t0 = time.perf_counter()
    spec = bench_spec(args.rate, args.requests)
    low_spec = bench_spec(args.low_rate, args.low_requests)
    groups: dict[str, list[Samples]] = {}
    if args.load:
        for path in args.load:
            with open(path) as f:
                for k, v in json.load(f).items():
                    groups.setdefault(k, []).extend(Samples.model_validate(s) for s in v)
    else:
        groups = {"fresh": [], "one-process": [], "low": []}
        for _ in range(args.fresh):
            groups["fresh"].append(samples_of(spec))
        if args.one_process:
            with simulator() as engine:
                for _ in range(args.one_process):
                    run = measure(spec, engine).result
                    groups["one-process"].append(Samples.from_records(run.requests, run.window.seconds))
        groups["low"] = [samples_of(low_spec) for _ in range(args.low)]
        for factor in args.slowdown.split(","):
            groups[f"slowed x{float(factor):g}"] = [
                samples_of(spec, slowdown=float(factor)) for _ in range(args.slowed)
            ]
    if args.save:
        with open(args.save, "w") as f:
            json.dump({k: [s.model_dump(mode="json") for s in v] for k, v in groups.items()}, f)

    load1, load5, _ = os.getloadavg()
    print(f"real-time simulator spread: {args.requests} requests at {args.rate:g} req/s "
          f"(low: {args.low_requests} at {args.low_rate:g}), seed 0, ISL 128 / OSL 64, "
          f"SLOs TTFT 80 ms / TPOT 19.5 ms; load average now {load1:.2f} (5 min {load5:.2f})")
    print(f"\n{'group':<22}{'n':>3} " + "".join(f"{m.split('.', 1)[1][:16]:>17}" for m in METRICS))
    print(f"{'':<26}" + "".join(f"{'mean      CV':>17}" for _ in METRICS))
    labels = {"fresh": f"fresh @{args.rate:g}", "one-process": f"one process @{args.rate:g}",
              "low": f"fresh @{args.low_rate:g}"}
    for key, runs in groups.items():
        if len(runs) >= 2:
            print(cv_row(labels.get(key, key), runs))
    both = groups.get("fresh", []) + groups.get("one-process", [])
    if groups.get("one-process"):
        print(cv_row(f"all @{args.rate:g}", both))
    slowed = {k: v for k, v in groups.items() if k.startswith("slowed")}
    verdict_counts(both, slowed, args.history, spec, args.repeats)
    print(f"\nelapsed {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

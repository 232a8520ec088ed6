"""Main moves: how the gate judges a PR in the pushes after main's level changed, before and after
reading the baseline as main's time series (``judge/noise/main_level.py``).

The baseline keeps one session per push, the newest five (``--goodput-sessions=1
--goodput-history=5``). Seeded simulated mains (``tests/judge_scenarios.py``: 5 % request
noise, 1 % machine noise a run, 2 runs of 240 requests a session), one push a day: each
push's TTFT moves by a day factor (CV ``--day-cv``), TPOT by 1 %, each launch both by
``--launch-cv`` (2 %: the registry's prior for TPOT).
The mains:

- ``step up``: a change merged on main makes TTFT and TPOT 25 % slower from one push on;
- ``step down``: a change makes them 20 % faster;
- ``transient``: one push is disturbed (25 % slower), the next ones are not;
- ``creep``: every push is 3 % slower than the one before (``steady`` before: no change).

For each push p = 1..5 after the event (p = 1: the event's session is the newest), a PR
measured the next day on main's current level is judged as it is (A/A), 15 % and 25 %
slower, by ``judge()``/``fails()`` with the level reading off (before) and on (after). Per
cell: how often the test fails, with a 95 % Wilson interval; for A/A the worst metric's rate
of *regressed* too (the bar: ≤ 1 % per metric). ``--seed`` draws fresh mains (the figures are
not tuned to one set of seeds), ``--pushes`` picks the pushes after the event::

    python bench/main_level.py --trials 40 --workers 1
    python bench/main_level.py --trials 200 --pushes 1 --mains "step up,step down" --seed 7 --workers 1
"""

from __future__ import annotations

import argparse
from collections import Counter
import math
import multiprocessing as mp
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from judge_scenarios import Workload, run, spec  # noqa: E402

from pytest_goodput.judge import Policy, fails, judge  # noqa: E402
from pytest_goodput.schema.environment import Fingerprint  # noqa: E402
from pytest_goodput.schema.runs.session import Session  # noqa: E402
from pytest_goodput.schema.runs.side import Side  # noqa: E402
from pytest_goodput.stats import wilson_interval  # noqa: E402

DAY0 = datetime(2026, 11, 1, 9, tzinfo=timezone.utc)
KEEP, REPEATS, REQUESTS = 5, 2, 240
MAINS = ("steady", "step up", "step down", "transient", "creep")
ARMS = (1.0, 1.15, 1.25)


def _lognormal(rng: np.random.Generator, cv: float) -> float:
    s2 = math.log1p(cv * cv)
    return math.exp(rng.normal(-s2 / 2.0, math.sqrt(s2))) if cv > 0 else 1.0


def _level(main: str, push: int, event: int) -> float:
    """Main's level at a push (the event is push ``event``)."""
    after = push - event
    if main == "step up":
        return 1.25 if after >= 0 else 1.0
    if main == "step down":
        return 0.8 if after >= 0 else 1.0
    if main == "transient":
        return 1.25 if after == 0 else 1.0
    if main == "creep":
        return 1.03 ** max(0, after + 1)
    return 1.0


def trial(args: tuple) -> list[tuple[bool, bool, bool]]:  # type: ignore[type-arg]
    """One main and one PR per arm: before fails, after fails, the metrics after reads
    *regressed*, after a step noted, after a session set aside."""
    t, main, p, day_cv, launch_cv, seed, with_before = args
    rng = np.random.default_rng([seed, t, MAINS.index(main), p])
    w = Workload.draw(REQUESTS, t)
    sp = spec(REQUESTS, repeats=REPEATS, ttft_ms=10_000, tpot_ms=1_000, attainment=0.5)
    event = KEEP  # pushes 0..KEEP-1 before the event; the PR comes after push event+p-1
    last = event + p - 1
    cpu = Fingerprint(provenance={"client_cpu": "cpu"})

    def session(push: int, effect: float = 1.0) -> Session:
        lv = _level(main, push, event) * effect
        f = _lognormal(rng, launch_cv)
        d = (_lognormal(rng, day_cv), _lognormal(rng, 0.01))
        runs = [run(w, rng, machine_cv=0.01, ttft_factor=lv * d[0] * f, tpot_factor=lv * d[1] * f)
                for _ in range(REPEATS)]
        return Session(samples=runs, environment=cpu, recorded_at=(DAY0 + timedelta(days=push)).isoformat())

    base = Side(sp, sp.identity_hash(), [session(k) for k in range(last - KEEP + 1, last + 1)])
    out = []
    for effect in ARMS:
        pr = Side(sp, sp.identity_hash(), [session(last + 1, effect)])
        if main == "transient":  # main is back to 1.0 the day after the disturbed push
            pr = Side(sp, sp.identity_hash(), [session(event + 1 if p == 1 else last + 1, effect)])
        before = Policy(main_level=False)
        after = judge("t::x", pr, base, Policy())
        regressed = frozenset(c.metric for c in after.comparisons if c.verdict == "regressed")
        was = fails(judge("t::x", pr, base, before), before) if with_before else None
        out.append((was, fails(after, Policy()), regressed,
                    any("main changed by" in n for n in after.notes), any("set aside" in n for n in after.notes)))
    return out


def _cell(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n)
    return f"{k}/{n} [{lo:.0%}, {hi:.0%}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--day-cv", type=float, default=0.03, help="day-to-day TTFT CV")
    ap.add_argument("--launch-cv", type=float, default=0.02, help="each launch's CV (the registry's TPOT prior)")
    ap.add_argument("--mains", default=",".join(MAINS))
    ap.add_argument("--pushes", default=",".join(str(p) for p in range(1, KEEP + 1)),
                    help="pushes after the event to judge at (steady: the first only)")
    ap.add_argument("--seed", type=int, default=20261204, help="draws the mains: a fresh seed, fresh mains")
    ap.add_argument("--after-only", action="store_true", help="skip the before (the level reading off)")
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args(argv)
    pushes = [int(p) for p in a.pushes.split(",")]
    print(f"main level: newest {KEEP} sessions, one a push; {REPEATS} runs of {REQUESTS} requests a session; "
          f"day CV of TTFT {a.day_cv:.0%}; launch CV {a.launch_cv:.0%}; seed {a.seed}; {a.trials} trials a cell; "
          f"fails before -> after")
    print("| main | push after | step noted / set aside | A/A fails | A/A worst metric regressed (after) "
          "| x1.15 fails | x1.25 fails |")
    print("|---|---|---|---|---|---|---|")
    t0 = time.monotonic()
    with mp.get_context("spawn").Pool(a.workers) as pool:
        for main in a.mains.split(","):
            for p in ([1] if main == "steady" else pushes):
                res = pool.map(trial, [(t, main, p, a.day_cv, a.launch_cv, a.seed, not a.after_only)
                                       for t in range(a.trials)])
                n = len(res)
                cells = []
                for i, _ in enumerate(ARMS):
                    f = sum(r[i][1] for r in res)
                    was = "–" if a.after_only else _cell(sum(r[i][0] for r in res), n)
                    cells.append(f"{was} → {_cell(f, n)}")
                by_metric = Counter(m for r in res for m in r[0][2])
                worst = by_metric.most_common(1)
                aa = f"{worst[0][1]}/{n} ({worst[0][0]})" if worst else f"0/{n}"
                noted = f"{sum(r[0][3] for r in res)}/{n} / {sum(r[0][4] for r in res)}/{n}"
                print(f"| {main} | {p} | {noted} | {cells[0]} | {aa} | {cells[1]} | {cells[2]} |", flush=True)
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A push to main for one launch: false alarms and detection when each push appends a session.

Two ways of keeping main's baseline, judged by the public judge (``judge.judge``) on seeded
simulated sessions (``tests/judge_scenarios.py``: 5 % request noise, 1 % machine noise per
run, ``--repeats`` runs a session):

- ``5 at once``: every push records ``--goodput-sessions=5`` (five launches, back to back,
  one sitting); the PR runs on a later day, so the judge adds the between-sitting prior
  (``judge/noise/sittings.py``).
- ``1 per push, newest N``: every push records one session (one launch) appended to the
  baseline, which keeps the newest N (``--goodput-sessions=1 --goodput-history=N``). The N
  sessions come from N pushes on N days: their spread holds the day-to-day noise itself.

The world: each day (one push) moves TTFT by a lognormal day factor (``--day-cvs``) and TPOT
by ``--day-cv-tpot`` (1 %: the registry's between-sitting priors, 8 % and 1 %, assume TPOT
follows the machine closely and TTFT does not), each launch moves both by a launch factor
(``--launch-cv``); main also drifts: with probability
``--drift-p`` a push is an accepted change of ``--drift-cv`` (the new normal). The PR is
measured the next day on main's current level (A/A) or ``--effect`` slower on every TTFT and
TPOT. Per cell: how often the test fails (default mode), with a 95 % Wilson interval, and the
launches one push costs::

    python bench/push_sessions.py --trials 200
"""

from __future__ import annotations

import argparse
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


def _lognormal(rng: np.random.Generator, cv: float) -> float:
    s2 = math.log1p(cv * cv)
    return math.exp(rng.normal(-s2 / 2.0, math.sqrt(s2))) if cv > 0 else 1.0


def _session(w: Workload, rng: np.random.Generator, day: tuple[float, float], launch_cv: float,
             repeats: int):  # type: ignore[no-untyped-def]
    f = _lognormal(rng, launch_cv)
    return [run(w, rng, machine_cv=0.01, ttft_factor=day[0] * f, tpot_factor=day[1] * f)
            for _ in range(repeats)]


def trial(args: tuple) -> bool:  # type: ignore[type-arg]
    """One PR judged against main's baseline kept by ``scheme``: whether the test failed."""
    t, scheme, keep, effect, day_cv, day_cv_tpot, launch_cv, drift_p, drift_cv, repeats, requests = args
    rng = np.random.default_rng([20261202, t])
    w = Workload.draw(requests, t)
    sp = spec(requests, repeats=repeats, ttft_ms=10_000, tpot_ms=1_000, attainment=0.5)
    pushes = max(keep, 5) + 1
    level, days = 1.0, []  # main's level and each push's day factor, push by push
    for _ in range(pushes):
        if rng.random() < drift_p:
            level *= _lognormal(rng, drift_cv)
        days.append((level * _lognormal(rng, day_cv), level * _lognormal(rng, day_cv_tpot)))
    if scheme == "at-once":  # the last push recorded five launches in one sitting
        stamps = [DAY0 + timedelta(days=pushes - 1, minutes=3 * k) for k in range(5)]
        history = [_session(w, rng, days[-1], launch_cv, repeats) for _ in range(5)]
    else:  # one launch per push, the newest `keep` pushes
        stamps = [DAY0 + timedelta(days=d) for d in range(pushes - keep, pushes)]
        history = [_session(w, rng, days[d], launch_cv, repeats) for d in range(pushes - keep, pushes)]
    cpu = Fingerprint(provenance={"client_cpu": "cpu"})
    base = Side(sp, sp.identity_hash(), [Session(samples=h, recorded_at=s.isoformat(), environment=cpu)
                                          for h, s in zip(history, stamps)])
    pr_day = (level * _lognormal(rng, day_cv) * effect,  # the next day, on main's current level
              level * _lognormal(rng, day_cv_tpot) * effect)
    pr = [_session(w, rng, pr_day, launch_cv, repeats)]
    cur = Side(sp, sp.identity_hash(), [Session(samples=pr[0], environment=cpu,
                                                recorded_at=(DAY0 + timedelta(days=pushes)).isoformat())])
    return fails(judge("t::x", cur, base, Policy()), Policy())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--effect", type=float, default=1.2)
    ap.add_argument("--day-cvs", default="0.03,0.08", help="day-to-day TTFT CVs (one push a day)")
    ap.add_argument("--day-cv-tpot", type=float, default=0.01, help="day-to-day TPOT CV")
    ap.add_argument("--launch-cv", type=float, default=0.03)
    ap.add_argument("--drift-p", type=float, default=0.2, help="share of pushes that move main's level")
    ap.add_argument("--drift-cv", type=float, default=0.03, help="size of an accepted change")
    ap.add_argument("--keep", default="5,10", help="newest sessions kept, one per push")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--requests", type=int, default=240)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    schemes = [("at-once", 5, 5)] + [("per-push", int(k), 1) for k in a.keep.split(",")]
    print(f"push sessions: {a.repeats} runs of {a.requests} requests a session; launch CV {a.launch_cv:.0%}; "
          f"day CV of TPOT {a.day_cv_tpot:.0%}; "
          f"{a.drift_p:.0%} of pushes an accepted change of CV {a.drift_cv:.0%}; {a.trials} trials a cell")
    print(f"| day CV (TTFT) | baseline | launches a push | A/A fails | x{a.effect:.2f} fails |")
    print("|---|---|---|---|---|")
    t0 = time.monotonic()
    with mp.get_context("spawn").Pool(a.workers) as pool:
        for day_cv in (float(x) for x in a.day_cvs.split(",")):
            for scheme, keep, cost in schemes:
                cells = []
                for effect in (1.0, a.effect):
                    res = pool.map(trial, [(t, scheme, keep, effect, day_cv, a.day_cv_tpot, a.launch_cv, a.drift_p,
                                            a.drift_cv, a.repeats, a.requests) for t in range(a.trials)])
                    k = sum(res)
                    lo, hi = wilson_interval(k, len(res))
                    cells.append(f"{k / len(res):.1%} [{lo:.1%}, {hi:.1%}]")
                name = "5 at once (one sitting)" if scheme == "at-once" else f"1 per push, newest {keep}"
                print(f"| {day_cv:.0%} | {name} | {cost} | {cells[0]} | {cells[1]} |", flush=True)
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a sweep's saturation began, against the baseline's sessions (pure).

A sweep records the step (index into ``sweep``) of its first point past saturation, or
``len(sweep)`` when none was (``measure/saturation.py``). The rule (``docs/frontiers.md``,
"Saturation point"): *regressed* when the current sweep saturated lower than
every baseline session, at least two sessions agree on their step, and far enough: one step
on a doubling grid (each load at least twice the one before: a step is a halved capacity)
when at least three sessions agree, two steps otherwise (a knee near a step's edge moves one
step between reruns of the same server). One baseline session or sessions that disagree is
*inconclusive*. *Improved* is the mirror image. Baselines recorded before sweeps kept their
saturation step give no row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from pytest_goodput.schema.outcomes.outcome import MetricComparison, Verdict

METRIC = "sweep.saturation_load"
#: Steps apart that decide on a finer grid: one step is its resolution, so may be noise.
STEPS = 2
#: A grid whose every load is at least this times the one before is a doubling grid.
DOUBLING = 1.99


#: Agreeing sessions one step needs: a same server whose knee sits on a step's edge lands
#: below all k agreeing sessions with a chance up to k^k/(k+1)^(k+1): 10.5 % at 3, 6.7 % at 5.
ONE_STEP_SESSIONS = 3


def steps_that_decide(loads: Sequence[float], sessions: int) -> int:
    """One step on a doubling grid (capacity halved) with :data:`ONE_STEP_SESSIONS` agreeing
    sessions, :data:`STEPS` otherwise."""
    doubling = len(loads) > 1 and all(b >= DOUBLING * a for a, b in zip(loads, loads[1:]))
    return 1 if doubling and sessions >= ONE_STEP_SESSIONS else STEPS


def _load(loads: Sequence[float], step: int) -> Optional[float]:
    return float(loads[step]) if 0 <= step < len(loads) else None


def _name(loads: Sequence[float], step: int, kind: str) -> str:
    load = _load(loads, step)
    return f"{kind} {load:g}" if load is not None else "no measured point"


def saturation_comparison(
    loads: Sequence[float],
    kind: str,
    baseline_steps: Sequence[Optional[float]],
    current_step: Optional[float],
) -> Optional[MetricComparison]:
    """The saturation point as a verdict of its own; None when either side never recorded one."""
    known = [int(s) for s in baseline_steps if s is not None]
    if not known or current_step is None:
        return None
    cur = int(current_step)
    agree = len(set(known)) == 1 and len(known) >= 2
    lowest, highest = min(known), max(known)
    apart = steps_that_decide(loads, len(known))
    verdict: Verdict = "pass"
    if cur < lowest:
        verdict = "regressed" if agree and cur <= lowest - apart else "inconclusive"
    elif cur >= highest + apart and agree:
        verdict = "improved"
    steps = ", ".join(_name(loads, s, kind) for s in known)
    why = ("one baseline session: a step lower may be noise" if len(known) == 1
           else "baseline sessions agree" if agree else "baseline sessions disagree")
    if agree and 0 < abs(cur - lowest) < apart:
        why += f"; fewer than {apart} steps apart may be noise"
    base_step = highest if cur > highest else lowest
    base, now = _load(loads, base_step), _load(loads, cur)
    return MetricComparison(
        metric=METRIC,
        direction="higher",
        baseline=base,
        current=now,
        change=(now - base) / base if base and now is not None else None,
        tolerance=0.0,
        verdict=verdict,
        method="first sweep point past saturation, in sweep steps",
        note=(f"saturation began at {_name(loads, cur, kind)} (baseline sessions: {steps}; {why}); "
              f"{cur - base_step:+d} sweep step(s)"),
    )

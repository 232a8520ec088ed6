"""A/B mode: a spec against a base and a head engine in one job, round by round.

Each round runs the spec once on each engine (a sweep: every point of it up to where the
first round found saturation), in the order ``judge.sequential.ab.round_order`` draws
for it: balanced in pairs of rounds (each engine first once per pair, so neither always
runs first on a warmer or colder machine), from an order seed drawn afresh per job and kept
in the result, so jobs of one spec do not share one order and a job can be replayed. Both sides replay the same spec, so the same prompts
and schedule. A run the client set the pace of is measured once more; still invalid, the
round is dropped (and counted). The pure judge looks after each round and says when the
answer is known.

A sweep stops past saturation as a single sweep does (``saturation_stop``, default on): in
the first round each side climbs until its own first point past saturation
(``measure.saturation``), the second side at least as far as the first, and the first side
then measures any point the second went beyond; every later round measures those loads only
(both sides the same points, so they pair), and the loads above are named as skipped.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Optional

from pytest_goodput.engines.engine import Engine
from pytest_goodput.judge.sequential.ab import (
    MAX_ROUNDS,
    MIN_ROUNDS,
    analyse,
    check_rounds,
    round_order,
    round_values,
    with_error_rate,
)
from pytest_goodput.judge.sequential.ab_sweep import analyse_sweep, sweep_defs, sweep_round_values
from pytest_goodput.judge.judge import metric_defs
from pytest_goodput.measure.saturation import point_saturation
from pytest_goodput.run.gating import ABMeasured
from pytest_goodput.run.remeasure import paced_by_client
from pytest_goodput.run.runner import point_spec, run_once, valid_once
from pytest_goodput.schema.outcomes.ab import ABResult, ABRound
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.judge.vocabulary import MetricDef

#: ``say("round 3: head, then base")``: one progress line.
SayFn = Callable[[str], None]
#: How one run is made (tests may replace it): ``runner(spec, engine)``.
RunFn = Callable[[ScenarioSpec, Engine], RunResult]
#: ``on_round(round, {"base": runs, "head": runs})`` after each round, dropped ones included
#: (one run per side; a sweep: one per point, in sweep order).
RoundFn = Callable[[ABRound, dict[str, list[RunResult]]], None]


def ab_metrics(spec: ScenarioSpec, tolerance: float | None = None) -> list[MetricDef]:
    """The spec's gated metrics (``gate=`` or its scenario's default gate) with tolerances;
    a sweep's: each point's throughput and TPOT (``judge.sequential.ab_sweep``)."""
    if spec.scenario == "capacity":
        raise ValueError("A/B mode does not compare capacity searches (each side would probe "
                         "other rates): compare a sweep over rate, or the rate as its own scenario")
    if spec.repeats != 1:
        raise ValueError("A/B mode repeats by rounds: leave --repeats at 1 and set --max-rounds")
    return sweep_defs(spec, tolerance) if spec.sweep else metric_defs(spec, tolerance)


def _side(name: str, spec: ScenarioSpec, engine: Engine, notes: list[str], run: RunFn) -> list[RunResult]:
    """One side's runs of a round: the spec's run, or each sweep point's, each measured once
    more when the client set its pace."""
    if not spec.sweep:
        return [valid_once(name, notes, lambda: run(spec, engine))]
    kind = "rate" if spec.sweep_over == "rate" else "concurrency"
    return [valid_once(f"{name} {kind} {v:g}", notes, lambda v=v: run(point_spec(spec, v), engine))
            for v in spec.sweep]


def _climb(name: str, spec: ScenarioSpec, engine: Engine, notes: list[str], run: RunFn,
           at_least: int, have: Optional[list[RunResult]] = None) -> list[RunResult]:
    """A sweep's points in order until one at index ``at_least`` or above is past saturation
    (``have``: the points already measured, continued from)."""
    assert spec.sweep is not None
    kind = "rate" if spec.sweep_over == "rate" else "concurrency"
    runs = list(have or [])
    for i in range(len(runs), len(spec.sweep)):
        v = spec.sweep[i]
        runs.append(valid_once(f"{name} {kind} {v:g}", notes, lambda v=v: run(point_spec(spec, v), engine)))
        if i >= at_least and point_saturation(spec, runs, i).past:
            break
    return runs


def skipped_note(spec: ScenarioSpec, measured: int) -> str:
    """What the first round's saturation left out of every round."""
    assert spec.sweep is not None
    kind = "rate" if spec.sweep_over == "rate" else "concurrency"
    skipped = ", ".join(f"{v:g}" for v in spec.sweep[measured:])
    return (f"A/B sweep stopped past saturation: both sides saturated by {kind} "
            f"{spec.sweep[measured - 1]:g} in the first round; every round skipped {kind} {skipped}")


def check_exclusive(base: Engine, head: Engine, what: str = "one engine at a time") -> None:
    """One engine at a time (or relaunching each round) needs two engines this process starts
    and stops."""
    attached = [n for n, e in (("base", base), ("head", head)) if not e.can_relaunch]
    if attached:
        raise ValueError(f"{what} needs engines started here (a command or the "
                         f"simulator); the {' and '.join(attached)} engine is attached by URL")


def _relaunched(base: Engine, head: Engine) -> float:
    """Both engines started afresh for a round; the seconds the two starts took."""
    t0 = time.monotonic()
    base.relaunch()
    head.relaunch()
    return time.monotonic() - t0


def relaunch_note(starts: list[float]) -> str:
    """What relaunching each round cost, and what it bought."""
    return (f"each round relaunched both engines ({_spent(starts, 2 * len(starts))}): "
            "launch-to-launch spread is in the rounds' spread")


def _spent(starts: list[float], count: int) -> str:
    total = math.fsum(starts)
    return f"{count} starts, {total / count:.1f} s each, {total:.0f} s of the job"


#: Said when both engines served every round from one launch each.
SHARED_LAUNCH_NOTE = ("every round ran on one launch of each engine: launch-to-launch spread is not "
                      "in the interval (relaunch each round: --relaunch, --goodput-ab-relaunch)")


def _alone(engine: Engine, other: Engine) -> float:
    """Stop ``other``, start ``engine`` afresh; the seconds the start took."""
    other.close()
    engine.close()
    t0 = time.monotonic()
    engine.start()
    return time.monotonic() - t0


def fresh_order_seed() -> int:
    """A new A/B order seed: every job draws its own rounds' order (``round_order``)."""
    return int.from_bytes(os.urandom(4), "big")


def exclusive_note(starts: list[float]) -> str:
    """What one engine at a time cost: the fresh starts and their seconds."""
    return f"one engine at a time: each run started its engine afresh ({_spent(starts, len(starts))})"


def run_ab(spec: ScenarioSpec, base: Engine, head: Engine, *, seed: int | None = None,
           min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS,
           tolerance: float | None = None, say: SayFn | None = None,
           run: RunFn = run_once, on_round: RoundFn | None = None,
           exclusive: bool = False, relaunch: bool = False) -> ABResult:
    """Rounds of ``spec`` on ``base`` and ``head`` until the judge has the answer.

    ``seed`` draws each round's order (default: a fresh seed per job, recorded in the result's
    ``seed``; give it to replay a job's orders); ``on_round`` sees each
    round's runs (the pytest gate keeps them for SLOs and reports). ``exclusive``: only one
    engine is up at a time, each run on a freshly started one (both sides alike: no side
    inherits a warm cache), for engines that do not fit on the machine together.
    ``relaunch``: both engines started afresh before every round after the first, so each
    round is one launch of each and the paired rounds' spread holds the launch-to-launch
    spread (one engine at a time does this by itself).
    """
    check_rounds(min_rounds, max_rounds)
    if exclusive:
        check_exclusive(base, head)
    relaunch = relaunch and not exclusive
    if relaunch:
        check_exclusive(base, head, "relaunching each round")
    starts: list[float] = []
    restarts: list[float] = []
    defs = ab_metrics(spec, tolerance)
    measured = with_error_rate(defs)  # the error rate is compared whatever the gate names
    seed = fresh_order_seed() if seed is None else seed
    rounds: list[ABRound] = []
    full = spec  # a sweep past saturation: ``spec`` becomes its measured loads after round 1
    while True:
        r = len(rounds) + 1
        order = round_order(seed, r)
        notes: list[str] = []
        sides = ("base", "head") if order == "base-head" else ("head", "base")
        engines = {"base": base, "head": head}
        runs: dict[str, list[RunResult]] = {}
        if relaunch and r > 1:
            restarts.append(_relaunched(base, head))
        if say is not None:
            say(f"round {r}: {sides[0]}, then {sides[1]}")
        climb = r == 1 and spec.sweep is not None and spec.saturation_stop
        for side in sides:
            if exclusive:
                starts.append(_alone(engines[side], engines["head" if side == "base" else "base"]))
            runs[side] = (_climb(f"round {r} {side}", spec, engines[side], notes, run,
                                 at_least=len(runs[sides[0]]) - 1 if runs else 0)
                          if climb else _side(f"round {r} {side}", spec, engines[side], notes, run))
        if climb and len(runs[sides[0]]) < len(runs[sides[1]]):  # the second side climbed higher
            if exclusive:
                starts.append(_alone(engines[sides[0]], engines[sides[1]]))
            runs[sides[0]] = _climb(f"round {r} {sides[0]}", spec, engines[sides[0]], notes, run,
                                    at_least=len(runs[sides[1]]) - 1, have=runs[sides[0]])
        if climb and spec.sweep is not None and len(runs[sides[1]]) < len(spec.sweep):
            full, measured_points = spec, len(runs[sides[1]])
            spec = spec.model_copy(update={"sweep": spec.sweep[:measured_points]})
            notes.append(skipped_note(full, measured_points))
        bad = [s for s in sides if not all(x.client.valid for x in runs[s])]
        if bad:
            reasons = "; ".join(paced_by_client(run_ for s in bad for run_ in runs[s]))
            rounds.append(ABRound(index=r, order=order, notes=notes,
                                  dropped=f"{' and '.join(bad)} invalid twice ({reasons})"))
        else:
            b, h = (sweep_round_values(spec, runs["base"], runs["head"], tolerance) if spec.sweep
                    else round_values(runs["base"][0], runs["head"][0], measured))
            rounds.append(ABRound(index=r, order=order, base=b, head=h, notes=notes))
        if on_round is not None:
            on_round(rounds[-1], runs)
        if spec.sweep:
            result, stop = analyse_sweep(rounds, spec, tolerance=tolerance, min_rounds=min_rounds,
                                         max_rounds=max_rounds, seed=seed)
        else:
            result, stop = analyse(rounds, defs, min_rounds=min_rounds, max_rounds=max_rounds,
                                   seed=seed, spec=spec)
        if say is not None and rounds[-1].dropped:
            say(f"round {r} dropped: {rounds[-1].dropped}")
        if stop:
            result.notes += [n for x in rounds for n in x.notes]
            result = result.model_copy(update={"spec": full}) if full is not spec else result
            if starts:
                result.notes.append(exclusive_note(starts))
            elif restarts:
                result.notes.append(relaunch_note(restarts))
            elif len(rounds) > 1 and all(getattr(e, "can_relaunch", False) for e in (base, head)):
                result.notes.append(SHARED_LAUNCH_NOTE)
            return result


def measure_ab(spec: ScenarioSpec, base: Engine, head: Engine, *,
               min_rounds: Optional[int] = None, max_rounds: Optional[int] = None,
               tolerance: Optional[float] = None, say: Optional[SayFn] = None,
               exclusive: bool = False, relaunch: bool = False,
               order_seed: Optional[int] = None) -> ABMeasured:
    """Rounds of ``spec`` on both engines until the answer is known (``run.ab.run_ab``)."""
    kept: dict[str, list[RunResult]] = {"base": [], "head": []}
    last: dict[str, list[RunResult]] = {}

    def keep(r: ABRound, runs: dict[str, list[RunResult]]) -> None:
        last["head"] = runs["head"]
        if not r.dropped:
            last.update(runs)
            for side in kept:
                kept[side] += runs[side]

    min_r = MIN_ROUNDS if min_rounds is None else min_rounds
    max_r = max(MAX_ROUNDS, min_r) if max_rounds is None else max_rounds
    result = run_ab(spec, base, head, seed=order_seed, min_rounds=min_r, max_rounds=max_r,
                    tolerance=tolerance, say=say, on_round=keep, exclusive=exclusive, relaunch=relaunch)
    return ABMeasured(result, base_runs=kept["base"], head_runs=kept["head"],
                      last_head=last["head"][-1] if last else None,
                      last_base_sweep=last.get("base", []) if spec.sweep else [],
                      last_head_sweep=last.get("head", []) if spec.sweep else [])

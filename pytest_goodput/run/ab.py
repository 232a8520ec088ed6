"""A/B mode: a spec against a base and a head engine in one job, round by round.

Each round runs the spec once on each engine, in the order ``judge.ab.round_order`` draws
for it (a fair coin per round from the seed: ABBA-like, so neither engine always runs
first on a warmer or colder machine). Both sides replay the same spec, so the same prompts
and schedule. A run the client set the pace of is measured once more; still invalid, the
round is dropped (and counted). The pure judge looks after each round and says when the
answer is known.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_goodput.engines.engine import Engine
from pytest_goodput.judge.ab import (
    MAX_ROUNDS,
    MIN_ROUNDS,
    analyse,
    check_rounds,
    round_order,
    round_values,
    with_error_rate,
)
from pytest_goodput.judge.judge import metric_defs
from pytest_goodput.judge.verdicts import MetricDef
from pytest_goodput.run.runner import run_once, valid_once
from pytest_goodput.schema.ab import ABResult, ABRound
from pytest_goodput.schema.results import RunResult
from pytest_goodput.schema.spec import ScenarioSpec

#: ``say("round 3: head, then base")``: one progress line.
SayFn = Callable[[str], None]
#: How one run is made (tests may replace it): ``runner(spec, engine)``.
RunFn = Callable[[ScenarioSpec, Engine], RunResult]


def ab_metrics(spec: ScenarioSpec, tolerance: float | None = None) -> list[MetricDef]:
    """The spec's gated metrics (``gate=`` or its scenario's default gate) with tolerances."""
    if spec.scenario in ("sweep", "capacity"):
        raise ValueError(f"A/B mode compares single-load scenarios, not {spec.scenario!r}: "
                         "run each sweep point or rate as its own scenario")
    defs = metric_defs(spec, tolerance)
    if spec.repeats != 1:
        raise ValueError("A/B mode repeats by rounds: leave --repeats at 1 and set --max-rounds")
    return defs


def _side(name: str, spec: ScenarioSpec, engine: Engine, notes: list[str], run: RunFn) -> RunResult:
    return valid_once(name, notes, lambda: run(spec, engine))


def run_ab(spec: ScenarioSpec, base: Engine, head: Engine, *, seed: int | None = None,
           min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS,
           tolerance: float | None = None, say: SayFn | None = None,
           run: RunFn = run_once) -> ABResult:
    """Rounds of ``spec`` on ``base`` and ``head`` until the judge has the answer.

    ``seed`` draws each round's order (default: the spec's seed).
    """
    check_rounds(min_rounds, max_rounds)
    defs = ab_metrics(spec, tolerance)
    measured = with_error_rate(defs)  # the error rate is compared whatever the gate names
    seed = spec.seed if seed is None else seed
    rounds: list[ABRound] = []
    while True:
        r = len(rounds) + 1
        order = round_order(seed, r)
        notes: list[str] = []
        sides = ("base", "head") if order == "base-head" else ("head", "base")
        engines = {"base": base, "head": head}
        runs: dict[str, RunResult] = {}
        if say is not None:
            say(f"round {r}: {sides[0]}, then {sides[1]}")
        for side in sides:
            runs[side] = _side(f"round {r} {side}", spec, engines[side], notes, run)
        bad = [s for s in sides if not runs[s].client.valid]
        if bad:
            reasons = "; ".join(x for s in bad for x in runs[s].client.reasons) or "client health check failed"
            rounds.append(ABRound(index=r, order=order, notes=notes,
                                  dropped=f"{' and '.join(bad)} invalid twice ({reasons})"))
        else:
            b, h = round_values(runs["base"], runs["head"], measured)
            rounds.append(ABRound(index=r, order=order, base=b, head=h, notes=notes))
        result, stop = analyse(rounds, defs, min_rounds=min_rounds, max_rounds=max_rounds,
                               seed=seed, spec=spec)
        if say is not None and rounds[-1].dropped:
            say(f"round {r} dropped: {rounds[-1].dropped}")
        if stop:
            result.notes += [n for x in rounds for n in x.notes]
            return result

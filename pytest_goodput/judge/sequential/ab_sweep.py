"""A/B mode for a sweep: every load point paired by round, the sweep judged as the gate judges it (pure).

A round runs the whole sweep on each engine. Each load point then gets what a single-load
A/B run gets (``judge.sequential.ab.analyse`` over that point's rounds): its output throughput and its
TPOT at the frontier's percentile (its interactivity), paired by round, with the same
intervals and stopping rule. The sweep's verdict is the stored-baseline gate's rule for
sweeps: ``frontier_throughput``, the worst point at equal load (``judge.shapes.frontier``). The
sweep stops when a point is decided *regressed*, or when every point has stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from pytest_goodput.judge.sequential.ab import analyse
from pytest_goodput.judge.evidence import samples_of
from pytest_goodput.judge.shapes.frontier import (
    FRONTIER_THROUGHPUT,
    frontier_metric,
    frontier_tpot,
    load_point,
    worst_of,
)
from pytest_goodput.judge.values import metric_value
from pytest_goodput.schema.outcomes.ab import ABResult, ABRound
from pytest_goodput.schema.registry import tolerance_for
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.judge.vocabulary import CONFIDENCE, MetricDef


def point_key(load: float, path: str) -> str:
    """A sweep point's metric in a round's values: ``throughput.output_tokens_per_s@4``."""
    return f"{path}@{load:g}"


def sweep_defs(spec: ScenarioSpec, tolerance: Optional[float] = None) -> list[MetricDef]:
    """A point's compared metrics, at the sweep's tolerance (``frontier_throughput``'s)."""
    tol = tolerance_for(spec, "frontier_throughput", tolerance)
    paths = [FRONTIER_THROUGHPUT, frontier_tpot(spec.frontier_percentile)]
    return [MetricDef.of(p, tol) for p in paths if p is not None]


def sweep_round_values(spec: ScenarioSpec, base: Sequence[RunResult], head: Sequence[RunResult],
                       tolerance: Optional[float] = None
                       ) -> tuple[dict[str, Optional[float]], dict[str, Optional[float]]]:
    """Each point's compared metrics (and error rate) on the round's base and head sweeps."""
    assert spec.sweep is not None
    paths = [d.path for d in sweep_defs(spec, tolerance)] + ["error_rate"]
    sides = []
    for runs in (base, head):
        samples = samples_of(list(runs))
        sides.append({point_key(load, p): metric_value(s, p)
                      for load, s in zip(spec.sweep, samples) for p in paths})
    return sides[0], sides[1]


def _point_rounds(rounds: Sequence[ABRound], load: float, paths: Sequence[str]) -> list[ABRound]:
    return [r.model_copy(update={"base": {p: r.base.get(point_key(load, p)) for p in paths},
                                 "head": {p: r.head.get(point_key(load, p)) for p in paths}})
            for r in rounds]


def analyse_sweep(rounds: Sequence[ABRound], spec: ScenarioSpec, *, tolerance: Optional[float] = None,
                  min_rounds: int, max_rounds: int, confidence: float = CONFIDENCE,
                  seed: int = 0) -> tuple[ABResult, bool]:
    """The sweep's comparison after the rounds so far, and whether to stop.

    ``comparisons`` holds ``frontier_throughput`` (the worst point, as in the gate) and the
    worst point's error rate; ``points`` every point's equal-load comparison.
    """
    assert spec.sweep is not None
    defs = sweep_defs(spec, tolerance)
    paths = [d.path for d in defs] + ["error_rate"]
    per_point = []
    for load in spec.sweep:
        result, stop = analyse(_point_rounds(rounds, load, paths), defs, min_rounds=min_rounds,
                               max_rounds=max_rounds, confidence=confidence, seed=seed, spec=spec)
        per_point.append((load, result, stop))
    points, errors = [], []
    for load, result, _ in per_point:
        by_path = {c.metric: c for c in result.comparisons}
        if FRONTIER_THROUGHPUT in by_path:
            tpot = by_path.get(defs[-1].path) if len(defs) > 1 else None
            points.append(load_point(load, by_path[FRONTIER_THROUGHPUT], tpot))
        if "error_rate" in by_path:
            errors.append(by_path["error_rate"])
    comparisons = [frontier_metric(points, None, defs[0].tolerance)]
    if errors:
        comparisons.append(worst_of(errors))
    regressed = [f"{load:g}" for load, r, stop in per_point if r.decided and r.regressed]
    first = per_point[0][1]
    if regressed:
        stop, decided = True, True
        reason = f"regressed beyond the tolerance over the whole interval at load {', '.join(regressed)}"
    else:
        stop = all(s for _, _, s in per_point)
        decided = all(r.decided for _, r, _ in per_point)
        open_ = [f"{load:g}" for load, r, _ in per_point if not r.decided]
        reason = ("every point decided" if decided else
                  f"round limit {max_rounds} reached; undecided at load {', '.join(open_)}")
    result = first.model_copy(update={
        "comparisons": comparisons, "rounds": list(rounds), "decided": decided and stop,
        "stopped_early": stop and len(rounds) < max_rounds, "stop_reason": reason if stop else "",
        "points": points,
    })
    return result, stop

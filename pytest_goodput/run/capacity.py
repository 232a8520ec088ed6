"""Capacity: the highest arrival rate whose SLO attainment stays at or above the target.

This is DistServe's "goodput" of a serving system, found by search. Every probe runs the
spec as a ``server`` scenario (open-loop arrivals) at one rate; it *passes* when its
attainment (good requests / issued requests, failures included) is at least
``spec.attainment``.

Search (:func:`plan_next_rate`, pure, so it can be tested without an engine):

1. Start at ``spec.rate`` (1 req/s if unset), capped at ``capacity_max_rate``.
2. While every probe passed, double the rate (never beyond ``capacity_max_rate``; a pass at
   the cap ends the search with no upper bound: capacity is *at least* the cap).
3. If the very first probe fails, halve the rate, at most :data:`MAX_HALVINGS` times (down
   to ``start / 2**MAX_HALVINGS``); if nothing passes, capacity is 0. Low rates make long
   probes, so bound probes by ``duration_s`` when the start rate may be far too high.
4. Once a passing rate ``lo`` lies below a failing one ``hi``, bisect (arithmetic
   midpoint) until ``(hi - lo) / lo <= capacity_resolution``.

``hi`` is the lowest failing rate and ``lo`` the highest passing rate below it. A noisy
engine can pass above a failure; such passes are kept in the probe list but never raise
``lo`` past ``hi``, so the reported capacity is the conservative end of the bracket.
A probe whose client could not keep up (``result.client.valid`` False) stops the search:
its attainment says nothing about the server. :data:`MAX_PROBES` bounds the search.

Comparison (:func:`capacity_comparison`): each search yields an interval ``[lower,
upper]`` of width at most the resolution. The current capacity has *regressed* only when
even its upper bound is below the baseline's lower bound by more than the tolerance
(``upper_cur < lower_base * (1 - tol)``): the two brackets do not overlap once the
tolerance is allowed for. A point estimate worse than the tolerance whose brackets still
overlap is *inconclusive*. *Improved* is the mirror image (``lower_cur > upper_base *
(1 + tol)``). A missing upper bound (the search hit ``capacity_max_rate``) is unbounded.
The brackets reflect the search's resolution, not the binomial noise of each probe's
attainment; the tolerance is what absorbs that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from pytest_goodput.engines.engine import Engine
from pytest_goodput.load.sending.loops import ProgressFn
from pytest_goodput.run.remeasure import paced_by_client
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Capacity, Session
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: Halvings tried below the start rate when the first probe fails.
MAX_HALVINGS = 3
#: Hard bound on probes per search (doubling from 1 req/s to 1e6 and bisecting fits).
MAX_PROBES = 40
#: Start rate when the spec names none.
DEFAULT_START_RATE = 1.0

METRIC = "capacity.requests_per_s"


@dataclass(frozen=True)
class Probe:
    """One probed rate and whether its attainment met the target."""

    rate: float
    passed: bool
    attainment: float = math.nan
    valid: bool = True  # False: the client set the pace; the probe neither passes nor fails


def start_rate(spec: ScenarioSpec) -> float:
    """``spec.rate`` (or 1 req/s), never above ``capacity_max_rate``."""
    rate = spec.rate if spec.rate is not None else DEFAULT_START_RATE
    if spec.capacity_max_rate is not None:
        rate = min(rate, spec.capacity_max_rate)
    return float(rate)


def bracket(history: Sequence[Probe]) -> tuple[Optional[float], Optional[float]]:
    """``(lo, hi)``: the highest passing rate below the lowest failing rate, and that rate.

    ``lo`` is None when nothing below ``hi`` passed; ``hi`` is None when nothing failed.
    """
    fails = [p.rate for p in history if p.valid and not p.passed]
    hi = min(fails) if fails else None
    passes = [p.rate for p in history if p.valid and p.passed and (hi is None or p.rate < hi)]
    return (max(passes) if passes else None), hi


def converged(lo: float, hi: float, resolution: float) -> bool:
    """The bracket is narrow enough: ``(hi - lo) / lo <= resolution``."""
    return (hi - lo) <= resolution * lo


def plan_next_rate(history: Sequence[Probe], spec: ScenarioSpec) -> Optional[float]:
    """The next rate to probe, or None when the search is over (see the module docstring)."""
    if len(history) >= MAX_PROBES:
        return None
    start = start_rate(spec)
    if not history:
        return start
    lo, hi = bracket(history)
    cap = spec.capacity_max_rate
    if lo is None:  # nothing passed yet: halve down to the floor
        assert hi is not None
        nxt = hi / 2.0
        return nxt if nxt >= start / 2.0**MAX_HALVINGS * (1 - 1e-9) else None
    if hi is None:  # everything passed: double up to the cap
        if cap is not None and lo >= cap:
            return None
        return min(2.0 * lo, cap) if cap is not None else 2.0 * lo
    if converged(lo, hi, spec.capacity_resolution):
        return None
    return (lo + hi) / 2.0


def remaining_probes(history: Sequence[Probe], spec: ScenarioSpec) -> Optional[int]:
    """Probes still to come, once the knee is bracketed (bisections to the resolution); None
    while the search is still doubling or halving (how far it goes is not known yet)."""
    if plan_next_rate(history, spec) is None:
        return 0
    lo, hi = bracket(history)
    if lo is None or hi is None:
        return None
    return max(1, math.ceil(math.log2((hi - lo) / (spec.capacity_resolution * lo))))


def summarize_search(
    history: Sequence[Probe],
    spec: ScenarioSpec,
    details: Optional[Sequence[dict[str, Any]]] = None,
    stopped: Optional[str] = None,
) -> Capacity:
    """The ``Session.capacity``: capacity, its bracket, the target and every probe."""
    lo, hi = bracket(history)
    probes = []
    for i, p in enumerate(history):
        row: dict[str, Any] = {"rate": p.rate, "attainment": p.attainment, "passed": p.passed}
        if not p.valid:
            row["invalid"] = True
        if details is not None and i < len(details):
            row.update(details[i])
        probes.append(row)
    out: dict[str, Any] = {
        "requests_per_s": lo if lo is not None else 0.0,
        "lower": lo if lo is not None else 0.0,
        "upper": hi,
        "target": spec.attainment,
        "probes": probes,
        "complete": stopped is None,
    }
    if stopped is not None:
        out["stopped"] = stopped
    return Capacity.model_validate(out)


RunOnce = Callable[[ScenarioSpec, Engine, Optional[ProgressFn]], RunResult]


def probe_spec(spec: ScenarioSpec, rate: float) -> ScenarioSpec:
    """The server-scenario spec of one probe."""
    return spec.model_copy(update={"scenario": "server", "rate": float(rate), "sweep": None})


def search(
    spec: ScenarioSpec,
    engine: Engine,
    run_once: RunOnce,
    progress: Optional[ProgressFn] = None,
    plan: Optional[Callable[[Optional[int]], None]] = None,
) -> Session:
    """Find the capacity of ``engine`` for ``spec``; every probe's run is kept, in order.

    ``plan(n)`` is told after each probe how many probes the search will make in all (None
    while that is not known), so progress can show an honest total.
    """

    if not spec.has_request_slos:
        raise ValueError("a capacity search needs per-request SLOs (ttft_ms=, tpot_ms= or e2e_ms=)")
    history: list[Probe] = []
    details: list[dict[str, Any]] = []
    runs: list[RunResult] = []
    stopped: Optional[str] = None
    rate = plan_next_rate(history, spec)
    while rate is not None:
        result = run_once(probe_spec(spec, rate), engine, progress)
        runs.append(result)
        if result.goodput is None:
            raise ValueError(f"capacity probe at {rate:g} req/s produced no attainment")
        g = result.goodput
        valid = result.client.valid
        history.append(Probe(rate, valid and g.attainment >= spec.attainment, g.attainment, valid))
        details.append({"goodput_rps": g.requests_per_s, "good": g.good, "issued": g.issued})
        if not valid:
            reasons = "; ".join(paced_by_client([result]))
            stopped = (f"probe at {rate:g} req/s is invalid (the client, not the server, "
                       f"set the pace: {reasons}); search stopped")
            break
        rate = plan_next_rate(history, spec)
        if plan is not None:
            left = remaining_probes(history, spec)
            plan(None if left is None else len(history) + left)
    return Session(spec=spec, results=runs, capacity=summarize_search(history, spec, details, stopped))

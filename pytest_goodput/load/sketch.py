"""Runs too large to ship every record: when to sketch, and what a worker ships instead.

Any pool can sketch: the coordinator decides, every worker's body (``worker.py``) ships.

A run of more than ``threshold`` requests (``spec.sketch_above``, default
:data:`SKETCH_ABOVE`) is sketched: each worker parses its own share into records after
each phase and ships a mergeable part of the run (``measure.run_part``: exact counters,
per-metric DDSketches, the window's ends) plus a uniform sample of its raw exchanges.
The sample is chosen by request index, from a generator seeded with the spec's seed
(request ``i`` is kept when the ``i``-th uniform draw is below the fraction), so it does
not depend on how many workers there are, and two runs of one spec keep the same requests:
their samples pair request by request as full runs do. Smaller runs take the exact path
(every record shipped) unchanged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from pytest_goodput.load.plan import Plan
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.run_part import RunPart, add_chains, part_of, records_of
from pytest_goodput.schema.runs.results import SketchInfo
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats.sketch import RELATIVE_ACCURACY

#: Runs of more requests than this (warm-up included) are sketched unless the spec says otherwise.
SKETCH_ABOVE = 2_000_000
#: Requests a sketched run keeps as its per-request sample (in expectation).
SAMPLE_REQUESTS = 100_000
#: Seconds a worker may take per request of its share to parse and sketch it after a phase
#: (about 0.7 ms measured on the busy 2-core machine; a bound against hangs, not a budget).
SKETCH_S_PER_REQUEST = 0.005
#: A worker parsing its share reports progress this often (the silence rule still applies)...
TICK_S = 1.0
#: ...between slices of this many requests.
SLICE = 2048


@dataclass(frozen=True)
class SketchPlan:
    """What every worker of a sketched run needs: α, the sample's fraction, seed and size."""

    alpha: float
    fraction: float
    seed: int
    total: int

    def kept(self) -> np.ndarray:
        """A boolean per request index: kept in the sample."""
        return np.random.default_rng(self.seed).random(self.total) < self.fraction

    def info(self, threshold: int, sampled: int) -> SketchInfo:
        return SketchInfo(relative_accuracy=self.alpha, threshold=threshold, sampled=sampled,
                          sample_fraction=self.fraction)


@dataclass
class Sketched:
    """A run too large to ship: its merged part, how it was sketched, every planned request."""

    part: RunPart
    info: SketchInfo
    plans: list[RequestPlan]  # what the prompt fingerprint reads (the exchanges are a sample)


def threshold(spec: ScenarioSpec) -> int:
    return spec.sketch_above if spec.sketch_above is not None else SKETCH_ABOVE


def sketch_plan(spec: ScenarioSpec, total: int) -> Optional[SketchPlan]:
    """A plan when a run of ``total`` requests is above the threshold; None: ship every record.

    A run whose size is not known in advance (a duration-bounded closed loop) is not sketched.
    """
    if total <= threshold(spec):
        return None
    return SketchPlan(RELATIVE_ACCURACY, min(1.0, SAMPLE_REQUESTS / total), spec.seed, total)


class Sketcher:
    """A worker's side: its share of a phase as a part of the run plus the sampled exchanges
    (``{"part", "sample", "count"}``; a pool's transport may pack the sample)."""

    def __init__(self, plan: SketchPlan, spec: ScenarioSpec, tokenizer: Any) -> None:
        self.plan, self.spec, self.tokenizer = plan, spec, tokenizer
        self._kept: Optional[np.ndarray] = None

    def share(self, exchanges: Sequence[RawExchange], tick: Callable[[int], None]) -> dict[str, Any]:
        if self._kept is None:
            self._kept = self.plan.kept()
        kept, last = self._kept, time.perf_counter()
        records, part = [], RunPart(self.plan.alpha)
        for lo in range(0, len(exchanges), SLICE):  # in slices, so that heartbeats keep going
            chunk = records_of(exchanges[lo:lo + SLICE], self.spec, self.tokenizer)
            part.merge(part_of(chunk, self.spec, self.plan.alpha, chains=False))
            records += chunk
            if time.perf_counter() - last >= TICK_S:  # a heartbeat: every request is sent by now
                tick(len(exchanges))
                last = time.perf_counter()
        add_chains(part, records, self.spec)
        sample = [ex for ex in exchanges if ex.plan.index >= len(kept) or kept[ex.plan.index]]
        return {"part": part, "sample": sample, "count": len(exchanges)}


def planned_requests(plan: Plan, spec: ScenarioSpec) -> list[RequestPlan]:
    """Every request a run of known size sends (index, output length, warm-up): what the prompt
    fingerprint reads, built on the driver since a sketched run ships only a sample."""
    if plan.open_loop:
        return [p for jobs, _ in plan.phases for job in jobs for p in job.plans]
    seen: dict[int, RequestPlan] = {}
    for jobs, _ in plan.phases:
        for job in jobs:
            for i, item in enumerate(job.items or []):
                if item is not None and i < plan.total and i not in seen:
                    seen[i] = RequestPlan(i, "", item.prompt_tokens, item.max_tokens, 0.0,
                                          i < spec.warmup_requests)
    return [seen[i] for i in sorted(seen)]


__all__ = ["SAMPLE_REQUESTS", "SKETCH_ABOVE", "SketchPlan", "Sketched", "Sketcher", "planned_requests", "sketch_plan",
           "threshold"]

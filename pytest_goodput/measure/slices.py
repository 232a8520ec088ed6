"""Time slices: a run's metrics per window of ``slice_s`` seconds (pure).

``docs/metrics.md`` ("Time slices") is the contract. The slices tile the run's measurement
window (the same one its rates divide by: arrivals, steady state or sends) from its start;
the last slice takes the remainder when it is at least half a slice and is folded into the
one before otherwise, so no rate divides by a sliver. A measured request belongs to the
slice its *completion* falls in (``end_at``; a failure that never ended: its send), so a
slice's throughput is what the engine delivered in that window and every request with all
its latencies known counts once. Requests completing outside the window (the open loop's
drain, the closed loop's ramp) are in no slice. A slice with fewer than
:data:`MIN_REQUESTS` completed requests shows its counts and rates but no medians, and the
steady-state detector and the degradation gate skip it.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Optional

from pytest_goodput.measure.degradation import degradation
from pytest_goodput.measure.steady_start import steady_start
from pytest_goodput.schema.results import RequestRecord, RunResult, Window
from pytest_goodput.schema.slices import Slice, Slices
from pytest_goodput.stats.quantiles import percentile

#: Completed requests a slice needs for its medians (a P50 of 10 is the 5th value; fewer
#: and one request moves it by a whole neighbour's gap).
MIN_REQUESTS = 10


def edges(start: float, end: float, slice_s: float) -> list[float]:
    """Slice boundaries over ``[start, end]``: whole slices, the remainder its own slice when
    at least half of one, else folded into the last. One slice when the window is shorter."""
    span = end - start
    if not span > 0:
        return []
    whole = math.floor(span / slice_s + 1e-9)
    if whole == 0:
        return [start, end]
    rest = span - whole * slice_s
    out = [start + k * slice_s for k in range(whole)]
    if rest >= slice_s / 2:
        out.append(start + whole * slice_s)
    out.append(end)
    return out


def completion(r: RequestRecord) -> float:
    """When a request counts: its end, or its send (schedule) when it never ended."""
    if r.end_at is not None:
        return r.end_at
    return r.sent_at if r.sent_at is not None else r.scheduled_at


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    return percentile(xs, 50) if len(xs) >= MIN_REQUESTS else None


def slice_of(records: Sequence[RequestRecord], start_s: float, seconds: float) -> Slice:
    """One slice's numbers from the measured requests that completed inside it."""
    ok = [r for r in records if r.ok]
    few = len(ok) < MIN_REQUESTS
    return Slice(
        start_s=start_s, seconds=seconds, completed=len(ok), failed=len(records) - len(ok),
        requests_per_s=len(ok) / seconds,
        output_tokens_per_s=sum(r.output_tokens for r in ok) / seconds,
        ttft_ms_p50=None if few else _median([r.ttft_ms for r in ok]),
        tpot_ms_p50=None if few else _median([r.tpot_ms for r in ok]),
        too_few=few,
    )


def time_slices(records: Sequence[RequestRecord], window: Window, slice_s: float) -> Slices:
    """The slices of a run's measured requests over its window, with the steady state's start
    (``measure/steady_start.py``) and the degradation (``measure/degradation.py``)."""
    bounds = edges(window.start, window.end, slice_s)
    buckets: list[list[RequestRecord]] = [[] for _ in range(max(0, len(bounds) - 1))]
    for r in records:
        if r.warmup:
            continue
        t = completion(r)
        if not bounds or not bounds[0] <= t <= bounds[-1]:
            continue
        buckets[min(bisect_right(bounds, t) - 1, len(buckets) - 1)].append(r)
    slices = [slice_of(b, bounds[i] - window.start, bounds[i + 1] - bounds[i])
              for i, b in enumerate(buckets)]
    steady, note = steady_start(slices)
    return Slices(
        slice_s=slice_s, slices=slices, steady_from=steady,
        steady_at_s=slices[steady].start_s if steady is not None else None, steady_note=note,
        degradation=degradation(slices, steady),
    )


def run_slices(result: RunResult) -> Optional[Slices]:
    """A run's slices when its spec asks for them; None for a sketched run, whose records are
    a sample (each slice would hold a fraction of its requests)."""
    slice_s = result.spec.slice_s
    if slice_s is None or result.percentiles == "sketch":
        return None
    return time_slices(result.requests, result.window, slice_s)

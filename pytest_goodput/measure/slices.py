"""Time slices: a run's metrics per window of ``slice_s`` seconds (pure).

``docs/metrics.md`` ("Time slices") is the contract. The slices tile the run's measurement
window (the same one its rates divide by: arrivals, steady state or sends) from its start;
the last slice takes the remainder when it is at least half a slice and is folded into the
one before otherwise, so no rate divides by a sliver. A measured request's *latencies*
belong to the slice its completion falls in (``end_at``; a failure that never ended: its
send): they are known then, and each request counts once. A slice's *throughput* is the work
done inside it: each ok request counts the fraction of its send-to-end time that lies in the
slice (its output tokens too), as the closed loop's steady window counts requests. Counting
whole requests at their completion would leave the first slice short by the requests still
in flight when the window opened (one E2E of completions), a warm-up that is only the
windowing's. A slice with fewer than :data:`MIN_REQUESTS` completed requests shows its counts
and rates but no medians, and the steady-state detector and the degradation gate skip it.

The warm-up detector (:func:`steady_start`): the first slice in the run's steady state.
``docs/metrics.md`` ("Steady state") is the contract. A slice is *steady* when each of its
output throughput, TTFT P50 and TPOT P50 lies within a band of the next usable slice's: the
band is :data:`BAND` (10 %; 15 % for TTFT's median, which is queueing over a few dozen
requests) or three slice-to-slice SDs (``measure/degradation.py``), whichever is wider, so
a noisy run is not all warm-up. Warm-up (a cold cache, compilation, a queue still filling)
is a stretch of slices still changing from one to the next; the steady state begins at the
first slice that agrees with the one after it. Comparing neighbours, not each slice with the
whole run, keeps a run that degrades later from looking like one long warm-up. The slice
must come before the last usable one (the degradation needs a later slice to compare with).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Optional

from pytest_goodput.measure.degradation import METRICS, degradation, slice_noise, values
from pytest_goodput.schema.runs.results import RequestRecord, RunResult, Window
from pytest_goodput.schema.runs.slices import Slice, Slices
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


def _median(column: Sequence[Optional[float]]) -> Optional[float]:
    xs = sorted(v for v in column if v is not None and math.isfinite(v))
    return percentile(xs, 50) if len(xs) >= MIN_REQUESTS else None


def _start(r: RequestRecord) -> float:
    return r.sent_at if r.sent_at is not None else r.scheduled_at


def work(records: Sequence[RequestRecord], bounds: Sequence[float]) -> list[tuple[float, float]]:
    """(requests, output tokens) of the ok requests done inside each slice of ``bounds``: each
    counts the fraction of its send-to-end time inside (a request of no duration: whole, in
    the slice it ended in; the last slice's end is inclusive)."""
    n = len(bounds) - 1
    out = [[0.0, 0.0] for _ in range(n)]
    for r in records:
        if not r.ok or r.end_at is None:
            continue
        t0, t1 = _start(r), r.end_at
        if t1 <= t0:
            if bounds[0] <= t1 <= bounds[-1]:
                k = min(bisect_right(bounds, t1) - 1, n - 1)
                out[k][0] += 1.0
                out[k][1] += r.output_tokens
            continue
        first = max(0, bisect_right(bounds, t0) - 1)
        for k in range(first, min(n, bisect_right(bounds, t1))):
            share = max(0.0, min(bounds[k + 1], t1) - max(bounds[k], t0)) / (t1 - t0)
            out[k][0] += share
            out[k][1] += share * r.output_tokens
    return [(a, b) for a, b in out]


def slice_of(records: Sequence[RequestRecord], start_s: float, seconds: float,
             done: tuple[float, float]) -> Slice:
    """One slice's numbers: latencies of the measured requests that completed inside it,
    throughput from ``done`` (:func:`work`)."""
    ok = [r for r in records if r.ok]
    few = len(ok) < MIN_REQUESTS
    return Slice(
        start_s=start_s, seconds=seconds, completed=len(ok), failed=len(records) - len(ok),
        requests_per_s=done[0] / seconds,
        output_tokens_per_s=done[1] / seconds,
        ttft_ms_p50=None if few else _median([r.ttft_ms for r in ok]),
        tpot_ms_p50=None if few else _median([r.tpot_ms for r in ok]),
        too_few=few,
    )


def time_slices(records: Sequence[RequestRecord], window: Window, slice_s: float) -> Slices:
    """The slices of a run's measured requests over its window, with the steady state's start
    (:func:`steady_start`) and the degradation (``measure/degradation.py``)."""
    bounds = edges(window.start, window.end, slice_s)
    buckets: list[list[RequestRecord]] = [[] for _ in range(max(0, len(bounds) - 1))]
    for r in records:
        if r.warmup:
            continue
        t = completion(r)
        if not bounds or not bounds[0] <= t <= bounds[-1]:
            continue
        buckets[min(bisect_right(bounds, t) - 1, len(buckets) - 1)].append(r)
    done = work([r for r in records if not r.warmup], bounds) if buckets else []
    slices = [slice_of(bucket, bounds[i] - window.start, bounds[i + 1] - bounds[i], done[i])
              for i, bucket in enumerate(buckets)]
    steady, note = steady_start(slices)
    return Slices(
        slice_s=slice_s, slices=slices, steady_from=steady,
        steady_at_s=slices[steady].start_s if steady is not None else None, steady_note=note,
        degradation=degradation(slices, steady),
    )


def run_slices(result: RunResult) -> Optional[Slices]:
    """A run's slices when its spec asks for them, the warm-up setting that would skip the
    slices before the steady state named; None for a sketched run, whose records are a sample
    (each slice would hold a fraction of its requests)."""
    spec = result.spec
    if spec.slice_s is None or result.percentiles == "sketch":
        return None
    s = time_slices(result.requests, result.window, spec.slice_s)
    if s.steady_from and s.steady_at_s and spec.scenario != "offline":
        # what the warm-up setting would have to be for the measured window to start steady
        s.steady_note += (f"; the {s.steady_from} slice(s) before it are warm-up: "
                          f"warmup_s={spec.warmup_s + s.steady_at_s:g} would leave them out")
    return s


#: The narrowest band around the next slice's value a steady slice lies within, by field.
BAND: dict[str, float] = {"output_tokens_per_s": 0.10, "ttft_ms_p50": 0.15, "tpot_ms_p50": 0.10}
#: Slice-to-slice SDs the band spans at least.
BAND_SDS = 3.0
_LABEL = {"output_tokens_per_s": "output throughput", "ttft_ms_p50": "TTFT P50",
          "tpot_ms_p50": "TPOT P50"}


def steady_start(slices: Sequence[Slice]) -> tuple[Optional[int], str]:
    """The index of the first steady slice (None: none before the last usable) and why."""
    bands: dict[str, float] = {}
    per_slice: dict[str, dict[int, float]] = {}
    for field in METRICS.values():
        vs = values(slices, field)
        if len(vs) < 2:
            continue
        sigma = slice_noise([v for _, v in vs]) or 0.0
        bands[field] = max(BAND[field], BAND_SDS * sigma)
        per_slice[field] = dict(vs)
    usable = [i for i, s in enumerate(slices) if not s.too_few]
    if len(usable) < 2 or not bands:
        return None, f"fewer than 2 slices with at least the requests a slice needs ({len(usable)})"
    for i, after in zip(usable, usable[1:]):
        off = [f for f, band in bands.items()
               if i in per_slice[f] and after in per_slice[f]
               and abs(per_slice[f][i] / per_slice[f][after] - 1.0) > band]
        if not off:
            names = ", ".join(f"{_LABEL[f]} ±{band:.0%}" for f, band in bands.items())
            where = "the first slice" if i == 0 else f"slice {i + 1} of {len(slices)} (at {slices[i].start_s:g} s)"
            return i, f"steady from {where}: within the next slice's values ({names})"
    return None, "no slice agrees with the next one within its band: no steady state"

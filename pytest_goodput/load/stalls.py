"""Which requests a stall of the client's event loop delayed, and by how much at most.

The loop-lag P99 sees a client that is late all the time; one stall of 80 ms moves no P99 of
5 ms samples, yet every first token that arrived during it is read at its end. The monitor
(``health.LoopLagMonitor``) keeps each wake-up later than ``STALL_MIN_MS`` as a window
``(deadline, woke)``; after a job, each measured request is matched against those windows:

* its TTFT bound: a stall that began before the first content chunk was read, ended after
  the request was written, and was followed within ``READ_SLACK_S`` by that read: the chunk
  may have arrived anywhere in the stall, so the delay is at most
  ``min(read, woke) - max(deadline, sent)``;
* its TPOT bound: the stalls' overlap with the stream (first to last content chunk), divided
  by the chunk gaps it spreads over;
* in an open loop, its send lag (TTFT counts from the schedule there).

Only requests with a bound above ``STALL_MIN_MS`` are kept; ``measure.stall_rule`` counts
those above the run's limits (``docs/metrics.md``, "Client stalls").
"""

from __future__ import annotations

import bisect
from typing import Iterable, Mapping, Sequence

from pytest_goodput.measure.exchange import RawExchange
from pytest_goodput.measure.record import parse_stream
from pytest_goodput.measure.stall_rule import STALL_MIN_MS, Delay

#: A read this soon after a stall ended is taken as held up by it (the backlog's drain).
READ_SLACK_S = 0.005


def _content_times(ex: RawExchange) -> list[float]:
    """When the client read each content chunk (a body without SSE events: its end)."""
    times = parse_stream(ex.reads).times if ex.reads else []
    if times:
        return times
    return [ex.end_at] if ex.end_at is not None else []


def read_bounds(ex: RawExchange, stalls: Sequence[tuple[float, float]], ends: Sequence[float]) -> tuple[float, float]:
    """(TTFT bound, TPOT bound) in seconds for one request; ``stalls`` sorted by end (``ends``)."""
    if ex.sent_at is None or ex.end_at is None:
        return 0.0, 0.0
    k = bisect.bisect_right(ends, ex.sent_at)
    if k == len(stalls) or stalls[k][0] >= ex.end_at + READ_SLACK_S:
        return 0.0, 0.0  # no stall during the request: nothing to parse
    times = _content_times(ex)
    if not times:
        return 0.0, 0.0
    first, last = times[0], times[-1]
    ttft = overlap = 0.0
    for start, end in stalls[k:]:
        if start >= last + READ_SLACK_S:
            break
        if start < first <= end + READ_SLACK_S:
            ttft = max(ttft, min(first, end) - max(start, ex.sent_at))
        if end > first and start < last:
            overlap += min(end, last) - max(start, first)
    gaps = len(times) - 1
    return ttft, (overlap / gaps if gaps else 0.0)


def request_delays(exchanges: Iterable[RawExchange], stalls: Sequence[tuple[float, float]],
                   late_sends_ms: Mapping[int, float]) -> list[Delay]:
    """The measured requests a stall (or, open loop, a late send) delayed by over ``STALL_MIN_MS``."""
    ordered = sorted(stalls, key=lambda w: w[1])
    ends = [e for _, e in ordered]
    out: list[Delay] = []
    for ex in exchanges:
        if ex.plan.warmup:
            continue
        ttft, tpot = read_bounds(ex, ordered, ends) if ordered else (0.0, 0.0)
        d = (late_sends_ms.get(ex.plan.index, 0.0), ttft * 1e3, tpot * 1e3)
        if max(d) > STALL_MIN_MS:
            out.append((round(d[0], 3), round(d[1], 3), round(d[2], 3)))
    return out

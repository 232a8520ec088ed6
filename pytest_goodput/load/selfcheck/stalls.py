"""Which requests a stall of the client's event loop delayed, and by how much at most.

The loop-lag P99 sees a client that is late all the time; one stall of 80 ms moves no P99 of
5 ms samples, yet every first token that arrived during it is read at its end. The monitor
(``health.LoopLagMonitor``) keeps each wake-up later than ``STALL_MIN_MS`` as a window
``(deadline, woke)``; after a job, each measured request is matched against those windows:

* its TTFT bound: a stall that began before the first content chunk was read, ended after
  the request was written, and was followed within ``READ_SLACK_S`` by that read: the chunk
  may have arrived anywhere in the stall, so the delay is at most
  ``min(read, woke) - max(deadline, sent)``;
* its TPOT bound: the stalls' overlap with the stream (first content chunk to the last event
  read), divided by the SSE events but ``[DONE]`` read after the first content chunk (the
  gaps it spreads over, counted by their framing, not decoded);
* in an open loop, its send lag (TTFT counts from the schedule there).

Each request costs a bisection over the stalls and, only when one fell within it, a parse
of its first reads (until its first content) and a count of its events' separators: after a
64-stream phase with a stall in it, nearly every request is such a request.
Only requests with a bound above ``STALL_MIN_MS`` are kept; ``measure.stall_rule`` counts
those above the run's limits (``docs/metrics.md``, "Client stalls").
"""

from __future__ import annotations

import bisect
from typing import Iterable, Mapping, Sequence

from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.measure.records.record import parse_stream
from pytest_goodput.measure.stall_rule import STALL_MIN_MS, Delay

#: A read this soon after a stall ended is taken as held up by it (the backlog's drain).
READ_SLACK_S = 0.005


def first_content_at(ex: RawExchange) -> float | None:
    """When the client read the first output chunk, the one TTFT counts to: the first content
    chunk with visible text (a stream of whitespace only: its first chunk; a body without SSE
    events: its end).

    Parses a prefix of the reads that doubles until it holds content: a stream's first
    content is in its first reads, so the cost does not grow with the stream's length."""
    reads = ex.reads
    n = 1
    while reads:
        parsed = parse_stream(reads[:n])
        visible = next((t for t, text in zip(parsed.times, parsed.texts) if text.strip()), None)
        if visible is not None:
            return visible
        if n >= len(reads):
            return parsed.times[0] if parsed.times else ex.end_at
        n *= 2
    return ex.end_at


def events_after(ex: RawExchange, first: float) -> tuple[int, float]:
    """SSE events but ``[DONE]`` the client read after ``first``, counted by their framing,
    and when the last of them was read: the chunk gaps a stall over the stream spreads over,
    without decoding one event."""
    count, last = 0, first
    for t, d in ex.reads:
        if t > first:
            n = d.count(b"\n\n") + d.count(b"\r\n\r\n") - d.count(b"[DONE]")
            if n > 0:
                count, last = count + n, t
    return count, last


class Stalls:
    """The loop's stall windows, sorted, with their running total: each request's bounds in
    O(log stalls) plus the stalls it touches (windows never overlap: the monitor's wake-ups
    follow one another)."""

    def __init__(self, stalls: Sequence[tuple[float, float]]) -> None:
        self.windows = sorted(stalls, key=lambda w: w[1])
        self.starts = [s for s, _ in self.windows]
        self.ends = [e for _, e in self.windows]
        self.total = [0.0]
        for s, e in self.windows:
            self.total.append(self.total[-1] + (e - s))

    def overlap(self, a: float, b: float) -> float:
        """Seconds of stall within ``[a, b]``."""
        if b <= a:
            return 0.0
        i, j = bisect.bisect_right(self.ends, a), bisect.bisect_left(self.starts, b)
        if j <= i:
            return 0.0
        inner = self.total[j] - self.total[i]
        inner -= max(0.0, a - self.starts[i]) + max(0.0, self.ends[j - 1] - b)
        return max(0.0, inner)


def read_bounds(ex: RawExchange, stalls: Stalls) -> tuple[float, float]:
    """(TTFT bound, TPOT bound) in seconds for one request."""
    if ex.sent_at is None or ex.end_at is None:
        return 0.0, 0.0
    k = bisect.bisect_right(stalls.ends, ex.sent_at)
    if k == len(stalls.windows) or stalls.starts[k] >= ex.end_at + READ_SLACK_S:
        return 0.0, 0.0  # no stall during the request: nothing to parse
    first = first_content_at(ex)
    if first is None:
        return 0.0, 0.0
    ttft = 0.0
    # the stalls the first read may have waited for: those that began before it and ended
    # within the slack of it (the last to start before it, and any just before that one)
    j = bisect.bisect_left(stalls.starts, first) - 1
    while j >= k and first <= stalls.ends[j] + READ_SLACK_S:
        ttft = max(ttft, min(first, stalls.ends[j]) - max(stalls.starts[j], ex.sent_at))
        j -= 1
    gaps, last = events_after(ex, first)
    overlap = stalls.overlap(first, last)
    return max(ttft, 0.0), (overlap / gaps if gaps else 0.0)


def request_delays(exchanges: Iterable[RawExchange], stalls: Sequence[tuple[float, float]],
                   late_sends_ms: Mapping[int, float]) -> list[Delay]:
    """The measured requests a stall (or, open loop, a late send) delayed by over ``STALL_MIN_MS``."""
    windows = Stalls(stalls)
    out: list[Delay] = []
    for ex in exchanges:
        if ex.plan.warmup:
            continue
        ttft, tpot = read_bounds(ex, windows) if windows.windows else (0.0, 0.0)
        d = (late_sends_ms.get(ex.plan.index, 0.0), ttft * 1e3, tpot * 1e3)
        if max(d) > STALL_MIN_MS:
            out.append((round(d[0], 3), round(d[1], 3), round(d[2], 3)))
    return out

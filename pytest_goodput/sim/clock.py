"""The simulator's own clock: vLLM's latency histograms and per-request timing, on its virtual time.

Why: the engine's clock is what tells an engine regression from a client or network delay,
so the simulator keeps one as vLLM does, stamped where the engine acts, not where the HTTP
layer writes: a request's arrival when it is admitted, its tokens at the end of the step
that produced them (the stepping task's deadline). A stalled client or a slow network does
not move these; a slower engine does.

Histograms use vLLM's bucket bounds; per-request ``metrics`` use vLLM's field names
(``--enable-per-request-metrics``). The queue time of a request is its arrival to the start
of the step that produced its first token (a prefill chunked over several steps counts its
earlier steps as queue). Arrivals are read on the wall clock and steps run on virtual
deadlines that lag it when the loop is late: a request admitted after the virtual start of
the step that takes it arrived, on the engine's clock, at that start. Per token: one dict lookup, a subtraction and a bisection.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Hashable, Optional

#: vLLM's buckets (``vllm/v1/metrics/loggers.py``), seconds.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                   60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


class Buckets:
    """One histogram: counts per bucket (the last is +Inf), their sum and count."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1  # le: a value on a bound counts in it
        self.sum += seconds
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, cumulative count)`` pairs, +Inf last, as Prometheus exposes them."""
        out, total = [], 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts):
            total += n
            out.append((bound, float(total)))
        return out


class EngineClock:
    """Stamps requests on the engine's time and keeps vLLM's four latency histograms."""

    def __init__(self, per_request: bool = False) -> None:
        self.per_request = per_request
        self.ttft, self.itl = Buckets(TTFT_BUCKETS), Buckets(ITL_BUCKETS)
        self.e2e, self.queue = Buckets(REQUEST_BUCKETS), Buckets(REQUEST_BUCKETS)
        # rid -> [arrived, scheduled, first token, last token, tokens]
        self._live: dict[Hashable, list[float]] = {}
        self._done: dict[Hashable, dict[str, Optional[float]]] = {}

    def arrived(self, rid: Hashable, now: float) -> None:
        self._live[rid] = [now, 0.0, 0.0, 0.0, 0.0]

    def emitted(self, rid: Hashable, n: int, done: bool, at: float, step_s: float) -> None:
        """``n`` tokens of ``rid`` produced by the step of ``step_s`` seconds ending ``at``."""
        r = self._live.get(rid)
        if r is None:
            return
        if r[4]:  # the hot path, once per step of every running request: Buckets.observe inlined
            itl, v = self.itl, at - r[3]
            itl.counts[bisect_left(itl.bounds, v)] += 1
            itl.sum += v
            itl.count += 1
        else:
            start = at - step_s
            if r[0] > start:  # admitted after the step's virtual start (the loop ran late): it joined it
                r[0] = start
            r[1], r[2] = start, at
            self.ttft.observe(at - r[0])
            self.queue.observe(r[1] - r[0])
        r[3], r[4] = at, r[4] + n
        if done:
            self._finish(rid, r)

    def _finish(self, rid: Hashable, r: list[float]) -> None:
        del self._live[rid]
        self.e2e.observe(r[3] - r[0])
        if self.per_request:
            arrived, scheduled, first, last, tokens = r
            self._done[rid] = {
                "time_to_first_token_ms": (first - scheduled) * 1000.0,
                "generation_time_ms": (last - first) * 1000.0,
                "queue_time_ms": (scheduled - arrived) * 1000.0,
                "mean_itl_ms": (last - first) * 1000.0 / (tokens - 1) if tokens > 1 else None,
                "tokens_per_second": tokens / (last - scheduled) if last > scheduled else None,
            }

    def metrics(self, rid: Hashable) -> Optional[dict[str, Optional[float]]]:
        """The finished request's vLLM ``metrics`` object (None unless asked for), once."""
        return self._done.pop(rid, None)

    def forget(self, rid: Hashable) -> None:
        """An aborted request: vLLM observes no latency of it."""
        self._live.pop(rid, None)
        self._done.pop(rid, None)

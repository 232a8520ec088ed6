"""The stall rule: how many measured requests the client delayed, and when that is too many.

The loop-lag P99 sees a client late all the time, not one long stall. ``load/selfcheck/stalls.py`` finds
the requests each stall (or, in an open loop, a late send) delayed; here they are counted
against the limits the run is judged by, during the run (the ceiling) and again once its
latencies are known (``metrics.judge_loop_lag``). ``docs/metrics.md``, "Client stalls".
"""

from __future__ import annotations

from typing import Iterable, Optional

#: A delay of at most this (ms) is not kept (the loop-lag floor: below it a late wake-up is
#: the scheduler's noise on a shared machine).
STALL_MIN_MS = 3.0
#: More than this share of the measured requests delayed beyond the limits is invalid: half
#: the tail above a P99, so delayed requests cannot carry a P99 by themselves.
STALL_SHARE = 0.005

#: One delayed request: (send lag ms over the open loop's send-lag limit, else 0; TTFT bound
#: ms; TPOT bound ms).
Delay = tuple[float, float, float]


def delayed_count(delays: Iterable[Delay], read_limit_ms: Optional[float]) -> int:
    """Requests delayed beyond a limit: sent late (a send lag is kept only in an open loop and
    only over its limit) or read late by more than ``read_limit_ms`` (None: exact receive
    times, reads not judged)."""
    return sum(1 for s, t, p in delays
               if s > 0 or (read_limit_ms is not None and max(t, p) > read_limit_ms))


def too_many(delayed: int, measured: int) -> bool:
    """More than ``STALL_SHARE`` of ``measured`` requests delayed (any, for very few)."""
    return delayed > STALL_SHARE * measured


def stall_reason(delayed: int, measured: int, longest_ms: Optional[float], limit_ms: float) -> str:
    """Why ``delayed`` of ``measured`` requests count, or do not, against the client."""
    share = delayed / measured if measured else 1.0
    over = too_many(delayed, measured)
    longest = f"; longest loop stall {longest_ms:.0f} ms" if longest_ms else ""
    return (f"the client sent or read {delayed} of {measured} measured requests late beyond the "
            f"limits (reads by more than {limit_ms:.1f} ms{longest}; {share:.1%} "
            f"{'>' if over else '<='} {STALL_SHARE:.1%}): "
            + ("their TTFT/TPOT include client delay" if over else "not held against the run"))

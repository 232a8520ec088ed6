"""Requests' departures from the packet capture, judged: what the client's own send stamp hid.

With a capture (``docs/capture.md``), each request's ``sent_at`` is its first outgoing
segment's kernel stamp (``measure.records.retime.depart_all``), so a closed loop's TTFT counts from
when the request left, not from the client's stamp before its write; an open loop's counts
from the schedule as before, and its send lag (schedule to departure) is judged again here
on the departures, which the worker's own check (on the stamps) could not see.
``docs/metrics.md``, "Departures".
"""

from __future__ import annotations

from typing import Optional, Sequence

from pytest_goodput.load.selfcheck.health import send_lag_limit_ms
from pytest_goodput.measure.metrics import distribution
from pytest_goodput.schema.runs.results import ClientHealth, ReceiveTimestamps


def judge_departures(health: ClientHealth, stamps: ReceiveTimestamps, send_lags_ms: Sequence[float],
                     *, open_loop: bool, mean_gap_s: Optional[float]) -> ClientHealth:
    """``health`` with the departures' note and, in an open loop whose send lag P99 measured
    on departures (``send_lags_ms``: schedule to departure, measured requests) is over the
    limit, the reason that makes the run invalid."""
    lag = stamps.departure_lag_ms
    if stamps.requests_departed == 0 or lag.p50 is None or lag.p99 is None:
        return health
    note = (f"departures from the capture for {stamps.requests_departed} requests: each left "
            f"{lag.p50:.3f} ms (P50) / {lag.p99:.3f} ms (P99) after the client's stamp before its "
            "write; " + ("send lag is measured to the departure" if open_loop
                         else "TTFT and E2E count from the departure"))
    reasons = list(health.reasons)
    p99 = distribution(send_lags_ms).p99
    limit = send_lag_limit_ms(mean_gap_s)
    if open_loop and p99 is not None and p99 > limit and not any("send lag P99" in r for r in reasons):
        reasons.append(f"send lag P99 {p99:.1f} ms > {limit:.1f} ms measured to the requests' captured "
                       "departures: the client could not send on schedule, so the offered load was "
                       "lower than specified")
    return health.model_copy(update={"notes": [*health.notes, note], "reasons": reasons,
                                     "valid": not reasons})

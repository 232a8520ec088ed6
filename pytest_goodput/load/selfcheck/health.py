"""The load generator's check on itself: did the client, rather than the server, set the pace?

A starved client (a busy event loop, a saturated core) sends late and reads chunks late,
which inflates TTFT and ITL and looks exactly like a server regression. During a run we
measure three things and judge them against the thresholds documented in
``docs/scenarios.md``:

* event-loop lag: a monitor task sleeps to absolute deadlines every ``LOOP_TICK_S`` and
  records how late it woke — the delay any chunk read suffers on top of the network;
* client send lag: how late each request was written after it was *allowed* to go (its
  deadline, or the moment a concurrency-ceiling slot freed, whichever is later) — waiting
  for a slot is the server's doing, not the client's, and is not counted here;
* CPU utilization: process CPU seconds / wall seconds (all threads, in cores), judged only
  over a run of at least ``CPU_MIN_WALL_S`` and only when the engine answered most requests:
  a closed loop re-sends at once after an instant failure, so against a dead engine it
  spins, and that is the engine's failure, not a saturated client;
* stalls: one long stall moves no P99 of the loop's samples, so the requests each stall
  delayed are found (``stalls.py``) and counted (``measure.stall_rule``): more than
  ``STALL_SHARE`` of the measured requests delayed beyond the limits makes the run invalid.

With packet-capture receive times (``docs/capture.md``, ``exact_receive``) a late loop no
longer delays any receive time the metrics use: its lag is reported in ``notes``, not held
against the run. Send lag and CPU saturation are judged as before (a late loop still sends
late); ``docs/performance.md`` has the measurement behind the relaxation.

The loop-lag limit scales with the latencies measured (``measure.metrics.loop_lag_limit_ms``):
during the run they are unknown and the ceiling applies; ``summarize`` judges the lag again
against the run's TTFT and ITL P50.

Every run is judged over its workers' stats (:class:`WorkersCheck`, one per worker of the
plan, one included): each worker is one event loop on at most one core, so the worst worker
decides, and with more than one the reasons name it.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

from pytest_goodput.load.client.event_loop import cancel
from pytest_goodput.load.selfcheck.stalls import request_delays
from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.measure.metrics import (
    LOOP_LAG_CEILING_MS,
    distribution,
    engine_failing,
    loop_lag_limit_ms,
    loop_lag_reason,
)
from pytest_goodput.measure.stall_rule import STALL_MIN_MS, Delay, delayed_count, stall_reason, too_many
from pytest_goodput.schema.runs.results import ClientHealth

LOOP_TICK_S = 0.005
#: Open-loop send lag P99 above max(SEND_LAG_FLOOR_MS, SEND_LAG_GAP_FRACTION * mean gap) is invalid.
SEND_LAG_FLOOR_MS = 10.0
SEND_LAG_GAP_FRACTION = 0.20
#: Event-loop lag P99 above this many ms is invalid whatever the latencies (chunk timestamps
#: are that late); with latencies measured the limit is lower (``loop_lag_limit_ms``).
LOOP_LAG_P99_MS = LOOP_LAG_CEILING_MS
#: Client process CPU at or above this fraction of one core is invalid (the loop is one core).
CPU_LIMIT = 0.90
#: Fewer loop-lag samples than this (a very short run) are not judged.
MIN_LOOP_SAMPLES = 20
#: CPU over a shorter run is not judged: start-up (imports, connects) dominates a few ms.
CPU_MIN_WALL_S = 1.0

def failed_exchange(ex: RawExchange) -> bool:
    """The engine failed the request: no response, an HTTP error status, or a client-side error."""
    return ex.error_kind is not None or ex.status is None or ex.status >= 400


class LoopLagMonitor:
    """Sleeps to absolute deadlines ``tick`` apart and records each wake-up's overshoot (ms)."""

    def __init__(self, tick_s: float = LOOP_TICK_S) -> None:
        self.tick_s = tick_s
        self.lags_ms: list[float] = []
        #: (deadline, woke) of each wake-up later than ``STALL_MIN_MS``, on perf_counter
        self.stalls: list[tuple[float, float]] = []
        self._task: Optional[asyncio.Task[None]] = None

    async def _run(self) -> None:
        clock = time.perf_counter
        deadline = clock()
        while True:
            deadline += self.tick_s
            await asyncio.sleep(max(0.0, deadline - clock()))
            now = clock()
            self.lags_ms.append((now - deadline) * 1e3)
            if now - deadline > STALL_MIN_MS / 1e3:
                self.stalls.append((deadline, now))
            if now - deadline > self.tick_s:  # fell behind: re-anchor instead of bursting
                deadline = now

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None


@dataclass
class SelfCheck:
    """Collects the client's own measurements during a run and judges them afterwards."""

    open_loop: bool
    mean_gap_s: Optional[float] = None
    monitor: LoopLagMonitor = field(default_factory=LoopLagMonitor)
    send_lags_ms: list[float] = field(default_factory=list)
    #: the client's connection-pool size and the most requests it had in flight at once
    pool_limit: Optional[int] = None
    peak_in_flight: int = 0
    requests: int = 0
    failed: int = 0
    retries: int = 0
    #: measured (not warm-up) requests, and the open-loop send lags over their limit by index
    measured: int = 0
    late_sends_ms: dict[int, float] = field(default_factory=dict)
    _wall0: float = 0.0
    _cpu0: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0

    def start(self) -> None:
        """Start the clocks and the loop-lag monitor (call from inside the running loop)."""
        self._wall0, self._cpu0 = time.perf_counter(), time.process_time()
        self.monitor.start()

    async def stop(self) -> None:
        await self.monitor.stop()
        self.wall_s = time.perf_counter() - self._wall0
        self.cpu_s = time.process_time() - self._cpu0

    def record_send(self, allowed_at: float, sent_at: Optional[float]) -> Optional[float]:
        """Note one request's client send lag (ms): written at ``sent_at``, allowed at ``allowed_at``."""
        if sent_at is None:
            return None
        lag = max(0.0, sent_at - allowed_at) * 1e3
        self.send_lags_ms.append(lag)
        return lag

    def record_exchange(self, allowed_at: float, ex: RawExchange) -> None:
        """Note one finished request: its send lag, whether the engine failed it, its retries."""
        lag = self.record_send(allowed_at, ex.sent_at)
        if not ex.plan.warmup:
            self.measured += 1
            if self.open_loop and lag is not None and lag > send_lag_limit_ms(self.mean_gap_s):
                self.late_sends_ms[ex.plan.index] = lag
        self.requests += 1
        self.failed += failed_exchange(ex)
        self.retries += ex.retries

    def stats(self, exchanges: Sequence[RawExchange] = ()) -> "WorkerStats":
        """The raw numbers a worker ships to the coordinator (picklable); ``exchanges``: the
        job's, matched against the loop's stalls."""
        return WorkerStats(list(self.send_lags_ms), list(self.monitor.lags_ms), self.cpu_s,
                           self.wall_s, self.peak_in_flight, self.pool_limit, self.requests,
                           self.failed, self.retries, self.measured,
                           request_delays(exchanges, self.monitor.stalls, self.late_sends_ms))

def send_lag_limit_ms(mean_gap_s: Optional[float]) -> float:
    """The open-loop send-lag P99 limit: 10 ms, or 20 % of the mean gap when that is larger."""
    gap_ms = (mean_gap_s or 0.0) * 1e3
    return max(SEND_LAG_FLOOR_MS, SEND_LAG_GAP_FRACTION * gap_ms)


def judge(
    *, cpu_utilization: float, loop_lags_ms: Sequence[float], send_lags_ms: Sequence[float],
    open_loop: bool, mean_gap_s: Optional[float] = None, workers: int = 1,
    pool_full: bool = False, pool_limit: Optional[int] = None, wall_s: Optional[float] = None,
    requests: int = 0, failed: int = 0, retries: int = 0,
    ttft_p50_ms: Optional[float] = None, itl_p50_ms: Optional[float] = None,
    exact_receive: bool = False, measured: Optional[int] = None, delays: Sequence[Delay] = (),
) -> ClientHealth:
    """Pure verdict on the client's measurements; ``reasons`` say what went wrong, in words.

    ``wall_s`` (None: long enough) shorter than ``CPU_MIN_WALL_S`` leaves the CPU unjudged.
    When the engine failed at least half of the ``requests`` (``engine_failing``), neither
    CPU nor loop lag is held against the client: the run says so in ``notes`` instead.
    ``delays``: the ``measured`` requests the client delayed (``stalls.request_delays``).
    """
    reasons: list[str] = []
    notes: list[str] = []
    loop = distribution(loop_lags_ms)
    send = distribution(send_lags_ms)
    failing = engine_failing(requests, failed)
    if failing:
        notes.append(f"the engine failed {failed} of {requests} requests: the client's CPU and "
                     "event-loop lag are not judged (a closed loop re-sends at once after a failure)")
    limit = loop_lag_limit_ms(ttft_p50_ms, itl_p50_ms)
    lag_p99 = loop.p99 if loop.count >= MIN_LOOP_SAMPLES else None
    if lag_p99 is not None and lag_p99 > limit and not failing:
        (notes if exact_receive else reasons).append(loop_lag_reason(lag_p99, limit, exact_receive))
    if open_loop and send.p99 is not None:
        limit_send = send_lag_limit_ms(mean_gap_s)
        if send.p99 > limit_send:
            reasons.append(
                f"send lag P99 {send.p99:.1f} ms > {limit_send:.1f} ms: the client could not send "
                "on schedule, so the offered load was lower than specified"
                + (f" (more requests were due than its {pool_limit} connections)" if pool_full else "")
            )
    stalled = delayed_count(delays, None if exact_receive else limit)
    if stalled and not failing:
        said = stall_reason(stalled, measured or requests, loop.max, limit)
        (reasons if too_many(stalled, measured or requests) else notes).append(said)
    cpu_judged = math.isfinite(cpu_utilization) and (wall_s is None or wall_s >= CPU_MIN_WALL_S)
    if cpu_judged and cpu_utilization >= CPU_LIMIT and not failing:
        reasons.append(
            f"client CPU {cpu_utilization:.0%} of a core >= {CPU_LIMIT:.0%}: the load "
            "generator was saturated"
        )
    if retries:
        notes.append(f"{retries} request(s) resent on a fresh connection: the server had closed "
                     "a kept-alive connection before the request was written")
    return ClientHealth(
        valid=not reasons,
        reasons=reasons,
        cpu_utilization=round(cpu_utilization, 4),
        loop_lag_ms=loop,
        send_lag_p99_ms=send.p99,
        workers=workers,
        requests=requests,
        failed=failed,
        retries=retries,
        loop_lag_p99_ms=lag_p99,
        loop_lag_limit_ms=limit,
        notes=notes,
        exact_receive=exact_receive,
        measured=measured or 0,
        delayed_requests=stalled,
        request_delays_ms=list(delays),
    )


@dataclass
class WorkerStats:
    """One worker process's self-check numbers, summed over the phases it ran."""

    send_lags_ms: list[float] = field(default_factory=list)
    loop_lags_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    peak_in_flight: int = 0
    pool_limit: Optional[int] = None
    requests: int = 0
    failed: int = 0
    retries: int = 0
    measured: int = 0
    delays: list[Delay] = field(default_factory=list)

    def add(self, other: "WorkerStats") -> None:
        self.send_lags_ms += other.send_lags_ms
        self.loop_lags_ms += other.loop_lags_ms
        self.cpu_s += other.cpu_s
        self.wall_s += other.wall_s
        self.peak_in_flight = max(self.peak_in_flight, other.peak_in_flight)
        self.pool_limit = other.pool_limit if self.pool_limit is None else self.pool_limit
        self.requests += other.requests
        self.failed += other.failed
        self.retries += other.retries
        self.measured += other.measured
        self.delays += other.delays

    @property
    def cpu_utilization(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def health(self, *, open_loop: bool, mean_gap_s: Optional[float] = None,
               exact_receive: bool = False) -> ClientHealth:
        """This process's (or worker's) verdict on its own numbers."""
        return judge(
            cpu_utilization=self.cpu_utilization, loop_lags_ms=self.loop_lags_ms,
            send_lags_ms=self.send_lags_ms, open_loop=open_loop, mean_gap_s=mean_gap_s,
            pool_full=self.pool_limit is not None and self.peak_in_flight > self.pool_limit,
            pool_limit=self.pool_limit, wall_s=self.wall_s, requests=self.requests,
            failed=self.failed, retries=self.retries, exact_receive=exact_receive,
            measured=self.measured, delays=self.delays,
        )


def judge_workers(
    stats: Sequence[WorkerStats], *, open_loop: bool, mean_gap_s: Optional[float] = None,
    exact_receive: bool = False,
) -> ClientHealth:
    """Verdict on a run over several workers: each judged alone, reasons prefixed with its number.

    ``cpu_utilization`` is the busiest worker's (one loop per worker: a saturated worker
    skews its share of the requests however idle the others are), ``loop_lag_p99_ms`` the
    worst worker's; the loop-lag distribution and the send-lag P99 are over all workers'
    samples; requests, failures and retries add up.
    """
    n = len(stats)
    if n == 1:  # the one worker's own verdict, its reasons not numbered
        return stats[0].health(open_loop=open_loop, mean_gap_s=mean_gap_s, exact_receive=exact_receive)
    reasons: list[str] = []
    notes: list[str] = []
    lag_p99s: list[float] = []
    delayed = 0
    for k, st in enumerate(stats, 1):
        one = st.health(open_loop=open_loop, mean_gap_s=mean_gap_s, exact_receive=exact_receive)
        reasons += [f"worker {k} of {n}: {r}" for r in one.reasons]
        delayed += one.delayed_requests
        notes += [f"worker {k} of {n}: {r}" for r in one.notes]
        if one.loop_lag_p99_ms is not None:
            lag_p99s.append(one.loop_lag_p99_ms)
    cpu = max((st.cpu_utilization for st in stats), default=0.0)
    send = distribution([x for st in stats for x in st.send_lags_ms])
    return ClientHealth(
        valid=not reasons,
        reasons=reasons,
        cpu_utilization=round(cpu, 4),
        loop_lag_ms=distribution([x for st in stats for x in st.loop_lags_ms]),
        send_lag_p99_ms=send.p99,
        workers=n,
        requests=sum(st.requests for st in stats),
        failed=sum(st.failed for st in stats),
        retries=sum(st.retries for st in stats),
        loop_lag_p99_ms=max(lag_p99s, default=None),
        loop_lag_limit_ms=loop_lag_limit_ms(None, None),
        notes=notes,
        exact_receive=exact_receive,
        measured=sum(st.measured for st in stats),
        delayed_requests=delayed,
        request_delays_ms=[d for st in stats for d in st.delays],
    )


@dataclass
class WorkersCheck:
    """A run's self-check: each worker's stats, judged by :func:`judge_workers`, plus notes
    (where each worker ran, its clock offset) that the pool adds."""

    open_loop: bool
    mean_gap_s: Optional[float]
    workers: list[WorkerStats]
    pool_notes: list[str] = field(default_factory=list)

    def health(self, exact_receive: bool = False) -> ClientHealth:
        h = judge_workers(self.workers, open_loop=self.open_loop, mean_gap_s=self.mean_gap_s,
                          exact_receive=exact_receive)
        return h.model_copy(update={"notes": [*h.notes, *self.pool_notes]}) if self.pool_notes else h

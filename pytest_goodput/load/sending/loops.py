"""The loops that send a worker's requests: on schedule (open loop), by users (closed loop).

Each sends raw requests through anything with ``async send(plan)`` and keeps the raw
exchanges; parsing happens after the run. Conversations (``conversation.py``) use the same
precise :func:`sleep_until`. ``docs/scenarios.md`` is the contract.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Awaitable, Callable, Iterable, Iterator, Optional, Protocol

from pytest_goodput.load.sending.ahead import AheadBodies
from pytest_goodput.load.sending.bodies import BodyWindow
from pytest_goodput.load.client.event_loop import SPIN_S, sleep_until
from pytest_goodput.load.selfcheck.health import SelfCheck
from pytest_goodput.load.plan import Supply
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.schema.scenario.spec import ScenarioSpec

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``; ``total`` is 0 when not known in advance (duration-bounded closed loop)."""

#: Spin (``SPIN_S``) before a deadline at most this fraction of the mean gap, so spinning
#: never costs over ~10 % of a core.
SPIN_GAP_FRACTION = 0.1
#: Seconds between progress callbacks.
PROGRESS_EVERY_S = 0.25
#: A client that writes no byte before a request's deadline (``writes_on_schedule``) is handed
#: the request this long ahead, so its pooled connection and headers are ready at the deadline.
ARM_LEAD_S = 0.005


#: Closed-loop users started per loop turn. A user's first step (its plan, its body, its send
#: up to the write) runs in the turn after it was started: a thousand users started at once
#: stalled the loop for tens of milliseconds, and every read arriving meanwhile was stamped late.
START_PER_TURN = 32


async def start_users(user: Callable[[], Awaitable[None]], n: int) -> list["asyncio.Task[None]"]:
    """``n`` tasks running ``user``, :data:`START_PER_TURN` per loop turn."""
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[None]] = []
    try:
        for k in range(n):
            if k and k % START_PER_TURN == 0:
                await asyncio.sleep(0)
            tasks.append(loop.create_task(user()))  # type: ignore[arg-type]
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
    return tasks


class Sender(Protocol):
    async def send(self, plan: RequestPlan) -> RawExchange: ...


class ProgressTicker:
    """Throttled ``progress(done, total)`` calls; the last one always reaches the callback."""

    def __init__(self, fn: Optional[ProgressFn], total: int) -> None:
        self.fn, self.total, self.done, self._last = fn, total, 0, 0.0
        #: The exchanges finished so far: what an interrupted run keeps (``worker.py``).
        self.finished: list[RawExchange] = []

    def tick(self, ex: RawExchange) -> None:
        self.finished.append(ex)
        self.done += 1
        if self.fn is None:
            return
        now = time.perf_counter()
        if now - self._last >= PROGRESS_EVERY_S or self.done == self.total:
            self._last = now
            self.fn(self.done, self.total)

    def finish(self) -> None:
        if self.fn is not None:
            self.fn(self.done, self.total or self.done)


async def open_loop(
    client: Sender, plans: Iterable[RequestPlan], check: SelfCheck, prog: ProgressTicker,
    ceiling: Optional[int], window: Optional[BodyWindow] = None,
) -> list[RawExchange]:
    """Send each plan at its deadline; with a ceiling a request first waits for a slot (send lag).

    A client that ``writes_on_schedule`` gets each request ``ARM_LEAD_S`` ahead of its
    deadline and writes it at the deadline; ``window`` has built the bodies ahead.
    """
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(ceiling) if ceiling else None
    out: list[RawExchange] = []
    pending: set[asyncio.Task[None]] = set()
    spin = min(SPIN_S, SPIN_GAP_FRACTION * (check.mean_gap_s or SPIN_S / SPIN_GAP_FRACTION))
    check.pool_limit = getattr(client, "max_connections", None)
    lead = ARM_LEAD_S if getattr(client, "writes_on_schedule", False) else 0.0
    in_flight = 0

    async def one(plan: RequestPlan) -> None:
        nonlocal in_flight
        allowed = plan.scheduled_at
        if sem is not None:
            waited = sem.locked()
            await sem.acquire()
            if waited:
                allowed = max(allowed, time.perf_counter())
        in_flight += 1
        check.peak_in_flight = max(check.peak_in_flight, in_flight)
        try:
            ex = await (client.send(plan, spin) if lead else client.send(plan))  # type: ignore[call-arg]
        finally:
            in_flight -= 1
            if sem is not None:
                sem.release()
        check.record_exchange(allowed, ex)
        out.append(ex)
        prog.tick(ex)

    for plan in plans:
        await (sleep_until(plan.scheduled_at - lead, 0.0) if lead else sleep_until(plan.scheduled_at, spin))
        if window is not None:
            window.take(plan)
        task = loop.create_task(one(plan))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending)
    return out


async def closed_loop(
    spec: ScenarioSpec, client: Sender, users: int, supply: Supply, check: SelfCheck,
    prog: ProgressTicker, *, first: int = 0, count: Optional[int] = None, batch: bool = False,
    warmup: Optional[bool] = None, indices: Optional[Iterator[int]] = None,
    t0: Optional[float] = None, budget: Optional[int] = None, bodies: Optional[AheadBodies] = None,
) -> list[RawExchange]:
    """``users`` loops, each sending its next request when its last one ends.

    Indices start at ``first``. ``batch``: every request is scheduled at the phase start
    (offline); else at the moment its user became free. ``warmup`` forces every request's
    flag and ``count`` caps the phase (offline phases); otherwise the spec's warm-up rules,
    ``requests`` and ``duration_s`` apply. A worker of the plan passes the
    increasing global ``indices`` it owns, the common start ``t0`` (slept until) and its
    share ``budget`` of the measured requests (default ``spec.requests``). ``bodies`` (built
    over the same ``supply``) takes the indices and has their bodies built ahead (``ahead.py``).
    """
    clock = time.perf_counter
    counter = indices if indices is not None else itertools.count(first)
    if bodies is not None:
        counter = iter(bodies.next_index, None)
    if t0 is not None:
        await sleep_until(t0)
    begin = clock() if t0 is None else t0
    budget = spec.requests if budget is None else budget
    measured, start = 0, None
    out: list[RawExchange] = []

    def admit(ready: float) -> Optional[RequestPlan]:
        """The next request to send, or None when the phase is over (no await: atomic)."""
        nonlocal measured, start
        i = next(counter, None)
        if i is None or count is not None and i - first >= count:
            return None
        now = clock()
        warm = warmup if warmup is not None else (
            i - first < spec.warmup_requests or now - begin < spec.warmup_s
        )
        if not warm:
            if budget is not None and measured >= budget:
                return None
            if start is None:
                start = ready
            elif spec.duration_s is not None and now - start > spec.duration_s:
                return None
            measured += 1
        plan = supply.plan(i, begin if batch else ready, warm)
        if bodies is not None:
            bodies.take(plan)
        return plan

    async def user() -> None:
        ready = begin
        while (plan := admit(ready)) is not None:
            ex = await client.send(plan)
            check.record_exchange(ready, ex)
            out.append(ex)
            prog.tick(ex)
            ready = ex.end_at if ex.end_at is not None else clock()

    if bodies is not None:
        bodies.start()
    try:
        await asyncio.gather(*await start_users(user, users))
    finally:
        if bodies is not None:
            await bodies.stop()
    return out

"""Driving one run: requests sent on schedule (open loop), by users (closed loop) or all at once.

The loops behind ``scenario.run_scenario`` and the worker processes of ``shard``: each
sends raw requests through anything with ``async send(plan)`` and keeps the raw
exchanges; parsing happens after the run. ``docs/scenarios.md`` is the contract.
"""

from __future__ import annotations

import asyncio
import itertools
import resource
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Protocol

from pytest_goodput.load.conversation import conversation_loop, open_conversations
from pytest_goodput.load.prefix import with_shared_prefixes
from pytest_goodput.load.schedule import Schedule, open_loop_schedule
from pytest_goodput.load.selfcheck import SelfCheck
from pytest_goodput.load.trace import Trace, load_trace
from pytest_goodput.load.trace_replay import mean_gap, trace_items, trace_load, trace_schedule
from pytest_goodput.load.workload import Dataset, WorkItem, build_workload
from pytest_goodput.measure.exchange import RawExchange, RequestPlan
from pytest_goodput.schema.results import ClientHealth
from pytest_goodput.schema.spec import ScenarioSpec

if TYPE_CHECKING:  # the worker processes never need the sketch path's modules
    from pytest_goodput.load.sketch_share import Sketched

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``; ``total`` is 0 when not known in advance (duration-bounded closed loop)."""

#: Busy-wait (yielding) at most this long before a deadline: loop timers wake up to ~1 ms late.
SPIN_S = 0.001
#: ...and at most this fraction of the mean gap, so spinning never costs over ~10 % of a core.
SPIN_GAP_FRACTION = 0.1
#: Seconds between progress callbacks.
PROGRESS_EVERY_S = 0.25
#: Prompts built up front for a closed loop whose request count is not known in advance.
INITIAL_SUPPLY = 1024
#: Seconds the pre-run reachability check waits for the server to answer.
REACH_TIMEOUT_S = 5.0
#: Keep-alive connections opened before a run starts (more are opened on demand).
WARM_CONNECTIONS = 64
#: Most connections one client process opens (an open loop without a ceiling).
MAX_CONNECTIONS = 4096


class Sender(Protocol):
    async def send(self, plan: RequestPlan) -> RawExchange: ...


async def sleep_until(deadline: float, spin_s: float = SPIN_S) -> None:
    """Sleep to the absolute ``perf_counter`` deadline: a loop timer, then a yielding spin."""
    clock = time.perf_counter
    delay = deadline - clock() - spin_s
    if delay > 0:
        await asyncio.sleep(delay)
    while clock() < deadline:
        await asyncio.sleep(0)


class ProgressTicker:
    """Throttled ``progress(done, total)`` calls; the last one always reaches the callback."""

    def __init__(self, fn: Optional[ProgressFn], total: int) -> None:
        self.fn, self.total, self.done, self._last = fn, total, 0, 0.0

    def tick(self) -> None:
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


class Supply:
    """Request payloads by index, built in advance and extended (doubling) when a run outgrows them."""

    def __init__(self, spec: ScenarioSpec, n: int, tokenizer: Any, dataset: Optional[Dataset],
                 salt: Optional[int], items: Optional[list[Any]] = None) -> None:
        self.spec, self.tokenizer, self.dataset, self.salt = spec, tokenizer, dataset, salt
        # ``items`` prebuilt by a parent process (None where another worker owns the index)
        self.items: list[Any] = items if items is not None else self._build(n)

    def _build(self, n: int) -> list[WorkItem]:
        items = build_workload(self.spec, n, self.tokenizer, dataset=self.dataset, salt=self.salt)
        return with_shared_prefixes(items, self.spec, self.salt, self.tokenizer)

    def __getitem__(self, i: int) -> WorkItem:
        if i >= len(self.items):
            n = max(2 * len(self.items), i + 1)
            self.items = self._build(n)
        return self.items[i]

    def plan(self, i: int, scheduled_at: float, warmup: bool) -> RequestPlan:
        item = self[i]
        return RequestPlan(i, item.prompt, item.prompt_tokens, item.max_tokens, scheduled_at, warmup,
                           images=item.images)


class HealthSource(Protocol):
    def health(self, exact_receive: bool = False) -> ClientHealth: ...


@dataclass
class RunOutput:
    """What a run returns: raw exchanges (sorted by index) and the client's self-check.

    ``sketched``: the run was sketched (``sketch_share.py``); ``exchanges`` is then its sample.
    """

    exchanges: list[RawExchange]
    check: HealthSource  # a SelfCheck, or the merged checks of a sharded run
    load: dict[str, float]
    sketched: Optional[Sketched] = None


def scheduled_plans(sched: Schedule, supply: Supply, t0: Optional[float] = None) -> Iterator[RequestPlan]:
    """The open-loop plans, deadlines ``t0 + offset`` (``t0``: now, taken at the first plan).

    Each plan is flagged ``open_loop``: its latencies count from its deadline.
    """
    t0 = time.perf_counter() if t0 is None else t0
    for i, (off, warm) in enumerate(zip(sched.offsets.tolist(), sched.warmup.tolist())):
        plan = supply.plan(i, t0 + off, warm)
        plan.open_loop = True
        yield plan


async def open_loop(
    client: Sender, plans: Iterable[RequestPlan], check: SelfCheck, prog: ProgressTicker,
    ceiling: Optional[int],
) -> list[RawExchange]:
    """Send each plan at its deadline; with a ceiling a request first waits for a slot (send lag)."""
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(ceiling) if ceiling else None
    out: list[RawExchange] = []
    pending: set[asyncio.Task[None]] = set()
    spin = min(SPIN_S, SPIN_GAP_FRACTION * (check.mean_gap_s or SPIN_S / SPIN_GAP_FRACTION))
    check.pool_limit = getattr(client, "max_connections", None)
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
            ex = await client.send(plan)
        finally:
            in_flight -= 1
            if sem is not None:
                sem.release()
        check.record_exchange(allowed, ex)
        out.append(ex)
        prog.tick()

    for plan in plans:
        await sleep_until(plan.scheduled_at, spin)
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
    t0: Optional[float] = None, budget: Optional[int] = None,
) -> list[RawExchange]:
    """``users`` loops, each sending its next request when its last one ends.

    Indices start at ``first``. ``batch``: every request is scheduled at the phase start
    (offline); else at the moment its user became free. ``warmup`` forces every request's
    flag and ``count`` caps the phase (offline phases); otherwise the spec's warm-up rules,
    ``requests`` and ``duration_s`` apply. A shard of a multi-process run passes the
    increasing global ``indices`` it owns, the common start ``t0`` (slept until) and its
    share ``budget`` of the measured requests (default ``spec.requests``).
    """
    clock = time.perf_counter
    counter = indices if indices is not None else itertools.count(first)
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
        return supply.plan(i, begin if batch else ready, warm)

    async def user() -> None:
        ready = begin
        while (plan := admit(ready)) is not None:
            ex = await client.send(plan)
            check.record_exchange(ready, ex)
            out.append(ex)
            prog.tick()
            ready = ex.end_at if ex.end_at is not None else clock()

    await asyncio.gather(*(user() for _ in range(users)))
    return out


async def drive(
    spec: ScenarioSpec, client: Sender, *, tokenizer: Any = None, progress: Optional[ProgressFn] = None,
    dataset: Optional[Dataset] = None, salt: Optional[int] = None,
) -> RunOutput:
    """The async core: run ``spec`` through ``client`` (anything with ``async send(plan)``).

    ``salt`` is the run nonce spelled into synthetic prompts (None: prompts depend on the seed only).
    """
    scen = spec.scenario
    if scen in ("sweep", "capacity"):
        raise ValueError(f"scenario {scen!r} is a series of runs; run each point as its own spec")
    if scen in ("server", "interactive", "trace"):
        sched, supply, gap, load = open_loop_setup(spec, tokenizer, dataset, salt)
        check = SelfCheck(open_loop=True, mean_gap_s=gap)
        prog = ProgressTicker(progress, len(sched))
        check.start()
        try:
            if spec.turns > 1:  # conversations arrive on the schedule; their turns follow
                out = await open_conversations(spec, client, supply, check, prog)
            else:
                out = await open_loop(client, scheduled_plans(sched, supply), check, prog, spec.concurrency)
            prog.finish()
        finally:
            await check.stop()
    elif scen == "concurrency":
        assert spec.concurrency is not None
        known = spec.requests is not None and spec.warmup_s == 0
        total = spec.warmup_requests + (spec.requests or 0) if known else 0
        supply = Supply(spec, total or INITIAL_SUPPLY, tokenizer, dataset, salt)
        check = SelfCheck(open_loop=False)
        load = {"concurrency": float(spec.concurrency)}
        prog = ProgressTicker(progress, total)
        check.start()
        try:
            if spec.turns > 1:  # conversations: each user keeps its slot for a whole one
                out = await conversation_loop(spec, client, spec.concurrency, supply, check, prog)
            else:
                out = await closed_loop(spec, client, spec.concurrency, supply, check, prog)
            prog.finish()
        finally:
            await check.stop()
    else:  # offline
        out, check, load = await offline(spec, client, tokenizer, progress, dataset, salt)
    return RunOutput(sorted(out, key=lambda ex: ex.plan.index), check, load)


def open_loop_setup(spec: ScenarioSpec, tokenizer: Any, dataset: Any, salt: Optional[int]
                    ) -> tuple[Schedule, Supply, Optional[float], dict[str, float]]:
    """An open-loop run's schedule, payloads, mean gap and offered load (``dataset``: a
    loaded dataset, or for a trace replay its :class:`Trace`)."""
    if spec.scenario == "trace":
        trace = dataset if isinstance(dataset, Trace) else load_trace(spec)
        sched, first = trace_schedule(spec, trace)
        items = trace_items(spec, trace, sched, first, tokenizer, salt)
        supply = Supply(spec, 0, tokenizer, None, salt, items=list(items))
        load, gap = trace_load(spec, trace, sched, first), mean_gap(sched)
    else:
        assert spec.rate is not None
        sched = open_loop_schedule(spec)
        supply = Supply(spec, len(sched), tokenizer, dataset, salt)
        load, gap = {"rate": float(spec.rate)}, 1.0 / spec.rate
    if spec.concurrency:
        load["max_concurrency"] = float(spec.concurrency)
    return sched, supply, gap, load


async def offline(
    spec: ScenarioSpec, client: Sender, tokenizer: Any, progress: Optional[ProgressFn],
    dataset: Optional[Dataset], salt: Optional[int],
) -> tuple[list[RawExchange], SelfCheck, dict[str, float]]:
    """Warm-up batch first (waited for), then the measured batch, each all scheduled at its start."""
    if spec.warmup_s > 0:
        raise ValueError("offline sends everything at t0: use warmup_requests=, not warmup_s=")
    if spec.requests is None and not spec.concurrency:
        raise ValueError("offline with only duration_s= needs a concurrency= ceiling (or requests=)")
    nw = spec.warmup_requests
    total = nw + (spec.requests or 0)
    supply = Supply(spec, total or INITIAL_SUPPLY, tokenizer, dataset, salt)
    check = SelfCheck(open_loop=False)
    prog = ProgressTicker(progress, total if spec.requests is not None else 0)
    cap = spec.concurrency
    load: dict[str, float] = {"requests": float(spec.requests or 0)}
    if cap:
        load["max_concurrency"] = float(cap)
    out: list[RawExchange] = []
    check.start()
    try:
        if nw:
            out += await closed_loop(spec, client, min(cap or nw, nw), supply, check, prog,
                                      count=nw, batch=True, warmup=True)
        users = cap or spec.requests or 1
        out += await closed_loop(spec, client, users, supply, check, prog, first=nw,
                                  count=spec.requests, batch=True, warmup=False)
        prog.finish()
    finally:
        await check.stop()
    return out, check, load


def pool_size(spec: ScenarioSpec) -> int:
    """Connections the client may open: the in-flight bound, or as many as file descriptors allow.

    An open loop without a ceiling has no in-flight bound; a pool smaller than its backlog
    would silently act as one, so it gets ``MAX_CONNECTIONS`` (the self-check flags a full pool).
    """

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    fd_cap = MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(64, soft - 128)
    if spec.concurrency:
        want = spec.concurrency
    elif spec.scenario == "offline":
        want = spec.warmup_requests + (spec.requests or 0)
    else:
        want = MAX_CONNECTIONS
    return max(1, min(want, fd_cap, MAX_CONNECTIONS))


def offered_rate(exchanges: list[RawExchange]) -> Optional[float]:
    """Measured requests per second actually sent: (n - 1) over the span of their send times."""
    sent = sorted(ex.sent_at for ex in exchanges if not ex.plan.warmup and ex.sent_at is not None)
    if len(sent) < 2 or sent[-1] <= sent[0]:
        return None
    return (len(sent) - 1) / (sent[-1] - sent[0])

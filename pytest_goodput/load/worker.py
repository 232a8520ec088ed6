"""One load worker: one event loop and one client running its jobs of the plan, phase by phase.

Every pool runs this body (in the coordinator's own loop, in a worker process, in a Ray
actor); only how messages travel differs. Messages (tuples): ``init`` (the pool's own
business) -> ``ready``; per phase ``job`` -> ``armed``, ``go(t0)`` -> ``tick(done)``
(0.25-1 s apart) ... ``done(share, stats)``; ``stop``. A share is the raw exchanges, or in
a sketched run a part of the run and a sample (``sketch.py``). Cancelled mid-phase (Ctrl-C,
a timeout), a worker sends ``partial(exchanges)`` on its way out: what the phase finished.
"""

from __future__ import annotations

import asyncio
import gc
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterator, Optional

from pytest_goodput.load.sending.ahead import AheadBodies
from pytest_goodput.load.sending.bodies import BodyWindow
from pytest_goodput.load.client.http import OpenAIClient
from pytest_goodput.load.sending.conversation import conversation_loop, open_conversations
from pytest_goodput.load.selfcheck.health import SelfCheck
from pytest_goodput.load.sending.loops import ARM_LEAD_S, ProgressTicker, Sender, closed_loop, open_loop
from pytest_goodput.load.plan import Job, Supply, owned
from pytest_goodput.load.requests.controls import controls_body
from pytest_goodput.load.sketch import Sketcher, SketchPlan
from pytest_goodput.measure.records.exchange import RequestPlan
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: Keep-alive connections an open loop opens before its run starts (more are opened on demand).
WARM_CONNECTIONS = 64
#: A closed loop opens one per user before its run starts, up to this many: its users all
#: start together, and a connect inside that burst costs loop turns and send lag (256 users
#: with 64 warm: send lag P99 52 ms; docs/performance.md).
WARM_USERS_MAX = 4096
#: Workers report at least this often while running a phase (the coordinator's silence rule).
HEARTBEAT_S = 1.0
#: Seconds between a worker's checks on its progress, for its heartbeat.
BEAT_S = 0.25

Message = tuple[Any, ...]
Emit = Callable[[Message], None]
Receive = Callable[[], Awaitable[Message]]


@dataclass
class Init:
    """What a worker needs to open its client; tokenizer/dataset only when it may build prompts
    (or parse its share, in a sketched run)."""

    spec: ScenarioSpec
    base_url: str
    model: str
    api_key_env: Optional[str]
    pool: int
    salt: Optional[int]
    tokenizer: Any = None
    dataset: Any = None
    sketch: Optional[SketchPlan] = None


def open_client(init: Init, keep_wire: bool) -> OpenAIClient:
    """The client a worker measures with (``keep_wire``: keep raw bytes for packet capture)."""
    spec = init.spec
    return OpenAIClient(
        init.base_url, init.model, api=spec.api, stream=spec.stream, api_key_env=init.api_key_env,
        timeout_s=spec.timeout_s, max_connections=init.pool, ignore_eos=spec.ignore_eos,
        extra_body=controls_body(spec), keep_wire=keep_wire,
    )


def warm_connections(init: Init) -> int:
    """Connections opened before the run: one per user of a closed loop, else a few."""
    spec = init.spec
    closed = spec.concurrency is not None or spec.scenario == "offline"
    return min(init.pool, WARM_USERS_MAX if closed else WARM_CONNECTIONS)


def _deadlines(plans: list[RequestPlan], t0: float) -> Iterator[RequestPlan]:
    """The job's plans with ``t0`` added to their offsets, as the loop reaches them."""
    for p in plans:
        p.scheduled_at += t0
        yield p


#: The old generation's collection threshold during a phase: never reached, so the full pass
#: waits for the phase's end (the young generations still collect every 700 allocations).
DEFERRED_FULL_COLLECTION = 1 << 30


@contextmanager
def quiet_collector() -> Iterator[None]:
    """No full garbage collection during the block, and the heap that exists now out of the
    collector's passes.

    A full collection walks the whole heap: 35-40 ms for the client's ~70,000 objects, one
    loop stall with the thread running, which a 64-stream closed loop met mid-run (24-33 ms)
    and a replay of 2,000 trace rows too (``docs/archive/decisions-log.md``, 2026-12-02). Frozen
    (``gc.freeze``), the heap is left out of every pass; the old generation's threshold
    defers the full pass over what the run allocates (3.6 ms for a 640-request phase's
    exchanges) to the phase's end. The young generations go on collecting: during such phases
    they found no unreachable object at all, but a run whose failures leave cycles still has
    them collected. Where something else froze objects already (``gc.get_freeze_count()``),
    its choice is left alone (the threshold is still deferred).
    """
    thresholds = gc.get_threshold()
    freeze = not gc.get_freeze_count()
    if freeze:
        gc.freeze()
    gc.set_threshold(thresholds[0], thresholds[1], DEFERRED_FULL_COLLECTION)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if freeze:
            gc.unfreeze()


async def _heartbeat(emit: Emit, prog: ProgressTicker) -> None:
    last, quiet = -1, 0.0
    while True:
        await asyncio.sleep(BEAT_S)
        quiet += BEAT_S
        if prog.done != last or quiet >= HEARTBEAT_S:
            emit(("tick", prog.done))
            last, quiet = prog.done, 0.0


class Worker:
    """Runs one worker's jobs through ``client`` and reports what they sent."""

    def __init__(self, init: Init, client: Sender, emit: Emit) -> None:
        self.init, self.client, self.emit = init, client, emit
        self.sketcher = None if init.sketch is None else Sketcher(init.sketch, init.spec, init.tokenizer)
        self.window: Optional[BodyWindow] = None
        self.ahead: Optional[tuple[Job, Supply, AheadBodies]] = None

    def prepare(self, job: Job) -> None:
        """Before the job's clock starts: an open loop's first request bodies (``bodies.py``),
        a closed loop's (``ahead.py``; not a conversation's: each turn holds the last answer)."""
        self.window, self.ahead = None, None
        if job.open_loop and not job.conversations:
            lead = ARM_LEAD_S if getattr(self.client, "writes_on_schedule", False) else 0.0
            self.window = BodyWindow(job.plans, self.client, job.prompts, lead)
            self.window.prefill()
        elif not job.open_loop and not job.conversations:
            init = self.init
            supply = Supply(init.spec, 0, init.tokenizer, init.dataset, init.salt, items=job.items or [])
            mine = owned(job.first, job.users, job.offset, job.total_users)
            limit = None if job.count is None else job.first + job.count
            bodies = AheadBodies(mine, supply, self.client, job.users, limit)
            bodies.prefill()
            self.ahead = (job, supply, bodies)

    async def _loop(self, job: Job, t0: float, check: SelfCheck, prog: ProgressTicker) -> list[Any]:
        spec, init = self.init.spec, self.init
        if job.open_loop and not job.conversations:
            if self.window is None or self.window.plans is not job.plans:
                self.prepare(job)  # a job run without its ``job`` message (no window prefilled)
            window = self.window
            assert window is not None
            window.start(t0)
            try:
                return await open_loop(self.client, _deadlines(job.plans, t0), check, prog, job.ceiling, window)
            finally:
                await window.stop()
        if not job.open_loop and not job.conversations:
            if self.ahead is None or self.ahead[0] is not job:
                self.prepare(job)  # a job run without its ``job`` message
            assert self.ahead is not None
            _, supply, bodies = self.ahead
            return await closed_loop(spec, self.client, job.users, supply, check, prog, first=job.first,
                                     count=job.count, batch=job.batch, warmup=job.warmup,
                                     budget=job.budget, t0=t0, bodies=bodies)
        supply = Supply(spec, 0, init.tokenizer, init.dataset, init.salt, items=job.items or [])
        if job.open_loop:
            return await open_conversations(spec, self.client, supply, check, prog, job.arrivals, t0,
                                            job.ceiling)
        mine = owned(job.first, job.users, job.offset, job.total_users)
        return await conversation_loop(spec, self.client, job.users, supply, check, prog, mine)

    async def run_job(self, job: Job, t0: float) -> Message:
        """Run ``job`` from the common start ``t0``: the ``done`` message, share and stats."""
        prog = ProgressTicker(None, 0)
        check = SelfCheck(open_loop=job.open_loop, mean_gap_s=job.mean_gap_s)
        beat = asyncio.get_running_loop().create_task(_heartbeat(self.emit, prog))
        with quiet_collector():  # a full collection due at the end runs after the monitor stopped
            check.start()
            try:
                out = await self._loop(job, t0, check, prog)
            except asyncio.CancelledError:  # Ctrl-C: what the phase finished is the run's evidence
                self.emit(("partial", list(prog.finished)))
                raise
            finally:
                await check.stop()
                beat.cancel()
        stats = check.stats(out)
        if self.sketcher is not None:
            return ("done", self.sketcher.share(out, lambda n: self.emit(("tick", n))), stats)
        return ("done", out, stats)

    async def serve(self, receive: Receive) -> None:
        """Run jobs until ``stop``. Between phases nothing is in flight."""
        while (msg := await receive())[0] == "job":
            self.prepare(msg[1])
            self.emit(("armed",))
            go = await receive()
            self.emit(await self.run_job(msg[1], go[1]))


async def serve(init: Init, receive: Receive, emit: Emit, keep_wire: bool) -> None:
    """A worker with a client of its own: open it and its first connections, then serve."""
    async with open_client(init, keep_wire) as client:
        emit(("ready", await client.open_connections(warm_connections(init))))
        await Worker(init, client, emit).serve(receive)

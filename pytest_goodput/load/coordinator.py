"""One run, any number of workers: the plan executed phase by phase over a pool.

The coordinator is the same for every pool (``pools/``: in-process, the default; worker
processes; Ray actors): it starts the workers, deals each phase's jobs, gives them one common
start t0 (on each worker's own clock), applies the silence and timeout rules, merges what
they ship (records, or in a sketched run parts and samples) and judges the client over the
workers' stats. ``docs/architecture.md`` draws the route.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Optional

from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.client.http import check_reachable
from pytest_goodput.load.selfcheck.health import WorkersCheck, WorkerStats
from pytest_goodput.load.sending.loops import ProgressFn, Sender
from pytest_goodput.load.plan import Plan, plan_run, worker_count
from pytest_goodput.load.pools import START_TIMEOUT_S, Pool, RunStopped, WorkerError
from pytest_goodput.load.pools.inprocess import InProcessPool
from pytest_goodput.load.pools.processes import ProcessPool
from pytest_goodput.load.pools.ray.pool import RayPool
from pytest_goodput.load.sketch import (
    SKETCH_S_PER_REQUEST,
    Sketched,
    SketchPlan,
    planned_requests,
    sketch_plan,
    threshold,
)
from pytest_goodput.load.requests.workload import Dataset
from pytest_goodput.load.worker import Init, Message
from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.measure.run_part import RunPart
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: Seconds the pre-run reachability check waits for the server to answer.
REACH_TIMEOUT_S = 5.0
#: A worker silent this long while running a phase is taken as hung (it beats every second).
SILENCE_S = 30.0
#: Added to a phase's own bound (last deadline or window, plus request timeouts).
MARGIN_S = 30.0
#: Seconds a pool's poll waits for a message before the rules are checked again.
POLL_S = 0.2


@dataclass
class RunOutput:
    """What a run returns: raw exchanges (sorted by index) and the client's self-check.

    ``sketched``: the run was sketched (``sketch.py``); ``exchanges`` is then its sample.
    """

    exchanges: list[RawExchange]
    check: WorkersCheck
    load: dict[str, float]
    sketched: Optional[Sketched] = None
    #: Why the run stopped before its end (None: it did not); ``exchanges`` is then what it
    #: had finished, of ``planned`` requests (0: not known in advance).
    stopped: Optional[str] = None
    planned: int = 0


class _Phases:
    """The coordinator's side of one run: messages collected under the rules, results merged."""

    def __init__(self, pool: Pool, plan: Plan, progress: Optional[ProgressFn]) -> None:
        self.pool, self.plan, self.progress = pool, plan, progress
        self.done = [0] * pool.n  # requests each worker reported in the current phase
        self.base = 0  # requests of the phases before
        self.stats = [WorkerStats() for _ in range(pool.n)]
        self.exchanges: list[RawExchange] = []
        self.part: Optional[RunPart] = None

    def tick(self) -> None:
        if self.progress is not None:
            self.progress(self.base + sum(self.done), self.plan.total)

    async def collect(self, tag: str, timeout_s: float, watch: bool = False) -> dict[int, Message]:
        """Wait for ``tag`` from every worker; ``watch`` applies the silence rule."""
        pool = self.pool
        start = time.perf_counter()
        seen = [start] * pool.n
        pending = set(range(pool.n))
        got: dict[int, Message] = {}
        while pending:
            msgs = await pool.poll(POLL_S)
            if _cancel_swallowed():
                raise asyncio.CancelledError()
            for k, msg in msgs:
                seen[k] = time.perf_counter()
                if msg[0] == "error":
                    pool.fail(k, f"failed:\n{msg[1].rstrip()}\n", grace_s=2.0)
                elif msg[0] == "tick":
                    self.done[k] = msg[1]
                    self.tick()
                elif msg[0] == tag:
                    got[k] = msg[1:]
                    pending.discard(k)
            now = time.perf_counter()
            for k in sorted(pending):
                if now - start > timeout_s:
                    pool.fail(k, f"did not finish within {timeout_s:.0f} s")
                if watch and now - seen[k] > SILENCE_S:
                    pool.fail(k, f"sent nothing for {SILENCE_S:.0f} s (hung)")
        return got

    def merge(self, done: dict[int, Message], sketched: bool) -> None:
        for k in range(self.pool.n):
            share, stats = done[k]
            self.stats[k].add(stats)
            if self.pool.n > 1:  # each record names its sender (a conversation stays on one)
                for ex in share["sample"] if sketched else share:
                    ex.plan.worker = k
            if sketched:
                self.part = share["part"] if self.part is None else self.part.merge(share["part"])
                self.exchanges += share["sample"]
                self.base += share["count"]
            else:
                self.exchanges += share
                self.base += len(share)
        self.done = [0] * self.pool.n


async def coordinate(plan: Plan, pool: Pool, init: Init, progress: Optional[ProgressFn] = None,
                     keep_partial: bool = False) -> RunOutput:
    """Execute ``plan`` over ``pool``; ``init`` is what every worker opens its client with.

    ``keep_partial``: cancelled (Ctrl-C), return what the run had finished, marked stopped,
    instead of raising (``event_loop.run`` raises it as ``RunInterrupted``); a worker that
    crashed, hung or ran out of time raises ``RunStopped`` with it instead of a bare ``WorkerError``."""
    spec = init.spec
    sketch = sketch_plan(spec, plan.total)  # None: every record shipped (the exact path)
    run_ = _Phases(pool, plan, progress)
    ok = False
    stopped: Optional[str] = None
    shard: Optional[WorkerError] = None
    notes: list[str] = []
    try:
        await pool.start(_inits(plan, init, sketch))
        await run_.collect("ready", START_TIMEOUT_S)
        for jobs, bound_s in plan.phases:
            for k, job in enumerate(jobs):
                pool.send(k, ("job", job))
            await run_.collect("armed", START_TIMEOUT_S)
            t0 = time.perf_counter() + pool.go_delay_s
            for k in range(pool.n):
                pool.send(k, ("go", t0 - pool.clock_offset(k)))  # on the worker's own clock
            parse_s = SKETCH_S_PER_REQUEST * plan.total / pool.n if sketch else 0.0
            limit = pool.go_delay_s + bound_s + MARGIN_S + parse_s
            run_.merge(await run_.collect("done", limit, watch=True), sketch is not None)
        if progress is not None:
            progress(run_.base, plan.total or run_.base)
        notes = pool.notes()
        ok = True
    except (asyncio.CancelledError, WorkerError) as exc:
        if not keep_partial or isinstance(exc, RunStopped):
            raise
        await pool.close(False)  # the workers stop, each saying what its phase had finished
        run_.exchanges += pool.partial()
        shard = exc if isinstance(exc, WorkerError) else None
        stopped = ("interrupted (Ctrl-C)" if shard is None else f"stopped: {shard}") + (
            "" if isinstance(pool, InProcessPool) else ": the workers' requests of the phase under way are not kept")
    finally:
        await pool.close(ok)
    check = WorkersCheck(plan.open_loop, plan.mean_gap_s, run_.stats, notes)
    sketched = None
    if sketch is not None and run_.part is not None and stopped is None:
        info = sketch.info(threshold(spec), sum(not ex.plan.warmup for ex in run_.exchanges))
        sketched = Sketched(run_.part, info, planned_requests(plan, spec))
    out = RunOutput(sorted(run_.exchanges, key=lambda ex: ex.plan.index), check, plan.load, sketched,
                    stopped, plan.total)
    if shard is not None:  # a hung or late worker: the run so far, raised as its stop
        raise RunStopped(str(shard), out) from None
    return out


def _cancel_swallowed() -> bool:
    """Whether this task was cancelled (Ctrl-C) but a pool's ``asyncio.wait_for`` returned a
    message instead of raising (Python 3.11 does when the message was ready at that moment):
    the run would go on to its end. Python 3.10 cannot tell (``Task.cancelling``)."""
    cancelling = getattr(asyncio.current_task(), "cancelling", None)
    return bool(cancelling is not None and cancelling())


def _inits(plan: Plan, init: Init, sketch: Optional[SketchPlan]) -> list[Init]:
    """Each worker's ``Init``: its connection pool; the tokenizer when it may build prompts or
    parse its share, the dataset only to build prompts."""
    tokenizer = init.tokenizer if plan.extendable or sketch else None
    dataset = init.dataset if plan.extendable else None
    return [dataclasses.replace(init, pool=max(1, size), tokenizer=tokenizer, dataset=dataset, sketch=sketch)
            for size in plan.pools]


def _pool(spec: ScenarioSpec) -> Pool:
    """The pool a run of ``spec`` uses: Ray actors, worker processes, or this process."""
    if spec.backend == "ray":  # Ray itself is imported only when a run uses it
        return RayPool(spec)
    n = worker_count(spec)
    return ProcessPool(n) if n > 1 else InProcessPool(keep_wire=spec.capture != "off")


def run_plan(
    spec: ScenarioSpec, base_url: str, model: str, *, api_key_env: Optional[str] = None,
    tokenizer: Any = None, progress: Optional[ProgressFn] = None, dataset: Any = None,
    salt: Optional[int] = None,
) -> RunOutput:
    """Run ``spec`` against ``base_url``: planned, then coordinated over its pool.

    Raises ``ConnectionError`` when the server does not answer within a few seconds,
    ``RunStopped`` (a :class:`WorkerError`) when a worker crashes, hangs or runs out of time and
    on Ctrl-C ``RunInterrupted``, both with the ``RunOutput`` finished so far (``stopped``
    says why).
    """
    async def planned_and_run() -> RunOutput:  # one loop from the first check on: Ctrl-C unwinds it
        await check_reachable(base_url, timeout_s=min(REACH_TIMEOUT_S, spec.timeout_s))
        pool = _pool(spec)
        init = Init(spec, base_url, model, api_key_env, 1, salt, tokenizer, dataset)
        plan = plan_run(spec, pool.n, tokenizer, dataset, salt)
        return await coordinate(plan, pool, init, progress, keep_partial=True)

    return run(planned_and_run())


async def drive(
    spec: ScenarioSpec, client: Sender, *, tokenizer: Any = None, progress: Optional[ProgressFn] = None,
    dataset: Optional[Dataset] = None, salt: Optional[int] = None,
) -> RunOutput:
    """Run ``spec`` through ``client`` (anything with ``async send(plan)``) on this event loop.

    ``salt`` is the run nonce spelled into synthetic prompts (None: prompts depend on the seed only).
    """
    plan = plan_run(spec, 1, tokenizer, dataset, salt)
    init = Init(spec, "", "", None, 1, salt, tokenizer, dataset)
    return await coordinate(plan, InProcessPool(client), init, progress)


__all__ = ["MARGIN_S", "REACH_TIMEOUT_S", "SILENCE_S", "RunOutput", "coordinate", "drive", "run_plan"]

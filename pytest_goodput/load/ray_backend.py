"""One run sharded over load workers on Ray actors, across the nodes of a Ray cluster.

The plan is the process backend's (``shard_plan.plan_run``) and every worker runs the
process backend's worker loop (``ray_worker.LoadWorker``), so for the same seed both
backends send the same requests on the same schedule. What differs is the transport
(Ray calls instead of a pipe; shares shipped back as columns) and the clock base: a worker
on another host has its own monotonic clock. At start the driver measures each worker's
clock offset (``clock_offset.py``, several round trips, the shortest kept); a phase's
common start t0 is sent to each worker on its own clock, and its timestamps are mapped back
onto the driver's, so the union of all records is on one time base. The offsets and their
error bound (RTT/2) are reported in the self-check's notes.

Actors outlive a run that ends well: their loops stop and they wait, idle, for the
session's next run on their node (``ray_actors.py``); a failed run kills its actors.

A run of more requests than its threshold is sketched (``sketch_share.py``): each worker
ships a mergeable part of the run and a sample instead of every record; its part's
timestamps are mapped onto the driver's clock as records' are.

A worker that raises, dies or falls silent fails the run with a ``ShardError`` naming it
(with its traceback, redacted), within the same bounds as the process backend: never a hang.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, NoReturn, Optional

from pytest_goodput.load.client import check_reachable, run
from pytest_goodput.load.clock_offset import ClockOffset, Sample, estimate
from pytest_goodput.load.columns import unpack
from pytest_goodput.load.drive import REACH_TIMEOUT_S, RunOutput
from pytest_goodput.load.placement import place
from pytest_goodput.load.ray_actors import created, give_back, take
from pytest_goodput.load.ray_runtime import ensure
from pytest_goodput.load.ray_worker import LoadWorker, host
from pytest_goodput.load.selfcheck import ShardCheck, WorkerStats
from pytest_goodput.load.shard import MARGIN_S, SILENCE_S, START_TIMEOUT_S, Init, ShardError
from pytest_goodput.load.shard_plan import plan_run
from pytest_goodput.load.sketch_share import (
    SKETCH_S_PER_REQUEST,
    Sketched,
    planned_requests,
    sketch_plan,
    threshold,
)
from pytest_goodput.measure.exchange import RawExchange
from pytest_goodput.measure.run_part import RunPart
from pytest_goodput.schema.redaction import redact
from pytest_goodput.schema.spec import ScenarioSpec

#: Seconds between the last worker arming a phase and its common start (Ray calls, maybe remote).
GO_DELAY_S = 0.25
#: Round trips per worker for its clock offset; the shortest is kept.
CLOCK_ROUND_TRIPS = 7
#: A worker's ``poll`` waits this long for a message before returning empty-handed.
POLL_S = 0.2
#: Seconds a worker may take to stop its loop after a run before its actor is killed, not kept.
FINISH_S = 10.0
#: Seconds an actor kept from an earlier run has to answer before a fresh one replaces it.
ALIVE_S = 10.0


def ray_workers(spec: ScenarioSpec, nodes: int) -> int:
    """Workers a Ray run of ``spec`` uses: ``workers`` when set, else one per node;
    at most one per user or slot, as in the process backend."""
    if spec.scenario in ("sweep", "capacity"):
        return 1
    want = spec.workers if "workers" in spec.model_fields_set else max(1, nodes)
    return max(1, min(want, spec.concurrency or spec.requests or want))


@dataclass
class RayCheck(ShardCheck):
    """A sharded run's self-check plus each worker's placement and clock offset, as notes."""

    clock_notes: list[str] = field(default_factory=list)

    def health(self, exact_receive: bool = False) -> Any:
        h = super().health(exact_receive)
        return h.model_copy(update={"notes": [*h.notes, *self.clock_notes]})


class _Pool:
    """N Ray actors driven phase by phase; any failure kills them all and raises ShardError."""

    def __init__(self, ray: Any, n: int) -> None:
        self.ray, self.n = ray, n
        self.actors: list[Any] = []
        self.hosts: list[str] = []
        self.polls: dict[int, Any] = {}
        self.done = [0] * n
        self.stats = [WorkerStats() for _ in range(n)]

    def fail(self, k: int, what: str) -> NoReturn:
        self.close()
        where = f" (Ray actor on {self.hosts[k]})" if k < len(self.hosts) else ""
        raise ShardError(redact(f"load generator worker {k + 1} of {self.n}{where} {what}"))

    def call(self, k: int, method: str, *args: Any, timeout_s: float = START_TIMEOUT_S) -> Any:
        """A blocking call on worker ``k``; its failure or a timeout fails the run."""
        try:
            return self.ray.get(getattr(self.actors[k], method).remote(*args), timeout=timeout_s)
        except self.ray.exceptions.GetTimeoutError:
            self.fail(k, f"did not answer {method} within {timeout_s:.0f} s")
        except self.ray.exceptions.RayError as exc:
            self.fail(k, f"failed:\n{str(exc)[-4000:].rstrip()}\n")

    def send(self, k: int, msg: tuple[Any, ...]) -> None:
        self.actors[k].send.remote(msg)  # ordered per actor; a dead actor shows in its poll

    def collect(self, tag: str, timeout_s: float, watch: bool = False,
                on_tick: Optional[Callable[[], None]] = None) -> dict[int, tuple[Any, ...]]:
        """Wait for ``tag`` from every worker; ``watch`` applies the silence rule."""
        ray = self.ray
        start = time.perf_counter()
        seen = [start] * self.n
        pending = set(range(self.n))
        got: dict[int, tuple[Any, ...]] = {}
        while pending:
            for k in range(self.n):
                if k not in self.polls:
                    self.polls[k] = self.actors[k].poll.remote(POLL_S)
            by_ref = {ref: k for k, ref in self.polls.items()}
            ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=POLL_S * 2)
            for ref in ready:
                k = by_ref[ref]
                del self.polls[k]
                try:
                    msgs = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    self.fail(k, f"exited before finishing:\n{str(exc)[-4000:].rstrip()}\n")
                if msgs:
                    seen[k] = time.perf_counter()
                for msg in msgs:
                    if msg[0] == "error":
                        self.fail(k, f"failed:\n{msg[1].rstrip()}\n")
                    elif msg[0] == "tick":
                        self.done[k] = msg[1]
                        if on_tick is not None:
                            on_tick()
                    elif msg[0] == tag:
                        got[k] = msg[1:]
                        pending.discard(k)
            now = time.perf_counter()
            for k in sorted(pending):
                if now - start > timeout_s:
                    self.fail(k, f"did not finish within {timeout_s:.0f} s")
                if watch and now - seen[k] > SILENCE_S:
                    self.fail(k, f"sent nothing for {SILENCE_S:.0f} s (hung)")
        return got

    def release(self, nodes: list[str]) -> None:
        """After a run that ended well: stop each worker's loop and keep the idle actor for the
        session's next run on its node (``ray_actors``); one that does not stop is killed.

        Polls still out are waited for first: one running late would read the next run's queue.
        """
        if self.polls:
            self.ray.wait(list(self.polls.values()), num_returns=len(self.polls), timeout=POLL_S * 10)
        self.polls = {}
        for k, a in enumerate(self.actors):
            try:
                idle = self.ray.get(a.finish.remote(FINISH_S), timeout=FINISH_S + START_TIMEOUT_S)
            except self.ray.exceptions.RayError:
                idle = False
            if idle:
                give_back(self.ray, nodes[k], a)
            else:
                _kill(self.ray, a)
        self.actors = []

    def close(self) -> None:
        for a in self.actors:
            _kill(self.ray, a)
        self.actors = []


def _kill(ray: Any, actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 - already gone
        pass


def _alive(ray: Any, actor: Any) -> bool:
    """Whether a kept actor still answers (its node may have gone since the last run)."""
    try:
        ray.get(actor.host.remote(), timeout=ALIVE_S)
        return True
    except ray.exceptions.RayError:
        _kill(ray, actor)
        return False


def _offset(pool: _Pool, k: int, shared: bool) -> ClockOffset:
    samples = []
    for _ in range(CLOCK_ROUND_TRIPS):
        w0, m0 = time.time(), time.perf_counter()
        ww, wm = pool.call(k, "clock")
        samples.append(Sample(w0, m0, ww, wm, time.time(), time.perf_counter()))
    return estimate(samples, shared)


def run_ray(
    spec: ScenarioSpec, base_url: str, model: str, *, api_key_env: Optional[str] = None,
    tokenizer: Any = None, progress: Optional[Callable[[int, int], None]] = None, dataset: Any = None,
    salt: Optional[int] = None,
) -> RunOutput:
    """Run ``spec`` over load workers on Ray actors; returns a ``RunOutput`` like ``run_sharded``."""
    run(check_reachable(base_url, timeout_s=min(REACH_TIMEOUT_S, spec.timeout_s)))
    ray = ensure()  # RayUnavailableError when Ray is missing or the cluster cannot be joined
    from ray import cloudpickle
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [(nd["NodeID"], float(nd["Resources"].get("CPU", 0))) for nd in ray.nodes() if nd["Alive"]]
    n = ray_workers(spec, len(nodes))
    plan = plan_run(spec, n, tokenizer, dataset, salt)
    sketch = sketch_plan(spec, plan.total)  # None: every record shipped (the exact path)
    merged: Optional[RunPart] = None
    actor = ray.remote(num_cpus=0, max_concurrency=4, max_restarts=0)(LoadWorker)
    pool = _Pool(ray, n)
    me = host()
    exchanges: list[RawExchange] = []
    base = 0
    try:
        placed = place(n, nodes)
        for node in placed:
            kept = take(ray, node)
            if kept is not None and not _alive(ray, kept):
                kept = None
            if kept is None:
                strategy = NodeAffinitySchedulingStrategy(node, soft=False)
                kept = actor.options(scheduling_strategy=strategy).remote()
                created()
            pool.actors.append(kept)
        offsets: list[ClockOffset] = []
        for k in range(n):
            name, boot = pool.call(k, "host")
            pool.hosts.append(name)
            offsets.append(_offset(pool, k, shared=(name, boot) == me))
        for k, size in enumerate(plan.pools):
            extra = (tokenizer, dataset) if plan.extendable else (tokenizer if sketch else None, None)
            init = Init(spec, base_url, model, api_key_env, max(1, size), salt, *extra)
            try:
                blob = cloudpickle.dumps(init)
            except Exception as exc:  # noqa: BLE001 - whatever the tokenizer raises
                pool.fail(k, f"could not be sent its work ({exc}); a tokenizer must be picklable")
            pool.call(k, "start", blob, k, sketch)
        pool.collect("ready", START_TIMEOUT_S)

        def tick() -> None:
            if progress is not None:
                progress(base + sum(pool.done), plan.total)

        for jobs, bound_s in plan.phases:
            pool.done = [0] * n
            for k, job in enumerate(jobs):
                pool.send(k, ("job", job))
            pool.collect("armed", START_TIMEOUT_S)
            t0 = time.perf_counter() + GO_DELAY_S
            for k in range(n):
                pool.send(k, ("go", t0 - offsets[k].shift_s))  # on the worker's own clock
            parse_s = SKETCH_S_PER_REQUEST * plan.total / n if sketch else 0.0
            done = pool.collect("done", GO_DELAY_S + bound_s + MARGIN_S + parse_s, watch=True, on_tick=tick)
            for k in range(n):
                cols, stats = done[k]
                pool.stats[k].add(stats)
                if sketch is None:
                    share = unpack(cols, offsets[k].shift_s)
                    base += len(share)
                else:
                    part = cols["part"].shifted(offsets[k].shift_s)
                    merged = part if merged is None else merged.merge(part)
                    share = unpack(cols["sample"], offsets[k].shift_s)
                    base += cols["count"]
                exchanges += share
            pool.done = [0] * n
        if progress is not None:
            progress(base, plan.total or base)
        notes = [f"worker {k + 1} of {n} (Ray actor on {pool.hosts[k]}): {o.describe()}"
                 for k, o in enumerate(offsets)]
        check = RayCheck(plan.open_loop, plan.mean_gap_s, pool.stats, notes)
        pool.release(placed)
    finally:
        pool.close()
    sketched = None
    if sketch is not None and merged is not None:
        info = sketch.info(threshold(spec), sum(not ex.plan.warmup for ex in exchanges))
        sketched = Sketched(merged, info, planned_requests(plan, spec))
    return RunOutput(sorted(exchanges, key=lambda ex: ex.plan.index), check, plan.load, sketched)

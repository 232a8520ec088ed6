"""Load workers on Ray actors, across the nodes of a Ray cluster.

Every worker runs the worker body (``actor.LoadWorker``), so for the same seed a Ray run and
a run in processes send the same requests on the same schedule. What differs is the
transport (Ray calls instead of a pipe; shares shipped back as columns) and the clock base:
a worker on another host has its own monotonic clock. At start the pool measures each
worker's clock offset (``clock_offset.py``, several round trips, the shortest kept); the
coordinator sends each phase's common start t0 on each worker's own clock, and the pool maps
its timestamps (records, or a sketched part) back onto the driver's, so the union of all
records is on one time base. The offsets and their error bound (RTT/2) are in the notes.

Actors outlive a run that ends well: their loops stop and they wait, idle, for the
session's next run on their node (``actors.py``); a failed run kills its actors. A worker
that raises, dies or falls silent fails the run with a ``WorkerError`` naming it (with its
traceback, redacted).
"""

from __future__ import annotations

import time
from typing import Any, NoReturn

from pytest_goodput.load.plan import worker_count
from pytest_goodput.load.pools import START_TIMEOUT_S, WorkerError
from pytest_goodput.load.pools.ray.actor import LoadWorker, host
from pytest_goodput.load.pools.ray.actors import created, give_back, take
from pytest_goodput.load.pools.ray.clock_offset import ClockOffset, Sample, estimate
from pytest_goodput.load.pools.ray.columns import unpack
from pytest_goodput.load.pools.ray.placement import place
from pytest_goodput.load.ray_runtime import ensure
from pytest_goodput.load.worker import Init, Message
from pytest_goodput.schema.redaction import redact
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: Round trips per worker for its clock offset; the shortest is kept.
CLOCK_ROUND_TRIPS = 7
#: A worker's ``poll`` waits this long for a message before returning empty-handed.
POLL_S = 0.2
#: Seconds a worker may take to stop its loop after a run before its actor is killed, not kept.
FINISH_S = 10.0
#: Seconds an actor kept from an earlier run has to answer before a fresh one replaces it.
ALIVE_S = 10.0


class RayPool:
    """N Ray actors; any failure kills them all and raises WorkerError."""

    go_delay_s = 0.25  # Ray calls, maybe to another host

    def __init__(self, spec: ScenarioSpec) -> None:
        self.ray = ensure()  # RayUnavailableError when Ray is missing or the cluster cannot be joined
        self.nodes = [(nd["NodeID"], float(nd["Resources"].get("CPU", 0)))
                      for nd in self.ray.nodes() if nd["Alive"]]
        self.n = worker_count(spec, len(self.nodes))
        self.actors: list[Any] = []
        self.hosts: list[str] = []
        self.placed: list[str] = []
        self.offsets: list[ClockOffset] = []
        self.polls: dict[int, Any] = {}

    async def start(self, inits: list[Init]) -> None:
        ray = self.ray
        cloudpickle, affinity = ray.cloudpickle, ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
        actor = ray.remote(num_cpus=0, max_concurrency=4, max_restarts=0)(LoadWorker)
        self.placed = place(self.n, self.nodes)
        for node in self.placed:
            kept = take(ray, node)
            if kept is not None and not _alive(ray, kept):
                kept = None
            if kept is None:
                strategy = affinity(node, soft=False)
                kept = actor.options(scheduling_strategy=strategy).remote()
                created()
            self.actors.append(kept)
        me = host()
        for k in range(self.n):
            name, boot = self.call(k, "host")
            self.hosts.append(name)
            self.offsets.append(self._offset(k, shared=(name, boot) == me))
        for k, init in enumerate(inits):
            try:
                blob = cloudpickle.dumps(init)
            except Exception as exc:  # noqa: BLE001 - whatever the tokenizer raises
                self.fail(k, f"could not be sent its work ({exc}); a tokenizer must be picklable")
            self.call(k, "start", blob, k)

    def _offset(self, k: int, shared: bool) -> ClockOffset:
        samples = []
        for _ in range(CLOCK_ROUND_TRIPS):
            w0, m0 = time.time(), time.perf_counter()
            ww, wm = self.call(k, "clock")
            samples.append(Sample(w0, m0, ww, wm, time.time(), time.perf_counter()))
        return estimate(samples, shared)

    def fail(self, k: int, what: str, grace_s: float = 0.0) -> NoReturn:
        self._kill_all()
        where = f" (Ray actor on {self.hosts[k]})" if k < len(self.hosts) else ""
        raise WorkerError(redact(f"load generator worker {k + 1} of {self.n}{where} {what}"))

    def call(self, k: int, method: str, *args: Any, timeout_s: float = START_TIMEOUT_S) -> Any:
        """A blocking call on worker ``k``; its failure or a timeout fails the run."""
        try:
            return self.ray.get(getattr(self.actors[k], method).remote(*args), timeout=timeout_s)
        except self.ray.exceptions.GetTimeoutError:
            self.fail(k, f"did not answer {method} within {timeout_s:.0f} s")
        except self.ray.exceptions.RayError as exc:
            self.fail(k, f"failed:\n{str(exc)[-4000:].rstrip()}\n")

    def send(self, k: int, msg: Message) -> None:
        self.actors[k].send.remote(msg)  # ordered per actor; a dead actor shows in its poll

    async def poll(self, timeout_s: float) -> list[tuple[int, Message]]:
        ray = self.ray
        for k in range(self.n):
            if k not in self.polls:
                self.polls[k] = self.actors[k].poll.remote(POLL_S)
        by_ref = {ref: k for k, ref in self.polls.items()}
        ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=max(timeout_s, POLL_S * 2))
        got: list[tuple[int, Message]] = []
        for ref in ready:
            k = by_ref[ref]
            del self.polls[k]
            try:
                msgs = ray.get(ref)
            except ray.exceptions.RayError as exc:
                self.fail(k, f"exited before finishing:\n{str(exc)[-4000:].rstrip()}\n")
            got += [(k, self._unpacked(k, msg)) for msg in msgs]
        return got

    def _unpacked(self, k: int, msg: Message) -> Message:
        """A ``done`` share from columns, its timestamps mapped onto the driver's clock."""
        if msg[0] != "done":
            return msg
        shift, cols = self.offsets[k].shift_s, msg[1]
        if "part" in cols:  # sketched: a part of the run and a sample
            share: Any = {"part": cols["part"].shifted(shift), "sample": unpack(cols["sample"], shift),
                          "count": cols["count"]}
        else:
            share = unpack(cols, shift)
        return ("done", share, msg[2])

    def clock_offset(self, k: int) -> float:
        return self.offsets[k].shift_s

    def notes(self) -> list[str]:
        return [f"worker {k + 1} of {self.n} (Ray actor on {self.hosts[k]}): {o.describe()}"
                for k, o in enumerate(self.offsets)]

    def partial(self) -> list[Any]:
        """Nothing: Ray actors are stopped with the run, their unshipped exchanges with them
        (an interrupted run says its requests done so far are unknown)."""
        return []

    async def close(self, ok: bool) -> None:
        if ok:
            self._release()
        self._kill_all()

    def _release(self) -> None:
        """After a run that ended well: stop each worker's loop and keep the idle actor for the
        session's next run on its node (``actors.py``); one that does not stop is killed.

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
                give_back(self.ray, self.placed[k], a)
            else:
                _kill(self.ray, a)
        self.actors = []

    def _kill_all(self) -> None:
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


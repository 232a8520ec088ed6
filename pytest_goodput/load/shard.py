"""One run sharded over worker processes: one event loop (and at most one core) each.

With ``workers=N`` the parent precomputes the plan (prompts, absolute deadlines, shares;
:mod:`.shard_plan`), starts N fresh interpreters (``python -m pytest_goodput.load.shard``; no
fork of a parent that may hold loops and threads), and each runs its share on its own
uvloop loop and ``OpenAIClient``, then ships raw exchanges and self-check numbers back
over a pipe (pickle). Deadlines are ``perf_counter()`` values: CLOCK_MONOTONIC on Linux,
one clock for every process of the machine; elsewhere :func:`effective_workers` falls back
to one process.

Messages (pickled tuples): ``init`` -> ``ready``; per phase ``job`` -> ``armed``, ``go(t0)``
-> ``tick(done)`` (0.25-1 s apart) ... ``done(exchanges, stats)``; ``stop``; a worker's
exception comes back as ``error(traceback)``. A worker that exits, falls silent or overruns
its phase makes the parent kill every worker and raise :class:`ShardError` naming it.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, NoReturn, Optional

from pytest_goodput.load.client import OpenAIClient, check_reachable, run
from pytest_goodput.load.drive import (
    REACH_TIMEOUT_S,
    WARM_CONNECTIONS,
    ProgressTicker,
    RunOutput,
    Supply,
    closed_loop,
    open_loop,
)
from pytest_goodput.load.reasoning_controls import reasoning_body
from pytest_goodput.load.selfcheck import SelfCheck, ShardCheck, WorkerStats
from pytest_goodput.load.shard_plan import (
    Job,
    Plan,
    count_owned,
    owned,
    plan_run,
    split,
)
from pytest_goodput.measure.exchange import RawExchange
from pytest_goodput.schema.spec import ScenarioSpec

__all__ = ["Init", "Job", "Plan", "ShardError", "count_owned", "effective_workers", "main", "owned",
           "plan_run", "run_sharded", "split"]

#: A worker must start, open its client and pre-open connections within this many seconds.
START_TIMEOUT_S = 60.0
#: Seconds between the last worker arming a phase and that phase's common start t0.
GO_DELAY_S = 0.05
#: Workers report at least this often while running a phase...
HEARTBEAT_S = 1.0
#: ...and one silent for this long is taken as hung.
SILENCE_S = 30.0
#: Added to a phase's own bound (last deadline or window, plus request timeouts).
MARGIN_S = 30.0
#: Characters of a failed worker's stderr shown in the error.
STDERR_TAIL = 2000


class ShardError(RuntimeError):
    """A worker process crashed, hung or failed; the message names it and its stderr tail."""


def effective_workers(spec: ScenarioSpec) -> int:
    """Processes a run of ``spec`` uses: ``spec.workers``, at most one per user or slot.

    Off Linux, where ``perf_counter`` is not documented to be one clock across processes,
    this warns and returns 1.
    """
    n = min(spec.workers, spec.concurrency or spec.requests or spec.workers)
    if n > 1 and not sys.platform.startswith("linux"):
        warnings.warn(f"workers={n} needs Linux (one monotonic clock across processes); "
                      "running in one process", RuntimeWarning, stacklevel=3)
        return 1
    return 1 if spec.scenario in ("sweep", "capacity") else n


@dataclass
class Init:
    """What a worker needs to open its client; tokenizer/dataset only when it may build prompts."""

    spec: ScenarioSpec
    base_url: str
    model: str
    api_key_env: Optional[str]
    pool: int
    salt: Optional[int]
    tokenizer: Any = None
    dataset: Any = None


def share_priority(pid: int) -> None:
    """Give process ``pid`` this thread's scheduling policy and nice value: a worker is the client
    too, and a placed client's real-time policy is reset for children (``run.affinity``)."""
    try:
        policy = os.sched_getscheduler(0)
        if policy & ~getattr(os, "SCHED_RESET_ON_FORK", 0) != os.SCHED_OTHER:
            os.sched_setscheduler(pid, policy, os.sched_getparam(0))
        os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0))
    except (AttributeError, OSError):  # not Linux, not permitted, or the worker already gone
        pass


class _Worker:
    """The parent's handle on one worker process."""

    def __init__(self, k: int, n: int) -> None:
        self.k, self.n = k, n
        self.err = tempfile.TemporaryFile()
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen([sys.executable, "-m", "pytest_goodput.load.shard"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=env)
        share_priority(self.proc.pid)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.tx = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self.rx = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.seen, self.done = time.perf_counter(), 0
        self.stats = WorkerStats()

    def describe(self, what: str, killed: bool) -> str:
        code = self.proc.returncode
        state = "still running, killed" if killed else f"exit code {code}" + (
            f" ({signal.Signals(-code).name})" if code is not None and code < 0 else "")
        self.err.seek(0)
        tail = self.err.read().decode("utf-8", "replace")[-STDERR_TAIL:].strip()
        return (f"load generator worker {self.k + 1} of {self.n} (pid {self.proc.pid}) {what}; {state}"
                + (f"; stderr tail:\n{tail}" if tail else "; no stderr output"))


class _Pool:
    """N workers driven phase by phase; any failure kills them all and raises ShardError."""

    def __init__(self) -> None:
        self.workers: list[_Worker] = []

    def fail(self, w: _Worker, what: str, grace_s: float = 0.0) -> NoReturn:
        """Kill every worker and raise for ``w`` (given ``grace_s`` to exit by itself first)."""
        if grace_s:
            try:
                w.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        alive = w.proc.poll() is None
        for other in self.workers:
            if other.proc.poll() is None:
                other.proc.kill()
        w.proc.wait()
        raise ShardError(w.describe(what, killed=alive))

    def send(self, w: _Worker, msg: tuple[Any, ...]) -> None:
        try:
            w.tx.send(msg)
        except (BrokenPipeError, ConnectionError):
            self.fail(w, "exited before finishing", grace_s=2.0)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            self.fail(w, f"could not be sent its work ({exc}); a tokenizer must be picklable for workers > 1")

    def collect(self, tag: str, timeout_s: float, watch: bool = False,
                on_tick: Optional[Callable[[], None]] = None) -> dict[int, tuple[Any, ...]]:
        """Wait for ``tag`` from every worker; ``watch`` applies the silence rule."""
        start = time.perf_counter()
        pending = {w.rx: w for w in self.workers}
        got: dict[int, tuple[Any, ...]] = {}
        for w in self.workers:
            w.seen = start
        while pending:
            for rx in wait(list(pending), timeout=0.2):
                w = pending[rx]  # type: ignore[index]
                try:
                    msg = rx.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    self.fail(w, "exited before finishing", grace_s=2.0)
                w.seen = time.perf_counter()
                if msg[0] == "error":
                    self.fail(w, f"failed:\n{msg[1].rstrip()}\n", grace_s=2.0)
                elif msg[0] == "tick":
                    w.done = msg[1]
                    if on_tick is not None:
                        on_tick()
                elif msg[0] == tag:
                    got[w.k] = msg[1:]
                    del pending[rx]
            now = time.perf_counter()
            for w in list(pending.values()):
                if now - start > timeout_s:
                    self.fail(w, f"did not finish within {timeout_s:.0f} s")
                if watch and now - w.seen > SILENCE_S:
                    self.fail(w, f"sent nothing for {SILENCE_S:.0f} s (hung)")
        return got

    def close(self) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                try:
                    w.tx.send(("stop",))
                except OSError:
                    pass
        deadline = time.perf_counter() + 5
        for w in self.workers:
            try:
                w.proc.wait(timeout=max(0.1, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
            w.tx.close()
            w.rx.close()
            w.err.close()


def run_sharded(
    spec: ScenarioSpec, base_url: str, model: str, *, api_key_env: Optional[str] = None,
    tokenizer: Any = None, progress: Optional[Callable[[int, int], None]] = None, dataset: Any = None,
    salt: Optional[int] = None,
) -> Any:
    """Run ``spec`` over :func:`effective_workers` processes; returns a ``loadgen.RunOutput``."""

    run(check_reachable(base_url, timeout_s=min(REACH_TIMEOUT_S, spec.timeout_s)))
    n = effective_workers(spec)
    plan = plan_run(spec, n, tokenizer, dataset, salt)
    pool = _Pool()
    exchanges: list[RawExchange] = []
    base = 0
    try:
        for k in range(n):
            pool.workers.append(_Worker(k, n))
        for w, size in zip(pool.workers, plan.pools):
            extra = (tokenizer, dataset) if plan.extendable else (None, None)
            pool.send(w, ("init", Init(spec, base_url, model, api_key_env, max(1, size), salt, *extra)))
        pool.collect("ready", START_TIMEOUT_S)

        def tick() -> None:
            if progress is not None:
                progress(base + sum(w.done for w in pool.workers), plan.total)

        for jobs, bound_s in plan.phases:
            for w, job in zip(pool.workers, jobs):
                w.done = 0
                pool.send(w, ("job", job))
            pool.collect("armed", START_TIMEOUT_S)
            t0 = time.perf_counter() + GO_DELAY_S
            for w in pool.workers:
                pool.send(w, ("go", t0))
            done = pool.collect("done", GO_DELAY_S + bound_s + MARGIN_S, watch=True, on_tick=tick)
            for w in pool.workers:
                out, stats = done[w.k]
                exchanges += out
                w.stats.add(stats)
            base += sum(len(done[k][0]) for k in done)
            for w in pool.workers:
                w.done = 0
        if progress is not None:
            progress(base, plan.total or base)
        check = ShardCheck(plan.open_loop, plan.mean_gap_s, [w.stats for w in pool.workers])
    finally:
        pool.close()
    return RunOutput(sorted(exchanges, key=lambda ex: ex.plan.index), check, plan.load)


# --- the worker process --------------------------------------------------------------


async def _heartbeat(tx: Connection, prog: Any) -> None:
    last, quiet = -1, 0.0
    while True:
        await asyncio.sleep(0.25)
        quiet += 0.25
        if prog.done != last or quiet >= HEARTBEAT_S:
            tx.send(("tick", prog.done))
            last, quiet = prog.done, 0.0


async def _run_job(init: Init, job: Job, t0: float, client: Any, tx: Connection) -> tuple[Any, ...]:

    prog = ProgressTicker(None, 0)
    check = SelfCheck(open_loop=job.open_loop, mean_gap_s=job.mean_gap_s)
    beat = asyncio.get_running_loop().create_task(_heartbeat(tx, prog))
    check.start()
    try:
        if job.open_loop:
            for p in job.plans:
                p.scheduled_at += t0
            out = await open_loop(client, job.plans, check, prog, job.ceiling)
        else:
            supply = Supply(init.spec, 0, init.tokenizer, init.dataset, init.salt, items=job.items or [])
            out = await closed_loop(
                init.spec, client, job.users, supply, check, prog, first=job.first, count=job.count,
                batch=job.batch, warmup=job.warmup, budget=job.budget, t0=t0,
                indices=owned(job.first, job.users, job.offset, job.total_users),
            )
    finally:
        await check.stop()
        beat.cancel()
    return ("done", out, check.stats())


async def serve(init: Init, rx: Connection, tx: Connection) -> None:
    """A worker's loop: open the client, then run jobs until ``stop`` (also run by ``ray_worker``)."""
    spec = init.spec
    async with OpenAIClient(
        init.base_url, init.model, api=spec.api, stream=spec.stream, api_key_env=init.api_key_env,
        timeout_s=spec.timeout_s, max_connections=init.pool, ignore_eos=spec.ignore_eos,
        extra_body=reasoning_body(spec), keep_wire=spec.capture != "off" and spec.backend == "process",
    ) as client:
        tx.send(("ready", await client.open_connections(min(init.pool, WARM_CONNECTIONS))))
        # Between phases the loop blocks on the pipe: nothing is in flight then.
        while (msg := rx.recv())[0] == "job":
            tx.send(("armed",))
            go = rx.recv()
            tx.send(await _run_job(init, msg[1], go[1], client, tx))


def main() -> int:
    """Worker entry point: messages on stdin, replies on stdout; stdout prints go to stderr."""

    rx = Connection(os.dup(0), writable=False)
    tx = Connection(os.dup(1), readable=False)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    try:
        msg = rx.recv()
        run(serve(msg[1], rx, tx))
    except EOFError:  # the parent went away
        return 1
    except BaseException:
        try:
            tx.send(("error", traceback.format_exc()[-STDERR_TAIL:]))
        except OSError:
            traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    # Run the importable module's main, so pickled classes resolve to one module object.
    from pytest_goodput.load.shard import main as _main

    sys.exit(_main())

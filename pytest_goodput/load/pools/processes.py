"""Worker processes: one event loop (and at most one core) each, on this machine.

The pool starts N fresh interpreters (``python -m pytest_goodput.load.pools.processes``; no
fork of a parent that may hold loops and threads); each runs the worker body
(``worker.py``) on its own uvloop loop and client, messages pickled over its stdin and
stdout. Deadlines are ``perf_counter()`` values: CLOCK_MONOTONIC on Linux, one clock for
every process of the machine (``plan.worker_count`` falls back to one process elsewhere).
A worker that exits or cannot be sent its work fails the run with a :class:`WorkerError`
naming it, its exit code and its stderr tail.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any, NoReturn

from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.pools import STDERR_TAIL, WorkerError
from pytest_goodput.load.worker import Init, Message, serve


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
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen([sys.executable, "-m", "pytest_goodput.load.pools.processes"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=env)
        share_priority(self.proc.pid)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.tx = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self.rx = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()

    def describe(self, what: str, killed: bool) -> str:
        code = self.proc.returncode
        state = "still running, killed" if killed else f"exit code {code}" + (
            f" ({signal.Signals(-code).name})" if code is not None and code < 0 else "")
        self.err.seek(0)
        tail = self.err.read().decode("utf-8", "replace")[-STDERR_TAIL:].strip()
        return (f"load generator worker {self.k + 1} of {self.n} (pid {self.proc.pid}) {what}; {state}"
                + (f"; stderr tail:\n{tail}" if tail else "; no stderr output"))


class ProcessPool:
    """N worker processes; any failure kills them all and raises WorkerError."""

    go_delay_s = 0.05

    def __init__(self, n: int) -> None:
        self.n = n
        self.workers: list[_Worker] = []

    async def start(self, inits: list[Init]) -> None:
        for k in range(self.n):
            self.workers.append(_Worker(k, self.n))
        for k, init in enumerate(inits):
            self.send(k, ("init", init))

    def fail(self, k: int, what: str, grace_s: float = 0.0) -> NoReturn:
        """Kill every worker and raise for worker ``k`` (given ``grace_s`` to exit by itself first)."""
        w = self.workers[k]
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
        raise WorkerError(w.describe(what, killed=alive))

    def send(self, k: int, msg: Message) -> None:
        try:
            self.workers[k].tx.send(msg)
        except (BrokenPipeError, ConnectionError):
            self.fail(k, "exited before finishing", grace_s=2.0)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            self.fail(k, f"could not be sent its work ({exc}); a tokenizer must be picklable for workers > 1")

    async def poll(self, timeout_s: float) -> list[tuple[int, Message]]:
        by_rx = {w.rx: w for w in self.workers}
        got: list[tuple[int, Message]] = []
        for rx in wait(list(by_rx), timeout=timeout_s):  # blocks this loop: it runs nothing else
            w = by_rx[rx]  # type: ignore[index]
            try:
                got.append((w.k, rx.recv()))  # type: ignore[union-attr]
            except (EOFError, OSError):
                self.fail(w.k, "exited before finishing", grace_s=2.0)
        return got

    def clock_offset(self, k: int) -> float:
        return 0.0  # one CLOCK_MONOTONIC for every process of the machine

    def notes(self) -> list[str]:
        return []

    def partial(self) -> list[Any]:
        """Nothing: worker processes are stopped with the run, their unshipped exchanges with them
        (an interrupted run says its requests done so far are unknown)."""
        return []

    async def close(self, ok: bool) -> None:
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


# --- the worker process --------------------------------------------------------------


def main() -> int:
    """Worker entry point: messages on stdin, replies on stdout; stdout prints go to stderr."""

    rx = Connection(os.dup(0), writable=False)
    tx = Connection(os.dup(1), readable=False)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)

    async def receive() -> Message:
        return rx.recv()  # blocks the loop between phases, when nothing is in flight

    try:
        init = rx.recv()[1]
        run(serve(init, receive, tx.send, keep_wire=init.spec.capture != "off"))
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
    from pytest_goodput.load.pools.processes import main as _main

    sys.exit(_main())

"""One load worker inside a Ray actor: the worker body, fed through queues.

The actor runs :func:`worker.serve` (the very body every pool runs: one uvloop loop, one
client, one job per phase) on a thread of its own, so a Ray run measures exactly what a
run in processes measures; only the transport differs. ``send`` puts a message in,
``poll`` takes out what the loop produced (heartbeat ticks, ``ready``, ``armed``, ``done``),
and a ``done`` share travels packed as columns (``columns.py``; in a sketched run its
sample). Ray is not imported here: ``pool.py`` wraps this class with ``ray.remote``.
"""

from __future__ import annotations

import os
import pickle
import queue
import socket
import threading
import time
import traceback
from typing import Any, Optional

from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.pools import STDERR_TAIL
from pytest_goodput.load.pools.ray.columns import pack
from pytest_goodput.load.worker import Message, serve


def _packed(msg: Message) -> Message:
    """A ``done`` share as columns (in a sketched run, its sample): a few flat arrays."""
    if msg[0] != "done":
        return msg
    share = msg[1]
    if isinstance(share, dict):  # sketched: a part of the run and a sample
        share = {**share, "sample": pack(share["sample"])}
    else:
        share = pack(share)
    return ("done", share, msg[2])


def boot_id() -> str:
    """This host's boot id (Linux): equal boot ids share one CLOCK_MONOTONIC."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return f"pid-{os.getpid()}"  # elsewhere: never taken as shared with another process


def host() -> tuple[str, str]:
    """``(hostname, boot id)`` of the calling process."""
    return socket.gethostname(), boot_id()


class LoadWorker:
    """A Ray actor's body: one load worker, for one run at a time."""

    def __init__(self) -> None:
        self._in: "queue.Queue[tuple[Any, ...]]" = queue.Queue()
        self._out: "queue.Queue[tuple[Any, ...]]" = queue.Queue()
        self._thread: Optional[threading.Thread] = None

    def host(self) -> tuple[str, str]:
        return host()

    def clock(self) -> tuple[float, float]:
        """This worker's wall and monotonic clocks, read back to back."""
        return time.time(), time.perf_counter()

    def start(self, init_blob: bytes, k: int) -> None:
        """Unpickle the ``Init`` and start worker ``k``'s loop; failures come back through ``poll``.

        An actor kept from an earlier run (``actors.py``) starts afresh: new queues, new loop.
        """
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("this load worker is still running an earlier run")
        self._in, self._out = queue.Queue(), queue.Queue()
        self._thread = threading.Thread(target=self._main, args=(init_blob,), daemon=True,
                                        name=f"goodput-load-worker-{k + 1}")
        self._thread.start()

    def finish(self, timeout_s: float) -> bool:
        """Stop the loop (its connections closed) and wait for it: True when the actor is idle."""
        if self._thread is None:
            return True
        self._in.put(("stop",))
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _main(self, init_blob: bytes) -> None:
        async def receive() -> Message:
            return self._in.get()  # blocks the loop between phases, when nothing is in flight

        try:
            init = pickle.loads(init_blob)
            run(serve(init, receive, lambda msg: self._out.put(_packed(msg)), keep_wire=False))
        except BaseException:
            self._out.put(("error", traceback.format_exc()[-STDERR_TAIL:]))

    def send(self, msg: tuple[Any, ...]) -> None:
        self._in.put(msg)

    def poll(self, timeout_s: float) -> list[tuple[Any, ...]]:
        """What the loop sent since the last poll, waiting up to ``timeout_s`` for the first."""
        try:
            out = [self._out.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self._out.get_nowait())
            except queue.Empty:
                return out

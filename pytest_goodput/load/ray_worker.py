"""One load worker inside a Ray actor: the process backend's worker loop, fed through queues.

The actor runs :func:`shard.serve` (the very loop a worker process of ``shard.py`` runs:
one uvloop loop, one client, ``_run_job`` per phase) on a thread of its own, so the Ray
backend measures exactly what the process backend measures; only the transport differs.
Messages are the process backend's; ``send`` puts one in, ``poll`` takes out what the loop
produced (heartbeat ticks, ``ready``, ``armed``, ``done``), and a ``done`` share travels
packed as columns (``columns.py``), or in a sketched run as a part and a sample (``sketch_share.py``). Ray is not imported here: ``ray_backend`` wraps this
class with ``ray.remote`` when the backend is used.
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

from pytest_goodput.load.client import run
from pytest_goodput.load.columns import pack
from pytest_goodput.load.shard import STDERR_TAIL, serve
from pytest_goodput.load.sketch_share import Sketcher, SketchPlan


class _Inbox:
    """The receiving end ``_serve`` reads from (a pipe in the process backend)."""

    def __init__(self, q: "queue.Queue[tuple[Any, ...]]") -> None:
        self._q = q

    def recv(self) -> tuple[Any, ...]:
        return self._q.get()


class _Outbox:
    """The sending end ``_serve`` writes to; a finished share is packed as columns, or, in a
    sketched run, parsed and shipped as a part of the run plus a sample (``sketch_share``)."""

    def __init__(self, q: "queue.Queue[tuple[Any, ...]]", sketcher: Optional[Sketcher] = None) -> None:
        self._q, self._sketcher = q, sketcher

    def send(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "done" and self._sketcher is not None:
            msg = ("done", self._sketcher.share(msg[1], lambda n: self._q.put(("tick", n))), msg[2])
        elif msg[0] == "done":
            msg = ("done", pack(msg[1]), msg[2])
        self._q.put(msg)


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

    def start(self, init_blob: bytes, k: int, sketch: Optional[SketchPlan] = None) -> None:
        """Unpickle the ``Init`` and start worker ``k``'s loop; failures come back through ``poll``.

        ``sketch``: the run is sketched; each phase's share is shipped as a part and a sample.
        An actor kept from an earlier run (``ray_actors``) starts afresh: new queues, new loop.
        """
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("this load worker is still running an earlier run")
        self._in, self._out = queue.Queue(), queue.Queue()
        self._thread = threading.Thread(target=self._main, args=(init_blob, sketch), daemon=True,
                                        name=f"goodput-load-worker-{k + 1}")
        self._thread.start()

    def finish(self, timeout_s: float) -> bool:
        """Stop the loop (its connections closed) and wait for it: True when the actor is idle."""
        if self._thread is None:
            return True
        self._in.put(("stop",))
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _main(self, init_blob: bytes, sketch: Optional[SketchPlan]) -> None:
        try:
            init = pickle.loads(init_blob)
            sketcher = None if sketch is None else Sketcher(sketch, init.spec, init.tokenizer)
            run(serve(init, _Inbox(self._in), _Outbox(self._out, sketcher)))  # type: ignore[arg-type]
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

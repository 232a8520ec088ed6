"""The default pool: one worker on the coordinator's own event loop.

Messages travel through two queues; the worker opens its own client unless one is given
(``coordinator.drive``). An exception in the worker is raised as itself, not as a
``WorkerError``: in one process there is no other worker to stop and nothing lost in transit.
"""

from __future__ import annotations

import asyncio
from typing import NoReturn, Optional

from pytest_goodput.load.sending.loops import Sender
from pytest_goodput.load.pools import WorkerError
from pytest_goodput.load.worker import Init, Message, Worker, serve
from pytest_goodput.measure.records.exchange import RawExchange


class InProcessPool:
    """One worker, a task of the running loop."""

    n = 1
    go_delay_s = 0.0

    def __init__(self, client: Optional[Sender] = None, keep_wire: bool = False) -> None:
        self.client, self.keep_wire = client, keep_wire
        self._in: asyncio.Queue[Message] = asyncio.Queue()
        self._out: asyncio.Queue[Message] = asyncio.Queue()
        self._task: Optional[asyncio.Task[None]] = None

    async def start(self, inits: list[Init]) -> None:
        self._task = asyncio.get_running_loop().create_task(self._main(inits[0]))

    async def _main(self, init: Init) -> None:
        emit = self._out.put_nowait
        try:
            if self.client is None:
                await serve(init, self._in.get, emit, self.keep_wire)
            else:
                emit(("ready", 0))
                await Worker(init, self.client, emit).serve(self._in.get)
        except Exception as exc:  # noqa: BLE001 - raised again by poll, as itself
            emit(("raised", exc))

    def send(self, k: int, msg: Message) -> None:
        self._in.put_nowait(msg)

    async def poll(self, timeout_s: float) -> list[tuple[int, Message]]:
        try:
            msgs = [await asyncio.wait_for(self._out.get(), timeout_s)]
        except asyncio.TimeoutError:
            return []
        while not self._out.empty():
            msgs.append(self._out.get_nowait())
        for msg in msgs:
            if msg[0] == "raised":
                raise msg[1]
        return [(0, msg) for msg in msgs]

    def clock_offset(self, k: int) -> float:
        return 0.0

    def fail(self, k: int, what: str, grace_s: float = 0.0) -> NoReturn:
        if self._task is not None:
            self._task.cancel()
        raise WorkerError(f"load generator worker 1 of 1 (in this process) {what}")

    def notes(self) -> list[str]:
        return []

    def partial(self) -> list[RawExchange]:
        """What the worker had finished when its phase was cancelled (it says so on the way out)."""
        kept: list[RawExchange] = []
        while not self._out.empty():
            msg = self._out.get_nowait()
            if msg[0] == "partial" or msg[0] == "done" and isinstance(msg[1], list):
                kept += msg[1]  # a phase done but not yet collected is kept too
        return kept

    async def close(self, ok: bool) -> None:
        task, self._task = self._task, None
        if task is None or task.done():
            return
        if ok:
            self._in.put_nowait(("stop",))
        else:
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if not ok and not task.cancelled():
                raise

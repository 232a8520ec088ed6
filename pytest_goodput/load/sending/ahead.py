"""The closed loop's bodies, built ahead of their sends, in the loop's idle moments.

A closed loop's next request is sent the moment a response ends, so encoding its body then
(``json.dumps`` of a long prompt: 1.3 ms for 120k tokens on a quiet core, several under load)
puts that work on the loop exactly when other streams' chunks are due. Which request comes
next is known (the user takes the next index its worker owns) and its body depends only on
its payload, not on when it is sent: so bodies are built ahead, in index order, by a task
that works in steps of at most ``STEP_S`` (a prompt escaped in slices, ``client/body.py``)
and yields between them. At most ``ahead`` bodies (twice the users, at least 8) and
``AHEAD_BYTES`` wait built; the first are built before the phase's clock starts.

Multi-turn conversations are not built ahead: a turn's body holds the previous turn's answer,
which exists only when that turn ended (``conversation.py`` encodes it then).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Iterator, Optional

from pytest_goodput.load.sending.bodies import AHEAD_BYTES, STEP_S
from pytest_goodput.load.client.body import json_chars
from pytest_goodput.load.client.event_loop import cancel
from pytest_goodput.load.plan import Supply
from pytest_goodput.measure.records.exchange import RequestPlan


class AheadBodies:
    """The indices a closed loop will send, in order, and their bodies built ahead.

    ``indices``: the increasing indices the loop owns; ``limit``: the first index it will
    never send (``first + count``; None: as many as the supply holds). The loop takes its next
    index from :meth:`next_index` and the body with :meth:`take`.
    """

    def __init__(self, indices: Iterator[int], supply: Supply, client: Any, users: int,
                 limit: Optional[int] = None) -> None:
        self.indices, self.supply, self.limit = indices, supply, limit
        self.frame = getattr(client, "body_frame", None)
        self.ahead = max(8, 2 * users)
        self.queue: list[int] = []  # peeked indices, in order, from ``head`` on (a list: O(1) indexing)
        self.head = 0
        self.bodies: dict[int, bytes] = {}
        self.held_bytes = 0
        self.built = self.taken = self.late = 0
        self.peak_bytes = 0
        self.last_built = -1  # indices increase: every index up to this one was built (or skipped)
        self.handed = -1  # the last index the loop took
        self._room = asyncio.Event()
        self._task: Optional[asyncio.Task[None]] = None

    def _peek(self, k: int) -> Optional[int]:
        """The ``k``-th index still to be sent (0: the next), or None past the end."""
        while len(self.queue) - self.head <= k:
            i = next(self.indices, None)
            if i is None:
                return None
            self.queue.append(i)
        return self.queue[self.head + k]

    def next_index(self) -> Optional[int]:
        """The next index to send (None: none left)."""
        i = self._peek(0)
        if i is None:
            return None
        self.head += 1
        if self.head >= 4096 and self.head * 2 >= len(self.queue):
            del self.queue[:self.head]
            self.head = 0
        self.handed = i
        return i

    def take(self, plan: RequestPlan) -> None:
        """Give ``plan`` its body if it was built (else the client builds it when sending)."""
        body = self.bodies.pop(plan.index, None)
        self.taken += 1
        self._room.set()  # room in the window, or (a duration-bound run) a supply grown since
        if body is None:
            self.late += self.frame is not None
            return
        self.held_bytes -= len(body)
        plan.body = body

    def _buildable(self, i: Optional[int]) -> bool:
        return (i is not None and self.frame is not None and (self.limit is None or i < self.limit)
                and i < len(self.supply.items) and self.supply.items[i] is not None)

    def _steps(self, i: int) -> Iterator[None]:
        """Build index ``i``'s body one slice per step (skipped when it is not a frame)."""
        plan = self.supply.plan(i, 0.0, False)
        frame = self.frame(plan) if self.frame is not None else None
        if frame is not None:
            out = [frame[0]]
            for chunk in json_chars((plan.prompt,)):
                out.append(chunk)
                yield
            out.append(frame[1])
            if i > self.handed:  # else its request was sent meanwhile, with a body of its own
                body = b"".join(out)
                self.bodies[i] = body
                self.held_bytes += len(body)
                self.peak_bytes = max(self.peak_bytes, self.held_bytes)
        self.built += 1

    def _target(self) -> Optional[int]:
        """The next index to build, or None while the window is full or nothing is left.

        The built bodies waiting are the first indices of the queue (built and taken in
        order), so the next to build sits right after them: no scan of the window."""
        if len(self.bodies) >= self.ahead or (self.bodies and self.held_bytes >= AHEAD_BYTES):
            return None
        k = len(self.bodies)
        while True:
            i = self._peek(k)
            if not self._buildable(i):
                return None
            assert i is not None
            if i > self.last_built:
                return i
            k += 1

    def prefill(self) -> None:
        """Build the first bodies now (before the phase's clock starts)."""
        while (i := self._target()) is not None:
            for _ in self._steps(i):
                pass
            self.last_built = i

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._fill())

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None

    async def _fill(self) -> None:
        clock = time.perf_counter
        while True:
            i = self._target()
            if i is None:
                if self._peek(0) is None:
                    return
                self._room.clear()
                await self._room.wait()
                continue
            until = clock() + STEP_S
            for _ in self._steps(i):
                if clock() >= until:
                    await asyncio.sleep(0)
                    until = clock() + STEP_S
            self.last_built = i
            await asyncio.sleep(0)


__all__ = ["AheadBodies"]

"""At most :data:`WRITES_PER_TURN` requests written per event-loop turn: a burst never starves
the reads.

A thousand closed-loop users start together, or wake together when the client learns the
server's keep-alive: each write costs tens of microseconds (most of it the kernel handing the
bytes to the server over loopback), so all of them in one loop turn stall the loop for tens
of milliseconds, and every read that arrives meanwhile is stamped that much late (measured:
a 71-98 ms stall at 1,024 users, the run invalid). Past the limit a request waits for the
next turn, first come first served; between turns the loop takes in what arrived. The
burst takes as long as before (its per-request cost times its size, shown as send lag),
but the reads are stamped when they arrive.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Optional

#: Requests written per loop turn before the next waits a turn (~1-2 ms of writes).
WRITES_PER_TURN = 32


class WriteTurns:
    """The client's writes per loop turn, and the requests waiting for a later turn."""

    def __init__(self, per_turn: int = WRITES_PER_TURN) -> None:
        self.per_turn = per_turn
        self._written = 0  # writes let through since the last turn began
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def admit(self) -> Optional["asyncio.Future[None]"]:
        """None: write now; else a future to await first (done at a later turn)."""
        if self._written < self.per_turn and not self._waiting:
            self._written += 1
            if self._written == 1:
                self._schedule()
            return None
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        if self._written == 0:
            self._schedule()
        return fut

    def _schedule(self) -> None:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        loop.call_soon(self._turn)

    def _turn(self) -> None:
        """A new turn: let the next waiting requests through (their writes run next turn)."""
        woken = 0
        waiting = self._waiting
        while waiting and woken < self.per_turn:
            fut = waiting.popleft()
            if not fut.done():  # a cancelled request gives up its place
                fut.set_result(None)
                woken += 1
        self._written = woken
        if woken:
            self._schedule()


__all__ = ["WRITES_PER_TURN", "WriteTurns"]

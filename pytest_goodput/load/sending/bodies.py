"""The open loop's body window: request bodies built ahead of their deadlines, in the loop's
idle moments, never more than a bounded window of them at once.

Encoding a request at its deadline puts that work on the schedule: a trace's burst of 16
rows of up to 120k tokens took 10 ms of JSON before the last of them could be written
(``docs/archive/decisions-log.md``, 2026-12-02). So the window builds each body before its request is
started: the first ones before the clock starts (:meth:`BodyWindow.prefill`), the rest by a
task that works in steps of at most ``STEP_S`` and only outside each request's quiet zone
(from ``GUARD_S`` before the loop starts it, ``lead_s`` ahead of its deadline, to ``AFTER_S``
after the deadline, while its bytes are written). At most ``AHEAD`` bodies and
``AHEAD_BYTES`` are built and not yet started, so a replay of a large trace never holds
more than that ahead of its schedule; a started request's body belongs to it until the
client has sent it. A body the window has not finished when its request starts is finished
then (``late``): still ahead of the deadline by ``lead_s``.

A trace replay's prompts are built here too (``TracePrompts``), piece by piece into the body,
so a prompt exists only as its request's body. With a client that builds its own bodies
(no ``body_frame``: the tests' fakes), the window builds only the prompts a source provides.
Not a thread: a builder thread holds the GIL through each C call and the loop's wake-ups
wait for it (loop-lag max 1.4 ms alone, 13-16 ms beside a thread encoding bodies).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Iterator, Optional, Sequence

from pytest_goodput.load.client.event_loop import cancel
from pytest_goodput.load.client.body import json_chars
from pytest_goodput.load.requests.trace_replay import TracePrompts
from pytest_goodput.measure.records.exchange import RequestPlan

#: Bodies built and not yet started, at most...
AHEAD = 4096
#: ...and at most this many bytes of them (at least one body is always built): a replay
#: whose bodies fit is built whole before its clock starts, a larger one keeps this much ahead.
AHEAD_BYTES = 64 << 20
#: Longest the window builds before it yields to the loop.
STEP_S = 0.0002
#: No step starts this long before a request is started, nor before ``AFTER_S`` after its deadline.
GUARD_S = 0.001
AFTER_S = 0.001


class BodyWindow:
    """Builds the bodies (or prompts) of ``plans``, in deadline order, ahead of the open loop.

    ``plans``' ``scheduled_at`` are offsets from the run's start until :meth:`start` gives it;
    ``lead_s``: how long before its deadline the loop starts a request (:meth:`take`).
    """

    def __init__(self, plans: Sequence[RequestPlan], client: Any, prompts: Optional[TracePrompts] = None,
                 lead_s: float = 0.0) -> None:
        self.plans, self.prompts, self.lead_s = plans, prompts, lead_s
        self.offsets = [p.scheduled_at for p in plans]
        self.frame = getattr(client, "body_frame", None)
        self.build_body = getattr(client, "build_body", None)
        self.built = 0  # plans[:built] have their body
        self.taken = 0  # plans[:taken] were started by the loop
        self.held_bytes = 0  # of the built bodies not yet started
        self.peak_held = 0  # most built bodies not yet started at once
        self.peak_bytes = 0
        self.late = 0  # bodies finished only when their request started
        self._sizes: list[int] = []
        self._current: Optional[Iterator[None]] = None
        self._room = asyncio.Event()
        self._task: Optional[asyncio.Task[None]] = None
        self._t0 = 0.0

    @property
    def needed(self) -> bool:
        """Whether there is anything to build (a client that takes bodies, or prompts to make)."""
        return self.frame is not None or self.prompts is not None

    def _full(self) -> bool:
        ahead = self.built - self.taken
        return ahead >= AHEAD or (ahead > 0 and self.held_bytes >= AHEAD_BYTES)

    def _steps(self, plan: RequestPlan) -> Iterator[None]:
        """Build ``plan``'s body (or prompt) one piece per step."""
        pieces = self.prompts.pieces(plan.index) if self.prompts is not None else iter((plan.prompt,))
        frame = self.frame(plan) if self.frame is not None else None
        if frame is None:  # a prompt only, or a body that is not a frame around it
            parts = []
            for piece in pieces:
                parts.append(piece)
                yield
            if self.prompts is not None:
                plan.prompt = "".join(parts)
            if self.build_body is not None:
                plan.body = self.build_body(plan)
            return
        out = [frame[0]]
        for chunk in json_chars(pieces):
            out.append(chunk)
            yield
        out.append(frame[1])
        plan.body = b"".join(out)

    def _advance(self, until: float) -> None:
        """Build ``plans[built]`` until it is done or the clock passes ``until``."""
        plan = self.plans[self.built]
        if self._current is None:
            self._current = self._steps(plan)
        clock = time.perf_counter
        for _ in self._current:
            if clock() >= until:
                return
        self._current = None
        size = len(plan.body) if plan.body is not None else len(plan.prompt)
        self._sizes.append(size)
        self.built += 1
        self.held_bytes += size
        self.peak_held = max(self.peak_held, self.built - self.taken)
        self.peak_bytes = max(self.peak_bytes, self.held_bytes)

    def prefill(self) -> None:
        """Build the first bodies of the window now (before the run's clock starts)."""
        while self.needed and self.built < len(self.plans) and not self._full():
            self._advance(math.inf)

    def take(self, plan: RequestPlan) -> None:
        """The loop starts ``plan`` (the next in order): its body is finished if need be."""
        if not self.needed:
            return
        assert plan is self.plans[self.taken], "plans are started in deadline order"
        if self.built == self.taken:
            self.late += 1
            self._advance(math.inf)
        self.held_bytes -= self._sizes[self.taken]
        self.taken += 1
        self._room.set()

    def start(self, t0: float) -> None:
        """The run started at ``t0``: keep building ahead of it in the loop's idle moments."""
        self._t0 = t0
        if self.needed and self.built < len(self.plans):
            self._task = asyncio.get_running_loop().create_task(self._fill())

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None

    async def _fill(self) -> None:
        clock, offsets, t0 = time.perf_counter, self.offsets, self._t0
        nxt = 0  # the first request whose quiet zone may still be ahead
        while self.built < len(self.plans):
            if self._full():
                self._room.clear()
                await self._room.wait()
                continue
            now = clock()
            while nxt < len(offsets) and t0 + offsets[nxt] + AFTER_S <= now:
                nxt += 1
            until = now + STEP_S
            if nxt < len(offsets):
                quiet = t0 + offsets[nxt] - self.lead_s - GUARD_S
                if now >= quiet:
                    await asyncio.sleep(t0 + offsets[nxt] + AFTER_S - now)
                    continue
                until = min(until, quiet)
            self._advance(until)
            await asyncio.sleep(0)


__all__ = ["AHEAD", "AHEAD_BYTES", "BodyWindow"]

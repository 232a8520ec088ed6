"""The event loop a run measures on: uvloop when available, Ctrl-C that unwinds a run, and
the precise sleep to an absolute deadline every timed send uses.

Kept apart from the client so that the loop's lifetime (signal handling, cancelling what a
run left pending) is one concept.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from typing import Any, Coroutine, TypeVar

try:  # a dependency on POSIX; asyncio's own loop elsewhere
    import uvloop
except ImportError:  # pragma: no cover - Windows
    uvloop = None

_T = TypeVar("_T")

#: Busy-wait (yielding) at most this long before a deadline: loop timers wake up to ~1 ms late.
SPIN_S = 0.001


async def sleep_until(deadline: float, spin_s: float = SPIN_S) -> None:
    """Sleep to the absolute ``perf_counter`` deadline: a loop timer, then a yielding spin."""
    clock = time.perf_counter
    delay = deadline - clock() - spin_s
    if delay > 0:
        await asyncio.sleep(delay)
    while clock() < deadline:
        await asyncio.sleep(0)


async def cancel(task: "asyncio.Task[Any] | None") -> None:
    """Cancel a background task of the run's loop and wait until it has ended."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A uvloop loop when uvloop is importable (3-4x less receive lag), else asyncio's."""
    return asyncio.new_event_loop() if uvloop is None else uvloop.new_event_loop()


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run that kept what it had measured: ``partial``. Each layer that
    catches it raises it again with its own view of the run so far (the coordinator's
    ``RunOutput``, the scenario's ``RunResult``, the runner's runs, then a ``Session``),
    so whoever reports it can write the evidence (``docs/decisions.md``, "An interrupted run
    leaves its evidence"). A ``KeyboardInterrupt`` still: whoever does not look for it stops."""

    def __init__(self, partial: Any) -> None:
        super().__init__()
        self.partial = partial

    def again(self, partial: Any) -> "RunInterrupted":
        """The same interruption, carrying ``partial`` instead."""
        return RunInterrupted(partial)


def run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion on a fresh :func:`new_event_loop` loop, then close it.

    Ctrl-C cancels the run's task and is raised as ``KeyboardInterrupt`` once the task has
    unwound (as ``asyncio.run`` does): raised inside a transport callback instead, the loop
    would log it as a transport error and the run would end as failed requests. A task that
    handles its cancellation by returning what it had is raised as :class:`RunInterrupted`
    with that value.
    """
    loop = new_event_loop()
    interrupted = False
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    catch_sigint = previous is signal.default_int_handler
    try:
        asyncio.set_event_loop(loop)
        task = loop.create_task(coro)

        def on_sigint() -> None:
            nonlocal interrupted
            interrupted = True
            task.cancel()

        if catch_sigint:
            try:
                loop.add_signal_handler(signal.SIGINT, on_sigint)
            except (NotImplementedError, RuntimeError, ValueError):
                catch_sigint = False
        try:
            result = loop.run_until_complete(task)
        except asyncio.CancelledError:
            if interrupted:
                raise KeyboardInterrupt() from None
            raise
        if interrupted:
            raise RunInterrupted(result)
        return result
    finally:
        if catch_sigint:
            loop.remove_signal_handler(signal.SIGINT)
            # uvloop leaves its own (closed loop's) handler behind: the next run in this
            # process would not see Ctrl-C at all, so Python's handler is put back.
            signal.signal(signal.SIGINT, previous)
        try:
            # After Ctrl-C the run's tasks are still pending: cancel them and let their
            # cleanup (closing connections, stopping monitors) run, as asyncio.run does.
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for leftover in pending:
                leftover.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()

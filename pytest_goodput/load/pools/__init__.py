"""The pools a plan runs over: this process (the default), worker processes, Ray actors.

What the coordinator asks of each (:class:`Pool`): start, send, poll, clock offset, close. A
pool only moves messages (``worker.py`` lists them) to and from its workers and knows how
they fail; the phase loop, the silence and timeout rules and the merging of results are the
coordinator's. Each pool is imported only by the coordinator and none imports another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:  # the worker module loads the streaming client; collection must not
    from pytest_goodput.load.worker import Init, Message
    from pytest_goodput.measure.records.exchange import RawExchange

#: A worker must start, open its client and pre-open connections within this many seconds
#: (and a blocking call on a worker answer within as long).
START_TIMEOUT_S = 60.0
#: Characters of a failed worker's traceback or stderr shown in the error.
STDERR_TAIL = 2000


class WorkerError(RuntimeError):
    """A load worker crashed, hung or failed; the message names it (and its stderr tail)."""


class RunStopped(WorkerError):
    """A worker crashed, hung or ran out of time mid-run and the run kept what it had finished:
    ``partial``, re-raised by each layer with its own view of the run so far, as Ctrl-C's
    ``RunInterrupted`` is (``load/client/event_loop.py``)."""

    def __init__(self, message: str, partial: Any) -> None:
        super().__init__(message)
        self.partial = partial

    def again(self, partial: Any) -> "RunStopped":
        """The same stop, carrying ``partial`` instead."""
        return RunStopped(str(self), partial)


class Pool(Protocol):
    """``n`` workers; messages to worker ``k`` and from any worker, in order per worker."""

    n: int
    #: Seconds between the last worker arming a phase and the phase's common start t0.
    go_delay_s: float

    async def start(self, inits: list[Init]) -> None:
        """Start worker ``k`` with ``inits[k]``; each answers ``ready`` (or an error)."""

    def send(self, k: int, msg: Message) -> None: ...

    async def poll(self, timeout_s: float) -> list[tuple[int, Message]]:
        """What the workers sent, waiting up to about ``timeout_s`` for the first message;
        a ``done`` share arrives with its timestamps on the coordinator's clock."""

    def clock_offset(self, k: int) -> float:
        """Seconds to subtract from a coordinator's ``perf_counter`` time for worker ``k``'s clock."""

    def fail(self, k: int, what: str, grace_s: float = 0.0) -> NoReturn:
        """Stop every worker and raise :class:`WorkerError` for worker ``k`` (which may get
        ``grace_s`` to exit by itself first, so that its exit code and stderr are told)."""

    def notes(self) -> list[str]:
        """Where the workers ran, in words, for the self-check's notes."""

    async def close(self, ok: bool) -> None:
        """Stop the workers (``ok``: the run ended well; a pool may keep them for the next)."""

    def partial(self) -> list[RawExchange]:
        """After a run was interrupted and the pool closed: the exchanges its workers had
        finished in the phase under way (empty where they cannot be reached any more)."""

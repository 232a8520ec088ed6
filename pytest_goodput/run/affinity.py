"""Keeping the load generator on its own CPUs (and, where permitted, ahead of neighbours).

The client's timestamps are only as good as its promptness. :class:`ClientPlacement` moves
every thread of this process to the client's CPU set for as long as the engine runs (new
threads and worker processes inherit it) and raises the threads' scheduling priority, and
the session's autogroup's (``engines.autogroup``), when the system allows it;
:meth:`ClientPlacement.restore` puts all of it back.

The raise is real-time round-robin scheduling (``SCHED_RR`` at the lowest real-time
priority) where permitted: a waking client thread then preempts any ordinary thread on its
CPU at once, where a nice boost only shortens the wait (``docs/performance.md`` has the
event-loop and send lag of both beside CPU-bound neighbours). The client sleeps between
sends and reads, and the kernel's real-time throttling keeps at least 5 % of each second
for ordinary threads, so neighbours are not locked out. ``SCHED_RESET_ON_FORK`` keeps child
processes (an engine relaunched between sessions, worker processes) from inheriting it.
Where real-time scheduling is refused, the nice boost applies alone.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

from pytest_goodput.engines.autogroup import autogroup_nice, set_autogroup_nice
from pytest_goodput.schema.cpus import PRIORITY_BOOST, CpuSetError, format_cpus, plan_cpus

__all__ = ["PRIORITY_BOOST", "ClientPlacement", "available_cpus", "plan"]

#: The real-time priority asked for (1, the lowest: above every ordinary thread, below the
#: kernel's own real-time threads).
REALTIME_PRIORITY = 1


def available_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on."""
    if not hasattr(os, "sched_getaffinity"):
        raise CpuSetError("CPU pinning needs Linux (os.sched_setaffinity)")
    return tuple(sorted(os.sched_getaffinity(0)))


def plan(engine: Optional[str], client: Optional[str], *, client_count: int = 1,
         ) -> tuple[Optional[tuple[int, ...]], Optional[tuple[int, ...]]]:
    """The engine's and the client's CPU sets for this machine (see ``schema.cpus.plan_cpus``)."""
    if engine is None and client is None:
        return None, None
    return plan_cpus(engine, client, available_cpus(), client_count=client_count)


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


class ClientPlacement:
    """This process's threads on ``cpus``; ``boosted`` says whether the priority rose too."""

    def __init__(self, cpus: Sequence[int]) -> None:
        self.cpus = tuple(cpus)
        self._affinity: dict[int, set[int]] = {}
        self._nice: dict[int, int] = {}
        self._policy: dict[int, tuple[int, int]] = {}
        for tid in _threads():
            try:
                self._affinity[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, self.cpus)
            except OSError:  # a thread that ended meanwhile
                continue
            try:
                now = os.getpriority(os.PRIO_PROCESS, tid)
                os.setpriority(os.PRIO_PROCESS, tid, now - PRIORITY_BOOST)
                self._nice[tid] = now
            except OSError:  # not permitted (no CAP_SYS_NICE): pinning alone still helps
                pass
            self._realtime(tid)
        # where CPU is shared by session first, a nice value weighs only inside the session
        self._group: Optional[int] = autogroup_nice()
        if self._group is not None and not (self._nice and set_autogroup_nice(self._group - PRIORITY_BOOST)):
            self._group = None
        self.boosted = bool(self._nice)
        self.realtime = bool(self._policy)

    def _realtime(self, tid: int) -> None:
        """SCHED_RR for one thread, remembering its policy; refused: left as it was."""
        rr, reset = getattr(os, "SCHED_RR", None), getattr(os, "SCHED_RESET_ON_FORK", 0)
        if rr is None or not reset:
            return
        try:
            policy, param = os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority
            if policy & ~reset != os.SCHED_OTHER:  # already real-time (or batch/idle): leave it
                return
            os.sched_setscheduler(tid, rr | reset, os.sched_param(REALTIME_PRIORITY))
            self._policy[tid] = (policy, param)
        except OSError:  # not permitted, or the kernel keeps no real-time budget for this group
            pass

    def describe(self) -> str:
        return f"client on CPUs {format_cpus(self.cpus)}" + (
            f", real-time priority (SCHED_RR {REALTIME_PRIORITY})" if self.realtime
            else f", priority raised by {PRIORITY_BOOST}" if self.boosted else "")

    def restore(self) -> None:
        """Give every thread its affinity and priority back."""
        for tid, cpus in self._affinity.items():
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:
                pass
        for tid, (policy, param) in self._policy.items():
            try:
                os.sched_setscheduler(tid, policy, os.sched_param(param))
            except OSError:
                pass
        for tid, nice in self._nice.items():
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:
                pass
        if self._group is not None:
            set_autogroup_nice(self._group)
            self._group = None
        self._affinity.clear()
        self._nice.clear()
        self._policy.clear()

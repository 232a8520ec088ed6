"""``python -m pytest_goodput.engines.pinned CPUS -- CMD...``: run CMD on the CPU list CPUS.

The affinity is set before CMD is executed, so every thread and child process the engine
ever starts inherits it (setting it from outside after the start would miss threads the
engine already made). Where the system permits it (CAP_SYS_NICE), the scheduling priority
rises by ``PRIORITY_BOOST`` too, the process's and its session's autogroup's (``autogroup``),
as the client's does: a neighbour that lands on the
engine's CPUs then takes a tenth of them instead of half, so the engine's speed does not
swing from run to run with it. Used by :func:`pytest_goodput.engines.launch.launch` with ``cpus=``.
"""

from __future__ import annotations

import os
import sys

from pytest_goodput.engines.autogroup import autogroup_nice, set_autogroup_nice
from pytest_goodput.schema.cpus import PRIORITY_BOOST, CpuSetError, parse_cpus


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m pytest_goodput.engines.pinned CPUS -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    try:
        cpus = parse_cpus(argv[0])
        os.sched_setaffinity(0, cpus)
    except (CpuSetError, OSError) as exc:
        print(f"pytest-goodput: cannot run the engine on CPUs {argv[0]}: {exc}", file=sys.stderr)
        return 2
    try:
        os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) - PRIORITY_BOOST)
    except OSError:  # not permitted (no CAP_SYS_NICE): pinning alone still helps
        pass
    group = autogroup_nice()
    if group is not None and os.getsid(0) == os.getpid():  # leads its own session (launch starts
        set_autogroup_nice(group - PRIORITY_BOOST)         # one): never a caller's shell's group
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        print(f"pytest-goodput: cannot start {argv[2]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

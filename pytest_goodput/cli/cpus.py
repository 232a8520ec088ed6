"""``--engine-cpus`` / ``--client-cpus`` of ``run`` and ``ab``: engine and client apart.

On a small machine a CPU engine started next to the load generator takes the client's core
while tokens stream, and the client's self-check then (rightly) refuses the run. The flags
are the plugin's ``--goodput-engine-cpus`` / ``--goodput-client-cpus`` on the command line,
planned by the same code (``run.affinity.plan``) and applied the same way: the engine through
the launcher's pinning wrapper, the client by :class:`~pytest_goodput.run.affinity.ClientPlacement`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional

from pytest_goodput.run.affinity import ClientPlacement, plan
from pytest_goodput.schema.cpus import CpuSetError

Cpus = Optional[tuple[int, ...]]


def add_cpu_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine-cpus", metavar="LIST",
                   help="CPUs an engine started here (a command or the simulator) runs on, with "
                        "everything it starts: a list such as 0-3,6, or auto")
    p.add_argument("--client-cpus", metavar="LIST",
                   help="CPUs the load generator runs on while the engine runs (its priority "
                        "raised where permitted): a list, or auto; auto on either side gives the "
                        "client the last CPU and the engine the rest")


def cpu_plan(ns: argparse.Namespace, attached: list[str]) -> tuple[Cpus, Cpus]:
    """The engine's and the client's CPU sets from the flags (None: not pinned); a bad
    setting raises :class:`CpuSetError` (a usage error, exit 2) naming the flag.

    ``attached`` names the URL flags in use: an engine attached by URL was started
    elsewhere and cannot be pinned from here, so an explicit ``--engine-cpus`` is refused
    with it (``auto`` then places the client alone).
    """
    engine, client = ns.engine_cpus, ns.client_cpus
    if engine is None and client is None:
        return None, None
    if attached and engine is not None and engine.strip().lower() != "auto":
        raise CpuSetError(f"--engine-cpus: applies to engines this command starts, not to one "
                       f"attached by {' / '.join(attached)}; pin that engine where it is "
                       "started, or set only --client-cpus")
    try:
        engine_set, client_set = plan(engine, client, client_count=getattr(ns, "workers", None) or 1)
    except CpuSetError as exc:
        given = " / ".join(f for f, v in (("--engine-cpus", engine), ("--client-cpus", client)) if v)
        raise CpuSetError(f"{given}: {exc}") from None
    return (None if attached else engine_set), client_set


@contextmanager
def placed_client(cpus: Cpus) -> Iterator[None]:
    """This process's threads (the load generator's) on ``cpus`` for the block; None: as is."""
    if not cpus:
        yield
        return
    placement = ClientPlacement(cpus)
    print(placement.describe(), file=sys.stderr)
    try:
        yield
    finally:
        placement.restore()

"""CPU sets for keeping a launched engine and the load generator on different cores.

On a small shared machine a CPU engine launched next to its client takes the client's CPU
when it needs it most, and the client's self-check then (rightly) refuses the run. Giving
each its own cores removes the contest. Pure: parsing and the automatic split only; the
pinning itself happens where processes are started (``engines.launch``, ``run.affinity``).
"""

from __future__ import annotations

from typing import Iterable, Optional

AUTO = "auto"
#: How much a pinned engine and the placed client ask to be favoured (a nice decrement; needs
#: CAP_SYS_NICE). 10 (about nine tenths of a shared CPU when runnable) keeps the client's
#: receive lag P99 under 1 ms beside a CPU-bound neighbour; 5 left it at 4 ms
#: (docs/performance.md).
PRIORITY_BOOST = 10
#: The forms a CPU setting accepts, for error messages.
ALLOWED = "a CPU list such as 0, 0-3 or 0-3,6 (Linux CPU numbers), or auto"


class CpuSetError(ValueError):
    """A CPU setting is malformed or names CPUs this process may not use."""


def parse_cpus(text: str) -> tuple[int, ...]:
    """``"0-2,5"`` -> ``(0, 1, 2, 5)``; raises :class:`CpuSetError` naming the allowed forms."""
    cpus: set[int] = set()
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise CpuSetError(f"{text!r} names no CPU; expected {ALLOWED}")
    for part in parts:
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise CpuSetError(f"{part!r} is not a CPU number or range; expected {ALLOWED}") from None
        if first < 0 or last < first:
            raise CpuSetError(f"{part!r} is not an ascending range of CPU numbers; expected {ALLOWED}")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_cpus(cpus: Iterable[int]) -> str:
    """``(0, 1, 2, 5)`` -> ``"0-2,5"``: how CPU sets are shown and recorded."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def plan_cpus(engine: Optional[str], client: Optional[str], available: Iterable[int], *,
              client_count: int = 1) -> tuple[Optional[tuple[int, ...]], Optional[tuple[int, ...]]]:
    """The engine's and the client's CPU sets from the two settings (None: not pinned).

    ``auto`` (on either) splits the CPUs this process may use: the client keeps the last
    ``client_count`` (at most half of them), the engine gets the rest. An explicit list wins
    over ``auto`` for its side, and the other side of an explicit list set against ``auto``
    gets what is left. Lists must name usable CPUs and must not overlap.
    """
    usable = tuple(sorted(set(available)))
    if engine is None and client is None:
        return None, None
    explicit = {side: parse_cpus(v) for side, v in (("engine", engine), ("client", client))
                if v is not None and v.strip().lower() != AUTO}
    for side, cpus in explicit.items():
        missing = sorted(set(cpus) - set(usable))
        if missing:
            raise CpuSetError(f"{side} CPUs {format_cpus(cpus)}: CPU {format_cpus(missing)} is not "
                              f"available to this process (it may use {format_cpus(usable)})")
    if "engine" in explicit and "client" in explicit:
        both = set(explicit["engine"]) & set(explicit["client"])
        if both:
            raise CpuSetError(f"engine CPUs {format_cpus(explicit['engine'])} and client CPUs "
                              f"{format_cpus(explicit['client'])} overlap on {format_cpus(both)}: "
                              "the point is to keep them apart")
        return explicit["engine"], explicit["client"]
    auto_side = {side for side, v in (("engine", engine), ("client", client))
                 if v is not None and v.strip().lower() == AUTO}
    if not auto_side:  # one side pinned explicitly, the other left alone
        return explicit.get("engine"), explicit.get("client")
    if "engine" in explicit or "client" in explicit:
        side, cpus = next(iter(explicit.items()))
        rest = tuple(c for c in usable if c not in cpus)
        if not rest:
            raise CpuSetError(f"{side} CPUs {format_cpus(cpus)} leave none of {format_cpus(usable)} "
                              "for the other side's auto")
        return (cpus, rest) if side == "engine" else (rest, cpus)
    if len(usable) < 2:
        raise CpuSetError(f"auto needs at least 2 CPUs to split; this process may use "
                          f"{format_cpus(usable) or 'none'}")
    n = max(1, min(client_count, len(usable) // 2))
    return usable[:-n], usable[-n:]

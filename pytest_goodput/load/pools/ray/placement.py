"""Which cluster node each load worker runs on: spread, in proportion to cores. Pure.

Every node takes one worker before any takes a second (the largest nodes first); after that
each worker goes to the node with the fewest workers per core once it is added (ties: the
node listed first), so a node with twice the cores ends up with about twice the workers. A worker is one event
loop on one core: more workers than a node has cores is allowed (the self-check then
judges whether they kept up) but never the first choice.
"""

from __future__ import annotations

from typing import Sequence


class PlacementError(ValueError):
    """No node can take a worker."""


def place(n: int, nodes: Sequence[tuple[str, float]]) -> list[str]:
    """Node ids for workers ``0..n-1`` over ``nodes`` given as ``(node_id, cpus)``."""
    usable = [(nid, cpus) for nid, cpus in nodes if cpus > 0]
    if not usable:
        raise PlacementError("the Ray cluster has no alive node with CPUs to run a load worker on")
    load = [0] * len(usable)
    out: list[str] = []
    for _ in range(n):
        k = min(range(len(usable)), key=lambda i: (load[i] > 0, (load[i] + 1) / usable[i][1], i))
        load[k] += 1
        out.append(usable[k][0])
    return out

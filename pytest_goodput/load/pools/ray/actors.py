"""Load-worker actors kept between the Ray runs of one session, by node.

Creating an actor starts a Python process on its node that imports the client: the largest
part of what a Ray run costs before its window (``docs/performance.md``). A run that ends
well stops its workers' loops (their connections closed) and hands the idle actors back
here; the next run on the same node takes one instead of creating it. A run that fails kills
its actors, never returning them. Actors belong to one Ray session (a runtime started,
joined or found initialized): when the session changes, handles of the old one are dropped,
and :func:`forget` (called when the gate's session or CLI run ends) kills the idle ones.
"""

from __future__ import annotations

from typing import Any, Optional

_idle: dict[str, list[Any]] = {}
_session: Optional[str] = None
#: Actors created and actors reused since the process started (what the tests and bench read).
counts = {"created": 0, "reused": 0}


def _current(ray: Any) -> str:
    return ray.get_runtime_context().get_job_id()


def take(ray: Any, node: str) -> Optional[Any]:
    """An idle actor on ``node`` of the current Ray session, or None."""
    global _session
    session = _current(ray)
    if session != _session:  # a new runtime: the old session's actors died with it
        _idle.clear()
        _session = session
    actors = _idle.get(node)
    if not actors:
        return None
    counts["reused"] += 1
    return actors.pop()


def created() -> None:
    counts["created"] += 1


def give_back(ray: Any, node: str, actor: Any) -> None:
    """An actor whose loop has stopped cleanly, for the next run on ``node``."""
    global _session
    session = _current(ray)
    if session != _session:
        _idle.clear()
        _session = session
    _idle.setdefault(node, []).append(actor)


def forget(ray: Any = None) -> None:
    """Kill the idle actors (if their runtime is still up) and drop them."""
    actors = [a for pool in _idle.values() for a in pool]
    _idle.clear()
    if ray is None or not ray.is_initialized() or _session != _current(ray):
        return
    for a in actors:
        try:
            ray.kill(a, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass


def idle() -> int:
    """Idle actors kept."""
    return sum(len(v) for v in _idle.values())


__all__ = ["counts", "created", "forget", "give_back", "idle", "take"]

"""Sittings: which of a baseline's sessions were recorded together, and is the run new (pure).

Sessions recorded back to back share the day's machine state: the boot, the neighbours, the
clock and thermal state, the client's CPU. Their spread is the noise *within* a sitting. A
committed baseline is judged on other machines and other days, where the whole level moves
by what no back-to-back recording can show, so the verdict adds a between-sitting term
(``spread.DayTerm``) when the run being judged is not part of a baseline sitting.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional, Sequence

#: Sessions further apart than this, or on another client CPU, are different sittings.
SITTING_GAP_S = 3 * 3600.0


@dataclass(frozen=True)
class Sittings:
    """How a baseline's sessions fall into sittings, and whether the judged run is in one."""

    count: int  # distinct sittings among the baseline's sessions
    current_new: bool  # the judged run was not measured in any of them


def _time(stamp: Optional[str]) -> Optional[float]:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _same(a: tuple[Optional[float], Optional[str]], b: tuple[Optional[float], Optional[str]]) -> bool:
    """Whether two sessions share a sitting: both times known and close, and one client CPU."""
    if a[0] is None or b[0] is None or a[1] != b[1]:
        return False
    return abs(a[0] - b[0]) <= SITTING_GAP_S


def sittings(recorded_at: Sequence[Optional[str]], client_cpus: Sequence[Optional[str]],
             current_at: Optional[str], current_cpu: Optional[str]) -> Optional[Sittings]:
    """Group the baseline's sessions (oldest first) into sittings; None when the run's time
    or every session's is unknown (nothing to say about sittings: judged without the term).

    Sessions join the sitting of the session before them when close in time on one client
    CPU (a recording of five sessions spans minutes); the judged run is in a sitting when it
    is close to one of its sessions. A run's time is known to the gate, which stamps it; a
    run file read by ``compare`` carries none, so the CLI judges it as the gate judges a run
    in its baseline's sitting.
    """
    keys = _keys(recorded_at, client_cpus)
    count = _count(keys)
    if _time(current_at) is None or count is None:
        return None
    cur = (_time(current_at), current_cpu)
    return Sittings(count=count, current_new=not any(_same(k, cur) for k in keys))


def sitting_count(recorded_at: Sequence[Optional[str]], client_cpus: Sequence[Optional[str]]) -> Optional[int]:
    """How many sittings a baseline's sessions (oldest first) fall into; None when no
    session's time is known."""
    return _count(_keys(recorded_at, client_cpus))


def _keys(recorded_at: Sequence[Optional[str]], client_cpus: Sequence[Optional[str]]
          ) -> list[tuple[Optional[float], Optional[str]]]:
    cpus = list(client_cpus) + [None] * (len(recorded_at) - len(client_cpus))
    return [(_time(t), c) for t, c in zip(recorded_at, cpus)]


def _count(keys: list[tuple[Optional[float], Optional[str]]]) -> Optional[int]:
    """Sessions join the sitting of the session before them when close in time on one CPU."""
    if not any(k[0] is not None for k in keys):
        return None
    return max(1, sum(1 for i, key in enumerate(keys) if i == 0 or not _same(keys[i - 1], key)))

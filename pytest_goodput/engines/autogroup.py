"""The scheduler's autogroup: the priority of a whole session, where Linux shares CPU by session.

With autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) the kernel shares
CPU time between sessions first and weighs a process's nice value only against the
processes of its own session. A client or engine favoured by nice alone then still gets no
more than its session's share beside CPU-bound work started from other sessions (other CI
jobs, a neighbour's shell): measured on a 2-core machine at load 10, a pinned client at nice
−10 read 11–22 ms late (P99) in every run. So the boost goes to the session's autogroup
too (``/proc/self/autogroup``; lowering it needs CAP_SYS_NICE, as a negative nice does).
Without autogroup scheduling the file is absent and nothing changes.
"""

from __future__ import annotations

import re
from typing import Optional

AUTOGROUP = "/proc/self/autogroup"


def autogroup_nice() -> Optional[int]:
    """This session's autogroup nice value (None: no autogroup scheduling here)."""
    try:
        with open(AUTOGROUP) as f:
            m = re.search(r"nice\s+(-?\d+)", f.read())
    except OSError:
        return None
    return int(m.group(1)) if m else None


def set_autogroup_nice(nice: int) -> bool:
    """Set this session's autogroup nice value (clamped to -20..19); False when not permitted."""
    try:
        with open(AUTOGROUP, "w") as f:
            f.write(str(max(-20, min(19, nice))))
    except OSError:
        return False
    return True

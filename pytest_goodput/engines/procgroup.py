"""Tear down a whole process group, even when the process that started it dies first.

An engine forks workers (tokenizers, GPU workers, a llama.cpp slot pool), so killing the
main pid is not enough: the engine runs in its own session, and teardown signals the group
and waits for every member, not just the leader. Three layers make sure no engine outlives
the test run: an explicit close (:func:`kill_group`), an ``atexit`` sweep of whatever is
still open (:func:`track`), and a tiny watchdog process (:func:`start_watchdog`) that
reaps the group when its pipe from the parent closes because the parent was killed outright.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
import weakref
from typing import Optional, Protocol

# Runs in its own session; EOF on stdin without a "closed" byte means the parent is gone.
_WATCHDOG = r"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
pgid, grace = int(sys.argv[1]), float(sys.argv[2])
if sys.stdin.buffer.read():
    sys.exit(0)
deadline = time.monotonic() + grace
for sig in (signal.SIGTERM, 0, signal.SIGKILL):
    try:
        while sig == 0 and time.monotonic() < deadline:
            os.killpg(pgid, 0)
            time.sleep(0.05)
        os.killpg(pgid, sig)
    except ProcessLookupError:
        break
"""


class Closable(Protocol):
    """What the exit sweep needs of a tracked object."""

    def close(self, grace_s: Optional[float] = None) -> Optional[int]: ...


_LIVE: "weakref.WeakSet[Closable]" = weakref.WeakSet()


def track(obj: Closable) -> None:
    """Close ``obj`` at interpreter exit unless :func:`untrack` ran first (weakly held)."""
    _LIVE.add(obj)


def untrack(obj: Closable) -> None:
    """``obj`` was closed on purpose: the exit sweep can forget it."""
    _LIVE.discard(obj)


@atexit.register
def _close_all() -> None:
    for obj in list(_LIVE):
        obj.close(grace_s=5.0)


def group_alive(pgid: int) -> bool:
    """Does any process of the group still run? Zombies do not count: once the leader is
    gone its children are reaped by init, which may take a while."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc/self"):
        return True
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after the command: state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the group ``proc`` leads, SIGKILL whatever is left after ``grace_s``; reap ``proc``."""
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    deadline = time.monotonic() + grace_s
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        # The leader may exit while its children linger: wait for the whole group.
        while sig == signal.SIGTERM and group_alive(pgid) and time.monotonic() < deadline:
            try:
                proc.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                pass
        if not group_alive(pgid):
            break
    proc.wait()


def start_watchdog(pgid: int, grace_s: float) -> Optional[subprocess.Popen[bytes]]:
    """A process that tears the group down if this one dies; None if it cannot start
    (teardown then relies on close and atexit alone)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-c", _WATCHDOG, str(pgid), str(grace_s)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


def release_watchdog(wd: Optional[subprocess.Popen[bytes]]) -> None:
    """Stand the watchdog down after a deliberate close, so it does not signal a group
    whose id the system may already have given to someone else."""
    if wd is None or wd.stdin is None:
        return
    try:
        wd.stdin.write(b"closed")  # data before EOF: "closed on purpose, do nothing"
        wd.stdin.close()
    except (OSError, ValueError):
        pass
    try:
        wd.wait(timeout=5)
    except subprocess.TimeoutExpired:
        wd.kill()
        wd.wait()

"""Ctrl-C reaches every run of a process, not only its first (uvloop leaves its handler behind)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from pytest_goodput.load.client.event_loop import run


async def _interrupted_midway() -> None:
    asyncio.get_running_loop().call_later(0.01, os.kill, os.getpid(), signal.SIGINT)
    await asyncio.sleep(5)


@pytest.mark.skipif(signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
                    reason="this process does not take Ctrl-C (its SIGINT handler is not Python's)")
def test_a_second_run_in_one_process_is_still_interrupted_by_ctrl_c():
    run(asyncio.sleep(0))  # a first run (a reachability check, a warm-up)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        run(_interrupted_midway())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

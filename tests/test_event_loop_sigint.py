"""Ctrl-C reaches every run of a process, not only its first (uvloop leaves its handler behind),
and a run stopped mid-phase (Ctrl-C, a worker out of time) keeps what it had finished."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from pytest_goodput.load.client.event_loop import RunInterrupted, run
from pytest_goodput.load import coordinator
from pytest_goodput.load.coordinator import coordinate
from pytest_goodput.load.plan import plan_run
from pytest_goodput.load.pools import RunStopped, WorkerError
from pytest_goodput.load.pools.inprocess import InProcessPool
from pytest_goodput.load.worker import Init
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.schema.scenario.spec import ScenarioSpec


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


async def _keeps_what_it_had() -> str:
    asyncio.get_running_loop().call_later(0.01, os.kill, os.getpid(), signal.SIGINT)
    try:
        await asyncio.sleep(5)
    except asyncio.CancelledError:
        return "what it had"
    return "finished"


@pytest.mark.skipif(signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
                    reason="this process does not take Ctrl-C (its SIGINT handler is not Python's)")
def test_a_run_that_keeps_what_it_had_is_interrupted_with_it():
    with pytest.raises(RunInterrupted) as caught:
        run(_keeps_what_it_had())
    assert caught.value.partial == "what it had"
    assert isinstance(caught.value, KeyboardInterrupt)  # whoever does not look for it stops


class _InterruptedAtTen:
    """Answers each request after 5 ms; Ctrl-C arrives as the tenth is sent."""

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, plan: RequestPlan) -> RawExchange:
        self.sent += 1
        if self.sent == 10:
            os.kill(os.getpid(), signal.SIGINT)
        start = time.perf_counter()
        await asyncio.sleep(0.005)
        return RawExchange(plan, start, time.perf_counter(), 200, [], None, None)


@pytest.mark.skipif(signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
                    reason="this process does not take Ctrl-C (its SIGINT handler is not Python's)")
def test_ctrl_c_mid_phase_keeps_the_exchanges_the_phase_had_finished():
    spec = ScenarioSpec(scenario="concurrency", concurrency=2, requests=40, warmup_requests=0)
    plan = plan_run(spec, 1, None, None, None)
    client = _InterruptedAtTen()
    init = Init(spec, "", "", None, 1, None, None, None)
    with pytest.raises(RunInterrupted) as caught:
        run(coordinate(plan, InProcessPool(client), init, keep_partial=True))
    out = caught.value.partial
    assert out.stopped == "interrupted (Ctrl-C)" and out.planned == 40
    # the sends before the tenth had ended; the two in flight when it came never did
    assert 8 <= len(out.exchanges) < client.sent <= 11
    assert len({ex.plan.index for ex in out.exchanges}) == len(out.exchanges)


class _HangsAfterFive:
    """Answers the first five requests at once; the others never end (a hung engine the
    client's own timeout would not catch)."""

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, plan: RequestPlan) -> RawExchange:
        self.sent += 1
        if self.sent > 5:
            await asyncio.sleep(3600)
        start = time.perf_counter()
        return RawExchange(plan, start, time.perf_counter(), 200, [], None, None)


def test_a_worker_out_of_time_stops_the_run_with_what_it_had_finished(monkeypatch):
    monkeypatch.setattr(coordinator, "MARGIN_S", 0.2)  # the phase's bound: last deadline + 1 s + 0.2 s
    spec = ScenarioSpec(scenario="server", rate=100, requests=10, warmup_requests=0, timeout_s=1)
    plan = plan_run(spec, 1, None, None, None)
    init = Init(spec, "", "", None, 1, None, None, None)
    with pytest.raises(RunStopped) as caught:
        run(coordinate(plan, InProcessPool(_HangsAfterFive()), init, keep_partial=True))
    out = caught.value.partial
    assert isinstance(caught.value, WorkerError)  # whoever catches a worker's failure still does
    assert out.stopped.startswith("stopped: load generator worker 1 of 1 (in this process) did not finish within")
    assert (len(out.exchanges), out.planned) == (5, 10)

"""How closely the load generator keeps time on this machine (``python bench/loadgen_timing.py``).

The figures ``tests/test_loadgen.py`` used to assert as wall-clock limits; the tests now decide
the rules exactly (no request planned after a closed window, slot waits not counted as send
lag, a refused connection raised). Printed per repeat, against an in-process fake engine
(every request answered after a fixed service time) so only the client's timing is measured:

- ``window``: a closed loop of 2 users bounded by ``duration_s=0.3`` (10 ms service): the
  run's wall time and how far after the window's first send the last send came (ms over 300).
- ``ceiling``: an open loop of 40 requests at 200 req/s behind a ceiling of 3 slots (50 ms
  service): the self-check's send-lag P99 (slot waits excluded) and the P99 from the schedule.
- ``unreachable``: a run against a closed port on 127.0.0.1, until ``ConnectionError``.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import time

from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.coordinator import drive
from pytest_goodput.load.scenario import run_scenario
from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.schema.scenario.spec import ScenarioSpec


class FakeEngine:
    """Answers every request after ``service_s`` (no network, no process)."""

    def __init__(self, service_s: float) -> None:
        self.service_s = service_s

    async def send(self, plan):  # type: ignore[no-untyped-def]
        sent = time.perf_counter()
        await asyncio.sleep(self.service_s)
        return RawExchange(plan, sent, time.perf_counter(), 200, [], None, None)


def window() -> tuple[float, float]:
    """(wall s, last send after the first, ms) for a 0.3 s closed-loop window."""
    spec = ScenarioSpec(scenario="concurrency", concurrency=2, duration_s=0.3)
    t = time.perf_counter()
    out = run(drive(spec, FakeEngine(0.01)))
    wall = time.perf_counter() - t
    sent = [ex.sent_at for ex in out.exchanges]
    return wall, (max(sent) - min(sent)) * 1e3


def ceiling() -> tuple[float, float]:
    """(send-lag P99 the self-check counts, P99 from the schedule), ms."""
    spec = ScenarioSpec(scenario="server", rate=200, arrival="constant", requests=40, concurrency=3)
    out = run(drive(spec, FakeEngine(0.05)))
    lags = sorted((ex.sent_at - ex.plan.scheduled_at) * 1e3 for ex in out.exchanges)
    return out.check.health().send_lag_p99_ms, lags[int(0.99 * (len(lags) - 1))]


def unreachable() -> float:
    """Seconds until a run against a closed port raises ``ConnectionError``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.perf_counter()
    try:
        run_scenario(ScenarioSpec(scenario="offline", requests=2), f"http://127.0.0.1:{port}", "m")
    except ConnectionError:
        return time.perf_counter() - t
    raise SystemExit("a closed port did not raise ConnectionError")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    n = ap.parse_args().repeats
    print("repeat  window wall s  last send ms (window 300)  ceiling send-lag P99 ms  "
          "from schedule P99 ms  unreachable s")
    for i in range(n):
        wall, spread = window()
        counted, scheduled = ceiling()
        print(f"{i + 1:>6}  {wall:>13.3f}  {spread:>25.1f}  {counted:>23.2f}  {scheduled:>20.1f}  "
              f"{unreachable():>13.3f}")


if __name__ == "__main__":
    main()

"""The CPU a burst of users starting together costs per request, this client beside the raw one.

A closed loop of N users (``--users``, default 256 and 1,024) starting together against the
reference server: each user's first request is written as soon as the client gets to it.
For this client (the load engine, ``load.coordinator.run_plan``) and the raw asyncio client
of ``bench/raw_client.py``, the process's CPU time is read at each first write; printed: the
burst's wall time (from the common start for this client, from the first write for the raw
one) and its CPU per write between the first and the last. CPU time holds up on a busy
machine, wall time does not (the load average is printed on every row).

    python bench/client_fan_in.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import raw_client  # noqa: E402
from client_scale import start_server  # noqa: E402
from pytest_goodput.load.client import connection  # noqa: E402
from pytest_goodput.load.client.event_loop import run as run_loop  # noqa: E402
from pytest_goodput.load.coordinator import run_plan  # noqa: E402
from pytest_goodput.schema.scenario.spec import ScenarioSpec  # noqa: E402

MARKS: list[tuple[float, float]] = []  # (perf_counter, thread CPU) at each request's write


def _marked(write):  # type: ignore[no-untyped-def]
    def wrapper(self, head, *rest):  # type: ignore[no-untyped-def]
        if head[:4] != b"GET ":  # not a warm-up or keep-alive probe
            MARKS.append((time.perf_counter(), time.thread_time()))
        return write(self, head, *rest)
    return wrapper


connection.Connection.write = _marked(connection.Connection.write)
raw_client.Conn.exchange = _marked(raw_client.Conn.exchange)


def burst(n: int, t0: float) -> str:
    first = MARKS[:n]
    wall = (first[-1][0] - t0) * 1e3
    cpu = (first[-1][1] - first[0][1]) / max(1, n - 1) * 1e6
    return f"wall {wall:6.1f} ms  CPU {cpu:5.1f} us per write  load {os.getloadavg()[0]:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", default="256,1024")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    proc, url, port = start_server(50, 50)
    try:
        for n in (int(x) for x in args.users.split(",")):
            for k in range(args.runs):
                MARKS.clear()
                spec = ScenarioSpec(scenario="concurrency", concurrency=n, requests=n, warmup_requests=0,
                                    isl=16, osl=2, timeout_s=120)
                out = run_plan(spec, url + "/v1", "ref-model", salt=1)
                t0 = min(ex.plan.scheduled_at for ex in out.exchanges)
                print(f"{n:5d} users run {k + 1}  ours: {burst(n, t0)}", flush=True)
                MARKS.clear()
                run_loop(raw_client.closed_loop("127.0.0.1", port, n, n, 2))
                print(f"{n:5d} users run {k + 1}   raw: {burst(n, MARKS[0][0])}", flush=True)
    finally:
        proc.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())

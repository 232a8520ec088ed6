"""Does sharding the load generator over processes lift the one-event-loop ceiling?

Runs the reference server (tests/refserver.py, its own process, one uvloop loop: TTFT and
inter-token time are exact deadlines, so anything above them is the client's or the
machine's doing) and drives it with the same spec at ``workers=1`` and ``workers=2``,
alternating, at loads chosen to saturate one client loop:

* ``poisson``: open loop at a high request rate with short answers (per-request client
  work — building, sending, reading the response — dominates);
* ``streams``: closed loop, many concurrent streams, one token per chunk (per-chunk
  receive work dominates).

Printed per run: achieved rate vs the schedule's, send-lag P99, loop-lag P99 (all
workers' samples), CPU per worker (cores), reported TTFT P50 / P99 (the server's true TTFT
is the configured one), output tokens/s, and whether the self-check flagged the run.

The machine has 2 cores: the server process competes with the client workers for them,
so at ``workers=2`` three busy processes share two cores.

    python bench/loadgen_scale.py              # about 2 minutes
    python bench/loadgen_scale.py --rate 3000 --repeats 1
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pytest_goodput.load.coordinator import run_plan
from pytest_goodput.load.scenario import offered_rate
from pytest_goodput.load.requests.schedule import mean_rate, open_loop_schedule
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def pct(values: list[float], p: float) -> float:
    xs = sorted(values)
    return xs[max(0, math.ceil(p / 100.0 * len(xs)) - 1)] if xs else float("nan")


def start_server(ttft_ms: float, itl_ms: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "refserver.py"), "--port", "0", "--ttft-ms", str(ttft_ms),
         "--itl-ms", str(itl_ms), "--max-seconds", "900"],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line and line[0] == "READY", line
    return proc, f"http://127.0.0.1:{line[1]}/v1"


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    import os

    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(spec: ScenarioSpec, url: str, server_pid: int) -> dict[str, Any]:
    """One run, returning the raw output (so per-worker CPU stays visible)."""
    import os

    salt = 1
    cpu0, wall0 = proc_cpu_s(server_pid), time.perf_counter()
    out = run_plan(spec, url, "ref-model", salt=salt)  # one worker or several: one coordinator
    cpus = [st.cpu_utilization for st in out.check.workers]
    server_cpu = (proc_cpu_s(server_pid) - cpu0) / (time.perf_counter() - wall0)
    health = out.check.health()
    recs = [to_record(ex, stream=True, api="completions") for ex in out.exchanges]
    meas = [r for r in recs if not r.warmup]
    ttft = [r.ttft_ms for r in meas if r.ttft_ms is not None]
    ends = [r.end_at for r in meas if r.end_at]
    sends = [r.sent_at for r in meas if r.sent_at]
    window = max(ends) - min(sends)
    return {
        "workers": spec.workers,
        "ok": sum(r.ok for r in meas), "n": len(meas),
        "rate": offered_rate(out.exchanges),
        "send_p99": health.send_lag_p99_ms, "loop_p99": health.loop_lag_ms.p99,
        "cpu": cpus, "ttft_p50": pct(ttft, 50), "ttft_p99": pct(ttft, 99),
        "tok_s": sum(r.output_tokens for r in meas if r.ok) / window,
        "valid": health.valid, "reasons": health.reasons,
        "server_cpu": server_cpu, "load": os.getloadavg()[0],
    }


def show(title: str, rows: list[dict[str, Any]], sched_rate: float | None) -> None:
    print(f"\n## {title}" + (f" (schedule's own rate {sched_rate:.1f} req/s)" if sched_rate else ""))
    print("| workers | ok/n | achieved req/s | send lag P99 ms | loop lag P99 ms | CPU per worker | "
          "server CPU | load avg | TTFT P50 / P99 ms | output tok/s | self-check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = " + ".join(f"{c:.2f}" for c in r["cpu"])
        verdict = "valid" if r["valid"] else "invalid: " + "; ".join(x.split(" > ")[0] for x in r["reasons"])
        print(f"| {r['workers']} | {r['ok']}/{r['n']} | {r['rate']:.1f} | {r['send_p99']:.1f} | "
              f"{r['loop_p99']:.1f} | {cpu} | {r['server_cpu']:.2f} | {r['load']:.1f} | {r['ttft_p50']:.1f} / {r['ttft_p99']:.1f} | "
              f"{r['tok_s']:.0f} | {verdict} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=2000.0, help="poisson: requests/s")
    ap.add_argument("--seconds", type=float, default=6.0, help="poisson: measured window")
    ap.add_argument("--streams", type=int, default=128, help="closed loop: concurrent streams")
    ap.add_argument("--stream-requests", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    proc, url = start_server(ttft_ms=5.0, itl_ms=2.0)
    try:
        poisson = ScenarioSpec(scenario="server", rate=args.rate, duration_s=args.seconds, warmup_s=1.0,
                               isl=16, osl=4, timeout_s=30)
        streams = ScenarioSpec(scenario="concurrency", concurrency=args.streams, requests=args.stream_requests,
                               warmup_requests=args.streams, isl=16, osl=64, timeout_s=30)
        print(f"refserver TTFT 5 ms, one token per chunk every 2 ms; {time.strftime('%Y-%m-%d %H:%M')}")
        for title, spec, rate in (
            (f"poisson {args.rate:g} req/s, {args.seconds:g} s, OSL 4", poisson,
             mean_rate(open_loop_schedule(poisson).offsets)),
            (f"closed loop {args.streams} streams, OSL 64", streams, None),
        ):
            rows = []
            for _ in range(args.repeats):
                for w in (1, args.workers):
                    rows.append(one_run(spec.model_copy(update={"workers": w}), url, proc.pid))
            show(title, rows, rate)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()

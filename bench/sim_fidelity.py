"""How faithfully does the simulator server emit the timing its model intends?

1. Knee load: the ``default`` preset at 16 req/s (ISL 128 / OSL 64, Poisson). The server
   runs with ``--trace`` and logs, per token, the intended emission time (the end of the
   engine step that produced it) and the time it was written. The client (the project's
   :class:`OpenAIClient`, in this process) stamps every read. Reported: P50/P99/max of
   written - intended (server) and received - intended (end to end over loopback).
2. Ceiling: a 10x faster profile (``--time-scale 0.1``), Poisson rate raised step by step
   until the P99 write-time error passes 2 ms: the highest token rate the simulator
   sustains on this machine with the client beside it.

``--tables`` instead prints the virtual-time tables of ``docs/simulator.md`` (no server).

Usage: python bench/sim_fidelity.py [--knee-seconds 20] [--step-seconds 6] [--tables]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.client.http import OpenAIClient
from pytest_goodput.measure.records.exchange import RequestPlan

LAUNCH = "import sys; from pytest_goodput.sim.server import main; sys.exit(main(sys.argv[1:]))"
LIMIT_MS = 2.0


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(0, -(-len(s) * q // 100) - 1)] if s else float("nan")


def start(trace: str, *flags: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "--port", "0", "--trace", trace, *flags],
                            stdout=subprocess.PIPE, text=True)
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(30)
    if not box or not box[0].startswith("http"):
        proc.kill()
        raise SystemExit("simulator did not start")
    return proc, box[0].strip()


def token_times(reads: list[tuple[float, bytes]]) -> tuple[str | None, list[float]]:
    """Response id and the receive time of every content event (time of its last byte)."""
    buf, rid, out = b"", None, []
    for t, chunk in reads:
        buf += chunk
        *events, buf = buf.split(b"\n\n")
        for ev in events:
            if not ev.startswith(b"data: {"):
                continue
            if rid is None:
                rid = json.loads(ev[6:])["id"].split("-", 1)[1]
            if b'"text":"' in ev:
                out.append(t)
    return rid, out


async def drive(url: str, rate: float, seconds: float, seed: int) -> list[tuple[str | None, list[float]]]:
    """Open-loop Poisson load at absolute deadlines; returns per-request token receive times."""
    rng = random.Random(seed)
    filler = " ".join(["tok"] * 126)
    async with OpenAIClient(url, "goodput-sim", max_connections=1024, timeout_s=120) as client:
        t0, t, tasks, i = time.perf_counter() + 0.2, 0.0, [], 0
        while True:
            t += rng.expovariate(rate)
            if t > seconds:
                break
            plan = RequestPlan(i, f"r{seed}x{i} {filler}", 128, 64, t0 + t)
            delay = plan.scheduled_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(client.send(plan)))
            i += 1
        exchanges = await asyncio.gather(*tasks)
    bad = [ex for ex in exchanges if ex.status != 200 or ex.error_kind]
    if bad:
        raise SystemExit(f"{len(bad)} requests failed, e.g. {bad[0].error_detail or bad[0].status}")
    return [token_times(ex.reads) for ex in exchanges]


def errors(trace: str, observed: list[tuple[str | None, list[float]]]) -> dict[str, Any]:
    by_id = {}
    with open(trace, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            by_id[rec["id"]] = rec
    write_err, recv_err, n_tok = [], [], 0
    for rid, times in observed:
        rec = by_id[rid]
        intended = rec["intended"]
        assert len(intended) == len(times) == 64, (len(intended), len(times))
        write_err += [(w - i) * 1000 for w, i in zip(rec["written"], intended)]
        recv_err += [(r - i) * 1000 for r, i in zip(times, intended)]
        n_tok += len(times)
    return {"tokens": n_tok, "write": write_err, "recv": recv_err}


def summary(label: str, e: dict[str, Any], seconds: float) -> str:
    w, r = e["write"], e["recv"]
    return (f"{label}: {e['tokens']} tokens, {e['tokens'] / seconds:.0f} tok/s | write-intended ms "
            f"P50 {pct(w, 50):.3f} P99 {pct(w, 99):.3f} max {max(w):.2f} min {min(w):.3f} | "
            f"received-intended ms P50 {pct(r, 50):.3f} P99 {pct(r, 99):.3f} max {max(r):.2f} | "
            f"CPU server {e.get('server_cpu', 0):.0%} client {e.get('client_cpu', 0):.0%} "
            f"load avg {os.getloadavg()[0]:.2f}")


def run_level(rate: float, seconds: float, seed: int, *flags: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace.jsonl")
        proc, url = start(trace, *flags)
        try:
            c0, s0 = time.process_time(), cpu_seconds(proc.pid)
            observed = run(drive(url, rate, seconds, seed))
            client_cpu, server_cpu = time.process_time() - c0, cpu_seconds(proc.pid) - s0
        finally:
            proc.terminate()
            proc.wait(10)
        e = errors(trace, observed)
        e.update(server_cpu=server_cpu / seconds, client_cpu=client_cpu / seconds)
        return e


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc), to show who was busy."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return float("nan")


def tables() -> None:
    """Virtual-time goodput-vs-rate and TPOT-vs-concurrency tables for the default preset."""
    from pytest_goodput.sim.model import EngineModel, SimRequest
    from pytest_goodput.sim.profile import SimProfile

    prof = SimProfile()
    print("| rate (req/s) | P50 TTFT ms | P99 TTFT ms | P50 TPOT ms | P99 TPOT ms | attainment | "
          "goodput (req/s) | output tok/s |")
    print("|---|---|---|---|---|---|---|---|")
    for rate in (2, 4, 8, 12, 14, 16, 17, 18, 20, 24):
        rng, t, reqs = random.Random(1), 0.0, []
        for i in range(2000):
            t += rng.expovariate(rate)
            reqs.append(SimRequest(i, 128, 64, t))
        lines = EngineModel(prof).simulate(reqs)
        span = max(x.token_times[-1] for x in lines) - lines[0].arrival
        good = sum(1 for x in lines if x.ttft <= 0.2 and x.tpot <= 0.04)
        ttft = [x.ttft * 1000 for x in lines]
        tpot = [x.tpot * 1000 for x in lines]
        print(f"| {rate} | {pct(ttft, 50):.1f} | {pct(ttft, 99):.1f} | {pct(tpot, 50):.1f} | "
              f"{pct(tpot, 99):.1f} | {good / len(lines):.3f} | {good / span:.2f} | "
              f"{64 * len(lines) / span:.0f} |")
    print()
    print("| concurrency | running | P50 TTFT ms | P50 TPOT ms | output tok/s | tok/s/user |")
    print("|---|---|---|---|---|---|")
    for users in (1, 2, 4, 8, 16, 24, 32, 48, 64, 96):
        m, now, nxt, done, times, ttfts, tpots = EngineModel(prof), 0.0, 0, 0, {}, [], []
        for _ in range(users):
            m.add_request(nxt, 128, 64)
            times[nxt] = [0.0]
            nxt += 1
        running = []
        while done < 40 * users:
            res = m.step(now)
            now += res.duration_s
            running.append(m.num_running)
            for rid, _n, fin in res.emitted:
                times[rid].append(now)
                if fin:
                    tl = times.pop(rid)
                    ttfts.append((tl[1] - tl[0]) * 1000)
                    tpots.append((tl[-1] - tl[1]) / 63 * 1000)
                    done += 1
                    m.add_request(nxt, 128, 64)
                    times[nxt] = [now]
                    nxt += 1
        thr = 64 * done / now
        print(f"| {users} | {sum(running) / len(running):.1f} | {pct(ttfts, 50):.1f} | "
              f"{pct(tpots, 50):.1f} | {thr:.0f} | {1000 / pct(tpots, 50):.1f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--knee-seconds", type=float, default=20.0)
    ap.add_argument("--step-seconds", type=float, default=6.0)
    ap.add_argument("--tables", action="store_true")
    a = ap.parse_args()
    if a.tables:
        tables()
        return 0
    t_start = time.perf_counter()
    knee = run_level(16.0, a.knee_seconds, 1)
    print(summary("default preset @ 16 req/s (knee)", knee, a.knee_seconds), flush=True)
    ok = pct(knee["recv"], 99) <= LIMIT_MS and pct(knee["write"], 99) <= LIMIT_MS
    print(f"knee fidelity P99 <= {LIMIT_MS} ms: {'PASS' if ok else 'FAIL'}", flush=True)
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores - 0.5:
        print(f"note: load average {load:.2f} on {cores} cores — other processes compete for the "
              "CPU; wake-up latency, not the simulator, then sets the tail", flush=True)
    best, misses = None, 0
    for rate in (30, 50, 70, 90, 110, 130, 150):
        e = run_level(float(rate), a.step_seconds, rate, "--time-scale", "0.1")
        print(summary(f"time_scale 0.1 @ {rate} req/s", e, a.step_seconds), flush=True)
        if pct(e["write"], 99) > LIMIT_MS:
            misses += 1
            if misses == 2 or time.perf_counter() - t_start > 150:
                break
            continue  # one miss may be a noisy neighbour; two in a row is the ceiling
        misses = 0
        best = (rate, e["tokens"] / a.step_seconds)
    if best:
        print(f"highest sustained level: {best[0]} req/s, {best[1]:.0f} streamed tokens/s "
              f"with P99 write error <= {LIMIT_MS} ms")
    print(f"bench wall time {time.perf_counter() - t_start:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

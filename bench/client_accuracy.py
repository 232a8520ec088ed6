"""How much does the measuring client distort what it measures?

Runs the reference server (tests/refserver.py) in its own process — TTFT 50 ms, one
token per chunk every 10 ms, 128 output tokens — and compares what the client reports
with what the server logged, on one CLOCK_MONOTONIC timeline:

* receive lag: client read time of the first / last / every token - server write time;
* reported TTFT and TPOT vs the server's true ones (first write - request read; span of
  token writes / (n - 1)), and server read time - client ``sent_at``;
* client CPU (process CPU seconds / wall seconds);
* open-loop Poisson arrivals at 100 req/s (schedule precomputed with absolute deadlines):
  achieved rate, inter-arrival CV, send lag P99.

Concurrency 64 is measured twice: 64 streams started together (rounds wait for all to
end; the bars apply here) and a closed loop, where each stream's end sends the next
request — with equal output lengths all 64 ends coincide with 64 sends, the worst case
for a single-threaded client. The same measurements are repeated with a plain httpx
streaming client for comparison.

    python bench/client_accuracy.py            # about 80 s
    python bench/client_accuracy.py --busy     # the same beside a CPU-bound neighbour per core
    python bench/client_accuracy.py --busy --client-cpus 1 --server-cpus 0   # ... with placement
    python bench/client_accuracy.py --busy --capture --skip-httpx   # ... receive times from packets

``--busy`` starts one CPU-bound neighbour process per core for the whole run (what a shared
CI runner looks like). ``--client-cpus`` puts the client on those CPUs with the plugin's
:class:`pytest_goodput.run.affinity.ClientPlacement` (pinning, and a raised priority where
permitted), ``--server-cpus`` the reference server with the engine launcher's wrapper.
Each concurrency phase is also judged by the client's own self-check, as a gated run is.
``--capture`` (needs CAP_NET_RAW, e.g. root) runs every phase of this client under the plugin's packet
capture (``docs/capture.md``): reads are retimed to the packets that carried them before
anything is measured, and the self-check is told when every event was mapped; the mapped
fractions are printed. The httpx comparison keeps read-time stamps.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pytest_goodput.load.selfcheck.capture import begin as begin_capture
from pytest_goodput.load.selfcheck.capture import finish as finish_capture
from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.client.http import OpenAIClient
from pytest_goodput.load.selfcheck.health import judge as self_check
from pytest_goodput.run.affinity import ClientPlacement
from pytest_goodput.schema.cpus import format_cpus, parse_cpus
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.records.record import parse_stream, to_record

TTFT_MS, ITL_MS, TOKENS = 50.0, 10.0, 128


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    xs = sorted(values)
    return xs[max(0, math.ceil(p / 100.0 * len(xs)) - 1)] if xs else float("nan")


class HttpxClient:
    """The comparison: httpx streaming, same request body, sent time from httpx's trace hook."""

    def __init__(self, base_url: str, model: str, max_connections: int = 256) -> None:
        self._body = OpenAIClient(base_url, model)  # only used to build identical bodies
        self._url = self._body.base_url + "/completions"
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._hc = httpx.AsyncClient(limits=limits, timeout=60.0)

    async def __aenter__(self) -> "HttpxClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._hc.aclose()

    async def send(self, plan: RequestPlan) -> RawExchange:
        data = self._body.build_body(plan)
        ex = RawExchange(plan, None, None, None, [], None, None)

        async def trace(name: str, info: dict) -> None:
            if name == "http11.send_request_body.started" and ex.sent_at is None:
                ex.sent_at = time.perf_counter()

        append, clock = ex.reads.append, time.perf_counter
        req = self._hc.build_request("POST", self._url, content=data, extensions={"trace": trace},
                                     headers={"Content-Type": "application/json"})
        resp = await self._hc.send(req, stream=True)
        try:
            ex.status = resp.status_code
            async for chunk in resp.aiter_raw():
                append((clock(), chunk))
            ex.end_at = clock()
        finally:
            await resp.aclose()
        return ex


def start_server(cpus: str | None = None, *extra: str, max_seconds: int = 300) -> tuple[subprocess.Popen, str]:
    """The exact reference server (first token after TTFT_MS, one per ITL_MS) on 127.0.0.1;
    ``extra``: more of its flags (e.g. ``--chunk-tokens 64``)."""
    cmd = [sys.executable, str(ROOT / "tests" / "refserver.py"), "--port", "0",
           "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--max-seconds", str(max_seconds), *extra]
    if cpus:
        cmd = [sys.executable, "-m", "pytest_goodput.engines.pinned", format_cpus(parse_cpus(cpus)), "--", *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if not line or line[0] != "READY":
        proc.kill()
        raise RuntimeError("reference server did not start")
    return proc, f"http://127.0.0.1:{line[1]}"


def server_log(url: str, reset: bool = False) -> dict[str, Any]:
    if reset:
        httpx.post(url + "/_reset")
        return {}
    return httpx.get(url + "/_log", timeout=30).json()


def plan(i: int, at: float, n: int = TOKENS) -> RequestPlan:
    return RequestPlan(index=i, prompt="x", prompt_tokens=1, max_tokens=n, scheduled_at=at)


async def closed_loop(client: Any, users: int, per_user: int) -> list[RawExchange]:
    out: list[RawExchange] = []

    async def user(u: int) -> None:
        for k in range(per_user):
            out.append(await client.send(plan(u * per_user + k, time.perf_counter())))

    await asyncio.gather(*(user(u) for u in range(users)))
    return out


async def burst(client: Any, streams: int, rounds: int) -> list[RawExchange]:
    """``streams`` requests started together; the next round starts when all have ended."""
    out: list[RawExchange] = []
    for r in range(rounds):
        now = time.perf_counter()
        out += await asyncio.gather(*(client.send(plan(r * streams + i, now)) for i in range(streams)))
    return out


async def poisson(client: Any, rate: float, seconds: float, tokens: int, seed: int = 7) -> list[RawExchange]:
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=int(rate * seconds))
    t0 = time.perf_counter() + 0.05
    deadlines = t0 + np.cumsum(gaps) - gaps[0]
    tasks = []
    clock = time.perf_counter
    for i, at in enumerate(deadlines.tolist()):
        # loop timers fire up to ~1 ms off (uvloop rounds to ms): sleep, then yield-spin
        delay = at - clock() - 0.001
        if delay > 0:
            await asyncio.sleep(delay)
        while clock() < at:
            await asyncio.sleep(0)
        tasks.append(asyncio.ensure_future(client.send(plan(i, at, tokens))))
    return list(await asyncio.gather(*tasks))


async def ticker(lags: list[float], period: float = 0.005) -> None:
    """Loop lag: how late a 5 ms timer fires. Large values mean the process was not running."""
    clock = time.perf_counter
    while True:
        due = clock() + period
        await asyncio.sleep(period)
        lags.append((clock() - due) * 1e3)


def phase(make: Callable[[], Any], body: Callable[[Any], Any],
          capture_url: str | None = None) -> tuple[list[RawExchange], float, list[float], Any, float]:
    """One phase on a fresh client; under ``capture_url`` its reads retimed to the packets."""
    t_phase = time.perf_counter()
    cap, why = begin_capture("on" if capture_url else "off", "process", capture_url or "")

    async def go() -> tuple[list[RawExchange], float, list[float]]:
        async with make() as client:
            if hasattr(client, "open_connections"):
                await client.open_connections(64)
            lags: list[float] = []
            tick = asyncio.ensure_future(ticker(lags))
            c0, w0 = time.process_time(), time.perf_counter()
            exs = await body(client)
            cpu = (time.process_time() - c0) / (time.perf_counter() - w0)
            tick.cancel()
            return exs, cpu, lags

    exs, cpu, lags = run(go())
    stamps = finish_capture(cap, why, exs)
    # the capture process's own CPU seconds over the phase's wall seconds
    stamps_cpu = (cap.stats.get("cpu_s", float("nan")) if cap else 0.0) / (time.perf_counter() - t_phase)
    return exs, cpu, lags, stamps, stamps_cpu


def accuracy(exs: list[RawExchange], log: dict[str, Any], cpu: float, loop_lag: list[float]) -> dict[str, float]:
    recs = [to_record(ex, stream=True, api="completions", min_output_tokens=ex.plan.max_tokens) for ex in exs]
    bad = [r for r in recs if not r.ok]
    if bad:
        print(f"  !! {len(bad)} failed requests, first: {bad[0].error_kind}: {bad[0].error_detail}")
    good = [r for r in recs if r.ok]
    lag_first, lag_last, lag_all, read, ttft_c, ttft_s, tpot_c, tpot_s = ([] for _ in range(8))
    by_index = {ex.plan.index: ex for ex in exs}
    for r in good:
        e = log[r.response_id]
        w = e["token_writes"]
        got = parse_stream(by_index[r.index].reads).times
        lag_all.extend((g - s) * 1e3 for g, s in zip(got, w))
        lag_first.append((r.first_token_at - w[0]) * 1e3)
        lag_last.append((r.last_token_at - w[-1]) * 1e3)
        read.append((e["read_at"] - r.sent_at) * 1e3)
        ttft_c.append(r.ttft_ms)
        ttft_s.append((w[0] - e["read_at"]) * 1e3)
        tpot_c.append(r.tpot_ms)
        tpot_s.append((w[-1] - w[0]) * 1e3 / (len(w) - 1))
    return {
        "n": len(good), "lag_first_p50": pct(lag_first, 50), "lag_first_p99": pct(lag_first, 99),
        "lag_last_p50": pct(lag_last, 50), "lag_last_p99": pct(lag_last, 99),
        "lag_all_p50": pct(lag_all, 50), "lag_all_p99": pct(lag_all, 99),
        "ttft_p50": pct(ttft_c, 50), "ttft_true_p50": pct(ttft_s, 50),
        "ttft_p99": pct(ttft_c, 99), "ttft_true_p99": pct(ttft_s, 99),
        "tpot_p50": pct(tpot_c, 50), "tpot_true_p50": pct(tpot_s, 50),
        "tpot_p99": pct(tpot_c, 99), "tpot_true_p99": pct(tpot_s, 99),
        "read_minus_sent_p50": pct(read, 50), "cpu": cpu,
        "loop_lag_p50": pct(loop_lag, 50), "loop_lag_p99": pct(loop_lag, 99),
    }


def arrivals(exs: list[RawExchange], rate: float) -> dict[str, float]:
    sent = np.sort(np.array([ex.sent_at for ex in exs if ex.sent_at is not None]))
    gaps = np.diff(sent)
    lag = [(ex.sent_at - ex.plan.scheduled_at) * 1e3 for ex in exs if ex.sent_at is not None]
    ok = sum(1 for ex in exs if to_record(ex, stream=True, api="completions").ok)
    return {"n": len(exs), "ok": ok, "rate": (len(sent) - 1) / (sent[-1] - sent[0]), "target": rate,
            "cv": float(gaps.std() / gaps.mean()), "send_lag_p50": pct(lag, 50), "send_lag_p99": pct(lag, 99)}


def row(name: str, a: float, b: float | None, unit: str = "ms") -> str:
    ratio = f"{b / a:8.1f}x" if b is not None and a > 0 else ""
    bs = f"{b:10.3f}" if b is not None else " " * 10
    return f"  {name:<34}{a:10.3f}{bs} {unit:<5}{ratio}"


def main() -> int:
    ap = argparse.ArgumentParser(description="client measurement accuracy vs a timing-exact server")
    ap.add_argument("--c1-requests", type=int, default=15)
    ap.add_argument("--c64-rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--poisson-seconds", type=float, default=8.0)
    ap.add_argument("--poisson-tokens", type=int, default=32)
    ap.add_argument("--skip-httpx", action="store_true")
    ap.add_argument("--busy", action="store_true", help="a CPU-bound neighbour process per core")
    ap.add_argument("--client-cpus", help="place the client on these CPUs (e.g. 1)")
    ap.add_argument("--server-cpus", help="run the reference server on these CPUs (e.g. 0)")
    ap.add_argument("--capture", action="store_true",
                    help="this client's phases under packet capture (needs CAP_NET_RAW)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    load_before = os.getloadavg()
    neighbours = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                  for _ in range(os.cpu_count() or 1)] if args.busy else []
    placement = ClientPlacement(parse_cpus(args.client_cpus)) if args.client_cpus else None
    if placement is not None:
        print(f"[{placement.describe()}]")
    proc, url = start_server(args.server_cpus)
    clients: dict[str, Callable[[], Any]] = {
        "ours": lambda: OpenAIClient(url, "ref-model", max_connections=256, keep_wire=args.capture),
    }
    if not args.skip_httpx:
        clients["httpx"] = lambda: HttpxClient(url, "ref-model")
    res: dict[str, dict[str, dict[str, float]]] = {}
    try:
        for name, make in clients.items():
            captured = args.capture and name == "ours"
            res[name] = {}
            for label, body in (
                ("c1", lambda c: closed_loop(c, 1, args.c1_requests)),
                ("c64", lambda c: burst(c, 64, args.c64_rounds)),
                ("c64closed", lambda c: closed_loop(c, 64, args.c64_rounds)),
            ):
                server_log(url, reset=True)
                exs, cpu, lags, stamps, capture_cpu = phase(make, body, url if captured else None)
                res[name][label] = accuracy(exs, server_log(url), cpu, lags)
                health = self_check(cpu_utilization=cpu, loop_lags_ms=lags, send_lags_ms=[], open_loop=False,
                                    ttft_p50_ms=res[name][label]["ttft_p50"], itl_p50_ms=ITL_MS,
                                    exact_receive=stamps.exact)
                if captured:
                    print(f"  [{label}: {stamps.events_mapped}/{stamps.events} events, "
                          f"{stamps.responses_mapped}/{stamps.responses} responses mapped, "
                          f"{stamps.packets} packets, {stamps.packets_dropped} dropped, "
                          f"clock error {stamps.clock_error_ms:.4f} ms; read - packet P50/P99 "
                          f"{stamps.receive_lag_ms.p50:.2f}/{stamps.receive_lag_ms.p99:.2f} ms, "
                          f"end {stamps.end_lag_ms.p50:.2f}/{stamps.end_lag_ms.p99:.2f} ms; "
                          f"capture process CPU {capture_cpu:.3f} core]", flush=True)
                res[name][label]["valid"] = float(health.valid)
                res[name][label]["reasons"] = "; ".join(health.reasons)  # type: ignore[assignment]
            server_log(url, reset=True)
            exs, cpu, lags, _, _ = phase(make, lambda c: poisson(c, args.rate, args.poisson_seconds, args.poisson_tokens),
                                      url if captured else None)
            res[name]["poisson"] = {**arrivals(exs, args.rate), "cpu": cpu,
                                    "loop_lag_p50": pct(lags, 50), "loop_lag_p99": pct(lags, 99)}
            print(f"[{name} done at {time.perf_counter() - t_start:.0f} s]", flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
        for n in neighbours:
            n.kill()
            n.wait(10)
        if placement is not None:
            placement.restore()

    a, h = res["ours"], res.get("httpx")
    print(f"\nserver: TTFT {TTFT_MS:g} ms, ITL {ITL_MS:g} ms, {TOKENS} tokens; "
          f"c1 n={a['c1']['n']}, c64 n={a['c64']['n']}+{a['c64closed']['n']}, poisson {args.rate:g}/s x {args.poisson_seconds:g} s "
          f"({args.poisson_tokens} tokens) n={a['poisson']['n']}")
    print(f"  {'metric':<34}{'ours':>10}{'httpx' if h else '':>10} unit  httpx/ours")
    titles = {"c1": "concurrency 1 (sequential)", "c64": "concurrency 64 (64 streams started together, per round)",
              "c64closed": "concurrency 64, closed loop (next request sent as each stream ends)"}
    for label in ("c1", "c64", "c64closed"):
        print(f" {titles[label]}")
        for key, unit in (("lag_first_p50", "ms"), ("lag_first_p99", "ms"), ("lag_last_p50", "ms"),
                          ("lag_last_p99", "ms"), ("lag_all_p50", "ms"), ("lag_all_p99", "ms"), ("ttft_p50", "ms"), ("ttft_true_p50", "ms"),
                          ("ttft_p99", "ms"), ("ttft_true_p99", "ms"), ("tpot_p50", "ms"),
                          ("tpot_true_p50", "ms"), ("tpot_p99", "ms"), ("tpot_true_p99", "ms"),
                          ("read_minus_sent_p50", "ms"), ("cpu", "core"), ("loop_lag_p50", "ms"),
                          ("loop_lag_p99", "ms")):
            print(row(key, a[label][key], h[label][key] if h else None, unit))
    print(" poisson")
    for key, unit in (("rate", "req/s"), ("cv", ""), ("send_lag_p50", "ms"), ("send_lag_p99", "ms"),
                      ("ok", "req"), ("cpu", "core"), ("loop_lag_p50", "ms"), ("loop_lag_p99", "ms")):
        print(row(key, a["poisson"][key], h["poisson"][key] if h else None, unit))

    c1, c64, po = a["c1"], a["c64"], a["poisson"]
    for label in ("c1", "c64", "c64closed"):
        verdict = "valid" if a[label]["valid"] else f"INVALID ({a[label]['reasons']})"
        print(f"  self-check {label}: {verdict}")
    bars = [
        ("c64 run judged valid by the client's self-check", bool(a["c64"]["valid"])),
        ("c64 receive lag P50 <= 0.5 ms (first, last)", max(c64["lag_first_p50"], c64["lag_last_p50"]) <= 0.5),
        ("c64 receive lag P99 <= 3 ms (first, last)", max(c64["lag_first_p99"], c64["lag_last_p99"]) <= 3.0),
        ("c64 server read within 2 ms of sent_at (P50)", abs(c64["read_minus_sent_p50"]) <= 2.0),
        ("c64 TPOT P50 within 0.5 ms of truth", abs(c64["tpot_p50"] - c64["tpot_true_p50"]) <= 0.5),
        ("c1 TTFT P50 within 0.5 ms of truth", abs(c1["ttft_p50"] - c1["ttft_true_p50"]) <= 0.5),
        (f"poisson rate within 2 % of {args.rate:g}/s", abs(po["rate"] / args.rate - 1) <= 0.02),
        ("poisson inter-arrival CV within 0.1 of 1.0", abs(po["cv"] - 1.0) <= 0.1),
        ("poisson send lag P99 <= 1 ms", po["send_lag_p99"] <= 1.0),
    ]
    print()
    for text, ok in bars:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    load_after = os.getloadavg()
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s; 1-min load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after, on {os.cpu_count()} cores"
          + (f"; {len(neighbours)} CPU-bound neighbours" if neighbours else "")
          + (f"; {placement.describe()}" if placement else "; client and server share the cores")
          + ("; this client's receive times from packet capture" if args.capture else ""))
    return 0 if all(ok for _, ok in bars) else 1


if __name__ == "__main__":
    sys.exit(main())

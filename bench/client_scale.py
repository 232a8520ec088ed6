"""This client beside a raw asyncio client, at scale, against the exact reference server.

Each configuration runs this client (the plugin's load engine, ``load.coordinator.run_plan``,
or ``load.scenario.run_scenario`` with packet capture) and then the raw client of
``bench/raw_client.py`` (one protocol per connection, stamps in ``data_received``, parsing
after the run) on the same server, back to back, with the 1-minute load average printed on
every row. Against the server's log (``tests/refserver.py``: every write stamped on
CLOCK_MONOTONIC, the clock both clients stamp with):

* receive lag: the client's read of each first token - the server's write of it (P50/P99);
* TTFT error against the server's truth: reported TTFT - (server first write - server read of
  the request), P50 / P99 of the differences' distributions' percentiles (reported P - true P);
  "client-side" error: reported - (first write - the client's own ``sent_at``); and how long
  after ``sent_at`` the server read the request (with capture, after the departure: the
  server's own read delay, which no client sees on the wire);
* client CPU per request and per chunk (this client: the worker's phase CPU, excluding the
  parsing after the run; the raw client: the process CPU over its run);
* for this client, the self-check's verdict.

Parts (``--part``):

* ``c64``: 64 streams x 640 requests (TTFT 50 ms, one token per 10 ms, 128 tokens), ``--runs``
  consecutive runs (default 10): the bar is receive lag P99 <= 3 ms and TTFT P99 error <= 5 ms
  in every run the self-check calls valid, at least 9 of 10 valid;
* ``wide``: 256 and 1,024 concurrent streams (TTFT 50 ms, one token per 50 ms, 32 tokens, two
  requests per stream): the ratio of this client's receive-lag P99 to the raw client's, the
  send lag, the fan-in (each user's first write after the common start, P99 and max; the raw
  client's from its first write) and the self-check's verdict;
* ``open``: open-loop Poisson 500 and 2,000 req/s for 5 s (TTFT 5 ms, 4 tokens 2 ms apart):
  send lag, CPU per request (the anchor: ~47 us in MLPerf's client, AIPerf paces to ~50 us);
* ``request``: a closed loop of 8 streams of one token each (first token 1 ms after the read),
  2,000 requests: CPU per request with no spinning and one chunk per request;
* ``capture``: 64 streams with ``capture="on"`` beside ``--busy`` neighbours (one CPU-bound
  process per core): TTFT P50 / P99 error <= 1 / 3 ms against the server's truth, or the run
  judged invalid - never valid and wrong.

    python bench/client_scale.py --part c64 --runs 10
    python bench/client_scale.py --part wide
    python bench/client_scale.py --part open
    python bench/client_scale.py --part request
    python bench/client_scale.py --part capture --busy --runs 3
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
from typing import Any, Optional

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import raw_client  # noqa: E402
from pytest_goodput.load.client.event_loop import SPIN_S  # noqa: E402
from pytest_goodput.load.client.event_loop import run as run_loop  # noqa: E402
from pytest_goodput.load.sending.loops import SPIN_GAP_FRACTION  # noqa: E402
from pytest_goodput.load.coordinator import run_plan  # noqa: E402
from pytest_goodput.load.requests.schedule import open_loop_schedule  # noqa: E402
from pytest_goodput.load.scenario import run_scenario  # noqa: E402
from pytest_goodput.measure.records.record import to_record  # noqa: E402
from pytest_goodput.schema.scenario.spec import ScenarioSpec  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)] if s else float("nan")


def start_server(ttft_ms: float, itl_ms: float) -> tuple[subprocess.Popen, str, int]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "refserver.py"), "--port", "0",
                             "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms), "--max-seconds", "1800"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line and line[0] == "READY", line
    return proc, f"http://127.0.0.1:{line[1]}", int(line[1])


def truth(url: str) -> dict[str, Any]:
    log = httpx.get(url + "/_log", timeout=60).json()
    httpx.post(url + "/_reset")
    return log


def judge_rows(rows: list[tuple[Optional[str], Optional[float], Optional[float], Optional[float]]],
               log: dict[str, Any]) -> dict[str, float]:
    """rows: (response id, first-token read, reported TTFT ms, client sent_at) per measured request."""
    lag, rep, true_srv, true_cli, read_after = [], [], [], [], []
    for rid, first, ttft, sent in rows:
        e = log.get(rid or "")
        if e is None or not e["token_writes"] or first is None or ttft is None:
            continue
        w = e["token_writes"][0]
        lag.append((first - w) * 1e3)
        rep.append(ttft)
        true_srv.append((w - e["read_at"]) * 1e3)
        if sent is not None:
            true_cli.append((w - sent) * 1e3)
            read_after.append((e["read_at"] - sent) * 1e3)
    return {"n": len(lag), "lag_p50": pct(lag, 50), "lag_p99": pct(lag, 99),
            "err_p50": pct(rep, 50) - pct(true_srv, 50), "err_p99": pct(rep, 99) - pct(true_srv, 99),
            "cli_err_p99": pct(rep, 99) - pct(true_cli, 99) if true_cli else float("nan"),
            "read_p50": pct(read_after, 50), "read_p99": pct(read_after, 99)}


def ours(spec: ScenarioSpec, url: str) -> dict[str, Any]:
    """This client through the load engine (run_plan), or run_scenario when capturing."""
    if spec.capture == "on":
        res = run_scenario(spec, url + "/v1", "ref-model", salt=1)
        meas = [r for r in res.requests if not r.warmup]
        rows = [(r.response_id, r.first_token_at, r.ttft_ms, r.sent_at) for r in meas]
        c = res.client
        dep = res.receive_timestamps.departure_lag_ms if res.receive_timestamps else None
        extra = {"valid": c.valid, "reasons": c.reasons, "loop_max": c.loop_lag_ms.max, "cpu_req_us": float("nan"),
                 "cpu_chunk_us": float("nan"), "delayed": c.delayed_requests,
                 "departure_p99": dep.p99 if dep else None}
    else:
        out = run_plan(spec, url + "/v1", "ref-model", salt=1)
        recs = [to_record(ex, stream=True, api="completions") for ex in out.exchanges]
        meas = [r for r in recs if not r.warmup]
        rows = [(r.response_id, r.first_token_at, r.ttft_ms, r.sent_at) for r in meas]
        h = out.check.health()
        cpu = sum(st.cpu_s for st in out.check.workers)
        chunks = sum(r.content_chunks for r in recs)
        extra = {"valid": h.valid, "reasons": h.reasons, "loop_max": h.loop_lag_ms.max,
                 "cpu_req_us": cpu / max(1, len(recs)) * 1e6, "cpu_chunk_us": cpu / max(1, chunks) * 1e6,
                 "delayed": h.delayed_requests, "send_p99": h.send_lag_p99_ms,
                 "fan_in": fan_in([(ex.plan.scheduled_at, ex.sent_at) for ex in out.exchanges], spec.concurrency)}
    return {"rows": rows, **extra}


def raw(port: int, streams: Optional[int], requests: int, tokens: int, offsets: Optional[list[float]]) -> dict[str, Any]:
    c0, w0 = time.process_time(), time.perf_counter()
    if offsets is None:
        exs = run_loop(raw_client.closed_loop("127.0.0.1", port, streams or 1, requests, tokens))
    else:
        exs = run_loop(raw_client.open_loop("127.0.0.1", port, offsets, tokens))
    cpu = time.process_time() - c0
    rows = []
    for ex in exs:
        rid, first = ex.first_token()
        rows.append((rid, first, None if first is None else (first - ex.scheduled_at) * 1e3, ex.sent_at))
    chunks = sum(ex.chunks() for ex in exs)
    sends = [(ex.sent_at - ex.scheduled_at) * 1e3 for ex in exs]
    burst = sorted(exs, key=lambda ex: ex.scheduled_at)[:streams or 0]
    t0 = burst[0].scheduled_at if burst else 0.0
    return {"rows": rows, "valid": None, "cpu_req_us": cpu / max(1, len(exs)) * 1e6,
            "cpu_chunk_us": cpu / max(1, chunks) * 1e6, "send_p99": pct(sends, 99) if offsets else None,
            "fan_in": fan_in([(t0, ex.sent_at) for ex in burst], streams) if offsets is None else None,
            "wall_s": time.perf_counter() - w0}


def fan_in(pairs: list[tuple[float, Optional[float]]], users: Optional[int]) -> Optional[tuple[float, float]]:
    """A closed loop's burst: each user's first write after the common start (ms), P99 and max.

    ``pairs``: (scheduled, sent) of every request; the burst is the ``users`` earliest-scheduled."""
    if not users:
        return None
    first = sorted(pairs, key=lambda p: p[0])[:users]
    t0 = min(p[0] for p in first)
    lags = [(sent - t0) * 1e3 for _, sent in first if sent is not None]
    return (pct(lags, 99), max(lags)) if lags else None


def show(label: str, client: str, r: dict[str, Any], j: dict[str, float]) -> None:
    verdict = "" if r.get("valid") is None else ("valid" if r["valid"] else "INVALID")
    extra = ""
    if r.get("send_p99") is not None:
        extra += f"  send lag P99 {r['send_p99']:.2f} ms"
    if r.get("fan_in") is not None:
        extra += f"  fan-in (first writes after the start) P99/max {r['fan_in'][0]:.2f}/{r['fan_in'][1]:.2f} ms"
    if r.get("loop_max") is not None:
        extra += f"  loop-lag max {r['loop_max']:.1f} ms  delayed {r.get('delayed')}"
    if r.get("departure_p99") is not None:
        extra += f"  departure - stamp P99 {r['departure_p99']:.3f} ms"
    print(f"{label:>14} {client:>5}: n {j['n']:4d}  receive lag P50/P99 {j['lag_p50']:.2f}/{j['lag_p99']:.2f} ms  "
          f"TTFT error vs server P50/P99 {j['err_p50']:+.2f}/{j['err_p99']:+.2f} ms (client-side P99 "
          f"{j['cli_err_p99']:+.2f}; server read - sent_at P50/P99 {j['read_p50']:.2f}/{j['read_p99']:.2f})  CPU {r['cpu_req_us']:.0f} us/req {r['cpu_chunk_us']:.1f} us/chunk"
          f"{extra}  {verdict}  load {os.getloadavg()[0]:.2f}", flush=True)
    if r.get("reasons"):
        print(f"{'':>22}{'; '.join(r['reasons'])}", flush=True)


def side_by_side(label: str, spec: ScenarioSpec, url: str, port: int, tokens: int,
                 offsets: Optional[list[float]] = None,
                 bar: Optional[tuple[Optional[float], float]] = None) -> tuple[dict, dict, dict, dict]:
    """``bar``: (TTFT P50, P99 error limits) a valid run of this client must be within (and
    receive lag P99 <= 3 ms); a valid run outside it is flagged."""
    truth(url)
    a = ours(spec, url)
    ja = judge_rows(a["rows"], truth(url))
    show(label, "ours", a, ja)
    a["within"] = bar is None or (ja["lag_p99"] <= 3.0 and abs(ja["err_p99"]) <= bar[1] and (
        bar[0] is None or abs(ja["err_p50"]) <= bar[0]))
    if a["valid"] and not a["within"]:
        print(f"{'':>22}VALID AND OUTSIDE THE BAR (receive lag P99 <= 3 ms, TTFT error P50/P99 <= "
              f"{bar[0] if bar and bar[0] else '-'}/{bar[1] if bar else '-'} ms)", flush=True)
    if offsets is not None and spec.rate:
        print(f"{'':>22}of its CPU per request, up to {min(SPIN_S, SPIN_GAP_FRACTION / spec.rate) * 1e6:.0f} us "
              "is the open loop's spin before each deadline", flush=True)
    n = (spec.requests or 0) + (spec.warmup_requests or 0)
    b = raw(port, spec.concurrency, n, tokens, offsets)
    jb = judge_rows(b["rows"], truth(url))
    show(label, "raw", b, jb)
    return a, ja, b, jb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["c64", "wide", "open", "capture", "request"], required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--busy", action="store_true", help="one CPU-bound neighbour process per core")
    ap.add_argument("--streams", default="256,1024", help="wide: stream counts")
    ap.add_argument("--rates", default="500,2000", help="open: requests/s")
    args = ap.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)] \
        if args.busy else []
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}" + (f", {len(busy)} CPU-bound neighbours" if busy else ""), flush=True)
    try:
        if args.part in ("c64", "capture"):
            proc, url, port = start_server(50, 10)
            spec = ScenarioSpec(scenario="concurrency", concurrency=64, requests=640, isl=16, osl=128,
                                capture="on" if args.part == "capture" else "off")
            good = valid = 0
            bar = (1.0, 3.0) if args.part == "capture" else (None, 5.0)
            for k in range(args.runs):
                a, _, _, _ = side_by_side(f"{args.part} run {k + 1}", spec, url, port, 128, bar=bar)
                valid += bool(a["valid"])
                good += bool(a["valid"]) and a["within"]
            print(f"\n{args.part}: {valid} of {args.runs} runs valid, {good} of them within the bar; "
                  f"load average now {os.getloadavg()[0]:.2f}")
        elif args.part == "wide":
            proc, url, port = start_server(50, 50)
            for n in (int(x) for x in args.streams.split(",")):
                spec = ScenarioSpec(scenario="concurrency", concurrency=n, requests=2 * n, warmup_requests=0,
                                    isl=16, osl=32, timeout_s=120)
                a, ja, b, jb = side_by_side(f"{n} streams", spec, url, port, 32)
                print(f"{'':>22}receive-lag P99 ratio (ours / raw) {ja['lag_p99'] / jb['lag_p99']:.2f}", flush=True)
        elif args.part == "request":
            proc, url, port = start_server(1, 1)
            spec = ScenarioSpec(scenario="concurrency", concurrency=8, requests=2000, warmup_requests=0,
                                isl=16, osl=1, timeout_s=30)
            side_by_side("8 streams x 1 token", spec, url, port, 1)
        else:
            proc, url, port = start_server(5, 2)
            for rate in (float(x) for x in args.rates.split(",")):
                spec = ScenarioSpec(scenario="server", rate=rate, duration_s=5.0, warmup_s=0.0, isl=16, osl=4,
                                    timeout_s=30, seed=1)
                offsets = list(open_loop_schedule(spec).offsets)
                side_by_side(f"{rate:g} req/s", spec, url, port, 4, offsets)
    finally:
        proc.terminate()
        for b in busy:
            b.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())

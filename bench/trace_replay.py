"""Does a real trace replay on schedule? Mooncake's conversation trace against an exact server.

Replays a Mooncake trace (default: ``tests/data/mooncake_conversation_300.jsonl``, the first
300 rows of the FAST'25 conversation trace: prompts of 14k tokens on average and up to 120k,
bursts of up to 16 rows with one timestamp, prefixes shared through ``hash_ids``) at
``--scale`` (default 0.1: 102 s of trace in 10 s) with the CLI a user runs::

    python -m pytest_goodput run --url URL --scenario trace --trace FILE --trace-time-scale 0.1 --json F

against the reference server (``tests/refserver.py`` in its own process: first chunk 50 ms
after the read, then 64 tokens per chunk every 10 ms, so a 2,000-token answer takes 360 ms:
the subject is the client's schedule, not the server). Each code tree given is run in turn
(``--runs`` rounds, trees alternating, so they share the machine's state), and per run it
prints:

* arrival error: each request's send time - its scheduled time (``sent_at - scheduled_at``,
  the trace's offset from the run's start) P50 / P99 / max, ms;
* server read: when the server had read the whole body - the scheduled time, P50 / P99, ms
  (a 120k-token body is ~0.8 MB: this includes its transfer);
* loop-lag max (ms) and whether the self-check judged the run valid (its reasons if not);
* the client process's peak RSS (MB, ``wait4``'s ``ru_maxrss``);
* requests answered.

Targets (issue "Exact on real traffic"): arrival error P99 <= 2 ms, loop-lag max <= 5 ms,
the run valid. Compare trees within one invocation, never figures across invocations.

    python bench/trace_replay.py --before 452a57d            # that commit's code, then this tree
    mkdir -p before && git archive 452a57d pytest_goodput | tar -x -C before
    python bench/trace_replay.py --code before --runs 3      # a tree already extracted
    python bench/trace_replay.py --trace FULL.jsonl --requests 1000
    python bench/trace_replay.py --before 452a57d --client-cpus 1   # the client placed, priority raised
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests" / "data" / "mooncake_conversation_300.jsonl"
sys.path.insert(0, str(ROOT / "bench"))
from client_accuracy import start_server  # noqa: E402  (the same exact server: TTFT 50 ms, ITL 10 ms)
CHUNK_TOKENS = 64
ARRIVAL_P99_MS, LOOP_MAX_MS = 2.0, 5.0


def extract(commit: str, into: Path) -> Path:
    """``git archive COMMIT pytest_goodput`` unpacked under ``into``."""
    archive = subprocess.run(["git", "archive", commit, "pytest_goodput"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def q(xs: list[float], p: float) -> float:
    return float(np.percentile(xs, p)) if xs else float("nan")


def one_run(code: Path, url: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    httpx.post(url + "/_reset")
    cmd = [sys.executable, "-m", "pytest_goodput", "run", "--url", url + "/v1", "--model", "ref-model",
           "--scenario", "trace", "--trace", str(args.trace), "--trace-time-scale", str(args.scale),
           "--timeout", "60", "--json", str(out)]
    if args.requests:
        cmd += ["--requests", str(args.requests)]
    if args.client_cpus:
        cmd += ["--client-cpus", args.client_cpus]
    env = {**os.environ, "PYTHONPATH": str(code)}
    with open(out.with_suffix(".log"), "w") as log:
        # not from ROOT: ``-m`` puts the working directory first on sys.path, before PYTHONPATH
        p = subprocess.Popen(cmd, cwd=out.parent, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if not out.exists():
        raise SystemExit(f"the run wrote no result (exit {p.returncode}): "
                         f"{out.with_suffix('.log').read_text()[-2000:]}")
    run = json.loads(out.read_text())
    server = httpx.get(url + "/_log", timeout=60).json()
    arrival = [r["send_lag_ms"] for r in run["requests"] if r.get("send_lag_ms") is not None]
    reads = [(server[r["response_id"]]["read_at"] - r["scheduled_at"]) * 1e3
             for r in run["requests"] if r.get("response_id") in server]
    c = run["client"]
    return {"exit": p.returncode, "valid": c["valid"], "reasons": c["reasons"], "sent": len(arrival),
            "ok": sum(1 for r in run["requests"] if r["ok"]), "n": len(run["requests"]),
            "arr_p50": q(arrival, 50), "arr_p99": q(arrival, 99), "arr_max": max(arrival, default=float("nan")),
            "read_p50": q(reads, 50), "read_p99": q(reads, 99),
            "loop_max": c["loop_lag_ms"]["max"], "loop_p99": c["loop_lag_ms"]["p99"],
            "delayed": c["delayed_requests"], "rss_mb": usage.ru_maxrss / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", metavar="COMMIT", help="also run this commit's pytest_goodput (git archive)")
    ap.add_argument("--code", action="append", default=[], metavar="DIR",
                    help="also run the pytest_goodput under DIR (repeatable)")
    ap.add_argument("--runs", type=int, default=2, help="rounds (each tree once per round)")
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--scale", type=float, default=0.1, help="trace_time_scale")
    ap.add_argument("--requests", type=int, default=0, help="cut the replay to this many rows (0: all)")
    ap.add_argument("--client-cpus", help="the CLI's --client-cpus (placement and priority) for every run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees: list[tuple[str, Path]] = []
        if args.before:
            (Path(tmp) / "before").mkdir()
            trees.append((args.before, extract(args.before, Path(tmp) / "before")))
        trees += [(str(d), Path(d)) for d in args.code]
        trees.append(("this tree", ROOT))
        runs = Path(tmp) / "runs"  # the working directory of every run: no package in it
        runs.mkdir()
        for label, code in trees:
            where = subprocess.run([sys.executable, "-c", "import pytest_goodput; print(pytest_goodput.__file__)"],
                                   env={**os.environ, "PYTHONPATH": str(code)}, cwd=runs, capture_output=True,
                                   text=True)
            print(f"{label}: {where.stdout.strip()}")
        proc, url = start_server(None, "--chunk-tokens", str(CHUNK_TOKENS), max_seconds=1200)
        rows: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in trees}
        try:
            for k in range(args.runs):
                for label, code in trees:
                    r = one_run(code, url, runs / f"run{k}.json", args)
                    rows[label].append(r)
                    print(f"run {k + 1} {label:>10}: {'valid  ' if r['valid'] else 'INVALID'} "
                          f"arrival error P50/P99/max {r['arr_p50']:.2f}/{r['arr_p99']:.2f}/{r['arr_max']:.1f} ms  "
                          f"server read P50/P99 {r['read_p50']:.1f}/{r['read_p99']:.1f} ms  "
                          f"loop-lag max {r['loop_max']:.1f} ms  peak RSS {r['rss_mb']:.0f} MB  "
                          f"ok {r['ok']}/{r['n']}  delayed {r['delayed']}"
                          + (f"\n           {'; '.join(r['reasons'])}" if r["reasons"] else ""), flush=True)
        finally:
            proc.terminate()
            proc.wait(10)
    print()
    for label, rs in rows.items():
        met = sum(r["valid"] and r["arr_p99"] <= ARRIVAL_P99_MS and r["loop_max"] <= LOOP_MAX_MS for r in rs)
        print(f"{label}: {met} of {len(rs)} runs valid with arrival error P99 <= {ARRIVAL_P99_MS:g} ms and "
              f"loop-lag max <= {LOOP_MAX_MS:g} ms; peak RSS {max(r['rss_mb'] for r in rs):.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

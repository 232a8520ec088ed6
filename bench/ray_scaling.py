"""The Ray backend next to the process backend: what the client side sustains, what a run costs.

Against the embedded simulator (its own process, ``time_scale`` 0.25 so it is not the
bottleneck first), an open-loop Poisson ladder of request rates is run at 1, 2 and 4 workers
on both backends (Ray: the local runtime this script starts, one per machine); at each
level it prints achieved output tokens/s and the self-check's verdict, and per
configuration the highest level with a valid self-check. Then what a run costs to start:
``ray.init`` of a local runtime (once per session or CLI run), and the wall time of a
one-request run per backend and worker count (worker start, clock-offset round trips,
connection pre-opening, shipping back), alternating backends; for Ray, a run whose actors
were kept from the session's previous run next to one that creates them (``--reuse-only``:
that comparison alone). Last, how compact a share travels: pickled bytes of N raw exchanges
as objects vs as columns.

``--equal`` first compares the backends for one seed against the reference server
(tests/refserver.py: TTFT and inter-token times are exact deadlines, so what differs is
client and machine noise): request counts, the schedule, TTFT and ITL percentiles.

The machine has 2 cores and is shared: read ratios measured side by side in one run.

    python bench/ray_scaling.py                 # about 3 minutes
    python bench/ray_scaling.py --rates 40,80 --seconds 2
    python bench/ray_scaling.py --equal --only-equal    # the equality check alone, about 1 minute
    python bench/ray_scaling.py --reuse-only            # actors kept vs created, about 1 minute
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pytest_goodput.engines.engine import simulator  # noqa: E402
from pytest_goodput.load import ray_runtime
from pytest_goodput.load.pools.ray import actors as ray_actors  # noqa: E402
from pytest_goodput.load.pools.ray.columns import pack  # noqa: E402
from pytest_goodput.load.scenario import run_scenario  # noqa: E402
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan  # noqa: E402
from pytest_goodput.schema.scenario.spec import ScenarioSpec  # noqa: E402


def ladder(url: str, backend: str, workers: int, rates: list[float], seconds: float, osl: int) -> float:
    best = 0.0
    for rate in rates:
        spec = ScenarioSpec(scenario="server", rate=rate, requests=max(workers, round(rate * seconds)),
                            warmup_requests=workers, isl=32, osl=osl, workers=workers, backend=backend)
        r = run_scenario(spec, url, "sim", salt=7)
        tok_s = r.throughput.output_tokens_per_s
        verdict = "valid" if r.client.valid else "invalid: " + "; ".join(r.client.reasons)[:110]
        print(f"  {backend:7s} workers={workers} rate={rate:6.0f} req/s  {tok_s:8.0f} output tok/s  "
              f"send lag P99 {r.client.send_lag_p99_ms or 0:6.1f} ms  {verdict}", flush=True)
        if r.client.valid:
            best = max(best, tok_s)
    return best


def start_cost(url: str, backend: str, workers: int) -> float:
    spec = ScenarioSpec(scenario="offline", requests=workers, isl=8, osl=2, workers=workers, backend=backend)
    t = time.perf_counter()
    run_scenario(spec, url, "sim", salt=7)
    return time.perf_counter() - t


def reuse_cost(url: str, workers: int, repeats: int) -> tuple[float, float]:
    """Median wall seconds of a one-request Ray run creating its actors vs taking kept ones."""
    ray = ray_runtime.ensure()
    fresh, kept = [], []
    for _ in range(repeats):
        ray_actors.forget(ray)  # the next run creates its actors...
        fresh.append(start_cost(url, "ray", workers))
        kept.append(start_cost(url, "ray", workers))  # ...and this one takes them back
    return statistics.median(fresh), statistics.median(kept)


def shipping(n: int) -> tuple[int, int, float, float]:
    """Pickled sizes of ``n`` distinct exchanges (32 chunks each) as objects and as columns."""
    exs = [RawExchange(RequestPlan(i, f"{i} " + "x" * 128, 32, 32, float(i)), i + 0.5, i + 2.0, 200,
                       [(i + 1.0 + j * 0.01, f'data: {{"choices":[{{"text":" t{i}.{j}"}}]}}\n\n'.encode())
                        for j in range(32)]) for i in range(n)]
    t0 = time.perf_counter()
    objects = pickle.dumps(exs, protocol=5)
    t1 = time.perf_counter()
    columns = pickle.dumps(pack(exs), protocol=5)
    t2 = time.perf_counter()
    return len(objects), len(columns), t1 - t0, t2 - t1


def equal(pairs: int) -> None:
    """Process vs Ray, same seed and salt, alternating, against the reference server."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "refserver.py"), "--port", "0",
                             "--ttft-ms", "5", "--itl-ms", "2", "--max-seconds", "600"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    url = f"http://127.0.0.1:{line[1]}/v1"
    spec = ScenarioSpec(scenario="server", rate=40, requests=400, warmup_requests=10, isl=16, osl=16,
                        workers=2, seed=3)
    print("equality: server 40 req/s, 400 measured requests, OSL 16, workers=2, reference server "
          "TTFT 5 ms / ITL 2 ms")
    try:
        for i in range(pairs):
            views = {}
            for backend in ("process", "ray"):
                r = run_scenario(spec.model_copy(update={"backend": backend}), url, "m", salt=5)
                first = r.requests[0].scheduled_at
                views[backend] = ([(x.index, x.warmup, x.output_tokens) for x in r.requests],
                                  [round(x.scheduled_at - first, 9) for x in r.requests])
                m = r.metrics
                print(f"  pair {i + 1} {backend:7s} issued {r.issued} completed {r.completed}  TTFT P50/P99 "
                      f"{m.ttft_ms.p50:.2f}/{m.ttft_ms.p99:.2f} ms  ITL P50/P99 {m.itl_ms.p50:.2f}/"
                      f"{m.itl_ms.p99:.2f} ms  self-check {'valid' if r.client.valid else 'invalid'}",
                      flush=True)
            same = views["process"] == views["ray"]
            print(f"  pair {i + 1}: same requests, token counts and schedule offsets: {same}")
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="25,50,100,200", help="comma-separated request rates")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per level")
    ap.add_argument("--osl", type=int, default=32)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--start-repeats", type=int, default=3)
    ap.add_argument("--equal", action="store_true", help="first compare the backends for one seed")
    ap.add_argument("--only-equal", action="store_true", help="stop after the comparison")
    ap.add_argument("--reuse-only", action="store_true", help="only actors kept vs created")
    ns = ap.parse_args()
    rates = [float(x) for x in ns.rates.split(",")]
    counts = [int(x) for x in ns.workers.split(",")]
    t = time.perf_counter()
    ray_runtime.configure("local")
    ray_runtime.ensure()
    init_s = time.perf_counter() - t
    try:
        if ns.equal or ns.only_equal:
            equal(3)
        if ns.only_equal:
            return
        with simulator(time_scale=0.25) as eng:
            url = eng.base_url
            if ns.reuse_only:
                print("one-request Ray run, wall seconds (median of repeats): actors created vs kept")
                for workers in counts:
                    fresh, kept = reuse_cost(url, workers, ns.start_repeats)
                    print(f"  workers={workers}: created {fresh:.2f} s   kept {kept:.2f} s   "
                          f"(saved {fresh - kept:.2f} s a run)", flush=True)
                return
            best: dict[tuple[str, int], float] = {}
            for workers in counts:
                for backend in ("process", "ray"):
                    best[backend, workers] = ladder(url, backend, workers, rates, ns.seconds, ns.osl)
            print("\nhighest output tokens/s with a valid self-check (0: no level valid)")
            for workers in counts:
                print(f"  workers={workers}: process {best['process', workers]:7.0f}   "
                      f"ray {best['ray', workers]:7.0f}")
            print(f"\nstart-up: ray.init of a local runtime {init_s:.2f} s (once per session / CLI run)")
            print("one-request run, wall seconds (median of alternating repeats):")
            for workers in counts:
                times: dict[str, list[float]] = {"process": [], "ray": []}
                for _ in range(ns.start_repeats):
                    for backend in ("process", "ray"):
                        times[backend].append(start_cost(url, backend, workers))
                p, r = statistics.median(times["process"]), statistics.median(times["ray"])
                print(f"  workers={workers}: process {p:.2f} s   ray {r:.2f} s (actors kept)   "
                      f"(ray - process {r - p:+.2f} s)")
            print("one-request Ray run: actors created vs kept from the previous run")
            for workers in counts:
                fresh, kept = reuse_cost(url, workers, ns.start_repeats)
                print(f"  workers={workers}: created {fresh:.2f} s   kept {kept:.2f} s   "
                      f"(saved {fresh - kept:.2f} s a run)", flush=True)
    finally:
        ray_runtime.shutdown()
    for n in (1000, 10000):
        obj, cols, obj_s, cols_s = shipping(n)
        print(f"shipping {n} exchanges of 32 chunks: pickled objects {obj / 1e6:.2f} MB in "
              f"{obj_s * 1e3:.0f} ms, columns {cols / 1e6:.2f} MB ({cols / obj:.0%}) in {cols_s * 1e3:.0f} ms")


if __name__ == "__main__":
    main()

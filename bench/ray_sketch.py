"""Sketched Ray runs next to exact ones: percentile accuracy, bytes shipped, time to summarize.

No server and no Ray: what a sketched run changes is what its workers ship and what the
driver reads, so this builds N synthetic raw exchanges (an open-loop run at 1000 req/s; 32
SSE chunks each; TTFT lognormal around 50 ms with a heavy tail, inter-token gaps lognormal
around 8 ms; one request in 200 failed) and deals them round-robin to W workers, as the Ray
backend does. Then, on the same exchanges:

* exact path: each worker's share packed as columns (what ships today), the driver parsing
  every record and summarizing them (``summarize``);
* sketched path: each worker parsing its own share into a part (``sketch.Sketcher``:
  counters, DDSketches, window ends) plus the seeded sample, the driver merging the parts and
  building the result (``summarize_part``).

Printed: bytes shipped by all workers (pickled, protocol 5) on each path; every reported
percentile of TTFT, TPOT, ITL and E2E on both paths with the relative error (bound: 1 %);
counts, rates and SLO verdicts compared; and seconds spent (worker-side parsing is spread
over the workers on a real cluster). The sample size is ``--sample`` (the product's default
100,000 needs runs above 100,000 requests to be a sample at all).

    python bench/ray_sketch.py                          # 200,000 requests, 4 workers, ~4 minutes
    python bench/ray_sketch.py --requests 20000 --sample 2000   # quick, ~30 s
"""

from __future__ import annotations

import argparse
import pickle
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pytest_goodput.load import sketch  # noqa: E402
from pytest_goodput.load.pools.ray.columns import pack, unpack  # noqa: E402
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan  # noqa: E402
from pytest_goodput.measure.metrics import summarize  # noqa: E402
from pytest_goodput.measure.run_part import RunPart, records_of  # noqa: E402
from pytest_goodput.measure.sketched import summarize_part  # noqa: E402
from pytest_goodput.schema.runs.results import ClientHealth  # noqa: E402
from pytest_goodput.schema.scenario.spec import ScenarioSpec  # noqa: E402


def exchanges(n: int, seed: int = 0) -> list[RawExchange]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sched = i * 0.001
        plan = RequestPlan(i, f"{i} " + "x" * 128, 32, 32, sched, warmup=i < 10, open_loop=True)
        sent = sched + rng.uniform(0.0, 0.0005)
        if i % 200 == 7:
            out.append(RawExchange(plan, sent, sent + 60.0, None, [], "timeout", "no answer in 60 s"))
            continue
        t = sent + rng.lognormvariate(-3.0, 0.5)  # TTFT: median 50 ms, P99 ~160 ms
        reads = []
        for j in range(32):
            reads.append((t, f'data: {{"choices":[{{"text":" t{i}.{j}"}}]}}\n\n'.encode()))
            t += rng.lognormvariate(-4.8, 0.4)  # inter-token: median 8 ms
        reads.append((t, b"data: [DONE]\n\n"))
        out.append(RawExchange(plan, sent, t + 0.0001, 200, reads))
    return out


def nbytes(obj: object) -> int:
    return len(pickle.dumps(obj, protocol=5))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200_000, help="measured + 10 warm-up requests")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--sample", type=int, default=sketch.SAMPLE_REQUESTS)
    ns = ap.parse_args()
    n, w = ns.requests + 10, ns.workers
    spec = ScenarioSpec(scenario="server", rate=1000, requests=ns.requests, warmup_requests=10,
                        ttft_ms=100, ttft_p99_ms=150, itl_p99_ms=20, seed=1, sketch_above=1)
    client = ClientHealth(valid=True, cpu_utilization=0.1, loop_lag_p99_ms=0.5)
    t = time.perf_counter()
    exs = exchanges(n)
    shares = [exs[k::w] for k in range(w)]
    print(f"{n:,} requests ({ns.requests:,} measured), {w} workers, 32 chunks each; built in "
          f"{time.perf_counter() - t:.1f} s", flush=True)

    t = time.perf_counter()
    cols = [pack(s) for s in shares]
    exact_bytes = sum(nbytes(c) for c in cols)
    pack_s = time.perf_counter() - t
    t = time.perf_counter()
    back = sorted((ex for c in cols for ex in unpack(c)), key=lambda ex: ex.plan.index)
    exact = summarize(records_of(back, spec, None), spec, client)
    exact_s = time.perf_counter() - t
    print(f"exact:    shipped {exact_bytes / 1e6:8.2f} MB ({exact_bytes / n:.0f} B a request); workers "
          f"packed in {pack_s:.1f} s, driver parsed and summarized in {exact_s:.1f} s", flush=True)

    plan = sketch.SketchPlan(0.01, min(1.0, ns.sample / n), spec.seed, n)
    t = time.perf_counter()
    shipped = [sketch.Sketcher(plan, spec, None).share(s, lambda _: None) for s in shares]
    worker_s = time.perf_counter() - t
    part_bytes = sum(nbytes(x["part"]) for x in shipped)
    sample_bytes = sum(nbytes(x["sample"]) for x in shipped)
    t = time.perf_counter()
    merged = RunPart(plan.alpha)
    for x in shipped:
        merged.merge(pickle.loads(pickle.dumps(x["part"], protocol=5)))
    sample = sorted((ex for x in shipped for ex in unpack(x["sample"])), key=lambda ex: ex.plan.index)
    kept = sum(not ex.plan.warmup for ex in sample)
    sk = summarize_part(merged, records_of(sample, spec, None), spec, client, plan.info(1, kept))
    driver_s = time.perf_counter() - t
    total = part_bytes + sample_bytes
    print(f"sketched: shipped {total / 1e6:8.2f} MB = parts {part_bytes / 1e3:.0f} kB + sample of {kept:,} "
          f"{sample_bytes / 1e6:.2f} MB ({total / exact_bytes:.1%} of exact); workers parsed and "
          f"sketched in {worker_s:.1f} s (all {w}, one after another here), driver in {driver_s:.1f} s",
          flush=True)

    print("\nmetric  pct     exact ms   sketch ms   rel. error")
    worst = 0.0
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        e, s = getattr(exact.metrics, metric), getattr(sk.metrics, metric)
        for p in ("p50", "p90", "p95", "p99"):
            ev, sv = getattr(e, p), getattr(s, p)
            err = abs(sv - ev) / ev
            worst = max(worst, err)
            print(f"{metric:7s} {p:4s} {ev:11.3f} {sv:11.3f}   {err:8.3%}")
        assert (e.count, e.max) == (s.count, s.max)
    print(f"largest relative error {worst:.3%} (bound 1 %)")
    same = [exact.issued == sk.issued, exact.completed == sk.completed, exact.failures == sk.failures,
            exact.goodput == sk.goodput, exact.window == sk.window,
            [(c.ok, c.proven, c.samples, c.over_limit) for c in exact.percentile_slos]
            == [(c.ok, c.proven, c.samples, c.over_limit) for c in sk.percentile_slos]]
    print(f"counts, failures, goodput, window, SLO verdicts and proofs equal: {all(same)} {same}")
    print(f"throughput exact {exact.throughput.output_tokens_per_s:.1f} tok/s, sketched "
          f"{sk.throughput.output_tokens_per_s:.1f} tok/s; samples' rate window "
          f"{sk.samples_window_s():.2f} s of {sk.window.seconds:.2f} s")
    for c, d in zip(exact.percentile_slos, sk.percentile_slos):
        print(f"  {c.name}: exact {c.value_ms} ok={c.ok}; sketched {d.value_ms} ok={d.ok}")


if __name__ == "__main__":
    main()

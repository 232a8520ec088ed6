"""The Ray backend on a two-node cluster started on this machine (``ray.cluster_utils.Cluster``).

Ray's test cluster starts a head and a second node as separate raylets on one machine: two
node ids, each with its own CPUs, the same scheduling (node affinity) a real cluster uses.
Against the embedded simulator this checks, and prints:

1. placement: a Ray run without ``workers=`` uses one worker per node, and the two workers
   are pinned to the two different nodes (the node ids ``placement.place`` chose);
2. sameness: a run with 2 workers across the 2 nodes and the process backend's run of the
   same spec, seed and salt send the same requests (indices, warm-up flags, output token
   counts) on the same schedule (offsets from the first deadline), for an open-loop and a
   closed-loop scenario;
3. a sketched run across the two nodes (``sketch_above`` below its size): exact counts equal
   to the process run's, and the result flagged.

It exits 1 if any check fails. Not a unit test: starting the two nodes alone takes 15-35 s on
the 2-core machine, and the whole script about a minute and a half.

    python bench/ray_cluster.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pytest_goodput.engines.engine import simulator  # noqa: E402
from pytest_goodput.load.pools.ray import pool as ray_pool  # noqa: E402
from pytest_goodput.load.scenario import run_scenario  # noqa: E402
from pytest_goodput.schema.runs.results import RunResult  # noqa: E402
from pytest_goodput.schema.scenario.spec import ScenarioSpec  # noqa: E402

OBJECT_STORE = 80 * 1024 * 1024


def view(r: RunResult) -> tuple[list[tuple[int, bool, int]], list[float]]:
    first = r.requests[0].scheduled_at
    return ([(x.index, x.warmup, x.output_tokens) for x in r.requests],
            [round(x.scheduled_at - first, 9) for x in r.requests])


def main() -> int:
    import ray
    from ray.cluster_utils import Cluster

    start = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": OBJECT_STORE})
    cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    cluster.wait_for_nodes()
    nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    print(f"cluster: {len(nodes)} nodes up in {time.perf_counter() - start:.1f} s: "
          + ", ".join(n[:12] for n in nodes), flush=True)
    chosen: list[list[str]] = []
    place = ray_pool.place

    def recording(n: int, ns: Any) -> list[str]:
        chosen.append(place(n, ns))
        return chosen[-1]

    ray_pool.place = recording  # type: ignore[assignment]
    failed = []
    try:
        with simulator(time_scale=0.25) as eng:
            url = eng.base_url
            server = ScenarioSpec(scenario="server", rate=40, requests=40, warmup_requests=4, isl=8,
                                  osl=6, osl_dist="uniform", range_ratio=0.5, seed=5)
            r = run_scenario(server.model_copy(update={"backend": "ray"}), url, "sim", salt=11)
            ok = r.client.workers == 2 and sorted(chosen[-1]) == nodes
            print(f"1. default placement: {r.client.workers} workers on nodes "
                  f"{[n[:12] for n in chosen[-1]]}: one per node {ok}", flush=True)
            failed += [] if ok else ["placement"]
            for spec in (server.model_copy(update={"workers": 2}),
                         ScenarioSpec(scenario="concurrency", concurrency=3, requests=20, warmup_requests=3,
                                      isl=8, osl=6, workers=2)):
                procs = run_scenario(spec, url, "sim", salt=11)
                t = time.perf_counter()
                on_ray = run_scenario(spec.model_copy(update={"backend": "ray"}), url, "sim", salt=11)
                ray_s = time.perf_counter() - t
                spread = sorted(chosen[-1]) == nodes
                if spec.scenario == "server":
                    same = view(on_ray) == view(procs)
                else:  # a closed loop's schedule follows its responses: compare requests only
                    same = view(on_ray)[0] == view(procs)[0]
                counts = (on_ray.issued, on_ray.completed, on_ray.client.requests) == (
                    procs.issued, procs.completed, procs.client.requests)
                print(f"2. {spec.scenario}: 2 workers across 2 nodes {spread}; same requests"
                      f"{' and schedule' if spec.scenario == 'server' else ''} as processes {same}; "
                      f"issued/completed/sent {on_ray.issued}/{on_ray.completed}/{on_ray.client.requests} "
                      f"equal {counts} (Ray run {ray_s:.1f} s)", flush=True)
                failed += [] if spread and same and counts else [f"sameness {spec.scenario}"]
            sk = run_scenario(server.model_copy(update={"backend": "ray", "workers": 2, "sketch_above": 20}),
                              url, "sim", salt=11)
            ok = sk.percentiles == "sketch" and (sk.issued, sk.completed) == (40, 40) and sorted(chosen[-1]) == nodes
            print(f"3. sketched across 2 nodes: percentiles={sk.percentiles}, issued/completed "
                  f"{sk.issued}/{sk.completed} (expected 40/40), sample of "
                  f"{sk.sketch.sampled if sk.sketch else 0}: {ok}", flush=True)
            failed += [] if ok else ["sketched"]
    finally:
        ray_pool.place = place  # type: ignore[assignment]
        ray.shutdown()
        cluster.shutdown()
    print(f"done in {time.perf_counter() - start:.0f} s: " + ("all checks passed" if not failed else f"FAILED {failed}"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

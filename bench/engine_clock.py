"""What reading the engine's clock costs (``python bench/engine_clock.py [LABEL_SETS]``).

1. The scrape: a vLLM-shaped ``/metrics`` text (its gauges and counters, its twelve latency
   and size histograms with vLLM's bucket counts, ``LABEL_SETS`` label sets each, default 2:
   data parallelism or two models) parsed as the runner did before (``parse``, twice a run)
   and as it does now (each text parsed once into families, flattened and its histograms
   read, and the delta): the median
   of 40 repetitions of each, run alternately, as a ratio.
2. The simulator's clock: ``EngineClock.emitted`` per token-producing step of one request,
   against the dict lookup the stepping loop already does per step, as a ratio.
"""

from __future__ import annotations

import sys
import time
from statistics import median

from pytest_goodput.engines.histograms import run_histograms
from pytest_goodput.engines.prometheus import families, flatten, parse
from pytest_goodput.sim.clock import ITL_BUCKETS, REQUEST_BUCKETS, TTFT_BUCKETS, EngineClock

_TOKENS = tuple(float(x) for x in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000))
#: vLLM's histograms (name, buckets) as its v1 logger exports them.
_HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", TTFT_BUCKETS), ("vllm:inter_token_latency_seconds", ITL_BUCKETS),
    ("vllm:request_time_per_output_token_seconds", ITL_BUCKETS),
    ("vllm:e2e_request_latency_seconds", REQUEST_BUCKETS), ("vllm:request_queue_time_seconds", REQUEST_BUCKETS),
    ("vllm:request_inference_time_seconds", REQUEST_BUCKETS), ("vllm:request_prefill_time_seconds", REQUEST_BUCKETS),
    ("vllm:request_decode_time_seconds", REQUEST_BUCKETS), ("vllm:request_prompt_tokens", _TOKENS),
    ("vllm:request_generation_tokens", _TOKENS), ("vllm:iteration_tokens_total", _TOKENS),
    ("vllm:request_params_max_tokens", _TOKENS),
)


def exposition(label_sets: int, scale: float) -> str:
    lines = []
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        lines += [f"# TYPE {name} gauge"] + [f'{name}{{engine="{e}",model_name="m"}} {3 * scale}'
                                             for e in range(label_sets)]
    for name in ("vllm:num_preemptions", "vllm:prompt_tokens", "vllm:generation_tokens",
                 "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:request_success"):
        lines += [f"# TYPE {name} counter"] + [f'{name}_total{{engine="{e}",model_name="m"}} {100 * scale}'
                                               for e in range(label_sets)]
    for name, bounds in _HISTOGRAMS:
        lines.append(f"# TYPE {name} histogram")
        for e in range(label_sets):
            lbl = f'engine="{e}",model_name="m"'
            for i, b in enumerate((*bounds, "+Inf")):
                lines.append(f'{name}_bucket{{{lbl},le="{b}"}} {float(i * scale)}')
            lines.append(f"{name}_count{{{lbl}}} {float(len(bounds) * scale)}")
            lines.append(f"{name}_sum{{{lbl}}} {1.5 * scale}")
    return "\n".join(lines) + "\n"


def _side_by_side(a, b, reps: int = 40) -> tuple[float, float]:
    """Median seconds of ``a`` and of ``b``, run alternately so a busy machine's drift hits both."""
    ta, tb = [], []
    for _ in range(reps):
        for fn, times in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return median(ta), median(tb)


def main() -> None:
    label_sets = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    before, after = exposition(label_sets, 1.0), exposition(label_sets, 2.0)
    lines = after.count("\n")
    def now() -> None:  # what the runner does: each text parsed once, flattened, histograms read
        b, a = families(before), families(after)
        flatten(b), flatten(a), run_histograms(b, a)

    old, new = _side_by_side(lambda: (parse(before), parse(after)), now)
    print(f"scrape: {lines} lines, {label_sets} label sets; per run, parse x2: {old * 1e3:.2f} ms; "
          f"families x2 + flatten x2 + histograms x2 + delta: {new * 1e3:.2f} ms; ratio {new / old:.2f}")

    n = 200_000
    clock, live = EngineClock(per_request=True), {"r": 1}
    clock.arrived("r", 0.0)
    t0 = time.perf_counter()
    for i in range(n):
        live.get("r")
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(n):
        clock.emitted("r", 1, False, 0.001 * (i + 1), 0.001)
    cost = time.perf_counter() - t0
    print(f"simulator clock: {cost / n * 1e9:.0f} ns per emitted step against {base / n * 1e9:.0f} ns "
          f"for the loop's dict lookup; ratio {cost / base:.1f}")


if __name__ == "__main__":
    main()

"""The simulator's Prometheus ``/metrics``: vLLM's metric names, read at scrape time.

Tools that watch a vLLM server (queue depth, KV-cache use, preemptions, token counters)
read the simulator the same way; ``goodput_sim:*`` counters expose its fault injection.
Nothing is updated per token: a collector reads the engine's counters when scraped. vLLM's
latency histograms come from the engine's own clock (``sim/clock.py``).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily


def metrics_registry(engine: Any) -> Any:
    """vLLM-named gauges and counters read from ``engine.model`` at scrape time (no per-token cost)."""

    m = engine.model
    gauges = (
        ("vllm:num_requests_running", "Sequences in the running batch.", lambda: m.num_running),
        ("vllm:num_requests_waiting", "Requests waiting to be scheduled.", lambda: m.num_waiting),
        ("vllm:kv_cache_usage_perc", "KV-cache usage, 0..1.", lambda: m.kv_usage),
    )
    counters = (
        ("vllm:num_preemptions", "Preemptions (recompute).", lambda: m.preemptions_total),
        ("vllm:generation_tokens", "Generated tokens.", lambda: m.generation_tokens_total),
        ("vllm:prompt_tokens", "Prefilled prompt tokens.", lambda: m.prompt_tokens_total),
        ("vllm:prefix_cache_queries", "Prompt tokens looked up.", lambda: m.prefix_cache_queries_total),
        ("vllm:prefix_cache_hits", "Prompt tokens found cached.", lambda: m.prefix_cache_hits_total),
        ("goodput_sim:steps", "Engine steps.", lambda: m.steps_total),
        ("goodput_sim:injected_errors", "Requests failed by error_rate.", lambda: engine.errors_injected),
        ("goodput_sim:refused", "Requests refused by max_queue.", lambda: engine.refused),
        ("goodput_sim:dropped_streams", "Streams cut by drop_prob.", lambda: engine.drops),
        ("goodput_sim:stalled_streams", "Streams stalled by stall_prob.", lambda: engine.stalls),
    )

    if engine.profile.spec_tokens:  # vLLM exports these only with a speculative config
        s = m.spec
        counters += (
            ("vllm:spec_decode_num_drafts", "Drafts verified.", lambda: s.drafts_total),
            ("vllm:spec_decode_num_draft_tokens", "Draft tokens verified.", lambda: s.draft_tokens_total),
            ("vllm:spec_decode_num_accepted_tokens", "Draft tokens accepted.",
             lambda: s.accepted_tokens_total),
        )

    c = engine.clock
    histograms = (
        ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", c.ttft),
        ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", c.itl),
        ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", c.e2e),
        ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
         c.queue),
    )

    class _Collector:
        def collect(self) -> Any:
            lbl = [engine.profile.model_name]
            for family, table in ((GaugeMetricFamily, gauges), (CounterMetricFamily, counters)):
                for name, doc, read in table:
                    metric = family(name, doc, labels=["model_name"])
                    metric.add_metric(lbl, read())
                    yield metric
            for name, doc, h in histograms:
                hist = HistogramMetricFamily(name, doc, labels=["model_name"])
                hist.add_metric(lbl, h.cumulative(), h.sum)
                yield hist

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())  # type: ignore[arg-type]
    return registry

"""Read an engine's Prometheus ``/metrics`` and turn it into a few engine-neutral numbers.

Why: the client sees latencies; only the server knows how many requests it queued, how full
its KV cache was and how often it preempted. Scraping before and after a run and keeping the
difference puts that next to the client's numbers, whatever the engine. Parsing is left to
``prometheus_client``'s own parser, never done by hand.

``fetch`` and ``scrape`` do I/O; ``delta``, ``neutral`` and ``server_metrics`` are pure.
"""

from __future__ import annotations

import urllib.parse
from typing import Iterable, Mapping, Optional

import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "COUNTERS", "GAUGES", "NEUTRAL_NAMES", "fetch", "scrape", "parse", "families", "flatten", "delta", "neutral",
    "server_metrics",
]

GAUGES: dict[str, tuple[str, ...]] = {
    "running": (
        "vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing",
        "tgi_batch_current_size",
    ),
    "waiting": (
        "vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred",
        "tgi_queue_size",
    ),
    "kv_cache_usage": (
        "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ),
}
"""Neutral gauge name → engine series, first present wins. Values are as the engine reports."""

COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions": ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total"),
    "prompt_tokens": (
        "vllm:prompt_tokens_total", "sglang:prompt_tokens_total", "llamacpp:prompt_tokens_total",
        "tgi_request_input_length_sum",
    ),
    "generation_tokens": (
        "vllm:generation_tokens_total", "sglang:generation_tokens_total",
        "llamacpp:tokens_predicted_total", "llamacpp:n_tokens_predicted_total",
        "tgi_request_generated_tokens_sum",
    ),
    "prefix_cache_hits": (
        "vllm:prefix_cache_hits_total", "sglang:cached_tokens_total",
        "llamacpp:prompt_tokens_cached_total",
    ),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total",),
    # speculative decoding: acceptance rate = accepted / draft tokens (docs/metrics.md)
    "spec_decode_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_decode_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
}
"""Neutral counter name → engine series, first present wins; compared as after − before."""

NEUTRAL_NAMES: tuple[str, ...] = (*GAUGES, *COUNTERS)

_COUNTER_SUFFIXES = ("_total", "_count", "_sum")


def metrics_url(base_url_or_metrics_url: str) -> str:
    """``http://h:p/v1`` or ``http://h:p`` → ``http://h:p/metrics``; a URL with a path other
    than ``/v1`` (e.g. TensorRT-LLM's ``/prometheus/metrics``) is used as given."""

    u = urllib.parse.urlsplit(base_url_or_metrics_url.rstrip("/"))
    path = u.path
    if path in ("", "/v1"):
        path = "/metrics"
    return urllib.parse.urlunsplit((u.scheme, u.netloc, path, u.query, ""))


def parse(text: str) -> dict[str, float]:
    """Exposition text → {sample name: value summed over label sets}.

    Histogram buckets, quantiles and ``_created`` timestamps are dropped (summing them over
    labels means nothing); ``_sum`` and ``_count`` stay.
    """
    return flatten(text_string_to_metric_families(text))


def families(text: Optional[str]) -> Optional[list[Metric]]:
    """The metric families of a ``/metrics`` text, parsed once for :func:`flatten` and the
    histograms; ``None`` for no text or text that is not Prometheus's (JSON, HTML)."""
    if text is None:
        return None
    try:
        return list(text_string_to_metric_families(text))
    except (ValueError, IndexError, KeyError, TypeError):
        return None


def flatten(parsed: Iterable[Metric]) -> dict[str, float]:
    """Parsed families → {sample name: value summed over label sets}, as :func:`parse` says."""
    out: dict[str, float] = {}
    for family in parsed:
        for s in family.samples:
            if s.name.endswith(("_bucket", "_created")) or "quantile" in s.labels:
                continue
            if s.value != s.value:  # NaN
                continue
            out[s.name] = out.get(s.name, 0.0) + float(s.value)
    return out


def fetch(base_url_or_metrics_url: str, timeout_s: float = 5.0) -> Optional[str]:
    """The ``/metrics`` text; ``None`` when the engine has no (reachable) endpoint."""

    try:
        r = httpx.get(metrics_url(base_url_or_metrics_url), timeout=timeout_s, trust_env=False)
    except httpx.HTTPError:
        return None
    return r.text if r.status_code == 200 else None


def scrape(base_url_or_metrics_url: str, timeout_s: float = 5.0) -> Optional[dict[str, float]]:
    """Fetch and parse ``/metrics``; ``None`` when the engine has no (reachable) endpoint."""
    parsed = families(fetch(base_url_or_metrics_url, timeout_s))
    return flatten(parsed) if parsed is not None else None


def _is_counter(name: str) -> bool:
    return name.endswith(_COUNTER_SUFFIXES)


def delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """after − before for counter-like series (``_total``, ``_count``, ``_sum``) in both.

    A counter that went down means the engine restarted: the after value is the increase.
    """
    out: dict[str, float] = {}
    for name, a in after.items():
        if not _is_counter(name) or name not in before:
            continue
        b = before[name]
        out[name] = a - b if a >= b else a
    return out


def _first(sample: Mapping[str, float], names: tuple[str, ...]) -> Optional[float]:
    for n in names:
        if n in sample:
            return sample[n]
    return None


def neutral(sample: Mapping[str, float]) -> dict[str, float]:
    """One scrape → the neutral names it has (gauges and raw counter values)."""
    out: dict[str, float] = {}
    for key, names in (*GAUGES.items(), *COUNTERS.items()):
        v = _first(sample, names)
        if v is not None:
            out[key] = v
    return out


def server_metrics(
    before: Optional[Mapping[str, float]], after: Optional[Mapping[str, float]]
) -> dict[str, float]:
    """Before/after scrapes → gauges as the after value (``<name>_before`` too) and counters
    as the increase over the run. Empty when either scrape is missing."""
    if before is None or after is None:
        return {}
    nb, na = neutral(before), neutral(after)
    out: dict[str, float] = {}
    for key in GAUGES:
        if key in na:
            out[key] = na[key]
        if key in nb:
            out[f"{key}_before"] = nb[key]
    for key in COUNTERS:
        if key in na and key in nb:
            out[key] = na[key] - nb[key] if na[key] >= nb[key] else na[key]
    return out

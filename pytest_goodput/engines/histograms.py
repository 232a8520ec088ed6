"""The engine's latency histograms in its ``/metrics`` text, by engine-neutral name.

Why: the engine's clock is the one witness that can tell an engine regression from a client or
network delay. Every major engine exports TTFT / ITL / E2E / queue-time histograms under its own
names (``docs/engines.md``, "The engine's clocks"); these are read from the same scrapes the
runner makes before and after a run, parsed once (``prometheus.families``, ``prometheus_client``'s
parser), so they cost no extra request and no second parse.
"""

from __future__ import annotations

from typing import Iterable, Optional

from prometheus_client.metrics_core import Metric

from pytest_goodput.measure.clocks.histogram import delta
from pytest_goodput.schema.runs.engine_clock import Histogram

__all__ = ["HISTOGRAMS", "histograms", "run_histograms"]

HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds",
             "trtllm_time_to_first_token_seconds", "lmdeploy:time_to_first_token_seconds"),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
            "sglang:inter_token_latency_seconds", "lmdeploy:iter_token_latency"),
    "e2e": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds",
            "trtllm_e2e_request_latency_seconds", "lmdeploy:e2e_request_latency_seconds", "tgi_request_duration"),
    "queue": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds", "tgi_request_queue_duration"),
}
"""Neutral latency → the engine's histogram families, first present wins (all in seconds)."""

_WANTED = {name: key for key, names in HISTOGRAMS.items() for name in names}


def _family(samples: list) -> Optional[tuple[list[float], list[float], float, float]]:
    """Buckets summed over label sets: (bounds, cumulative, count, sum); None if malformed."""
    buckets: dict[float, float] = {}
    count = total = 0.0
    for s in samples:
        if s.name.endswith("_bucket") and "le" in s.labels:
            le = float(s.labels["le"])
            buckets[le] = buckets.get(le, 0.0) + float(s.value)
        elif s.name.endswith("_count"):
            count += float(s.value)
        elif s.name.endswith("_sum"):
            total += float(s.value)
    bounds = sorted(b for b in buckets if b != float("inf"))
    if not buckets:
        return None
    return bounds, [buckets[b] for b in bounds], count, total


def histograms(parsed: Iterable[Metric]) -> dict[str, Histogram]:
    """Parsed ``/metrics`` families (``prometheus.families``) → {ttft|itl|e2e|queue: Histogram};
    empty when the engine exports none."""
    found: dict[str, Histogram] = {}
    rank = {name: i for names in HISTOGRAMS.values() for i, name in enumerate(names)}
    for family in parsed:
        key = _WANTED.get(family.name)
        if key is None or family.type != "histogram":
            continue
        if key in found and rank[found[key].series] <= rank[family.name]:
            continue
        read = _family(family.samples)
        if read is not None:
            bounds, cumulative, count, total = read
            found[key] = Histogram(series=family.name, bounds=bounds, cumulative=cumulative,
                                   count=count, sum=total)
    return found


def run_histograms(before: Optional[Iterable[Metric]], after: Optional[Iterable[Metric]]) -> dict[str, Histogram]:
    """The run's own histograms from the families of the scrapes before and after it: after −
    before of each latency the engine exports (a labelled histogram first seen after the run
    counts whole). Empty without both scrapes: no engine clock."""
    if before is None or after is None:
        return {}
    old = histograms(before)
    out: dict[str, Histogram] = {}
    for key, h in histograms(after).items():
        d = delta(old.get(key), h)
        if d is not None and d.count > 0:
            out[key] = d
    return out

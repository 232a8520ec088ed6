"""A measurement's engine-side latencies beside ours, as flat numbers reports and baselines keep (pure).

Why flat: they travel with the server's other numbers (``server.*`` in a baseline's summary,
``server`` in an outcome), so a baseline recorded today carries the engine's clock for the
comparisons of tomorrow. Keys (``docs/metrics.md``, "The engine's clock"):

* ``engine_<m>_mean_ms``, ``engine_<m>_p<q>_lo_ms`` / ``_hi_ms``: from the run's delta
  histograms, ``m`` in ttft, itl, e2e, queue; ``engine_<m>_count``: observations.
* ``engine_request_ttft_mean_ms`` / ``_p<q>_ms`` (queue + TTFT), ``engine_request_queue_mean_ms``,
  ``engine_request_itl_mean_ms``, ``engine_requests``: from vLLM's per-request ``metrics``.
* ``client_<m>_mean_ms``: ours over the same runs (TTFT, ITL, E2E); ``ttft_gap_mean_ms`` /
  ``ttft_gap_p<q>_ms``: our TTFT minus the engine's, request by request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

from pytest_goodput.measure.clocks.histogram import mean_ms, merge, percentile_bounds_ms
from pytest_goodput.schema.runs.engine_clock import CLOCK_METRICS
from pytest_goodput.schema.runs.results import RequestRecord, RunResult
from pytest_goodput.stats.quantiles import percentile

__all__ = ["PERCENTILES", "clock_summary", "engine_ttft_ms"]

#: The percentiles reported of each engine latency.
PERCENTILES: tuple[int, ...] = (50, 90, 99)


def _mean(values: Sequence[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def _histograms(runs: Sequence[RunResult]) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in CLOCK_METRICS:
        h = merge([r.engine_histograms[m] for r in runs if m in r.engine_histograms])
        mean = mean_ms(h) if h is not None else None
        if h is None or mean is None:
            continue
        out[f"engine_{m}_mean_ms"], out[f"engine_{m}_count"] = mean, h.count
        for q in PERCENTILES:
            bounds = percentile_bounds_ms(h, q)
            if bounds is not None:  # past the last finite bound: no upper bound (JSON has no inf)
                out[f"engine_{m}_p{q}_lo_ms"] = bounds[0]
                if math.isfinite(bounds[1]):
                    out[f"engine_{m}_p{q}_hi_ms"] = bounds[1]
    return out


def _add_spread(out: dict[str, float], key: str, values: list[float]) -> None:
    """``<key>_mean_ms`` and ``<key>_p<q>_ms`` (nearest rank) of ``values``, when there are any."""
    if not values:
        return
    ordered = sorted(values)
    out[f"{key}_mean_ms"] = sum(values) / len(values)
    for q in PERCENTILES:
        out[f"{key}_p{q}_ms"] = percentile(ordered, q)


def _per_request(ok: Sequence[RequestRecord]) -> dict[str, float]:
    timed = [(r, r.engine.ttft_from_queue_ms()) for r in ok if r.engine is not None]
    timed = [(r, t) for r, t in timed if t is not None]
    if not timed:
        return {}
    out: dict[str, float] = {"engine_requests": float(len(timed))}
    _add_spread(out, "engine_request_ttft", [t for _, t in timed])
    for key, field in (("queue", "queue_time_ms"), ("itl", "mean_itl_ms")):
        v = _mean([x for r, _ in timed if (x := getattr(r.engine, field)) is not None])
        if v is not None:
            out[f"engine_request_{key}_mean_ms"] = v
    _add_spread(out, "ttft_gap", [r.ttft_ms - t for r, t in timed if r.ttft_ms is not None])
    return out


def clock_summary(runs: Sequence[RunResult]) -> dict[str, float]:
    """The engine's clock over ``runs`` beside ours; empty when the engine showed none."""
    out = _histograms(runs)
    ok = [q for r in runs for q in r.requests if q.ok and not q.warmup]
    out.update(_per_request(ok))
    if not out:
        return {}
    for key, values in (("ttft", [q.ttft_ms for q in ok]), ("e2e", [q.e2e_ms for q in ok]),
                        ("itl", [x for q in ok for x in q.itl_ms])):
        mean = _mean([v for v in values if v is not None])
        if mean is not None:
            out[f"client_{key}_mean_ms"] = mean
    return out


def engine_ttft_ms(summary: dict[str, float]) -> Optional[tuple[float, str]]:
    """The engine's mean TTFT of a summary and its source: per request (vLLM's ``metrics``,
    queue included) when it has them, else the TTFT histogram's exact mean."""
    if "engine_request_ttft_mean_ms" in summary:
        return summary["engine_request_ttft_mean_ms"], "per-request metrics"
    if "engine_ttft_mean_ms" in summary:
        return summary["engine_ttft_mean_ms"], "TTFT histogram"
    return None

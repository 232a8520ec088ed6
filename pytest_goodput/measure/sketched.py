"""The run result of a sketched run: exact counts, sketched percentiles, a uniform sample.

``summarize`` reads every record; a run too large to ship every record arrives instead as
the merge of its workers' parts (``run_part``) plus a seeded uniform sample of its records.
This builds the same ``RunResult`` from them, field by field as ``docs/metrics.md`` defines
it: counts, rates, goodput, failures, windows and every percentile SLO's pass/fail and
proof are exact (they need counts only: a nearest-rank percentile is at most the limit
exactly when at least ⌈P/100·n⌉ samples are); distributions' count, mean and max are exact
and their percentiles within the sketches' α; ``requests`` holds the sample, and the result
says so (``percentiles="sketch"``, ``sketch``). Pure.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from pytest_goodput.measure.metrics import OPEN_LOOP_SCENARIOS, judged_client, least_exact, mark_good
from pytest_goodput.measure.run_part import RunPart
from pytest_goodput.schema.registry import PERCENTILE_SLO_RE
from pytest_goodput.schema.runs.results import (
    ClientHealth,
    Distribution,
    Goodput,
    LatencyMetrics,
    PercentileSLOCheck,
    RequestRecord,
    RunResult,
    SketchInfo,
    Throughput,
    Window,
)
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats import percentile_proof
from pytest_goodput.stats.quantiles import nearest_rank
from pytest_goodput.stats.sketch import QuantileSketch


def sketched_distribution(s: Optional[QuantileSketch]) -> Distribution:
    """A sketch as a ``Distribution``: exact count, mean and max; percentiles within α."""
    if s is None or not s.count:
        return Distribution()
    return Distribution(count=s.count, mean=s.mean, p50=s.percentile(50), p90=s.percentile(90),
                        p95=s.percentile(95), p99=s.percentile(99), max=s.max)


def _steady_state(p: RunPart, users: Optional[int]) -> Optional[Window]:
    """``metrics.steady_state_window`` from the parts' heads, tails and spans."""
    if not users or not p.issued or p.heads != users or p.tails != users:
        return None
    assert p.last_head_send is not None and p.first_tail_end is not None
    start = max(p.last_head_send, p.last_warmup_end if p.last_warmup_end is not None else -math.inf)
    end = p.first_tail_end
    if end <= start:
        return None
    t0 = np.frombuffer(p.span_starts, dtype=np.float64)
    e = np.nan_to_num(np.frombuffer(p.span_ends, dtype=np.float64), nan=-math.inf)
    ended = np.isfinite(e)
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.maximum(0.0, np.minimum(end, e) - np.maximum(start, t0)) / (e - t0)
    inside = np.where(e <= t0, ((start <= e) & (e <= end)).astype(float), part)
    k = math.fsum(np.where(ended, inside, 0.0).tolist())
    if k <= 0:
        return None
    return Window(start=start, end=end, seconds=p.issued * (end - start) / k, basis="steady_state",
                  steady_requests=k)


def part_window(p: RunPart, spec: ScenarioSpec) -> Window:
    """``metrics.measurement_window`` from a part's window ends (``docs/metrics.md``)."""
    window = None
    if spec.scenario in OPEN_LOOP_SCENARIOS and p.first_arrival is not None:
        start, end = p.first_arrival, p.last_arrival
        assert end is not None
        if end <= start and spec.rate:
            end = start + p.issued / spec.rate
        if end > start:
            window = Window(start=start, end=end, seconds=end - start, basis="arrivals")
    elif spec.scenario == "concurrency":
        window = _steady_state(p, spec.concurrency)
    if window is not None:
        return window
    if p.first_send is None:
        return Window(start=0.0, end=0.0, seconds=0.0, basis="sends")
    end = p.last_end if p.last_end is not None else p.first_send
    return Window(start=p.first_send, end=end, seconds=max(end - p.first_send, 0.0), basis="sends")


def _slo_check(p: RunPart, name: str, limit: float) -> PercentileSLOCheck:
    sp = p.slos[name]
    m = PERCENTILE_SLO_RE.match(name)
    assert m is not None  # validated by the spec
    metric, pct = m.group(1), float(m.group(2))
    value: Optional[float] = None
    ok = False
    if sp.samples:
        r = nearest_rank(sp.samples, pct) - 1
        ok = sp.samples - sp.over > r  # at least r + 1 samples at or below the limit
        if r < sp.values.count:  # else the rank falls on a failure (+inf): no value
            v = sp.values.at_rank(r)
            value = min(v, limit) if ok else max(v, limit)  # moves toward the exact value
    proven, needed = percentile_proof(sp.samples, sp.over, pct)
    return PercentileSLOCheck(name=name, metric=f"{metric}_ms", percentile=pct, limit_ms=limit,
                              value_ms=value, ok=ok, samples=sp.samples, over_limit=sp.over,
                              proven=proven and ok, requests_needed=None if proven else needed)


def summarize_part(
    part: RunPart, sample: list[RequestRecord], spec: ScenarioSpec, client: ClientHealth,
    info: SketchInfo, load: Optional[dict[str, float]] = None,
) -> RunResult:
    """The run result of a sketched run (``part``: every worker's parts merged, on one clock)."""
    window = part_window(part, spec)
    secs = window.seconds

    def rate(x: float) -> float:
        return x / secs if secs > 0 else 0.0

    goodput = None
    if spec.has_request_slos:
        attainment = part.good / part.issued if part.issued else 0.0
        goodput = Goodput(requests_per_s=rate(part.good), tokens_per_s=rate(part.good_tokens),
                          attainment=attainment, good=part.good, issued=part.issued,
                          target=spec.attainment, met=attainment >= spec.attainment)
    metrics = LatencyMetrics(
        **{name: sketched_distribution(s) for name, s in part.sketches.items() if name != "send_lag_ms"},
        ttft_ms_by_turn={t: sketched_distribution(s) for t, s in sorted(part.by_turn.items(), key=lambda kv: int(kv[0]))},
    )
    cached = part.cached_tokens if part.cached_any else None
    return RunResult(
        spec=spec,
        load=load or {},
        window=window,
        issued=part.issued,
        completed=part.completed,
        metrics=metrics,
        throughput=Throughput(requests_per_s=rate(part.completed), output_tokens_per_s=rate(part.output_tokens),
                              total_tokens_per_s=rate(part.output_tokens + part.input_tokens)),
        goodput=goodput,
        percentile_slos=[_slo_check(part, n, lim) for n, lim in sorted(spec.percentile_slos.items())],
        send_lag_ms=sketched_distribution(part.sketches.get("send_lag_ms")),
        failures=dict(sorted(part.failures.items())),
        token_count_source=least_exact(part.token_sources) or "usage",
        reasoning_token_source=least_exact(part.reasoning_sources),
        client=judged_client(client, metrics),
        cached_prompt_tokens=cached,
        prefix_cache_hit_rate=cached / part.cached_prompt_tokens if cached is not None else None,
        requests=mark_good(sample, spec),
        percentiles="sketch",
        sketch=info,
    )


#: How a sketched run's note begins (reports pick it out of a test's notes).
SKETCH_NOTE = "percentiles sketched"


def sketch_note(result: RunResult) -> Optional[str]:
    """What a sketched run's reader must know, in words (None for an exact run)."""
    info = result.sketch
    if result.percentiles != "sketch" or info is None:
        return None
    return (f"{SKETCH_NOTE} (DDSketch, within ±{info.relative_accuracy:.0%} of exact): "
            f"{result.issued:,} measured requests, above the {info.threshold:,}-request threshold; "
            f"counts, rates, goodput and SLO pass/fail exact; {info.sampled:,} requests "
            f"(a seeded uniform {info.sample_fraction:.2%} sample) kept for comparisons")


__all__ = ["SKETCH_NOTE", "part_window", "sketch_note", "sketched_distribution", "summarize_part"]

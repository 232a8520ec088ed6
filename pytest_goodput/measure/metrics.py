"""Per-run metrics from per-request records, exactly as ``docs/metrics.md`` defines them.

Pure: records in, numbers out. Percentiles are nearest-rank (MLPerf style) so that every
reported percentile is a latency some request really had.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Iterator, Optional

from pytest_goodput.measure.records.prefix_cache import by_turn, hit_rate, later_turn_ttft
from pytest_goodput.measure.stall_rule import delayed_count, stall_reason, too_many
from pytest_goodput.schema.registry import PERCENTILE_SLO_RE
from pytest_goodput.schema.runs.results import (
    ClientHealth,
    Distribution,
    Goodput,
    LatencyMetrics,
    PercentileSLOCheck,
    RequestRecord,
    RunResult,
    Throughput,
    Window,
)
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.stats import percentile_proof
from pytest_goodput.stats.quantiles import percentile

_TOKEN_SOURCE_RANK = {"usage": 0, "tokenizer": 1, "chunks": 2}
OPEN_LOOP_SCENARIOS = ("server", "interactive", "trace")
#: The client's event-loop lag P99 must stay below this fraction of min(TTFT P50, ITL P50)...
LOOP_LAG_FRACTION = 1.0
#: ...but the limit is never below this (loop timers tick in whole ms, and a healthy client
#: on a shared 2-core machine measured a loop-lag P99 of up to ~3 ms)...
LOOP_LAG_FLOOR_MS = 3.0
#: ...nor above this (the limit when no latency was measured).
LOOP_LAG_CEILING_MS = 10.0
#: With at least this fraction of requests failed by the engine, the client's load is not judged.
ENGINE_FAILED_FRACTION = 0.5


def least_exact(sources: Iterable[str]) -> Optional[str]:
    """The least exact of token-count sources (usage < tokenizer < chunks); None for none."""
    return max(sources, key=_TOKEN_SOURCE_RANK.__getitem__, default=None)


def distribution(values: Iterable[Optional[float]]) -> Distribution:
    """Summary of the finite values (``None`` and NaN are skipped)."""
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    if not xs:
        return Distribution()
    return Distribution(
        count=len(xs),
        mean=math.fsum(xs) / len(xs),
        p50=percentile(xs, 50),
        p90=percentile(xs, 90),
        p95=percentile(xs, 95),
        p99=percentile(xs, 99),
        max=xs[-1],
    )


def is_good(record: RequestRecord, spec: ScenarioSpec) -> bool:
    """A request is good when it succeeded and meets every per-request SLO.

    TPOT is undefined below two output tokens; its limit is then vacuously met. Two or more
    tokens without a TPOT (they all arrived at one instant: ``tokens_at_once``) do not meet
    a TPOT limit: nothing shows they were generated at the pace it asks for.
    """
    if not record.ok:
        return False
    for name, limit, value in (
        ("ttft", spec.ttft_ms, record.ttft_ms),
        ("ttfo", spec.ttfo_ms, record.ttfo_ms),  # None: no answer came (reasoning only)
        ("tpot", spec.tpot_ms, record.tpot_ms),
        ("e2e", spec.e2e_ms, record.e2e_ms),
    ):
        if limit is None:
            continue
        if value is None:
            if name == "tpot" and record.output_tokens < 2:
                continue
            return False
        if value > limit:
            return False
    return True


def mark_good(records: list[RequestRecord], spec: ScenarioSpec) -> list[RequestRecord]:
    """Return the records with ``good`` set (or left None when the spec has no per-request SLO)."""
    if not spec.has_request_slos:
        return records
    return [r.model_copy(update={"good": is_good(r, spec)}) for r in records]


def send_window(measured: list[RequestRecord]) -> Window:
    """From the first measured send (or schedule) to the last measured end (offline, fallback)."""
    starts = [r.sent_at if r.sent_at is not None else r.scheduled_at for r in measured]
    ends = [r.end_at for r in measured if r.end_at is not None]
    if not starts:
        return Window(start=0.0, end=0.0, seconds=0.0, basis="sends")
    start = min(starts)
    end = max(ends) if ends else start
    return Window(start=start, end=end, seconds=max(end - start, 0.0), basis="sends")


def arrival_window(measured: list[RequestRecord], rate: Optional[float]) -> Optional[Window]:
    """Open loop: first to last scheduled arrival; ``n / rate`` seconds when they coincide."""
    arrivals = sorted(r.scheduled_at for r in measured)
    if not arrivals:
        return None
    start, end = arrivals[0], arrivals[-1]
    if end <= start:
        if not rate:
            return None
        end = start + len(arrivals) / rate  # one request: one mean inter-arrival gap
    return Window(start=start, end=end, seconds=end - start, basis="arrivals")


def _inside(r: RequestRecord, start: float, end: float) -> float:
    """The fraction of ``r``'s send-to-end time that lies inside ``[start, end]``."""
    if r.end_at is None:
        return 0.0
    t0 = r.sent_at if r.sent_at is not None else r.scheduled_at
    if r.end_at <= t0:
        return 1.0 if start <= r.end_at <= end else 0.0
    return max(0.0, min(end, r.end_at) - max(start, t0)) / (r.end_at - t0)


def steady_state_window(
    records: list[RequestRecord], measured: list[RequestRecord], users: Optional[int]
) -> Optional[Window]:
    """Closed loop: from when every user is busy with measured requests to when one stops.

    A user's next request is scheduled at the end of its previous one, so the records chain
    per user: a *head* (first request) is scheduled at no record's end, a *tail* (last
    request) ends at no record's schedule. The window starts at the latest of the heads'
    sends and the warm-up requests' ends, and ends at the earliest tail end. ``k`` is the
    measured requests' share of it: each counts the fraction of its send-to-end time inside
    (a request straddling an edge counts in part, so batches that complete together do not
    tip the count by a whole batch). ``seconds = issued * (end - start) / k``, so that a
    rate ``count / seconds`` is the count per issued request times the steady rate
    ``k / (end - start)``. None when the chains do not show ``users`` users, or the window is
    empty (a run too short for a steady state).
    """
    ends = {r.end_at for r in records if r.end_at is not None}
    scheduled = {r.scheduled_at for r in records}
    heads = [r for r in records if r.scheduled_at not in ends]
    tails = [r.end_at for r in records if r.end_at is not None and r.end_at not in scheduled]
    if not users or not measured or len(heads) != users or len(tails) != users:
        return None
    start = max(r.sent_at if r.sent_at is not None else r.scheduled_at for r in heads)
    start = max([start] + [r.end_at for r in records if r.warmup and r.end_at is not None])
    end = min(tails)
    if end <= start:
        return None
    k = math.fsum(_inside(r, start, end) for r in measured)
    if k <= 0:
        return None
    return Window(start=start, end=end, seconds=len(measured) * (end - start) / k,
                  basis="steady_state", steady_requests=k)


def measurement_window(
    measured: list[RequestRecord], spec: Optional[ScenarioSpec] = None,
    records: Optional[list[RequestRecord]] = None,
) -> Window:
    """The window the run's rates divide by, by scenario (``docs/metrics.md``, "Per run").

    Open loop: the measured arrivals' span. Closed loop: the steady state (``records``, warm-up
    included, to follow each user). Offline, and whenever those are undefined: first
    measured send to last measured end.
    """
    window = None
    if spec is not None and spec.scenario in OPEN_LOOP_SCENARIOS:
        window = arrival_window(measured, spec.rate)
    elif spec is not None and spec.scenario == "concurrency":
        window = steady_state_window(records if records is not None else measured, measured,
                                     spec.concurrency)
    return window or send_window(measured)


def loop_lag_limit_ms(ttft_p50_ms: Optional[float], itl_p50_ms: Optional[float]) -> float:
    """The event-loop lag P99 limit: the smaller of TTFT P50 and ITL P50, within [3, 10] ms."""
    scales = [v for v in (ttft_p50_ms, itl_p50_ms) if v is not None and v > 0]
    if not scales:
        return LOOP_LAG_CEILING_MS
    return min(LOOP_LAG_CEILING_MS, max(LOOP_LAG_FLOOR_MS, LOOP_LAG_FRACTION * min(scales)))


def engine_failing(requests: int, failed: int) -> bool:
    """The engine failed at least ``ENGINE_FAILED_FRACTION`` of the requests the client sent."""
    return requests > 0 and failed >= ENGINE_FAILED_FRACTION * requests


def loop_lag_reason(p99_ms: float, limit_ms: float, exact_receive: bool = False) -> str:
    if exact_receive:
        return (f"event-loop lag P99 {p99_ms:.1f} ms > {limit_ms:.1f} ms, not held against the run: "
                "receive times come from the packet capture (docs/capture.md)")
    return (
        f"event-loop lag P99 {p99_ms:.1f} ms > {limit_ms:.1f} ms: the client read responses "
        "late, so TTFT/ITL include client delay"
    )


def judge_loop_lag(
    client: ClientHealth, ttft_p50_ms: Optional[float], itl_p50_ms: Optional[float]
) -> ClientHealth:
    """The client's health with its loop lag judged against the latencies it measured.

    During the run the self-check knows no latency and applies the ceiling; here the limit
    scales with the run's TTFT and ITL P50 (``loop_lag_limit_ms``). Not judged (as during
    the run) when the engine failed at least half of the requests.
    """
    limit = loop_lag_limit_ms(ttft_p50_ms, itl_p50_ms)
    p99, judged = client.loop_lag_p99_ms, client.loop_lag_limit_ms
    update: dict = {"loop_lag_limit_ms": limit}
    failing = engine_failing(client.requests, client.failed)
    if client.exact_receive:  # packet-capture receive times: the loop's lag delayed none
        return client.model_copy(update=update)
    reasons = list(client.reasons)
    if p99 is not None and p99 > limit and not failing and (judged is None or p99 <= judged):
        where = "the most lagging worker's " if client.workers > 1 else ""
        reasons.append(where + loop_lag_reason(p99, limit))
    delayed = delayed_count(client.request_delays_ms, limit)
    if delayed > client.delayed_requests and not failing:
        was_over = too_many(client.delayed_requests, client.measured)
        update["delayed_requests"] = delayed
        if too_many(delayed, client.measured) and not was_over:
            reasons.append(stall_reason(delayed, client.measured, client.loop_lag_ms.max, limit))
    if len(reasons) > len(client.reasons):
        update.update(reasons=reasons, valid=False)
    return client.model_copy(update=update)


def judged_client(client: ClientHealth, metrics: LatencyMetrics) -> ClientHealth:
    """``judge_loop_lag`` against the run's TTFT P50 and chunk-gap P50.

    A late read stretches the gap between chunks: with several tokens per chunk
    (speculative decoding) that gap is ITL x tokens per chunk, not ITL.
    """
    itl = metrics.itl_ms.p50
    return judge_loop_lag(client, metrics.ttft_ms.p50,
                          None if itl is None else itl * max(1.0, metrics.tokens_per_chunk.mean or 1.0))


def _phase_tokens(r: RequestRecord, metric: str) -> int:
    """The tokens a TPOT column divides: the whole output's, or one phase's."""
    return {"reasoning_tpot": r.reasoning_tokens,
            "answer_tpot": r.answer_tokens}.get(metric, r.output_tokens)


def percentile_checks(
    records: list[RequestRecord], spec: ScenarioSpec
) -> list[PercentileSLOCheck]:
    """Check each ``<metric>_p<P>_ms`` SLO, with the MLPerf early-stopping proof.

    A failed request is one sample at +∞ (ITL included): it delivered nothing in time. So is
    a TPOT that two or more tokens arriving at one instant leave undefined, and a TTFO of a
    request whose reasoning used up its output (no answer came).
    """

    checks = []
    for name, limit in sorted(spec.percentile_slos.items()):
        m = PERCENTILE_SLO_RE.match(name)
        assert m is not None  # validated by the spec
        metric, pct = m.group(1), float(m.group(2))
        values: list[float] = []
        over = 0
        n = 0
        for r in records:
            if metric == "itl":
                if not r.ok:
                    n += 1
                    over += 1
                    values.append(math.inf)
                    continue
                for v in r.itl_ms:
                    n += 1
                    values.append(v)
                    over += v > limit
                continue
            v = getattr(r, f"{metric}_ms")
            if metric.endswith("tpot") and r.ok and v is None and _phase_tokens(r, metric) < 2:
                continue  # fewer than two tokens: TPOT undefined, not a sample
            n += 1
            if not r.ok or v is None:
                over += 1
                values.append(math.inf)
            else:
                values.append(v)
                over += v > limit
        value = percentile(sorted(values), pct) if values else None
        proven, needed = percentile_proof(n, over, pct)
        ok = value is not None and value <= limit
        checks.append(
            PercentileSLOCheck(
                name=name,
                metric=f"{metric}_ms",
                percentile=pct,
                limit_ms=limit,
                value_ms=value if value is None or math.isfinite(value) else None,
                ok=ok,
                samples=n,
                over_limit=over,
                proven=proven and ok,
                requests_needed=None if proven else needed,
            )
        )
    return checks


def metric_values(ok: list[RequestRecord]) -> dict[str, Iterator[Optional[float]]]:
    """Each ``LatencyMetrics`` distribution's values over the completed records (but by turn).

    The one definition of what each distribution summarizes: ``summarize`` takes their
    distributions, a sketched run (``run_part``) their sketches.
    """
    return {
        "ttft_ms": (r.ttft_ms for r in ok),
        "tpot_ms": (r.tpot_ms for r in ok),
        "itl_ms": (v for r in ok for v in r.itl_ms),
        "e2e_ms": (r.e2e_ms for r in ok),
        "ttfo_ms": (r.ttfo_ms for r in ok),
        "reasoning_tokens": (float(r.reasoning_tokens) for r in ok),
        "ttft_later_ms": (later_turn_ttft(r) for r in ok),
        "reasoning_tpot_ms": (r.reasoning_tpot_ms for r in ok),
        "answer_tpot_ms": (r.answer_tpot_ms for r in ok),
        "request_bytes": (r.request_bytes for r in ok),
        "images": (float(r.images) for r in ok),
        "image_tokens": (r.image_tokens for r in ok),
        "tokens_per_chunk": (r.tokens_per_chunk for r in ok),
    }


def summarize(
    records: list[RequestRecord],
    spec: ScenarioSpec,
    client: ClientHealth,
    load: Optional[dict[str, float]] = None,
    server_metrics: Optional[dict[str, float]] = None,
) -> RunResult:
    """Build the run result from every record (warm-up records are kept but not measured)."""
    records = mark_good(records, spec)
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    window = measurement_window(measured, spec, records)
    secs = window.seconds

    def rate(x: float) -> float:
        return x / secs if secs > 0 else 0.0

    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)
    goodput = None
    if spec.has_request_slos:
        good = [r for r in measured if r.good]
        attainment = len(good) / len(measured) if measured else 0.0
        goodput = Goodput(
            requests_per_s=rate(len(good)),
            tokens_per_s=rate(sum(r.output_tokens for r in good)),
            attainment=attainment,
            good=len(good),
            issued=len(measured),
            target=spec.attainment,
            met=attainment >= spec.attainment,
        )
    sources = {r.token_count_source for r in ok} or {"usage"}
    metrics = LatencyMetrics(
        **{name: distribution(values) for name, values in metric_values(ok).items()},
        ttft_ms_by_turn={t: distribution(v) for t, v in by_turn(ok).items()},
    )
    cached, hit = hit_rate(measured)
    split_sources = {r.reasoning_token_source for r in ok if r.reasoning_token_source}
    return RunResult(
        spec=spec,
        load=load or {},
        window=window,
        issued=len(measured),
        completed=len(ok),
        metrics=metrics,
        throughput=Throughput(
            requests_per_s=rate(len(ok)),
            output_tokens_per_s=rate(out_tokens),
            total_tokens_per_s=rate(out_tokens + in_tokens),
        ),
        goodput=goodput,
        percentile_slos=percentile_checks(measured, spec),
        send_lag_ms=distribution(r.send_lag_ms for r in measured),
        failures=dict(sorted(Counter(r.error_kind for r in measured if not r.ok and r.error_kind).items())),
        token_count_source=least_exact(sources),
        reasoning_token_source=least_exact(split_sources),
        client=judged_client(client, metrics),
        server_metrics=server_metrics or {},
        cached_prompt_tokens=cached,
        prefix_cache_hit_rate=hit,
        requests=records,
    )

"""Per-run metrics from per-request records, exactly as ``docs/metrics.md`` defines them.

Pure: records in, numbers out. Percentiles are nearest-rank (MLPerf style) so that every
reported percentile is a latency some request really had.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Optional

from pytest_goodput.schema.registry import PERCENTILE_SLO_RE
from pytest_goodput.schema.results import (
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
from pytest_goodput.schema.spec import ScenarioSpec
from pytest_goodput.stats import percentile_proof
from pytest_goodput.stats.quantiles import percentile

_TOKEN_SOURCE_RANK = {"usage": 0, "tokenizer": 1, "chunks": 2}


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

    TPOT is undefined below two output tokens; its limit is then vacuously met.
    """
    if not record.ok:
        return False
    for limit, value in (
        (spec.ttft_ms, record.ttft_ms),
        (spec.tpot_ms, record.tpot_ms),
        (spec.e2e_ms, record.e2e_ms),
    ):
        if limit is None:
            continue
        if value is None:
            if limit is spec.tpot_ms and record.output_tokens < 2:
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


def measurement_window(measured: list[RequestRecord]) -> Window:
    """From the first measured send (or schedule) to the last measured end."""
    starts = [r.sent_at if r.sent_at is not None else r.scheduled_at for r in measured]
    ends = [r.end_at for r in measured if r.end_at is not None]
    if not starts:
        return Window(start=0.0, end=0.0, seconds=0.0)
    start = min(starts)
    end = max(ends) if ends else start
    return Window(start=start, end=end, seconds=max(end - start, 0.0))


def percentile_checks(
    records: list[RequestRecord], spec: ScenarioSpec
) -> list[PercentileSLOCheck]:
    """Check each ``<metric>_p<P>_ms`` SLO, with the MLPerf early-stopping proof.

    A failed request counts as over every limit: it delivered nothing in time.
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
                    continue
                for v in r.itl_ms:
                    n += 1
                    values.append(v)
                    over += v > limit
                continue
            v = getattr(r, f"{metric}_ms")
            if metric == "tpot" and r.ok and v is None:
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
    window = measurement_window(measured)
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
    return RunResult(
        spec=spec,
        load=load or {},
        window=window,
        issued=len(measured),
        completed=len(ok),
        metrics=LatencyMetrics(
            ttft_ms=distribution(r.ttft_ms for r in ok),
            tpot_ms=distribution(r.tpot_ms for r in ok),
            itl_ms=distribution(v for r in ok for v in r.itl_ms),
            e2e_ms=distribution(r.e2e_ms for r in ok),
        ),
        throughput=Throughput(
            requests_per_s=rate(len(ok)),
            output_tokens_per_s=rate(out_tokens),
            total_tokens_per_s=rate(out_tokens + in_tokens),
        ),
        goodput=goodput,
        percentile_slos=percentile_checks(measured, spec),
        send_lag_ms=distribution(r.send_lag_ms for r in measured),
        failures=dict(sorted(Counter(r.error_kind for r in measured if not r.ok and r.error_kind).items())),
        token_count_source=max(sources, key=_TOKEN_SOURCE_RANK.__getitem__),
        client=client,
        server_metrics=server_metrics or {},
        requests=records,
    )

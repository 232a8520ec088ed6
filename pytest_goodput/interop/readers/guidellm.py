"""GuideLLM's benchmark report (``--output kind=json`` or ``kind=yaml``, report version 2).

One benchmark per file (a sweep's several loads are refused: give one benchmark per file).
Per-request values come from ``requests.successful`` and ``requests.errored`` when they hold
every request; a sampled report is read as summaries only. GuideLLM's
``inter_token_latency_ms`` is ``(last token - first token) / (output tokens - 1)``: our TPOT
(its ``time_per_output_token_ms`` is the request latency over all output tokens, TTFT
included, and is not read). ``incomplete`` requests, cut off by the benchmark's end, are left out.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from pytest_goodput.interop.readers.imported import (
    OURS,
    ForeignFileError,
    ImportedRun,
    need,
    per_request_run,
    record,
    spec_for,
    summary_run,
)
from pytest_goodput.schema.runs.results import Distribution, RequestRecord, Throughput
from pytest_goodput.schema.runs.session import ResultSource
from pytest_goodput.schema.scenario.spec import ScenarioSpec

TOOL = "guidellm"
NAME = "GuideLLM"
REPORT_VERSIONS = (2,)
_METRICS = {"ttft_ms": "time_to_first_token_ms", "tpot_ms": "inter_token_latency_ms", "e2e_ms": "request_latency"}


def looks_like(doc: Any) -> bool:
    return isinstance(doc, Mapping) and isinstance(doc.get("benchmarks"), list) \
        and isinstance(doc.get("metadata"), Mapping) and "guidellm_version" in doc["metadata"]


def read(doc: Mapping[str, Any]) -> ImportedRun:
    meta = doc["metadata"]
    tool = meta.get("guidellm_version")
    report = meta.get("version")
    version = f"{tool} (report {report})"
    if report not in REPORT_VERSIONS:
        raise ForeignFileError(f"{NAME} report (guidellm {tool}): metadata.version {report} is not one this "
                               f"version reads (report {', '.join(map(str, REPORT_VERSIONS))})")
    benches = doc["benchmarks"]
    if len(benches) != 1:
        raise ForeignFileError(f"{NAME} report ({version}): {len(benches)} benchmarks in one file; "
                               "give one benchmark (one load) per file")
    bench = benches[0]
    totals = need(need(bench, "metrics", NAME, version), "request_totals", NAME, version)
    requests = bench.get("requests") or {}
    rows = [(r, True) for r in requests.get("successful") or []] + [(r, False) for r in requests.get("errored") or []]
    issued = int(totals.get("successful", 0)) + int(totals.get("errored", 0))
    data = ((doc.get("config") or {}).get("spec") or {}).get("data") or [{}]
    spec = _spec(bench, data[0] if isinstance(data[0], Mapping) else {}, issued, version)
    if rows and len(rows) == issued:
        result = per_request_run(_records(rows, version), spec, NAME)
        source = ResultSource(tool=TOOL, version=version, per_request=True, definitions=dict(OURS))
    else:
        metrics = bench["metrics"]
        seconds = float(need(bench, "duration", NAME, version))
        done = int(totals.get("successful", 0))
        result = summary_run(
            spec, NAME, issued=issued, completed=done, seconds=seconds,
            metrics={ours: _dist(metrics.get(theirs), 1000.0 if theirs == "request_latency" else 1.0)
                     for ours, theirs in _METRICS.items()},
            throughput=Throughput(requests_per_s=done / seconds if seconds else 0.0,
                                  output_tokens_per_s=_total(metrics, "output_token_count") / seconds if seconds else 0.0,
                                  total_tokens_per_s=_total(metrics, "total_token_count") / seconds if seconds else 0.0))
        source = ResultSource(tool=TOOL, version=version, per_request=False, definitions=dict(OURS))
    return ImportedRun(result=result, source=source)


def _spec(bench: Mapping[str, Any], shape: Mapping[str, Any], issued: int, version: str) -> ScenarioSpec:
    """The load from the benchmark's strategy; lengths from the report's data config (synthetic
    data), else the requests' mean."""
    config = need(bench, "config", NAME, version)
    strategy = config.get("strategy") or {}
    kind = strategy.get("type_")
    conc = strategy.get("streams") if kind in ("concurrent", "synchronous") else None
    if kind == "synchronous":
        conc = 1
    rate = strategy.get("rate") if kind in ("constant", "poisson", "async") else None
    backend = config.get("backend") or {}
    rows = (bench.get("requests") or {}).get("successful") or []
    isl = shape.get("prompt_tokens") or _mean(rows, "prompt_tokens")
    osl = shape.get("output_tokens") or _mean(rows, "output_tokens")
    return spec_for(TOOL, concurrency=int(conc) if conc else None, rate=float(rate) if rate else None,
                    requests=issued, isl=round(isl or 1), osl=round(osl or 1),
                    api="chat" if "chat" in str(backend.get("request_format", "")) else "completions",
                    burstiness=1.0)


def _mean(rows: list, key: str) -> Optional[float]:  # type: ignore[type-arg]
    xs = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]
    return sum(xs) / len(xs) if xs else None


def _records(rows: list[tuple[Mapping[str, Any], bool]], version: str) -> list[RequestRecord]:
    starts = [float(need(r, "request_start_time", NAME, version) or 0.0) for r, _ in rows]
    t0 = min(starts)
    out = []
    for i, ((r, ok), start) in enumerate(sorted(zip(rows, starts), key=lambda p: p[1])):
        latency = r.get("request_latency")
        ttft = r.get("time_to_first_token_ms")
        ok = ok and ttft is not None
        out.append(record(i, start - t0, ok=ok, ttft_ms=ttft, e2e_ms=float(latency) * 1000 if latency else None,
                          output_tokens=int(r.get("output_tokens") or 0), prompt_tokens=r.get("prompt_tokens"),
                          tpot_ms=r.get("inter_token_latency_ms"),
                          cached_tokens=r.get("cached_tokens") if isinstance(r.get("cached_tokens"), int) else None,
                          error=str((r.get("info") or {}).get("error") or "errored") if not ok else None))
    return out


def _dist(v: Any, scale: float) -> Distribution:
    ok = v.get("successful") if isinstance(v, Mapping) else None
    if not isinstance(ok, Mapping) or not ok.get("count"):
        return Distribution()
    pct = ok.get("percentiles") or {}
    def get(x: Any) -> Optional[float]:
        return float(x) * scale if isinstance(x, (int, float)) else None
    return Distribution(count=int(ok["count"]), mean=get(ok.get("mean")), p50=get(pct.get("p50", ok.get("median"))),
                        p90=get(pct.get("p90")), p95=get(pct.get("p95")), p99=get(pct.get("p99")), max=get(ok.get("max")))


def _total(metrics: Mapping[str, Any], key: str) -> float:
    v = (metrics.get(key) or {}).get("successful") or {}
    return float(v.get("total_sum") or 0.0)

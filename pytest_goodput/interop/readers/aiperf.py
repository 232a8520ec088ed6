"""AIPerf's ``profile_export.jsonl`` (one record per request) and ``profile_export_aiperf.json``.

Per-request records when the JSON Lines file is given (the aggregate, when beside it, gives
the version and the load); the aggregate alone is summaries only. AIPerf's
``inter_token_latency`` is ``(request_latency - TTFT) / (OSL - 1)`` with the request latency
ending at the last response: our TPOT. Warm-up records (``benchmark_phase`` warmup) are left out.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from pytest_goodput.interop.readers.imported import (
    OURS,
    ForeignFileError,
    ImportedRun,
    describe_version,
    need,
    per_request_run,
    record,
    spec_for,
    summary_run,
)
from pytest_goodput.schema.runs.results import Distribution, RequestRecord, Throughput
from pytest_goodput.schema.runs.session import ResultSource
from pytest_goodput.schema.scenario.spec import ScenarioSpec

TOOL = "aiperf"
NAME = "AIPerf"
SCHEMA_MAJOR = "1"
_METRICS = {"ttft_ms": "time_to_first_token", "tpot_ms": "inter_token_latency",
            "e2e_ms": "request_latency", "itl_ms": "inter_chunk_latency"}


def looks_like_aggregate(doc: Any) -> bool:
    return isinstance(doc, Mapping) and "aiperf_version" in doc and "time_to_first_token" in doc


def looks_like_record(doc: Any) -> bool:
    return isinstance(doc, Mapping) and isinstance(doc.get("metadata"), Mapping) \
        and "request_start_ns" in doc["metadata"] and "metrics" in doc


def read(records: Optional[Sequence[Mapping[str, Any]]], aggregate: Optional[Mapping[str, Any]]) -> ImportedRun:
    """Either or both; per-request values whenever ``records`` is given."""
    version = _version(aggregate)
    spec = _spec(records, aggregate, version)
    if records is not None:
        result = per_request_run(_records(records, version), spec, NAME)
        source = ResultSource(tool=TOOL, version=version, per_request=True, definitions=dict(OURS))
    else:
        assert aggregate is not None
        completed = int(_avg(need(aggregate, "request_count", NAME, version)))
        errors = sum(int(e.get("count", 0)) for e in aggregate.get("error_summary") or [] if isinstance(e, Mapping))
        result = summary_run(
            spec, NAME, issued=completed + errors, completed=completed,
            seconds=_avg(need(aggregate, "benchmark_duration", NAME, version)),
            metrics={ours: _dist(aggregate.get(theirs), completed) for ours, theirs in _METRICS.items()},
            throughput=Throughput(
                requests_per_s=_avg(need(aggregate, "request_throughput", NAME, version)),
                output_tokens_per_s=_avg(need(aggregate, "output_token_throughput", NAME, version)),
                total_tokens_per_s=_avg(aggregate.get("total_token_throughput") or {"avg": 0.0})))
        if result.metrics.ttft_ms.mean is None:
            need(aggregate, "time_to_first_token", NAME, version)
        source = ResultSource(tool=TOOL, version=version, per_request=False, definitions=dict(OURS))
    at = aggregate.get("start_time") if aggregate is not None else None
    return ImportedRun(result=result.model_copy(update={"measured_at": at if isinstance(at, str) else None}),
                       source=source)


def _version(aggregate: Optional[Mapping[str, Any]]) -> Optional[str]:
    if aggregate is None:
        return None
    schema = str(need(aggregate, "schema_version", NAME, aggregate.get("aiperf_version")))
    tool = aggregate.get("aiperf_version")
    if schema.split(".")[0] != SCHEMA_MAJOR:
        raise ForeignFileError(f"{NAME} aggregate (aiperf {tool}): schema_version {schema} is not one this "
                               f"version reads (schema {SCHEMA_MAJOR}.x)")
    return f"{tool} (schema {schema})"


def _spec(records: Optional[Sequence[Mapping[str, Any]]], aggregate: Optional[Mapping[str, Any]],
          version: Optional[str]) -> ScenarioSpec:
    phase: Mapping[str, Any] = {}
    prompts: Mapping[str, Any] = {}
    if aggregate is not None:
        config = aggregate.get("input_config") or {}
        phase = next((p for p in config.get("phases", []) if p.get("kind") == "profiling"), {})
        sets = config.get("datasets") or [{}]
        prompts = sets[0].get("prompts") or {}
    measured = [r for r in records or [] if _phase(r) != "warmup"]
    n = len(measured) if records is not None else int(phase.get("requests") or 1)
    isl = (prompts.get("isl") or {}).get("mean") or _mean_of(measured, "input_sequence_length")
    osl = (prompts.get("osl") or {}).get("mean") or _mean_of(measured, "output_sequence_length")
    conc = phase.get("concurrency")
    rate = phase.get("request_rate") or phase.get("rate")
    endpoint = ((aggregate or {}).get("input_config") or {}).get("endpoint") or {}
    return spec_for(TOOL, concurrency=int(conc) if conc else None, rate=float(rate) if rate else None,
                    requests=n, isl=round(isl or 1), osl=round(osl or 1), api=endpoint.get("type", "completions"))


def _phase(r: Mapping[str, Any]) -> Any:
    return (r.get("metadata") or {}).get("benchmark_phase")


def _value(r: Mapping[str, Any], name: str) -> Any:
    m = (r.get("metrics") or {}).get(name)
    return m.get("value") if isinstance(m, Mapping) else None


def _mean_of(records: Sequence[Mapping[str, Any]], name: str) -> Optional[float]:
    xs = [float(v) for v in (_value(r, name) for r in records) if isinstance(v, (int, float))]
    return sum(xs) / len(xs) if xs else None


def _records(rows: Sequence[Mapping[str, Any]], version: Optional[str]) -> list[RequestRecord]:
    measured = [r for r in rows if _phase(r) != "warmup"]
    if not measured:
        raise ForeignFileError(f"{NAME} profile_export.jsonl ({describe_version(version)}): no profiling records")
    starts = [int(need(need(r, "metadata", NAME, version), "request_start_ns", NAME, version)) for r in measured]
    t0 = min(starts)
    out = []
    for i, (r, start) in enumerate(sorted(zip(measured, starts), key=lambda p: p[1])):
        error = r.get("error")
        ttft, e2e = _value(r, "time_to_first_token"), _value(r, "request_latency")
        ok = not error and ttft is not None and not (r.get("metadata") or {}).get("was_cancelled")
        chunks = _value(r, "inter_chunk_latency")
        out.append(record(i, (start - t0) / 1e9, ok=ok, ttft_ms=ttft, e2e_ms=e2e,
                          output_tokens=int(_value(r, "output_sequence_length") or 0),
                          prompt_tokens=_int(_value(r, "input_sequence_length")),
                          itl_ms=[float(x) for x in chunks] if isinstance(chunks, list) else None,
                          tpot_ms=_value(r, "inter_token_latency"),
                          cached_tokens=_int(_value(r, "usage_prompt_cache_read_tokens")),
                          error=str(error.get("message", error) if isinstance(error, Mapping) else error)
                          if error else None))
    return out


def _int(v: Any) -> Optional[int]:
    return int(v) if isinstance(v, (int, float)) else None


def _avg(v: Any) -> float:
    return float(v.get("avg", 0.0)) if isinstance(v, Mapping) else float(v)


def _dist(v: Any, count: int) -> Distribution:
    if not isinstance(v, Mapping):
        return Distribution()
    def get(k: str) -> Optional[float]:
        x = v.get(k)
        return float(x) if isinstance(x, (int, float)) else None
    return Distribution(count=count, mean=get("avg"), p50=get("p50"), p90=get("p90"), p95=get("p95"),
                        p99=get("p99"), max=get("max"))

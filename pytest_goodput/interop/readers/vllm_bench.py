"""``vllm bench serve --save-result`` JSON: per-request arrays with ``--save-detailed``, else summaries.

The file has no schema version; it is recognized by its fields (``formats.py``). Times in the
arrays are seconds (``ttfts``, ``latencies``, ``itls`` per request, ``start_times`` on the
client's monotonic clock); the summaries are ``mean_/median_/pNN_<metric>_ms``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from pytest_goodput.interop.readers.imported import (
    E2E_SENT,
    ITL_CHUNKS,
    OURS,
    TPOT_STREAM_END,
    TTFT_SENT,
    ForeignFileError,
    ImportedRun,
    need,
    per_request_run,
    record,
    spec_for,
    summary_run,
)
from pytest_goodput.schema.runs.results import Distribution, Throughput
from pytest_goodput.schema.runs.session import ResultSource

TOOL = "vllm-bench"
NAME = "vllm bench serve"
DETAILED = ("ttfts", "itls", "input_lens", "output_lens", "errors")
#: What a summary-only file's numbers mean: vLLM's TPOT runs to the end of the stream.
SUMMARY_DEFINITIONS = {"ttft_ms": TTFT_SENT, "tpot_ms": TPOT_STREAM_END, "e2e_ms": E2E_SENT, "itl_ms": ITL_CHUNKS}
_METRICS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "itl", "e2e_ms": "e2el"}


def looks_like(doc: Any) -> bool:
    return isinstance(doc, Mapping) and "request_throughput" in doc and "mean_ttft_ms" in doc \
        and ("num_prompts" in doc or "backend" in doc)


def read(doc: Mapping[str, Any]) -> ImportedRun:
    version = doc.get("vllm_version") if isinstance(doc.get("vllm_version"), str) else None
    completed = int(need(doc, "completed", NAME, version))
    failed = int(doc.get("failed") or 0)
    spec = _spec(doc, version, completed + failed)
    detailed = all(k in doc for k in DETAILED)
    if detailed:
        result = per_request_run(_records(doc, version), spec, NAME)
        source = ResultSource(tool=TOOL, version=version, per_request=True, definitions=dict(OURS))
    else:
        metrics = {ours: _summary(doc, theirs, completed) for ours, theirs in _METRICS.items()}
        if metrics["ttft_ms"].mean is None:
            need(doc, "mean_ttft_ms", NAME, version)
        result = summary_run(spec, NAME, issued=completed + failed, completed=completed,
                             seconds=float(need(doc, "duration", NAME, version)), metrics=metrics,
                             throughput=Throughput(
                                 requests_per_s=float(need(doc, "request_throughput", NAME, version)),
                                 output_tokens_per_s=float(need(doc, "output_throughput", NAME, version)),
                                 total_tokens_per_s=float(doc.get("total_token_throughput") or 0.0)))
        source = ResultSource(tool=TOOL, version=version, per_request=False, definitions=dict(SUMMARY_DEFINITIONS))
    return ImportedRun(result=result.model_copy(update={"measured_at": _date(doc.get("date"))}), source=source)


def _spec(doc: Mapping[str, Any], version: Optional[str], issued: int):  # type: ignore[no-untyped-def]
    rate = doc.get("request_rate")
    rate_f = None if rate in (None, "inf") or (isinstance(rate, float) and math.isinf(rate)) else float(rate)
    total_in, total_out = doc.get("total_input_tokens") or 0, doc.get("total_output_tokens") or 0
    done = max(1, int(doc.get("completed") or 0))
    requests = int(doc.get("num_prompts") or issued)
    return spec_for(TOOL, concurrency=doc.get("max_concurrency"), rate=rate_f, requests=requests,
                    isl=round(total_in / done), osl=round(total_out / done),
                    api="chat" if doc.get("endpoint_type") == "openai-chat" else "completions",
                    burstiness=float(doc.get("burstiness") or 1.0))


def _records(doc: Mapping[str, Any], version: Optional[str]) -> list:  # type: ignore[type-arg]
    n = len(doc["ttfts"])
    for key in DETAILED:
        if not isinstance(doc[key], list) or len(doc[key]) != n:
            raise ForeignFileError(f"{NAME} file ({version or 'no version in the file'}): field {key!r} "
                                   f"has {len(doc[key]) if isinstance(doc[key], list) else 'no'} entries, "
                                   f"'ttfts' has {n}")
    starts = doc.get("start_times")
    t0 = min(starts) if isinstance(starts, list) and len(starts) == n and starts else None
    latencies = doc.get("latencies") if isinstance(doc.get("latencies"), list) else None
    out = []
    for i in range(n):
        ok = not doc["errors"][i]
        ttft = float(doc["ttfts"][i]) * 1000
        gaps = [float(g) * 1000 for g in doc["itls"][i]]
        e2e = float(latencies[i]) * 1000 if latencies is not None else ttft + sum(gaps)
        start = float(starts[i]) - t0 if t0 is not None else 0.0
        out.append(record(i, start, ok=ok, ttft_ms=ttft, e2e_ms=e2e, output_tokens=int(doc["output_lens"][i]),
                          prompt_tokens=int(doc["input_lens"][i]), itl_ms=gaps, error=str(doc["errors"][i])))
    return out


def _summary(doc: Mapping[str, Any], name: str, count: int) -> Distribution:
    def get(key: str) -> Optional[float]:
        v = doc.get(f"{key}_{name}_ms")
        return float(v) if isinstance(v, (int, float)) else None
    p50 = get("p50")
    return Distribution(count=count if get("mean") is not None else 0, mean=get("mean"),
                        p50=p50 if p50 is not None else get("median"), p90=get("p90"), p95=get("p95"),
                        p99=get("p99"))


def _date(value: Any) -> Optional[str]:
    """vLLM's ``date`` (``20261204-085914``, local time) as ISO 8601 (zone unknown)."""
    if not isinstance(value, str) or len(value) != 15 or value[8] != "-":
        return None
    d, t = value[:8], value[9:]
    return f"{d[:4]}-{d[4:6]}-{d[6:]}T{t[:2]}:{t[2:4]}:{t[4:]}"

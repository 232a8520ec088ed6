"""``vllm bench serve``-compatible result JSON, with its ``--save-detailed`` per-request arrays (pure).

Keys and units are vLLM's (``vllm/benchmarks/serve.py`` at vllm-project/vllm
009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): per-request arrays in seconds, aggregates in
milliseconds. Each number means what vLLM's code measures, computed vLLM's way from our
records, so vLLM's scripts compare our runs with theirs like for like: TTFT and latency
count from the request's send (``sent_at``; vLLM's ``start_time``), the wait before it is
``queue_times`` (our send lag), TPOT is ``(latency − ttft) / (output_len − 1)``, aggregates
are numpy's mean, median, population SD and linear-interpolated percentiles over the
successful requests. ``docs/export.md`` lists what maps to what and what is left out.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Optional, Sequence

import numpy as np

from pytest_goodput.interop.writers.source import (
    ExportedTest,
    ExportError,
    ExportFile,
    labelled_runs,
    measured,
)
from pytest_goodput.schema.runs.results import RequestRecord, RunResult

#: vLLM's ``--percentile-metrics`` and ``--metric-percentiles`` as if given
#: ``ttft,tpot,itl,e2el`` and ``50,90,95,99``.
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (50, 90, 95, 99)


def _since_send(at: Optional[float], sent: Optional[float]) -> float:
    return at - sent if at is not None and sent is not None else 0.0


def _per_request(records: Sequence[RequestRecord]) -> dict[str, list[Any]]:
    """vLLM's per-request arrays; a failed request reads as vLLM's does: 0.0, [] and its error."""
    out: dict[str, list[Any]] = {k: [] for k in ("input_lens", "output_lens", "ttfts", "itls", "latencies",
                                                  "start_times", "queue_times", "errors")}
    for r in records:
        ok = r.ok
        out["input_lens"].append(r.prompt_tokens or 0)
        out["output_lens"].append(r.output_tokens if ok else 0)
        out["ttfts"].append(_since_send(r.first_token_at, r.sent_at) if ok else 0.0)
        out["itls"].append([v / 1000.0 for v in r.itl_ms] if ok else [])
        out["latencies"].append(_since_send(r.end_at, r.sent_at) if ok else 0.0)
        out["start_times"].append(r.sent_at if r.sent_at is not None else r.scheduled_at)
        out["queue_times"].append(_since_send(r.sent_at, r.scheduled_at))
        out["errors"].append("" if ok else f"{r.error_kind or 'error'}: {r.error_detail or ''}".rstrip(": "))
    return out


def _stats(name: str, seconds: Sequence[float]) -> dict[str, float]:
    """``mean_<name>_ms``, ``median_``, ``std_`` and ``p<P>_`` as vLLM computes them (0 when empty)."""
    x = np.asarray(seconds if len(seconds) else [0.0], dtype=float) * 1000.0
    out = {f"mean_{name}_ms": float(np.mean(x)), f"median_{name}_ms": float(np.median(x)),
           f"std_{name}_ms": float(np.std(x))}
    out.update({f"p{p}_{name}_ms": float(np.percentile(x, p)) for p in PERCENTILES})
    return out


def aggregates(arrays: dict[str, list[Any]], ok: Sequence[bool], duration: float) -> dict[str, Any]:
    """vLLM's run-level numbers from its per-request arrays (``calculate_metrics``)."""
    rows = [i for i, good in enumerate(ok) if good]
    ttfts = [arrays["ttfts"][i] for i in rows]
    lat = [arrays["latencies"][i] for i in rows]
    outs = [arrays["output_lens"][i] for i in rows]
    tpots = [(lat[j] - ttfts[j]) / (outs[j] - 1) for j in range(len(rows)) if outs[j] > 1]
    itls = [v for i in rows for v in arrays["itls"][i]]
    total_in = sum(arrays["input_lens"][i] for i in rows)
    total_out = sum(outs)
    per_s = 1.0 / duration if duration > 0 else 0.0  # a run with no window delivered no rate
    out: dict[str, Any] = {
        "duration": duration, "completed": len(rows), "failed": len(ok) - len(rows),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(rows) * per_s,
        "output_throughput": total_out * per_s,
        "total_token_throughput": (total_in + total_out) * per_s,
    }
    for name, values in zip(PERCENTILE_METRICS, (ttfts, tpots, itls, lat)):
        out.update(_stats(name, values))
    return out


def _date(run: RunResult) -> Optional[str]:
    """vLLM's ``date`` (``%Y%m%d-%H%M%S``) from the run's start, UTC."""
    if not run.measured_at:
        return None
    at = datetime.fromisoformat(run.measured_at.replace("Z", "+00:00")).astimezone(timezone.utc)
    return at.strftime("%Y%m%d-%H%M%S")


def result(test: ExportedTest, index: int) -> dict[str, Any]:
    """One run of ``test`` as the JSON ``vllm bench serve --save-result --save-detailed`` writes."""
    run = test.runs[index]
    if run.percentiles == "sketch":
        raise ExportError(f"{test.nodeid}: run {index + 1} was sketched (a sample of its requests is "
                          "kept): the vllm format needs every request; export llmd, bmf or pytorch")
    spec = run.spec
    records = measured(run)
    arrays = _per_request(records)
    backend = "openai-chat" if spec.api == "chat" else "openai"
    rate = spec.rate if spec.rate is not None else run.load.get("rate")
    doc: dict[str, Any] = {
        "date": _date(run), "endpoint_type": backend, "backend": backend, "label": test.nodeid,
        "model_id": test.model, "tokenizer_id": test.model, "num_prompts": run.issued,
        "request_rate": rate if rate is not None else "inf",
        # vLLM's constant arrivals are burstiness=inf, which JSON cannot hold: "inf" as for the rate.
        "burstiness": "inf" if spec.arrival == "constant" else (1.0 if spec.arrival == "poisson" else spec.burstiness),
        "max_concurrency": spec.concurrency,
    }
    doc.update(aggregates(arrays, [r.ok for r in records], run.window.seconds))
    doc["request_goodput"] = run.goodput.requests_per_s if run.goodput is not None else None
    doc.update(arrays)
    return doc


def write(tests: list[ExportedTest]) -> list[ExportFile]:
    return [ExportFile(label, json.dumps(result(t, i)) + "\n") for label, t, i in labelled_runs(tests)]

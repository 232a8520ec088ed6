"""What every reader returns: a run result in our schema, and where it came from.

A reader maps per-request values to :class:`RequestRecord` and lets ``measure.metrics``
compute every number as ``docs/metrics.md`` defines it, so an imported run is summarized
like one of ours; a file with summaries only becomes a run result with its distributions
filled from the file and no records, marked ``per_request=False``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from pytest_goodput.measure.metrics import summarize
from pytest_goodput.schema.registry import PERCENTILE_SLO_RE
from pytest_goodput.schema.runs.results import (
    ClientHealth,
    Distribution,
    LatencyMetrics,
    RequestRecord,
    RunResult,
    Throughput,
    Window,
)
from pytest_goodput.schema.runs.session import ResultSource
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: How each metric is defined, in words; two files are judged together only when the gated
#: metrics' words agree (``docs/metrics.md``, "Other tools' definitions").
TTFT_SENT = "first chunk with text - request sent"
TPOT_TOKENS = "(last token - first token) / (output tokens - 1)"
TPOT_STREAM_END = "(E2E - TTFT) / (output tokens - 1), to the end of the stream"
E2E_SENT = "end of the response - request sent"
ITL_CHUNKS = "gap between consecutive streamed chunks"
OURS: dict[str, str] = {"ttft_ms": TTFT_SENT, "tpot_ms": TPOT_TOKENS, "e2e_ms": E2E_SENT, "itl_ms": ITL_CHUNKS}
SUMMARY_ONLY_NOTE = ("summary only: no spread known (the file holds each metric's summary, not its "
                     "requests, so the noise within a run cannot be measured and a change smaller "
                     "than that noise can pass or fail by chance)")


class ForeignFileError(ValueError):
    """A file this version cannot read: the message names the tool, its version and the field."""


@dataclass(frozen=True)
class ImportedRun:
    """One tool file read: its run result and where it came from."""

    result: RunResult
    source: ResultSource
    recorded_at: Optional[str] = None


def need(doc: Mapping[str, Any], field: str, tool: str, version: Optional[str]) -> Any:
    """``doc[field]``, or an error naming the tool, its version and the missing field."""
    if not isinstance(doc, Mapping) or field not in doc:
        raise ForeignFileError(f"{tool} file ({describe_version(version)}): field {field!r} is missing; "
                               "this version of pytest-goodput reads it")
    return doc[field]


def describe_version(version: Optional[str]) -> str:
    return f"version {version}" if version else "no version in the file"


def imported_client(tool: str) -> ClientHealth:
    """The other tool's client health is not known: valid, with a note saying so."""
    return ClientHealth(valid=True, cpu_utilization=0.0,
                        notes=[f"imported from {tool}: its client's pace was not checked"])


def record(index: int, start_s: float, *, ok: bool, ttft_ms: Optional[float], e2e_ms: Optional[float],
           output_tokens: int, prompt_tokens: Optional[int], itl_ms: Optional[list[float]] = None,
           tpot_ms: Optional[float] = None, error: Optional[str] = None,
           cached_tokens: Optional[int] = None) -> RequestRecord:
    """One request from another tool's numbers: times relative to the run's first start (s).

    TPOT is our definition from the chunk gaps when the file has them (their sum is the last
    token's time minus the first's), else the tool's own per-request value."""
    gaps = list(itl_ms or [])
    if ok and gaps and output_tokens >= 2:
        tpot_ms = sum(gaps) / (output_tokens - 1)
    elif not ok or output_tokens < 2:
        tpot_ms = None
    first = start_s + ttft_ms / 1000 if ok and ttft_ms is not None else None
    end = start_s + e2e_ms / 1000 if e2e_ms is not None else None
    last = first + sum(gaps) / 1000 if first is not None and gaps else end
    return RequestRecord(
        index=index, ok=ok, error_kind=None if ok else "engine_error", error_detail=error if not ok else None,
        prompt_tokens=prompt_tokens, output_tokens=output_tokens if ok else 0, token_count_source="usage",
        content_chunks=len(gaps) + 1 if ok and gaps else int(ok), scheduled_at=start_s, sent_at=start_s,
        first_token_at=first, last_token_at=last, end_at=end, ttft_ms=ttft_ms if ok else None,
        tpot_ms=tpot_ms, e2e_ms=e2e_ms if ok else None, itl_ms=gaps if ok else [],
        ttft_sent_ms=ttft_ms if ok else None, e2e_sent_ms=e2e_ms if ok else None, ttfo_ms=ttft_ms if ok else None,
        answer_tpot_ms=tpot_ms, cached_tokens=cached_tokens if ok else None)


def per_request_run(records: list[RequestRecord], spec: ScenarioSpec, tool: str) -> RunResult:
    """A run result from imported records: every number computed as ours are."""
    return summarize(records, spec, imported_client(tool), load=load_of(spec))


def load_of(spec: ScenarioSpec) -> dict[str, float]:
    if spec.concurrency is not None:
        return {"concurrency": float(spec.concurrency)}
    return {"rate": spec.rate} if spec.rate is not None else {}


def summary_run(spec: ScenarioSpec, tool: str, *, issued: int, completed: int, seconds: float,
                metrics: Mapping[str, Distribution], throughput: Throughput) -> RunResult:
    """A run result from a file's summaries alone: no records, distributions from the file."""
    return RunResult(
        spec=spec, load=load_of(spec), window=Window(start=0.0, end=seconds, seconds=seconds, basis="sends"),
        issued=issued, completed=completed,
        metrics=LatencyMetrics(**{k: metrics.get(k, Distribution()) for k in ("ttft_ms", "tpot_ms", "itl_ms",
                                                                             "e2e_ms")}),
        throughput=throughput, send_lag_ms=Distribution(),
        failures={"engine_error": issued - completed} if issued > completed else {},
        token_count_source="usage", client=imported_client(tool))


def spec_for(tool: str, *, concurrency: Optional[int], rate: Optional[float], requests: int,
             isl: int, osl: int, api: str = "completions", burstiness: float = 1.0) -> ScenarioSpec:
    """The scenario another tool ran, in our words: what the identity check compares."""
    common: dict[str, Any] = dict(requests=max(1, requests), isl=max(1, isl), osl=max(1, osl),
                                  api="chat" if api == "chat" else "completions")
    if concurrency is not None:
        return ScenarioSpec(scenario="concurrency", concurrency=concurrency, **common)
    if rate is not None:
        arrival = "poisson" if burstiness == 1.0 else "gamma"
        return ScenarioSpec(scenario="server", rate=rate, arrival=arrival, burstiness=burstiness, **common)
    return ScenarioSpec(scenario="offline", **common)


#: Spec fields that judge a run rather than shape its load: a test may set them on an
#: imported file (its load is the file's), with ``*_pNN_ms`` percentile SLOs.
JUDGING_FIELDS = frozenset({"slo", "ttft_ms", "ttfo_ms", "tpot_ms", "attainment", "max_error_rate",
                            "percentile_slos", "tolerance", "tolerances", "gate", "interactivity_tolerance"})
_PER_REQUEST_SLOS = ("slo", "ttft_ms", "ttfo_ms", "tpot_ms", "percentile_slos")


def is_judging(key: str) -> bool:
    """A spec field that judges a run (an SLO, a tolerance), not its load."""
    return key in JUDGING_FIELDS or PERCENTILE_SLO_RE.match(key) is not None


def with_judging(run: ImportedRun, args: Mapping[str, Any]) -> ImportedRun:
    """The run judged under a test's SLOs and tolerances: its spec takes them and, with
    per-request values, its goodput and percentile SLO checks are computed from its records.

    A load field is refused (the file says what load ran), and so are per-request SLOs on a
    summary-only file (no request is known to meet them)."""
    if not args:
        return run
    load = sorted(k for k in args if not is_judging(k))
    if load:
        raise ForeignFileError(f"{', '.join(load)}: an imported file's load is the file's; only SLOs and "
                               f"tolerances can be given ({', '.join(sorted(JUDGING_FIELDS))}, *_pNN_ms)")
    slos = sorted(k for k in args if k in _PER_REQUEST_SLOS or PERCENTILE_SLO_RE.match(k))
    if slos and not run.source.per_request:
        raise ForeignFileError(f"{', '.join(slos)}: this {run.source.tool} file has summaries only, so no "
                               "request is known to meet a per-request SLO; save per-request values "
                               "(vllm bench serve --save-detailed, AIPerf's profile_export.jsonl)")
    spec = ScenarioSpec.model_validate({**run.result.spec.model_dump(exclude_unset=True), **args})
    result = run.result
    if run.source.per_request:
        result = per_request_run(list(result.requests), spec, run.source.tool).model_copy(
            update={"measured_at": result.measured_at})
    else:
        result = result.model_copy(update={"spec": spec})
    return ImportedRun(result=result, source=run.source, recorded_at=run.recorded_at)

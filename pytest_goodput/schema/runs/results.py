"""What came out of a run: per-request records and run metrics (the JSON contract).

Pure pydantic models. ``RESULT_SCHEMA_VERSION`` is bumped on any incompatible change;
``docs/metrics.md`` defines every field.
"""

from __future__ import annotations

from typing import Literal, Optional, get_args

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from pytest_goodput.schema.runs.engine_clock import EngineTiming, Histogram
from pytest_goodput.schema.runs.slices import Slices
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.schema.outcomes.workload_check import PromptSet

RESULT_SCHEMA_VERSION = 1

ErrorKind = Literal["http_status", "timeout", "transport", "malformed_stream", "short_output",
                    "truncated", "engine_error", "finish_reason"]
ERROR_KINDS: tuple[str, ...] = get_args(ErrorKind)
TokenCountSource = Literal["usage", "tokenizer", "chunks"]
LatencyOrigin = Literal["sent_at", "scheduled_at"]
WindowBasis = Literal["arrivals", "steady_state", "sends"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestRecord(_Model):
    """One request as measured. Times are ``time.perf_counter()`` seconds (CLOCK_MONOTONIC)."""

    index: int
    ok: bool
    warmup: bool = False
    error_kind: Optional[ErrorKind] = None
    error_detail: Optional[str] = None
    http_status: Optional[int] = None
    response_id: Optional[str] = None
    prompt_tokens: Optional[int] = None
    output_tokens: int = 0
    requested_output_tokens: Optional[int] = None
    token_count_source: TokenCountSource = "chunks"
    content_chunks: int = 0
    scheduled_at: float
    sent_at: Optional[float] = None
    first_token_at: Optional[float] = None
    last_token_at: Optional[float] = None
    end_at: Optional[float] = None
    ttft_ms: Optional[float] = None
    tpot_ms: Optional[float] = None
    e2e_ms: Optional[float] = None
    send_lag_ms: Optional[float] = None
    itl_ms: list[float] = Field(default_factory=list)
    good: Optional[bool] = None
    latency_from: LatencyOrigin = Field(
        "sent_at", description="what ttft_ms and e2e_ms count from: sent_at, or scheduled_at (open loop)"
    )
    ttft_sent_ms: Optional[float] = Field(None, description="first_token_at - sent_at (diagnosis)")
    e2e_sent_ms: Optional[float] = Field(None, description="end_at - sent_at (diagnosis)")
    tokens_at_once: bool = Field(
        False, description="two or more output tokens arrived at one instant (one content chunk, "
        "one read or a whole body): TPOT and ITL are undefined"
    )
    retries: int = Field(0, description="resends on a fresh connection of a request never written")
    # --- reasoning models (docs/metrics.md, "Reasoning") ----------------------------------
    reasoning_tokens: int = Field(
        0, description="output tokens of the reasoning phase (delta.reasoning_content); 0 without one"
    )
    answer_tokens: int = Field(0, description="output_tokens - reasoning_tokens: the answer's tokens")
    reasoning_token_source: Optional[TokenCountSource] = Field(
        None, description="where the reasoning/answer split came from: usage "
        "(completion_tokens_details.reasoning_tokens), tokenizer or chunks; None without reasoning"
    )
    first_answer_at: Optional[float] = Field(
        None, description="arrival time of the first answer (non-reasoning) content chunk"
    )
    ttfo_ms: Optional[float] = Field(
        None, description="time to first output (answer) token: first_answer_at - latency origin; "
        "equal to ttft_ms without reasoning"
    )
    # --- conversations and prefix caching (docs/metrics.md, "Conversations") --------------
    conversation: Optional[int] = Field(None, description="conversation number (multi-turn runs)")
    turn: Optional[int] = Field(None, description="turn within the conversation, from 1")
    worker: Optional[int] = Field(None, description="client process (from 0) that sent it, when workers > 1")
    cached_tokens: Optional[int] = Field(
        None, description="prompt tokens the engine served from its prefix cache "
        "(usage.prompt_tokens_details.cached_tokens); None when it does not say"
    )
    reasoning_tpot_ms: Optional[float] = Field(
        None, description="TPOT over the reasoning phase's chunks and tokens (streams with reasoning)")
    answer_tpot_ms: Optional[float] = Field(
        None, description="TPOT over the answer's chunks and tokens; tpot_ms without reasoning")
    # --- images and speculative decoding (docs/metrics.md, "Images", "Tokens per chunk") ---
    request_bytes: Optional[int] = Field(None, description="size of the JSON request body sent")
    images: int = Field(0, description="image_url parts the request carried")
    image_pixels: int = Field(0, description="width x height summed over the request's images")
    image_tokens: Optional[int] = Field(
        None, description="with images: usage.prompt_tokens minus the text's token count (the "
        "images' tokens, plus any chat-template tokens the text count lacks); None when unknown")
    tokens_per_chunk: Optional[float] = Field(
        None, description="streamed: output_tokens / content_chunks, when output_tokens is the "
        "engine's or a tokenizer's count (several tokens per chunk: speculative decoding, stream "
        "intervals)")
    usage_disagreement: Optional[str] = Field(
        None, description="why usage.completion_tokens was not believed: more than the streamed "
        "text could hold or fewer than its content chunks (output_tokens then come from the stream)")
    leading_blank_chunks: int = Field(
        0, description="whitespace-only content chunks before the first output chunk (TTFT "
        "counts from the first chunk with visible text)")
    engine: Optional[EngineTiming] = None  # the engine's own timing, when it sends it (vLLM)
    output_print: Optional[str] = Field(None, description="the output's fingerprint (output guard on)")


class Distribution(_Model):
    """Summary of a sample; percentiles are nearest-rank. ``None`` when there are no samples."""

    count: int = 0
    mean: Optional[float] = None
    p50: Optional[float] = None
    p90: Optional[float] = None
    p95: Optional[float] = None
    p99: Optional[float] = None
    max: Optional[float] = None


class LatencyMetrics(_Model):
    """Per-run distributions over completed requests; ``reasoning_tokens`` counts tokens, not ms."""

    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    e2e_ms: Distribution
    # Defaults: results written before reasoning models were measured still read back.
    ttfo_ms: Distribution = Field(default_factory=Distribution, description="time to first answer token (ms)")
    reasoning_tokens: Distribution = Field(default_factory=Distribution,
                                           description="reasoning tokens per completed request")
    # Multi-turn conversations (docs/metrics.md, "Conversations"); empty without them.
    ttft_later_ms: Distribution = Field(default_factory=Distribution, description="TTFT of turns 2 and later (ms)")
    ttft_ms_by_turn: dict[str, Distribution] = Field(default_factory=dict,
                                                     description="TTFT (ms) by turn number")
    reasoning_tpot_ms: Distribution = Field(default_factory=Distribution,
                                            description="TPOT of the reasoning phase (ms)")
    answer_tpot_ms: Distribution = Field(default_factory=Distribution,
                                         description="TPOT of the answer phase (ms)")
    # Images and speculative decoding, per completed request (docs/metrics.md).
    request_bytes: Distribution = Field(default_factory=Distribution, description="request body bytes")
    images: Distribution = Field(default_factory=Distribution, description="images per request")
    image_tokens: Distribution = Field(default_factory=Distribution,
                                       description="prompt tokens beyond the text (requests with images)")
    tokens_per_chunk: Distribution = Field(default_factory=Distribution, description="output tokens per chunk")


class Throughput(_Model):
    requests_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float


class Goodput(_Model):
    """Requests meeting every per-request SLO (DistServe goodput at a fixed load)."""

    requests_per_s: float
    tokens_per_s: float
    attainment: float
    good: int
    issued: int
    target: float
    met: bool


class PercentileSLOCheck(_Model):
    """``metric`` at ``percentile`` ≤ ``limit_ms``, with the MLPerf early-stopping proof."""

    name: str
    metric: str
    percentile: float
    limit_ms: float
    value_ms: Optional[float]
    ok: bool
    samples: int
    over_limit: int
    proven: bool
    requests_needed: Optional[int] = None


class ClientHealth(_Model):
    """The load generator's check on itself: did the client, not the server, set the pace?"""

    valid: bool
    reasons: list[str] = Field(default_factory=list)
    cpu_utilization: float = Field(description="client process CPU seconds / wall seconds, per core")
    loop_lag_ms: Distribution = Field(default_factory=Distribution)
    send_lag_p99_ms: Optional[float] = None
    workers: int = 1
    requests: int = Field(0, description="requests the client sent (warm-up included)")
    failed: int = Field(0, description="of which the engine failed (HTTP status >= 400, transport, timeout)")
    retries: int = Field(0, description="requests resent on a fresh connection (never written the first time)")
    loop_lag_p99_ms: Optional[float] = Field(
        None, description="the event-loop lag P99 judged: this process's, or the worst worker's")
    loop_lag_limit_ms: Optional[float] = Field(None, description="the limit it was judged against")
    notes: list[str] = Field(default_factory=list, description="observations that do not invalidate the run")
    exact_receive: bool = Field(False, description="every response's receive times came from packet "
                                "capture: event-loop lag did not delay them, so it is not judged")
    measured: int = Field(0, description="measured (not warm-up) requests the stall rule counts over")
    delayed_requests: int = Field(0, description="measured requests the client delayed beyond the limit "
                                  "it was judged against (docs/metrics.md, 'Client stalls')")
    request_delays_ms: list[tuple[float, float, float]] = Field(
        default_factory=list, description="per measured request delayed over 3 ms: (send lag, TTFT "
        "bound, TPOT bound) in ms, so the count can be judged again against the run's latencies")


class ReceiveTimestamps(_Model):
    """Which clock stamped the responses' arrivals (``docs/capture.md``, ``docs/metrics.md``)."""

    source: Literal["read", "capture"] = Field(
        description="capture: kernel packet arrival times; read: when the client read the bytes")
    reason: Optional[str] = Field(None, description="why read-time stamps were used")
    responses: int = Field(0, description="responses with a body (streamed or not)")
    responses_mapped: int = Field(0, description="of which every event was retimed to a packet")
    events: int = Field(0, description="SSE events of those responses")
    events_mapped: int = Field(0, description="of which a captured packet carried the last byte")
    packets: int = Field(0, description="server-to-client TCP segments captured")
    packets_dropped: int = Field(0, description="packets the kernel dropped before the capture read them")
    clock_error_ms: Optional[float] = Field(None, description="bound on the packet-clock to client-clock mapping")
    receive_lag_ms: Distribution = Field(
        default_factory=Distribution, description="read time - packet time, per mapped event")
    end_lag_ms: Distribution = Field(
        default_factory=Distribution, description="read-time end - packet time of the last byte, per "
        "mapped response: in a closed loop, think time the client added before the next request")
    requests_departed: int = Field(
        0, description="requests whose departure (sent_at) is their first captured outgoing segment")
    departure_lag_ms: Distribution = Field(
        default_factory=Distribution, description="captured departure - the client's stamp before "
        "its write, per departed request: how late the stamp alone would have made sent_at")

    @property
    def mapped_fraction(self) -> Optional[float]:
        return self.events_mapped / self.events if self.events else None

    @property
    def exact(self) -> bool:
        """Every response's receive times came from packets: loop lag delayed none of them."""
        return self.source == "capture" and 0 < self.responses == self.responses_mapped


class Window(_Model):
    """The time the run's rates divide by (``docs/metrics.md``, "Per run")."""

    start: float
    end: float
    seconds: float
    basis: Optional[WindowBasis] = None
    steady_requests: Optional[float] = Field(
        None, description="steady_state: the measured requests' share inside [start, end] (each "
        "counts the fraction of its send-to-end time that lies inside)"
    )


class SketchInfo(_Model):
    """How a run too large to ship every record was summarized (``docs/metrics.md``, "Sketched runs")."""

    relative_accuracy: float = Field(description="α: every sketched percentile is within α × the exact one")
    threshold: int = Field(description="runs of more requests than this are sketched")
    sampled: int = Field(description="measured requests kept in ``requests``: a seeded uniform sample")
    sample_fraction: float = Field(description="each request's chance of being kept")


class Interrupted(_Model):
    """Why a run stopped before its end, and how far it got: its result is partial evidence,
    reported and never judged nor stored as a baseline (``docs/metrics.md``, "Interrupted runs")."""

    reason: str = Field(description="what stopped the run: 'interrupted (Ctrl-C)', or 'stopped: ' and a "
                        "load worker's failure (crashed, hung, out of time)")
    planned: int = Field(description="requests the run planned, warm-up included (0: not known in advance)")
    done: int = Field(description="requests finished before it stopped (ok or failed), warm-up included")
    unfinished: Optional[int] = Field(description="planned - done: never sent or still in flight "
                                      "(None when the plan's size was not known)")

    def describe(self) -> str:
        """``interrupted (Ctrl-C): 12 of 40 requests done, 28 unfinished``: the words reports use."""
        of = f" of {self.planned}" if self.planned else ""
        left = f", {self.unfinished} unfinished" if self.unfinished is not None else ""
        return f"{self.reason}: {self.done}{of} requests done{left}"


class RunResult(_Model):
    """One scenario run. Serialized as the ``--goodput-json`` / ``--json`` contract."""

    schema_version: int = RESULT_SCHEMA_VERSION
    spec: ScenarioSpec
    load: dict[str, float] = Field(
        default_factory=dict, description="the load actually offered: rate or concurrency"
    )
    window: Window
    issued: int
    completed: int
    metrics: LatencyMetrics
    throughput: Throughput
    goodput: Optional[Goodput] = None
    percentile_slos: list[PercentileSLOCheck] = Field(default_factory=list)
    send_lag_ms: Distribution
    failures: dict[str, int] = Field(default_factory=dict)
    token_count_source: TokenCountSource
    reasoning_token_source: Optional[TokenCountSource] = Field(
        None, description="the least exact source of any completed request's reasoning split; "
        "None when no request reasoned"
    )
    client: ClientHealth
    server_metrics: dict[str, float] = Field(default_factory=dict)
    engine_histograms: dict[str, Histogram] = Field(default_factory=dict)  # the run's delta, by ClockMetric
    cached_prompt_tokens: Optional[int] = Field(
        None, description="prompt tokens served from the engine's prefix cache (completed measured "
        "requests that report it); None when the engine does not report it")
    prefix_cache_hit_rate: Optional[float] = Field(
        None, description="cached_prompt_tokens / their requests' prompt tokens")
    requests: list[RequestRecord] = Field(default_factory=list)
    prompt_set: Optional[PromptSet] = Field(
        None, description="fingerprint of the prompts sent (docs/metrics.md, \"Workload sameness\")")
    receive_timestamps: Optional[ReceiveTimestamps] = Field(
        None, description="capture or read-time arrival stamps, and how many were mapped to packets")
    percentiles: Literal["exact", "sketch"] = Field(
        "exact", description="exact: over every record; sketch: from merged sketches within "
        "sketch.relative_accuracy, counts exact, ``requests`` a uniform sample")
    sketch: Optional[SketchInfo] = None
    slices: Optional[Slices] = Field(
        None, description="time slices (slice_s=): metrics per window, the steady state's start, "
        "the degradation within the run; None when off or the run was sketched")
    interrupted: Optional[Interrupted] = Field(
        None, description="set when the run stopped before its end: a partial result, never judged "
        "nor stored as a baseline")
    measured_at: Optional[str] = Field(
        None, description="when the run started, ISO 8601 UTC: lets a run file read back by "
        "``compare`` be placed in or outside its baseline's sitting (docs/statistics.md, \"Sittings\")")

    def samples_window_s(self) -> float:
        """The window the kept ``requests`` divide by: ``window.seconds`` scaled to the sample."""
        if self.sketch is None or not self.issued:
            return self.window.seconds
        return self.window.seconds * sum(not r.warmup for r in self.requests) / self.issued


class Samples(_Model):
    """The raw per-request samples the statistics need, column-wise (compact in baselines).

    One entry per measured request, failures included (``ok`` False, latencies None).
    """

    window_s: float
    ok: list[bool]
    good: Optional[list[bool]] = None
    ttft_ms: list[Optional[float]]
    tpot_ms: list[Optional[float]]
    e2e_ms: list[Optional[float]]
    output_tokens: list[int]
    prompt_tokens: list[Optional[int]]
    # Reasoning models: None in baselines recorded before these columns existed (their TTFO
    # and reasoning length are unknown, not equal to TTFT and 0).
    ttfo_ms: Optional[list[Optional[float]]] = None
    reasoning_tokens: Optional[list[int]] = None
    # Conversations: TTFT of turns 2+, None on first turns; None without conversations.
    ttft_later_ms: Optional[list[Optional[float]]] = None
    reasoning_tpot_ms: Optional[list[Optional[float]]] = None
    answer_tpot_ms: Optional[list[Optional[float]]] = None
    # The prompts' fingerprint; None in baselines recorded before it was kept.
    prompt_set: Optional[PromptSet] = None
    # Completed requests' output fingerprints by request index; None: output guard off.
    output_prints: Optional[dict[int, str]] = None

    @field_serializer("ttft_ms", "tpot_ms", "e2e_ms", "ttfo_ms", "reasoning_tpot_ms", "answer_tpot_ms",
                      "ttft_later_ms")
    def _round_ms(self, values: Optional[list[Optional[float]]]) -> Optional[list[Optional[float]]]:
        """Keep baselines reviewable: 0.1 µs resolution is far below any clock's noise."""
        if values is None:
            return None
        return [None if v is None else round(v, 4) for v in values]

    @classmethod
    def from_records(cls, records: list[RequestRecord], window_s: float,
                     prompt_set: Optional[PromptSet] = None) -> "Samples":
        measured = [r for r in records if not r.warmup]
        has_good = any(r.good is not None for r in measured)
        return cls(
            window_s=window_s,
            ok=[r.ok for r in measured],
            good=[bool(r.good) for r in measured] if has_good else None,
            ttft_ms=[r.ttft_ms for r in measured],
            tpot_ms=[r.tpot_ms for r in measured],
            e2e_ms=[r.e2e_ms for r in measured],
            output_tokens=[r.output_tokens if r.ok else 0 for r in measured],
            prompt_tokens=[r.prompt_tokens for r in measured],
            ttfo_ms=[r.ttfo_ms for r in measured],
            reasoning_tokens=[r.reasoning_tokens if r.ok else 0 for r in measured],
            ttft_later_ms=[r.ttft_ms if (r.turn or 0) >= 2 else None for r in measured]
            if any(r.turn is not None for r in measured) else None,
            reasoning_tpot_ms=[r.reasoning_tpot_ms for r in measured],
            answer_tpot_ms=[r.answer_tpot_ms for r in measured],
            prompt_set=prompt_set,
            output_prints={r.index: r.output_print for r in measured if r.ok and r.output_print}
            if any(r.output_print for r in measured) else None,
        )

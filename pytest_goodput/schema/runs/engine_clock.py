"""The engine's own clock: its latency histograms over a run and its per-request timing (pure schema).

Why: the client's TTFT includes everything between the engine and the load generator; the
engine's histograms (``vllm:time_to_first_token_seconds``, ...) and vLLM's per-request
``metrics`` object do not. Kept beside our numbers, they tell an engine regression from a
client or network delay (``docs/metrics.md``, "The engine's clock").
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

#: The engine latencies read from histograms: time to first token, inter-token latency,
#: end-to-end latency and queue time.
ClockMetric = Literal["ttft", "itl", "e2e", "queue"]
CLOCK_METRICS: tuple[str, ...] = ("ttft", "itl", "e2e", "queue")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Histogram(_Model):
    """One Prometheus histogram as cumulative counts per finite upper bound (``le``), in seconds."""

    series: str = Field(description="the engine's series, e.g. vllm:time_to_first_token_seconds")
    bounds: list[float] = Field(description="finite upper bounds (le), ascending, seconds")
    cumulative: list[float] = Field(description="observations <= each bound (summed over label sets)")
    count: float = Field(description="all observations (the +Inf bucket)")
    sum: float = Field(description="sum of the observations, seconds")


class EngineTiming(_Model):
    """vLLM's per-request ``metrics`` object (``--enable-per-request-metrics``), as the engine sent it."""

    time_to_first_token_ms: Optional[float] = Field(
        None, description="engine: scheduled -> first token (vLLM excludes the queue from it)")
    queue_time_ms: Optional[float] = Field(None, description="engine: queued -> scheduled")
    generation_time_ms: Optional[float] = Field(None, description="engine: first -> last token")
    mean_itl_ms: Optional[float] = Field(None, description="generation_time_ms / (tokens - 1)")
    tokens_per_second: Optional[float] = Field(None, description="tokens / (scheduled -> last token)")

    @classmethod
    def from_metrics(cls, metrics: Any) -> Optional["EngineTiming"]:
        """A response's ``metrics`` object as read from the wire; None when absent or carrying no field.

        vLLM adds it to a non-streamed body and to a stream's final usage chunk. Anything else
        there, or a value that is not a non-negative number, is ignored: the engine's timing is
        evidence beside ours, never a reason to fail a request.
        """
        if not isinstance(metrics, dict):
            return None
        values = {k: float(v) for k in cls.model_fields if isinstance(v := metrics.get(k), (int, float))
                  and not isinstance(v, bool) and v >= 0 and v == v}
        return cls(**values) if values else None

    def ttft_from_queue_ms(self) -> Optional[float]:
        """queue + TTFT: the engine's time from queueing the request to its first token, the
        span comparable with our TTFT (which counts from the send)."""
        if self.time_to_first_token_ms is None:
            return None
        return self.time_to_first_token_ms + (self.queue_time_ms or 0.0)

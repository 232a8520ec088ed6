"""A run's time slices: its metrics per window of ``slice_s`` seconds (the JSON contract).

Pure pydantic models; ``measure/slices.py`` fills them and ``docs/metrics.md`` ("Time
slices") defines every field. A slice's latencies are those of the measured requests that
completed inside it; its throughput is the work done inside it.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Slice(_Model):
    """One window of the run: the measured requests whose completion time lies inside it."""

    start_s: float = Field(description="start, seconds after the run's window started")
    seconds: float = Field(description="length: slice_s, or the last slice's own length")
    completed: int = Field(0, description="ok requests that completed inside the slice")
    failed: int = Field(0, description="failed requests that ended inside the slice")
    requests_per_s: float = Field(0.0, description="ok requests done inside the slice / seconds: each "
                                  "counts the fraction of its send-to-end time inside")
    output_tokens_per_s: float = Field(0.0, description="their output tokens, by the same fractions, "
                                       "/ seconds")
    ttft_ms_p50: Optional[float] = Field(None, description="nearest-rank P50 TTFT of the completed "
                                         "requests; None when the slice has too few")
    tpot_ms_p50: Optional[float] = Field(None, description="nearest-rank P50 TPOT of the completed "
                                         "requests with a TPOT; None when too few")
    too_few: bool = Field(False, description="fewer completed requests than MIN_REQUESTS: shown, "
                          "not used by the steady-state detector or the degradation gate")


class Degradation(_Model):
    """One metric's change within the run: the last usable slice against the first steady ones."""

    value: float = Field(description="last / reference - 1 (relative change)")
    reference: float = Field(description="median of the first three usable slices from the steady "
                             "one (fewer when the run has fewer before its last)")
    last: float = Field(description="the last usable slice's value")
    sd: Optional[float] = Field(None, description="its within-run noise: sqrt(2) x the slice-to-slice "
                                "SD from the median absolute successive difference; None below 4 "
                                "usable slices")


class Slices(_Model):
    """A run's time slices, where its steady state began, and its degradation."""

    slice_s: float = Field(description="the slice length asked for, seconds")
    slices: list[Slice] = Field(default_factory=list)
    steady_from: Optional[int] = Field(None, description="index of the first steady slice; None when "
                                       "no slice before the last is steady")
    steady_at_s: Optional[float] = Field(None, description="when the steady state began: that slice's "
                                         "start_s")
    steady_note: str = Field("", description="why the detector chose that slice (or none)")
    degradation: dict[str, Degradation] = Field(
        default_factory=dict, description="by metric path (degradation.output_tokens_per_s, "
        "degradation.ttft_ms.p50, degradation.tpot_ms.p50): absent when not measurable")

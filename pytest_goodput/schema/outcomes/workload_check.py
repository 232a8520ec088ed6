"""Did baseline and current run the same workload? The prompt fingerprint and the verdict on
output lengths (pure schema; ``docs/metrics.md``, "Workload sameness").

A performance comparison means something only when both sides did the same work: the same
prompts, and outputs (reasoning and answer) of the same lengths. The judge
(``judge/workload.py``) fills :class:`WorkloadCheck`; the load generator fills
:class:`PromptSet`.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

LengthColumn = Literal["answer_tokens", "reasoning_tokens"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromptSet(_Model):
    """A fingerprint of the prompts a run sent: what makes two runs' requests the same."""

    sha256: str = Field(description="first 16 hex digits of the SHA-256 over the covered requests' "
                        "prompts and requested output lengths, in schedule order, run nonce masked")
    requests: int = Field(ge=0, description="measured requests covered, from the first")


class LengthChange(_Model):
    """Mean tokens per completed request of one output phase, baseline vs current."""

    column: LengthColumn
    baseline: float
    current: float
    change: Optional[float] = Field(None, description="current / baseline - 1; None when baseline is 0")
    significant: bool = Field(description="Welch's t-test on the two means, two-sided, 99 %")
    changed: bool = Field(description="a workload change: |change| > the threshold and significant")


class WorkloadCheck(_Model):
    """The sameness check of one comparison."""

    prompts: Literal["same", "differ", "unrecorded", "unchecked"] = Field(
        "unchecked", description="unrecorded: a side has no fingerprint (a baseline recorded "
        "before fingerprints were kept); unchecked: the fingerprints cover different request counts")
    lengths: list[LengthChange] = Field(default_factory=list)
    changes: list[str] = Field(default_factory=list,
                               description="the workload changes, named for the report")

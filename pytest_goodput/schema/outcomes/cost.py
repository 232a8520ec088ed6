"""What a verdict cost: engine launches and seconds of load (pure schema).

A launch of a 70B model takes minutes, so the number of engine starts a recording or a gate
made is part of its price, reported next to the verdicts (docs/metrics.md, "Cost").
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TestCost(BaseModel):
    """One test's share: the launches its measurements ran on and the seconds they took."""

    model_config = ConfigDict(extra="forbid")
    __test__ = False  # not a pytest test class

    launches: int = Field(0, ge=0, description="distinct engine launches this test's measurements "
                          "ran on (a launch shared with other tests counts for each); 0: attached by URL")
    load_s: float = Field(0.0, ge=0, description="seconds this test's measurements ran, warm-up and "
                          "re-measurements included")


class EngineUse(BaseModel):
    """A pytest session's engine starts: every process it launched, and the wait for them."""

    model_config = ConfigDict(extra="forbid")

    launches: int = Field(0, ge=0, description="engine processes started (first starts and relaunches)")
    start_s: float = Field(0.0, ge=0, description="seconds spent waiting for them to answer")
    load_s: float = Field(0.0, ge=0, description="seconds of load over every goodput test")
    tests: int = Field(0, ge=0, description="goodput tests judged")

"""A/B mode: base and head measured in one job, paired by round (pure schema).

One round is one run on the base engine and one on the head engine, in an order drawn per
round; the judge (``judge.sequential.ab``) compares the rounds' paired changes and says when it can
stop. ``docs/statistics.md`` ("A/B mode") defines the statistic and the stopping rule.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.scenario.spec import ScenarioSpec

Order = Literal["base-head", "head-base"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ABRound(_Model):
    """One round: each gated metric's value on base and on head (None: not measured).

    A round whose run stayed invalid after one re-run is kept with ``dropped`` set and no
    values: it is counted, never judged.
    """

    index: int = Field(description="1-based round number")
    order: Order
    base: dict[str, float | None] = Field(default_factory=dict)
    head: dict[str, float | None] = Field(default_factory=dict)
    dropped: str = Field("", description="why the round is left out (empty: it counts)")
    notes: list[str] = Field(default_factory=list)


class ABResult(_Model):
    """What A/B mode concluded: per-metric comparisons (base = baseline, head = current),
    the rounds behind them, and why it stopped."""

    spec: ScenarioSpec | None = None
    seed: int = Field(0, description="the order seed, drawn afresh per job: rounds 2k-1 and 2k "
                      "are one pair, base first in one of them (judge.sequential.ab.round_order); "
                      "--order-seed replays it")
    confidence: float = Field(description="overall two-sided confidence of each interval")
    looks: int = Field(description="most looks the stopping rule can take")
    alpha_per_look: float = Field(description="two-sided error rate of the last look's interval "
                                  "(the regressed side's nominal level, twice)")
    clear_alpha_per_look: float | None = Field(None, description="one-sided error rate of the last "
                                               "look's cleared decision (None: as the interval's side)")
    stopping: str = Field("", description="the stopping rule: each side's budget and its spending")
    min_rounds: int
    max_rounds: int
    rounds_used: int = Field(0, description="rounds judged (dropped ones excluded)")
    rounds_dropped: int = 0
    decided: bool = Field(False, description="stopped by a decision (every metric decided, or "
                          "one regressed beyond doubt), not by the round limit")
    stopped_early: bool = False
    stop_reason: str = ""
    comparisons: list[MetricComparison] = Field(default_factory=list)
    points: list[dict] = Field(default_factory=list, description="a sweep: each load point's "
                               "equal-load comparison (verdict, throughput, TPOT), as the gate keeps them")
    rounds: list[ABRound] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def regressed(self) -> list[str]:
        """The metrics judged *regressed*."""
        return [c.metric for c in self.comparisons if c.verdict == "regressed"]

    @property
    def undecided(self) -> list[str]:
        """The metrics left *inconclusive* or *underpowered*."""
        return [c.metric for c in self.comparisons if c.verdict in ("inconclusive", "underpowered")]

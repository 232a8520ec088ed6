"""How an A/B test reached its verdict: the two engines, the rounds, why it stopped (pure).

Kept on the test's outcome so every report can say that the comparison was base against
head in one job, not against a stored baseline.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ABSummary(BaseModel):
    """The A/B run behind a test's comparisons (``docs/ab.md``)."""

    model_config = ConfigDict(extra="forbid")

    base: str = Field(description="the base engine: its URL, command or simulator knobs")
    head: str = Field(description="the head engine (the session's engine, or the one given to run())")
    rounds_used: int = Field(description="rounds judged")
    rounds_dropped: int = Field(0, description="rounds left out: a side invalid twice")
    min_rounds: int
    max_rounds: int
    decided: bool = Field(description="stopped by a decision, not by the round limit")
    stop_reason: str = ""
    orders: list[str] = Field(default_factory=list, description="each round's order: AB or BA")
    looks: int = Field(description="most looks the stopping rule can take")
    alpha_per_look: float = Field(description="two-sided error rate of the last look's interval")

    def line(self) -> str:
        """One line for reports: what ran, how many rounds, why it stopped."""
        state = "decided" if self.decided else "undecided"
        dropped = f", {self.rounds_dropped} dropped" if self.rounds_dropped else ""
        return (f"A/B in one job: base {self.base} vs head {self.head}; {state} after "
                f"{self.rounds_used} rounds{dropped} ({' '.join(self.orders)}): {self.stop_reason}")

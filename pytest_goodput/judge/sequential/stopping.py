"""A/B mode's stopping rule: how much error each look may spend, on each side (pure).

Two decisions end a metric early, and they err in different ways. *Regressed* (the whole
interval beyond the tolerance, or at the limit off 0) wrongly made is a false alarm: it
gets the gate's one-sided α = (1 − confidence) / 2. *Cleared* (the interval's worse end
within the tolerance) wrongly made lets a change of the tolerance's size through: it gets
its own one-sided budget ``clear_alpha`` (an equivalence, TOST-like, bound), as the gate's
power target does. Each budget is spread over the looks by a Lan–DeMets spending function
(``stats.spending``) at information n / max_rounds, or split evenly (Bonferroni). The
boundaries are the paired t statistic's own (``t_boundaries``: n − 1 degrees of freedom at
a look after n rounds), so the error spent at few rounds is the budget, not above it.
``docs/statistics.md`` ("A/B mode") has the formulas; ``docs/decisions.md`` the choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytest_goodput.stats.spending import SPENDING, t_levels

Split = Literal["obf", "pocock", "bonferroni"]
SPLITS: tuple[str, ...] = (*SPENDING, "bonferroni")
_NAMES = {"obf": "O'Brien–Fleming-type spending", "pocock": "Pocock-type spending",
          "bonferroni": "Bonferroni"}

__all__ = ["DEFAULT_RULE", "RULES", "SPLITS", "StoppingRule"]


@dataclass(frozen=True)
class StoppingRule:
    """Per side, how the one-sided error is split over the looks; ``clear_alpha`` None:
    the cleared side gets the same budget as the regressed side (the gate's α)."""

    regress: Split = "pocock"
    clear: Split = "pocock"
    clear_alpha: float | None = 0.05

    def __post_init__(self) -> None:
        for side in (self.regress, self.clear):
            if side not in SPLITS:
                raise ValueError(f"stopping rule: unknown split {side!r}; allowed: {', '.join(SPLITS)}")
        if self.clear_alpha is not None and not 0.0 < self.clear_alpha < 0.5:
            raise ValueError(f"stopping rule: clear_alpha {self.clear_alpha!r} must be in (0, 0.5)")

    def budgets(self, confidence: float) -> tuple[float, float]:
        """One-sided errors of the whole run: (regressed, cleared)."""
        alpha = (1.0 - confidence) / 2.0
        return alpha, alpha if self.clear_alpha is None else self.clear_alpha

    def levels(self, n: int, min_rounds: int, max_rounds: int, confidence: float) -> tuple[float, float]:
        """One-sided nominal levels (regressed, cleared) of a look at ``n`` compared rounds.

        Looks are planned after rounds ``min_rounds`` … ``max_rounds``; a metric compared on
        fewer rounds than ``min_rounds`` (some left out) is held to the first look's level
        (with its fewer degrees of freedom, a stricter t). Spent levels are those at which a
        t with n − 1 degrees of freedom crosses the t statistic's own boundary.
        """
        k = min(max(n, min_rounds), max_rounds) - min_rounds
        planned = list(range(min_rounds, max_rounds + 1))
        out = []
        for split, budget in zip((self.regress, self.clear), self.budgets(confidence)):
            if split == "bonferroni":
                out.append(budget / len(planned))
            else:
                out.append(t_levels(planned, max_rounds, budget, split)[k])  # type: ignore[arg-type]
        return out[0], out[1]

    def describe(self, confidence: float = 0.98) -> str:
        """E.g. "regressed: 0.01 one-sided by Pocock-type spending; cleared: 0.05 one-sided by …"."""
        a, b = self.budgets(confidence)
        return (f"regressed: {a:.3g} one-sided by {_NAMES[self.regress]}; "
                f"cleared: {b:.3g} one-sided by {_NAMES[self.clear]}")


#: Named rules (the bench compares them); ``bonferroni`` is the rule before spending.
RULES: dict[str, StoppingRule] = {
    "bonferroni": StoppingRule("bonferroni", "bonferroni", None),
    "spending": StoppingRule("pocock", "pocock", 0.05),
}
DEFAULT_RULE = RULES["spending"]

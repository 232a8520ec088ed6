"""The judge's vocabulary (pure, the bottom of ``judge/``): a gated metric, the confidence of
an interval of the change, the strength of the noise prior, and the rule that turns a change
and its interval into a verdict.

Every part of the judge speaks these words, so they sit below all of them: the scalar verdicts,
the noise models, the shapes and the sequential tests import them from here and never from
each other's modules (the ``layers`` contract inside ``judge/`` in ``pyproject.toml``).
``docs/statistics.md`` gives every formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from pytest_goodput.schema import registry

#: Two-sided confidence of the interval of the change (one-sided α = 1 %, the A/A target); see
#: docs/decisions.md for the measurement behind it.
CONFIDENCE = 0.98
#: Underpowered needs evidence: the one-sided confidence with which the smallest detectable
#: change must exceed the tolerance, given that it is estimated from a few sessions
#: (docs/statistics.md, "Power"; chosen by measurement, docs/decisions.md).
POWER_ALPHA = 0.05
#: Weight of the prior, in pseudo-sessions (degrees of freedom).
PRIOR_RUNS = 3.0


@dataclass(frozen=True)
class MetricDef:
    """A gated metric: its result path, which way is good, and its relative tolerance."""

    path: str
    direction: Literal["higher", "lower"]
    tolerance: float

    @classmethod
    def of(cls, path: str, tolerance: Optional[float] = None) -> "MetricDef":
        """The metric as the registry defines it (its default tolerance unless one is given)."""
        info = registry.metric(path)
        return cls(path, info.direction, info.tolerance if tolerance is None else tolerance)


def decide(direction: str, change: float, interval: tuple[float, float], tolerance: float,
           significance: Literal["zero", "tolerance"] = "zero") -> str:
    """The verdict rule on a relative change and its interval (see docs/statistics.md)."""
    sign = -1.0 if direction == "higher" else 1.0  # sign * change > 0 means worse
    worse = sign * change > tolerance
    better = sign * change < -tolerance
    lo, hi = sorted((sign * interval[0], sign * interval[1]))
    bound = tolerance if significance == "tolerance" else 0.0
    if worse:
        return "regressed" if lo > bound else "inconclusive"
    if better and hi < -bound:
        return "improved"
    return "pass"


__all__ = ["CONFIDENCE", "POWER_ALPHA", "PRIOR_RUNS", "MetricDef", "decide"]

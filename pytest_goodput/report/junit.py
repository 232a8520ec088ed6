"""JUnit XML properties of a goodput test: per gated metric its baseline, current value, change
and verdict, so a CI test report (Jenkins, GitLab, GitHub test reporters) shows why a test
failed, not only the current numbers.

Pure: an outcome in, ``(name, value)`` pairs out (what pytest's ``record_property`` and
``item.user_properties`` take). Values are plain strings: numbers with six significant
digits, changes as the reports print them (``-15.0%``, ``+2.00 pp`` for the error rate).
"""

from __future__ import annotations

from typing import Optional

from pytest_goodput.report.vocabulary import canonical_metric, fmt_change, sorted_comparisons
from pytest_goodput.schema.outcomes.outcome import TestOutcome

PREFIX = "goodput."


def _number(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.6g}"


def junit_properties(outcome: TestOutcome, remeasured_because: Optional[list[str]] = None
                     ) -> list[tuple[str, str]]:
    """Status, the current run's headline numbers, and every compared metric's four facts."""
    props: list[tuple[str, str]] = [(PREFIX + "status", outcome.status)]
    props += [(PREFIX + name, _number(value)) for name, value in outcome.key_metrics.items()
              if value is not None]
    for c in sorted_comparisons(outcome):
        name = PREFIX + canonical_metric(c.metric)
        props += [
            (f"{name}.baseline", _number(c.baseline)),
            (f"{name}.current", _number(c.current)),
            (f"{name}.change", fmt_change(c.change, missing="", scale=c.scale)),
            (f"{name}.verdict", c.verdict),
        ]
        if c.basis and c.basis != c.metric:  # a sweep's row: which metric its values are of
            props.append((f"{name}.basis", c.basis))
    if outcome.baseline_status != "compared":
        props.append((PREFIX + "baseline", outcome.baseline_status))
    if remeasured_because:
        props.append((PREFIX + "remeasured_because", "; ".join(remeasured_because)))
    return props

"""Judging (pure): the metric verdicts, SLO checks, frontier and capacity comparisons, and the
one :func:`judge` that the plugin and the CLI both call."""

from pytest_goodput.judge.evidence import from_baseline, from_measurement, from_results
from pytest_goodput.judge.judge import Policy, fails, judge, metric_defs

__all__ = ["Policy", "fails", "from_baseline", "from_measurement", "from_results", "judge",
           "metric_defs"]

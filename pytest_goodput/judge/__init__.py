"""Judging (pure): the metric verdicts, SLO checks, frontier and capacity comparisons, and the
one :func:`judge` that the plugin and the CLI both call.

``from_measurement`` is the deprecated name of :func:`from_session` (the runner's
``Measurement`` became the ``Session`` it is judged as); it warns and will go.
"""

import warnings
from typing import Any

from pytest_goodput.judge.evidence import from_baseline, from_results, from_session
from pytest_goodput.judge.judge import Policy, fails, judge, metric_defs
from pytest_goodput.schema.runs.side import Side

__all__ = ["Policy", "fails", "from_baseline", "from_measurement", "from_results", "from_session",
           "judge", "metric_defs"]


def from_measurement(*args: Any, **kwargs: Any) -> Side:
    """Deprecated: :func:`from_session`."""
    warnings.warn("pytest_goodput.judge.from_measurement is deprecated: use from_session",
                  DeprecationWarning, stacklevel=2)
    return from_session(*args, **kwargs)

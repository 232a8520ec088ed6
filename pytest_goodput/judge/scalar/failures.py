"""Failures in percentiles: what a failed request counts as, and what its reaching one says (pure).

A failed request delivered nothing in time, so in a percentile it is the slowest rank. Where
the statistics need a finite value (a baseline centre, a bootstrap resample, an order
statistic) the slowest success stands in for it; where failures reach the percentile itself
the value is unknown beyond that, and the verdict says only what that allows
(docs/statistics.md, "Failures in percentiles").
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from pytest_goodput.judge.values import Sessions, group_value, slowest_success
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.runs.results import Samples


def stand_ins(kind: str, path: str, sessions: Sessions, current_runs: Sequence[Samples]
                       ) -> tuple[tuple[float, float], Optional[tuple[int, bool]]]:
    """What a failed request counts as in a percentile (baseline side, current side), and
    (baseline sessions, current?) whose failures reach the percentile.

    A failure is the slowest rank: the baseline's slowest success stands in for it there, and
    the slower of that and the current's own slowest success on the current side, so a
    failure never ranks below a success of its own side and the baseline's stand-in does not
    depend on the run being judged (docs/statistics.md, "Failures in percentiles").
    """
    if kind != "percentile":
        return (math.inf, math.inf), None
    base_runs = [r for s in sessions for r in s]
    top_b = slowest_success(base_runs, path)
    top_c = slowest_success(current_runs, path)
    fail_b = top_b if top_b is not None else math.inf
    tops = [v for v in (top_b, top_c) if v is not None]
    fail_c = max(tops) if tops else math.inf
    reached_b = sum(group_value(s, path) == math.inf for s in sessions)
    return (fail_b, fail_c), (reached_b, group_value(current_runs, path) == math.inf)


def failure_floor(c: MetricComparison, reached: Optional[tuple[int, bool]],
                   fail: tuple[float, float], sessions: int) -> MetricComparison:
    """Failures reaching a percentile in the baseline are evidence, stated.

    In some sessions: they count at the stand-in (the baseline's slowest success). In every
    session: the baseline's value is only known to be at least that, so a finite current
    value cannot be shown worse — the verdict is at best *improved*, at worst *pass*.
    """
    if reached is None or not reached[0]:
        return c
    note = (f"{c.note}; " if c.note else "") + (
        f"failures reach this percentile in {reached[0]} of {sessions} baseline session(s), "
        f"counted at the slowest success ({fail[0]:.3g})")
    update: dict[str, object] = {"note": note}
    if reached[0] == sessions and c.verdict not in ("pass", "improved"):
        update["verdict"] = "pass"
        update["note"] = f"{note}: the current run, whose failures do not reach it, is not worse"
    return c.model_copy(update=update)

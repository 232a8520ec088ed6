"""A test whose run was interrupted: its partial evidence as the test's outcome.

Ctrl-C mid-run raises ``RunInterrupted`` (``load/client/event_loop.py``), a load worker that
crashed, hung or ran out of time ``RunStopped`` (``load/pools``), each with the runs made so
far, the last one partial. The test is reported with them, marked interrupted, and never
judged nor recorded: a partial run is no sample of the engine (``docs/decisions.md``, "An
interrupted run leaves its evidence").
"""

from __future__ import annotations

from typing import Sequence

from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.session import Session


def stop_reason(m: Session) -> str:
    """Why and how far: the partial run's own words, or a stop between two runs."""
    partial = next((r.interrupted for r in reversed(m.results) if r.interrupted is not None), None)
    if partial is not None:
        return partial.describe()
    return f"interrupted (Ctrl-C) between runs, after {len(m.results)} complete run(s)"


def interrupted_outcome(nodeid: str, m: Session, notes: Sequence[str] = ()) -> TestOutcome:
    """The outcome of a test whose run was interrupted: an error naming how far it got."""
    why = stop_reason(m)
    assert m.spec is not None, "the runner's session carries its spec"
    return TestOutcome(nodeid=nodeid, scenario=m.spec.scenario, spec=m.spec.model_dump(mode="json"),
                       interrupted=why, notes=list(notes),
                       error=f"{why}: a partial result, not judged, no baseline written")

"""What the verdicts cost, in words: engine launches and seconds of load (pure).

``engine launches: 3 (41.2 s starting); load: 96.0 s over 3 tests``, then each test's
share (docs/metrics.md, "Cost"). A launch shared by tests counts once in the session's
total and once for each test that ran on it.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from pytest_goodput.schema.outcomes.cost import EngineUse, TestCost
from pytest_goodput.schema.outcomes.outcome import TestOutcome


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "es" if word.endswith("ch") else "s")


def test_cost_text(cost: TestCost) -> str:
    """``3 launches, 15.0 s of load``; an attached engine has no launch of ours."""
    where = _plural(cost.launches, "launch") if cost.launches else "attached engine"
    return f"{where}, {cost.load_s:.1f} s of load"


test_cost_text.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def session_cost_text(engines: EngineUse) -> str:
    """The session's total: every engine process started, the wait, the load."""
    launches = _plural(engines.launches, "engine launch")
    return (f"{launches} ({engines.start_s:.1f} s starting); "
            f"load: {engines.load_s:.1f} s over {_plural(engines.tests, 'test')}")


def cost_lines(outcomes: Sequence[TestOutcome], engines: Optional[EngineUse],
               name: Callable[[str], str] = str) -> list[str]:
    """``cost: <session>`` then ``  <test>: <its share>`` per test; empty when nothing was
    counted (reports rendered from stored results)."""
    per_test = [f"  {name(o.nodeid)}: {test_cost_text(o.cost)}" for o in outcomes if o.cost is not None]
    if engines is None and not per_test:
        return []
    head = "cost: " + (session_cost_text(engines) if engines is not None else "per test")
    return [head, *per_test]

"""What a pytest session's verdicts cost: engine launches and seconds of load, per test.

Counted where it happens, never estimated: each engine handle counts the processes it
started (``Engine.launches``) and the seconds they took to answer; each measurement is
charged to its test with the launch it ran on. Reported in the terminal summary, the
Markdown report and the JSON document (docs/metrics.md, "Cost").
"""

from __future__ import annotations

from typing import Iterable

from pytest_goodput.engines.engine import Engine
from pytest_goodput.schema.outcomes.cost import EngineUse, TestCost


class Ledger:
    """The session's engines and each test's launches and load."""

    def __init__(self) -> None:
        self._engines: list[Engine] = []
        self._launches: dict[str, set[tuple[int, int]]] = {}
        self._load_s: dict[str, float] = {}

    def track(self, engine: Engine) -> Engine:
        """Count this engine's launches in the session's total (once, however often passed)."""
        if all(e is not engine for e in self._engines):
            self._engines.append(engine)
        return engine

    def charge(self, nodeid: str, engines: Iterable[Engine], seconds: float,
               first_launch: dict[int, int] | None = None) -> None:
        """``seconds`` of load on ``engines`` for ``nodeid``: each engine's current launch, and
        every launch since ``first_launch[id(engine)]`` when the measurement relaunched it."""
        used = self._launches.setdefault(nodeid, set())
        for e in engines:
            self.track(e)
            start = (first_launch or {}).get(id(e), e.launches)
            used.update((id(e), n) for n in range(max(start, 1), e.launches + 1))
        self._load_s[nodeid] = self._load_s.get(nodeid, 0.0) + max(seconds, 0.0)

    def test_cost(self, nodeid: str) -> TestCost | None:
        if nodeid not in self._load_s:
            return None
        return TestCost(launches=len(self._launches.get(nodeid, ())), load_s=round(self._load_s[nodeid], 3))

    def engine_use(self, tests: int) -> EngineUse:
        return EngineUse(launches=sum(e.launches for e in self._engines),
                         start_s=round(sum(e.start_s for e in self._engines), 3),
                         load_s=round(sum(self._load_s.values()), 3), tests=tests)

"""What the verdicts cost: the ledger's counts and their words, against a hand-computed case
(docs/metrics.md, "Cost")."""

from __future__ import annotations

import pytest

from pytest_goodput.engines.engine import Engine
from pytest_goodput.plugin.ledger import Ledger
from pytest_goodput.report.text.cost import cost_lines
from pytest_goodput.schema.outcomes.cost import EngineUse, TestCost

pytestmark = pytest.mark.fast


def launched(starts: list[float]) -> Engine:
    """An engine handle that started ``len(starts)`` processes, taking those seconds."""
    return Engine(kind="launch", base_url="http://127.0.0.1:9/v1", launches=len(starts), start_s=sum(starts))


def test_two_tests_over_two_sessions_on_one_engine() -> None:
    ledger = Ledger()
    eng = Engine(kind="launch", base_url="http://127.0.0.1:9/v1", launches=1, start_s=3.0)
    ledger.track(eng)
    ledger.charge("t.py::a", [eng], 4.0)  # session 1, launch 1
    ledger.charge("t.py::b", [eng], 6.0)
    eng.launches, eng.start_s = 2, 5.5  # relaunched: the second start took 2.5 s
    ledger.charge("t.py::a", [eng], 4.0)  # session 2, launch 2
    ledger.charge("t.py::b", [eng], 6.0)
    assert ledger.test_cost("t.py::a") == TestCost(launches=2, load_s=8.0)
    assert ledger.test_cost("t.py::b") == TestCost(launches=2, load_s=12.0)
    assert ledger.engine_use(tests=2) == EngineUse(launches=2, start_s=5.5, load_s=20.0, tests=2)
    assert ledger.test_cost("t.py::never") is None


def test_an_ab_test_counts_both_engines_and_every_relaunch_it_made() -> None:
    ledger = Ledger()
    base, head = launched([1.0]), launched([1.0])
    first = {id(base): base.launches, id(head): head.launches}
    base.launches, head.launches = 3, 2  # exclusive rounds restarted them
    ledger.charge("t.py::ab", [base, head], 10.0, first)
    assert ledger.test_cost("t.py::ab") == TestCost(launches=5, load_s=10.0)


def test_an_attached_engine_costs_no_launch() -> None:
    ledger = Ledger()
    ledger.charge("t.py::a", [Engine(kind="attach", base_url="http://127.0.0.1:9/v1")], 2.0)
    assert ledger.test_cost("t.py::a") == TestCost(launches=0, load_s=2.0)
    assert ledger.engine_use(tests=1).launches == 0


def test_the_words() -> None:
    from pytest_goodput.schema.outcomes.outcome import TestOutcome

    a = TestOutcome(nodeid="t.py::a", scenario="server", cost=TestCost(launches=2, load_s=8.0))
    b = TestOutcome(nodeid="t.py::b", scenario="server", cost=TestCost(launches=1, load_s=12.04))
    c = TestOutcome(nodeid="t.py::c", scenario="server", cost=TestCost(launches=0, load_s=1.0))
    use = EngineUse(launches=2, start_s=5.5, load_s=21.04, tests=3)
    assert cost_lines([a, b, c], use) == [
        "cost: 2 engine launches (5.5 s starting); load: 21.0 s over 3 tests",
        "  t.py::a: 2 launches, 8.0 s of load",
        "  t.py::b: 1 launch, 12.0 s of load",
        "  t.py::c: attached engine, 1.0 s of load",
    ]
    assert cost_lines([TestOutcome(nodeid="t.py::a", scenario="server")], None) == []


def test_reports_carry_the_cost() -> None:
    from pytest_goodput.report.md.markdown import render_markdown
    from pytest_goodput.report.text.terminal import render_summary
    from pytest_goodput.schema.outcomes.outcome import TestOutcome

    a = TestOutcome(nodeid="t.py::a", scenario="server", cost=TestCost(launches=2, load_s=8.0))
    use = EngineUse(launches=2, start_s=5.5, load_s=8.0, tests=1)
    md = render_markdown([a], engines=use)
    assert "**cost:** 2 engine launches (5.5 s starting); load: 8.0 s over 1 test<br>\n`t.py::a`: 2 launches, 8.0 s of load" in md
    assert "cost: 2 engine launches (5.5 s starting); load: 8.0 s over 1 test\n  t.py::a: 2 launches" in render_summary([a], engines=use)

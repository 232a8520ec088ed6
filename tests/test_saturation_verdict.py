"""Where saturation began, judged against the baseline's sessions (docs/frontiers.md, "Saturation point")."""

from __future__ import annotations

import pytest

from pytest_goodput.judge.shapes.saturation import saturation_comparison

LOADS = (1.0, 2.0, 4.0, 8.0)


def test_two_steps_lower_than_agreeing_sessions_regressed() -> None:
    c = saturation_comparison(LOADS, "rate", [3.0, 3.0], 1.0)
    assert c is not None and c.verdict == "regressed"
    assert c.metric == "sweep.saturation_load" and c.direction == "higher"
    assert (c.baseline, c.current) == (8.0, 2.0) and c.change == pytest.approx(-0.75)
    assert "saturation began at rate 2" in c.note and "agree" in c.note and "-2 sweep step" in c.note


def test_one_step_lower_on_a_doubling_grid_is_regressed_on_a_finer_one_inconclusive() -> None:
    # Three agreeing sessions or more on a grid that doubles: one step is a halved capacity.
    c = saturation_comparison(LOADS, "rate", [3.0, 3.0, 3.0], 2.0)
    assert c is not None and c.verdict == "regressed" and "may be noise" not in c.note
    # The knee from 16 to 8 req/s, five sessions agreeing that 16 was fine: capacity halved.
    knee = saturation_comparison((2.0, 4.0, 8.0, 16.0), "rate", [4.0] * 5, 3.0)
    assert knee is not None and knee.verdict == "regressed"
    fine = (2.0, 3.0, 4.0, 5.0)
    c = saturation_comparison(fine, "rate", [3.0, 3.0, 3.0], 2.0)
    assert c is not None and c.verdict == "inconclusive" and "fewer than 2 steps apart may be noise" in c.note
    assert saturation_comparison(fine, "rate", [3.0, 3.0, 3.0], 1.0).verdict == "regressed"
    # Two agreeing sessions, or sessions that disagree, stay inconclusive, on any grid.
    two = saturation_comparison(LOADS, "rate", [3.0, 3.0], 2.0)
    assert two is not None and two.verdict == "inconclusive"
    split = saturation_comparison(LOADS, "rate", [3.0, 2.0], 1.0)
    assert split is not None and split.verdict == "inconclusive"


def test_one_session_or_disagreeing_sessions_are_inconclusive() -> None:
    one = saturation_comparison(LOADS, "rate", [3.0], 1.0)
    assert one is not None and one.verdict == "inconclusive" and "one baseline session" in one.note
    split = saturation_comparison(LOADS, "rate", [3.0, 2.0], 1.0)
    assert split is not None and split.verdict == "inconclusive" and "disagree" in split.note
    # Within the sessions' own spread: pass.
    within = saturation_comparison(LOADS, "rate", [3.0, 2.0], 2.0)
    assert within is not None and within.verdict == "pass"


def test_same_step_passes_later_improves_and_never_saturating_counts_as_beyond_the_sweep() -> None:
    same = saturation_comparison(LOADS, "concurrency", [2.0, 2.0], 2.0)
    assert same is not None and same.verdict == "pass"
    later = saturation_comparison(LOADS, "concurrency", [2.0, 2.0], 4.0)  # 4 = len: none
    assert later is not None and later.verdict == "improved" and later.current is None
    assert "no measured point" in later.note
    one_later = saturation_comparison(LOADS, "concurrency", [2.0, 2.0, 2.0], 3.0)
    assert one_later is not None and one_later.verdict == "improved"  # a doubling grid
    one_later = saturation_comparison(LOADS, "concurrency", [2.0, 2.0], 3.0)  # two sessions
    assert one_later is not None and one_later.verdict == "pass"
    # The baseline never saturated; the current sweep did at its first point.
    worse = saturation_comparison(LOADS, "concurrency", [4.0, 4.0, 4.0], 0.0)
    assert worse is not None and worse.verdict == "regressed" and worse.baseline is None


def test_no_row_without_readings_on_both_sides() -> None:
    assert saturation_comparison(LOADS, "rate", [None, None], 2.0) is None
    assert saturation_comparison(LOADS, "rate", [2.0], None) is None
    # Older sessions without a reading are left out; the rest decide.
    c = saturation_comparison(LOADS, "rate", [None, 3.0, 3.0], 1.0)
    assert c is not None and c.verdict == "regressed"


def test_example_of_docs_frontiers_md() -> None:
    c = saturation_comparison(LOADS, "rate", [3.0, 3.0], 1.0)
    assert c is not None and c.verdict == "regressed"
    assert c.note == ("saturation began at rate 2 (baseline sessions: rate 8, rate 8; baseline "
                      "sessions agree); -2 sweep step(s)")
    one = saturation_comparison(LOADS, "rate", [3.0, 3.0], 2.0)
    assert one is not None and one.verdict == "inconclusive"
    assert one.note == ("saturation began at rate 4 (baseline sessions: rate 8, rate 8; baseline "
                        "sessions agree; fewer than 2 steps apart may be noise); -1 sweep step(s)")
    three = saturation_comparison(LOADS, "rate", [3.0, 3.0, 3.0], 2.0)
    assert three is not None and three.verdict == "regressed"
    assert three.note == ("saturation began at rate 4 (baseline sessions: rate 8, rate 8, rate 8; "
                          "baseline sessions agree); -1 sweep step(s)")


SAT = {"load_kind": "rate", "measured": [1.0, 2.0, 4.0], "began_at": 4.0, "step": 2,
       "reason": "achieved/offered 0.333 < 0.352, TTFT slope +2.05e+03 ms/s (p 1.6e-14)",
       "points": [], "skipped": [8.0], "saved_s": 3.0}


def _outcome(sat: dict):
    from pytest_goodput.schema.outcomes.outcome import TestOutcome

    point = {"load": 1.0, "load_kind": sat["load_kind"], "interactivity": 20.0, "throughput": 100.0}
    return TestOutcome(nodeid="t.py::test_sweep", scenario="sweep",
                       frontier={"points": [point], "current": [point], "saturation": sat})


def test_reports_say_where_saturation_began_and_what_was_skipped() -> None:
    from pytest_goodput.report.md.md_shapes import frontier_block
    from pytest_goodput.report.text.shapes import saturation_headline
    from pytest_goodput.report.text.terminal import render_summary

    line = ("saturation: began at rate 4 req/s (achieved/offered 0.333 < 0.352, TTFT slope "
            "+2.05e+03 ms/s (p 1.6e-14)); sweep stopped, skipped rate 8 req/s: 1 point, ~3 s of load")
    o = _outcome(SAT)
    assert saturation_headline(o) == line
    assert f"t.py::test_sweep: {line}" in render_summary([o], width=400)
    assert "**Saturation:** began at rate 4 req/s" in frontier_block(o, None)
    none = _outcome({**SAT, "began_at": None, "step": 3, "reason": None, "skipped": []})
    assert saturation_headline(none) == "saturation: no measured point past saturation (3 measured)"

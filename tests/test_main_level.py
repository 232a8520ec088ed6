"""Main's level: a baseline kept one session per push is read as main's time series.

Seeded sessions (``judge_scenarios``) through the public judge (``judge()`` and ``fails()``):
a step on main is found and the PR judged against the sessions since it, a further
regression is caught, an unchanged PR passes, a lone disturbed session is set aside and
named, and an unchanged main is judged as before (``judge/noise/main_level.py``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from judge_scenarios import Workload, run, spec  # noqa: E402

from pytest_goodput.judge import Policy, fails, judge  # noqa: E402
from pytest_goodput.judge.noise.main_level import MAIN_LEVEL_NOTE, level_spreads, main_level  # noqa: E402
from pytest_goodput.judge.scalar.verdicts import MetricDef  # noqa: E402
from pytest_goodput.report.md.markdown import render_markdown  # noqa: E402
from pytest_goodput.schema.environment import Fingerprint  # noqa: E402
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome  # noqa: E402
from pytest_goodput.schema.runs.results import Samples  # noqa: E402
from pytest_goodput.schema.runs.session import Session  # noqa: E402
from pytest_goodput.schema.runs.side import Side  # noqa: E402

REQUESTS, REPEATS = 240, 2


def _judge(levels: list[float], pr: float, seed: int, policy: Policy = Policy(),
           at_once: bool = False) -> Outcome:
    """Main's sessions at ``levels`` (one push each, oldest first, commit c1..cN; ``at_once``:
    recorded back to back on one commit), the PR at ``pr``."""
    w = Workload.draw(REQUESTS, seed)
    rng = np.random.default_rng([11, seed])
    sp = spec(REQUESTS, repeats=REPEATS)
    sessions = [Session(samples=[run(w, rng, ttft_factor=x, tpot_factor=x) for _ in range(REPEATS)],
                        recorded_at=(f"2026-11-01T09:0{i}:00+00:00" if at_once
                                     else f"2026-11-0{i + 1}T09:00:00+00:00"),
                        environment=Fingerprint(provenance={"git_commit": "c1" if at_once else f"c{i + 1}"}))
                for i, x in enumerate(levels)]
    base = Side(sp, sp.identity_hash(), sessions)
    cur = Side.of_samples(sp, [[run(w, rng, ttft_factor=pr, tpot_factor=pr) for _ in range(REPEATS)]])
    return judge("t::x", cur, base, policy)


def _verdicts(o: Outcome) -> dict[str, str]:
    return {c.metric: c.verdict for c in o.comparisons}


def test_a_further_regression_after_a_step_on_main_is_caught_and_the_step_named() -> None:
    for seed in range(3):
        o = _judge([1.0, 1.0, 1.0, 1.25, 1.25], 1.25 * 1.25, seed)
        assert fails(o, Policy())
        assert "regressed" in _verdicts(o).values()
        moved = [n for n in o.notes if "main changed by" in n]
        assert len(moved) == 1
        assert "at session 4 (c4) of 5; judged against the 2 sessions since" in moved[0]


def test_a_step_in_the_newest_session_judges_against_it_alone() -> None:
    o = _judge([1.0, 1.0, 1.0, 1.0, 1.25], 1.25 * 1.25, 0)
    assert fails(o, Policy())
    assert any("at session 5 (c5) of 5; judged against the 1 session since" in n for n in o.notes)


def test_an_unchanged_pr_after_a_step_passes() -> None:
    for seed in range(3):
        o = _judge([1.0, 1.0, 1.0, 1.25, 1.25], 1.25, seed)
        assert not fails(o, Policy())
        assert "regressed" not in _verdicts(o).values()
        assert any("main changed by" in n for n in o.notes)


def test_a_pr_that_reverts_main_s_regression_improves() -> None:
    o = _judge([1.0, 1.0, 1.0, 1.25, 1.25], 1.0, 0)
    assert not fails(o, Policy())
    assert _verdicts(o)["metrics.tpot_ms.p50"] == "improved"


def test_a_lone_disturbed_session_is_set_aside_and_named() -> None:
    o = _judge([1.0, 1.0, 1.3, 1.0, 1.0], 1.25, 0)
    assert fails(o, Policy())
    assert _verdicts(o)["metrics.tpot_ms.p50"] == "regressed"
    aside = [n for n in o.notes if "set aside" in n]
    assert len(aside) == 1 and aside[0].startswith(f"{MAIN_LEVEL_NOTE}: session 3 (c3) of 5 set aside")
    assert not any("main changed by" in n for n in o.notes)


def test_main_s_level_is_shown_per_gated_metric_with_the_sessions_not_judged_against_marked() -> None:
    o = _judge([1.0, 1.0, 1.0, 1.25, 1.25], 1.25, 0)
    lines = [n for n in o.notes if "over the sessions" in n]
    assert len(lines) == 7  # goodput, TTFT P50/P90/P99, TPOT P50/P90/P99 (the error rate is counts)
    tpot = next(n for n in lines if "TPOT P50" in n)
    assert tpot.count("*") == 4  # three sessions before the step, and the legend


def test_an_unchanged_main_is_judged_on_every_session_without_a_note() -> None:
    for seed in range(5):
        o = _judge([1.0] * 5, 1.0, seed)
        assert not fails(o, Policy())
        assert not [n for n in o.notes if n.startswith(MAIN_LEVEL_NOTE)]


def test_the_pr_report_says_main_moved_and_shows_its_level() -> None:
    o = _judge([1.0, 1.0, 1.0, 1.25, 1.25], 1.25 * 1.25, 0)
    md = render_markdown([o])
    block = next(line for line in md.splitlines() if line.startswith("> **Main's level:**"))
    assert "main changed by" in block and "judged against the 2 sessions since" in block
    assert "TPOT P50 over the sessions" in block
    assert "Main's level" not in render_markdown([_judge([1.0] * 5, 1.0, 0)])


def test_the_same_baseline_without_the_level_reading_is_blind_to_the_further_regression() -> None:
    """The before: the five sessions' spread is the step itself (Policy(main_level=False))."""
    before = Policy(main_level=False)
    assert not fails(_judge([1.0, 1.0, 1.0, 1.25, 1.25], 1.5625, 0, before), before)
    assert fails(_judge([1.0, 1.0, 1.0, 1.25, 1.25], 1.5625, 0), Policy())


def test_sessions_recorded_at_once_are_judged_as_recorded() -> None:
    """One commit, one sitting: not a series of main; the recording names its outliers."""
    o = _judge([1.0, 1.0, 1.3, 1.0, 1.0], 1.0, 0, at_once=True)
    assert not [n for n in o.notes if n.startswith(MAIN_LEVEL_NOTE)]


def _flat(tpot_ms: float) -> list[Samples]:
    """A session of one run whose every request has the same TPOT (its P50 is that value)."""
    n = 8
    return [Samples(window_s=10.0, ok=[True] * n, good=[True] * n, ttft_ms=[50.0] * n,
                    tpot_ms=[tpot_ms] * n, e2e_ms=[50.0 + 63 * tpot_ms] * n,
                    output_tokens=[64] * n, prompt_tokens=[128] * n)]


def test_the_step_and_the_spread_across_levels_match_the_hand_computed_case() -> None:
    """docs/metrics.md, "Example of main's level"."""
    tpot = MetricDef.of("metrics.tpot_ms.p50")
    level = main_level([_flat(v) for v in (10, 10, 10, 12.5, 12.5)], [tpot])
    assert level.kept == [3, 4] and not level.set_aside
    assert level.steps[0].at == 3 and level.steps[0].change == pytest.approx(0.25)
    sessions = [_flat(v) for v in (10, 10.2, 10.2, 12.5, 12.5)]
    level = main_level(sessions, [tpot])
    assert level.kept == [3, 4]
    m = (math.log(10) + 2 * math.log(10.2)) / 3
    s, nu, _ = level_spreads(level, sessions, [tpot])["metrics.tpot_ms.p50"]
    ss = 2 * (math.log(10.2) - m) ** 2 + (math.log(10) - m) ** 2
    assert math.sqrt(ss / 3) == pytest.approx(0.0093, abs=5e-5)  # measured, 3 degrees of freedom
    # below the prior (TPOT's launch CV 2 % and day CV 1 %, worth 3 sessions): pooled, on 3 + 3
    assert nu == 6
    assert s == pytest.approx(math.sqrt((3 * (0.02**2 + 0.01**2) + ss) / 6))
    assert s == pytest.approx(0.0171, abs=5e-5)


def test_two_sessions_show_no_step_and_a_change_within_the_tolerance_is_no_step() -> None:
    tpot = MetricDef.of("metrics.tpot_ms.p50")  # tolerance 5 %
    assert not main_level([_flat(10), _flat(12.5)], [tpot]).moved
    assert not main_level([_flat(v) for v in (10, 10, 10, 10.4, 10.4)], [tpot]).moved

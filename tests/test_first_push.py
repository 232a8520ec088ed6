"""The first push after main's step: a PR judged against the one session since it.

Hand-built sessions (``judge_scenarios``: one schedule, 5 % request noise) through the public
judge (``judge()`` and ``fails()``), one session a push on its own day as
``--goodput-sessions=1`` keeps them: four sessions of main at its old level, the fifth (the
newest) 25 % slower. The PR is judged against that one session, with the spread of all five,
each level centred on its own, and pooled with the prior's pseudo-sessions; the sessions'
days are those of the whole series, so no between-sitting spread is assumed on top of the
spread they measured (``judge/noise/main_level.py``, ``docs/statistics.md``, "Main's level").
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from judge_scenarios import Workload, run, spec  # noqa: E402

from pytest_goodput.judge import Policy, fails, judge  # noqa: E402
from pytest_goodput.schema.environment import Fingerprint  # noqa: E402
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome  # noqa: E402
from pytest_goodput.schema.runs.session import Session  # noqa: E402
from pytest_goodput.schema.runs.side import Side  # noqa: E402

REQUESTS, REPEATS = 240, 2
#: Main's sessions, oldest first: its old level with a 2 % launch-to-launch spread, then the step.
MAIN = (1.0, 1.02, 0.98, 1.01, 1.25)
TPOT = "metrics.tpot_ms.p50"


def _judge(pr: float, seed: int, main: tuple[float, ...] = MAIN) -> Outcome:
    """Main's sessions at ``main`` (one a day, commits c1..cN), the PR the next day at ``pr``."""
    w = Workload.draw(REQUESTS, seed)
    rng = np.random.default_rng([41, seed])

    def session(level: float, day: int) -> Session:
        return Session(samples=[run(w, rng, machine_cv=0.005, ttft_factor=level, tpot_factor=level)
                                for _ in range(REPEATS)],
                       recorded_at=f"2026-11-{day:02d}T09:00:00+00:00",
                       environment=Fingerprint(provenance={"git_commit": f"c{day}"}))

    sp = spec(REQUESTS, repeats=REPEATS)
    base = Side(sp, sp.identity_hash(), [session(x, i + 1) for i, x in enumerate(main)])
    cur = Side(sp, sp.identity_hash(), [session(pr, len(main) + 1)])
    return judge("t::x", cur, base, Policy())


def _by_metric(o: Outcome) -> dict[str, object]:
    return {c.metric: c for c in o.comparisons}


def test_a_further_15_percent_at_the_first_push_is_regressed_against_the_step_session() -> None:
    for seed in range(3):
        o = _judge(1.25 * 1.15, seed)
        assert any("at session 5 (c5) of 5; judged against the 1 session since" in n for n in o.notes)
        tpot = _by_metric(o)[TPOT]
        assert tpot.verdict == "regressed"  # type: ignore[attr-defined]
        assert fails(o, Policy())


def test_the_step_session_is_not_judged_as_a_sitting_of_its_own() -> None:
    """The spread of five sessions on five days holds the day-to-day spread: no
    between-sitting term is added because one session is left at main's current level."""
    o = _judge(1.25 * 1.15, 0)
    for c in o.comparisons:
        assert "share one sitting" not in c.note
    tpot = _by_metric(o)[TPOT]
    assert "t(ν=6)" in tpot.method  # type: ignore[attr-defined]
    assert "each of main's levels centred on its own, with the prior's 3 sessions" in tpot.note  # type: ignore[attr-defined]
    assert "rests on the one session since its step (session 5)" in tpot.note  # type: ignore[attr-defined]


def test_an_unchanged_pr_at_the_first_push_does_not_fail() -> None:
    for seed in range(3):
        o = _judge(1.25, seed)
        assert not fails(o, Policy())
        assert "regressed" not in {c.verdict for c in o.comparisons}


def test_at_the_second_push_the_level_rests_on_two_sessions() -> None:
    o = _judge(1.25 * 1.15, 0, main=(1.0, 1.02, 0.98, 1.25, 1.24))
    assert fails(o, Policy())
    tpot = _by_metric(o)[TPOT]
    assert tpot.verdict == "regressed"  # type: ignore[attr-defined]
    assert "rests on the one session" not in tpot.note  # type: ignore[attr-defined]


def test_a_main_noisier_than_the_prior_still_catches_a_further_15_percent_at_the_first_push() -> None:
    """Sessions 3 % apart before the step (the prior: 2.2 %): centring each level on its own
    leaves 3 degrees of freedom, and the prior's 3 pseudo-sessions are lent to them. Decided
    alone on 3 (and with a between-sitting term on top), this PR passed 3 times of 4."""
    noisy = (1.0, 1.04, 0.97, 1.02, 1.25)
    for seed in range(4):
        assert fails(_judge(1.25 * 1.15, seed, main=noisy), Policy())
        aa = _judge(1.25, seed, main=noisy)
        assert not fails(aa, Policy())
        tpot = _by_metric(aa)[TPOT]
        assert tpot.verdict == "underpowered"  # type: ignore[attr-defined]
        assert "rests on the one session since its step" in tpot.note  # type: ignore[attr-defined]

"""The README's promises at their own sizes, through the public judge, in seeded trials.

The README promises that the gate at its marker (a server test, 240 requests x 2 repeats,
five baseline sessions) gives no false alarm on an unchanged engine and fails a 10 % goodput
drop and a 20 % P99 rise (the counts below are in docs/performance.md, "Gate sensitivity at
the README's sizes"). Here each promise is a set of seeded trials of hand-built runs
(``judge_scenarios``: one schedule replayed, lognormal per-request latencies, 2 % machine
noise per run, 5 % request noise) through ``judge()`` and ``fails()``, the path the gate
takes. The trials are seeded, so the counts are what the judge decides, not a measurement:
a change in the judge that costs sensitivity or adds false alarms changes them.

``bench/gate_quality.py`` measures the same promises at 100-400 trials on the simulator.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from judge_scenarios import Workload, run, spec, verdicts  # noqa: E402

from pytest_goodput.schema.runs.results import Samples  # noqa: E402

TRIALS = 30
#: The README's marker: 240 requests, 2 repeats; the gate's default 5 baseline sessions.
REQUESTS, REPEATS, SESSIONS = 240, 2, 5


def _missing(s: Samples, miss: np.ndarray) -> Samples:
    """The run with the ``miss`` requests no longer good (each missed a per-request SLO)."""
    return s.model_copy(update={"good": [bool(g) and not m for g, m in zip(s.good or s.ok, miss)]})


def _current(arm: str, w: Workload, rng: np.random.Generator) -> list[Samples]:
    if arm == "goodput -10%":  # one request in ten misses its SLO; latencies as before
        return [_missing(run(w, rng), rng.random(w.n) < 0.10) for _ in range(REPEATS)]
    if arm == "TTFT +20%":
        return [run(w, rng, ttft_factor=1.2) for _ in range(REPEATS)]
    if arm == "TPOT +20%":
        return [run(w, rng, tpot_factor=1.2) for _ in range(REPEATS)]
    return [run(w, rng) for _ in range(REPEATS)]


def _trials(arm: str) -> tuple[int, Counter[tuple[str, str]]]:
    """How many trials fail the test, and each (metric, verdict)'s count."""
    failed, seen = 0, Counter()
    for t in range(TRIALS):
        w = Workload.draw(REQUESTS, 1000 + t)
        rng = np.random.default_rng([7, t])
        sp = spec(REQUESTS, repeats=REPEATS, ttft_ms=200, tpot_ms=40, attainment=0.5)
        base = [[run(w, rng) for _ in range(REPEATS)] for _ in range(SESSIONS)]
        _, verdict, fails = verdicts(sp, base, _current(arm, w, rng))
        failed += fails
        seen.update(verdict.items())
    return failed, seen


def test_an_unchanged_engine_never_fails_and_nothing_regresses() -> None:
    failed, seen = _trials("A/A")
    assert failed == 0
    assert not [k for k in seen if k[1] == "regressed"]


def test_a_ten_percent_goodput_drop_fails_nine_trials_in_ten_on_goodput() -> None:
    """Goodput is a count over a window: with one request in ten missing at random and 2 %
    machine noise per run, the realised drop of two repeats ranges from about 5 % to 12 %,
    so a 10 % drop against the 5 % tolerance is *regressed* in about nine trials of ten
    (28 of these 30), not every one; larger drops are caught every time
    (docs/performance.md, "Gate sensitivity at the README's sizes")."""
    failed, seen = _trials("goodput -10%")
    assert seen[("goodput.requests_per_s", "regressed")] >= 0.9 * TRIALS
    assert failed >= 0.9 * TRIALS


def test_a_twenty_percent_tpot_rise_fails_every_trial_on_p99_tpot() -> None:
    failed, seen = _trials("TPOT +20%")
    assert failed == TRIALS
    assert seen[("metrics.tpot_ms.p99", "regressed")] == TRIALS


def test_a_twenty_percent_ttft_rise_fails_every_trial() -> None:
    """Every trial fails; P99 TTFT itself is *regressed* in most, not all: +20 % is only 5
    points above its 15 % tolerance, where 480 requests resolve the tail at about 85-90 %
    (docs/performance.md, "Gate quality"); the median, gated at 10 %, catches the rest."""
    failed, seen = _trials("TTFT +20%")
    assert failed == TRIALS
    assert seen[("metrics.ttft_ms.p50", "regressed")] == TRIALS
    assert seen[("metrics.ttft_ms.p99", "regressed")] >= 0.8 * TRIALS

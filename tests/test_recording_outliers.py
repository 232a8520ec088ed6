"""Recording names a session that stands out from the others, keeps it, and says how to record
again: the pure rule on hand-computed cases, the notes and reports, and a recording through
pytester whose third engine launch is slowed."""

from __future__ import annotations

import json
import math
import sys

import pytest

import pytest_goodput.load.coordinator  # noqa: F401  (pytester: C extensions import once)
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.run.gating  # noqa: F401
from pytest_goodput.judge.noise.outliers import (
    OUTLIER_NOTE,
    Outlier,
    describe,
    outlier_notes,
    recording_outliers,
    session_outliers,
)
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.plugin.session import record_again_command
from pytest_goodput.plugin.settings import Settings
from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.report.text.terminal import render_summary
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome
from pytest_goodput.schema.runs.results import Samples

pytest_plugins = ["pytester"]

TPOT = MetricDef.of("metrics.tpot_ms.p99")  # log scale, tolerance 10 %, prior 2 %


def test_a_session_40_percent_slower_is_named_with_its_change_and_limit():
    # Others' logs have SD 0.85 % < the 2 % prior: σ = √((3·0.02² + 3·0.0085²)/6) = 1.54 %
    # on 6 degrees of freedom; t(1 − 0.001/10, 6) = 8.02, so the limit is
    # exp(8.02 · 0.0154 · √(1 + 1/4)) − 1 = +14.8 %. The change: 14 / geomean(others) − 1 = +39.8 %.
    (o,) = session_outliers([10, 10.1, 9.9, 14, 10.05], TPOT)
    assert (o.session, o.sessions, o.metric) == (4, 5, "metrics.tpot_ms.p99")
    assert o.change == pytest.approx(0.3983, abs=1e-4)
    assert o.limit == pytest.approx(0.1479, abs=1e-4)
    assert o.others == pytest.approx(10.0122, abs=1e-4)
    assert describe(o) == ("TPOT P99 +39.8% (worse) against the other 4 sessions "
                           "(prediction limit +14.8%, tolerance 10.0%)")


def test_three_sessions_are_enough_two_are_not():
    assert [o.session for o in session_outliers([10, 14, 10.1], TPOT)] == [2]
    assert session_outliers([10, 14], TPOT) == []


def test_noise_within_the_tolerance_never_names_a_session():
    # Nine identical sessions make the limit small (σ = √(3·0.02²/12) = 1 %, t(1 − 0.001/20, 12)
    # = 6.0: +6.2 %); a session 8 % slower lies beyond it but inside the 10 % tolerance.
    values = [10.0] * 9 + [10.8]
    assert session_outliers(values, TPOT) == []
    assert [o.session for o in session_outliers(values, MetricDef(TPOT.path, "lower", 0.05))] == [10]


def test_sessions_that_all_vary_name_none():
    # A noisy machine: 40 % between sessions is its spread, not one session's accident.
    assert session_outliers([10, 14, 8, 12, 9.5], TPOT) == []


def test_a_faster_session_is_named_too_and_said_to_be_better():
    (o,) = session_outliers([10, 10.1, 9.9, 6.5, 10.05], TPOT)
    assert o.session == 4 and o.change < -0.3
    assert "(better)" in describe(o) and "prediction limit -" in describe(o)


def test_a_session_whose_failures_reach_the_percentile_is_named():
    (o,) = session_outliers([10, 10.1, math.inf, 9.9, 10.0], TPOT)
    assert o.session == 3 and o.change == math.inf and o.limit is None
    assert describe(o) == ("TPOT P99: failures reach this percentile (+inf) in this session, "
                           "not in most of the other 4")
    # When most sessions reach it, none is the odd one out.
    assert session_outliers([math.inf, math.inf, math.inf, 10.0, 10.1], TPOT) == []


def test_throughput_lower_is_worse_and_unmeasured_sessions_are_skipped():
    thr = MetricDef.of("throughput.output_tokens_per_s")
    (o,) = session_outliers([1000, 1010, None, 990, 700, 1005], thr)
    assert (o.session, o.sessions) == (5, 6) and o.change == pytest.approx(700 / 1001.2 - 1, abs=1e-3)
    assert "(worse)" in describe(o)


def test_the_error_rate_is_judged_in_percentage_points():
    (o,) = session_outliers([0.001, 0.0, 0.002, 0.03, 0.0], MetricDef.of("error_rate"))
    assert o.session == 4 and o.change == pytest.approx(0.03 - 0.00075)
    assert describe(o).startswith("error rate +2.92 pp (worse)") and "tolerance 0.50 pp" in describe(o)


def _samples(tpot_ms: float, n: int = 50) -> Samples:
    return Samples(window_s=10.0, ok=[True] * n, good=None, ttft_ms=[20.0] * n,
                   tpot_ms=[tpot_ms * (1 + i / 1000) for i in range(n)], e2e_ms=[100.0] * n,
                   output_tokens=[16] * n, prompt_tokens=[32] * n)


def test_recording_outliers_reads_each_sessions_runs():
    # Two repeats per session: the session's value is the geometric mean of its runs' P99s.
    sessions = [[_samples(5.0), _samples(5.05)], [_samples(5.02), _samples(4.98)],
                [_samples(7.0), _samples(7.1)], [_samples(5.0), _samples(5.01)]]
    defs = [TPOT, MetricDef.of("metrics.ttft_ms.p99"), MetricDef.of("throughput.output_tokens_per_s")]
    found = recording_outliers(sessions, defs)
    assert [(o.session, o.metric) for o in found] == [(3, "metrics.tpot_ms.p99")]


def test_notes_name_the_session_when_it_was_recorded_and_the_command():
    found = [Outlier(2, 7, TPOT.path, 14.0, 10.0, 0.4, 0.15, 0.10, "log"),
             Outlier(6, 7, TPOT.path, 14.0, 10.0, 0.4, 0.15, 0.10, "log"),
             Outlier(6, 7, "metrics.ttft_ms.p99", 30.0, 20.0, 0.5, 0.2, 0.15, "log")]
    first, second = outlier_notes(found, recorded_now=5, command="pytest t.py::a --goodput-update-baseline")
    assert first.startswith(f"{OUTLIER_NOTE}: session 2 of 7 (recorded earlier): TPOT P99 +40.0%")
    assert second.startswith(f"{OUTLIER_NOTE}: session 6 of 7 (recorded now): TPOT P99 +40.0%")
    assert "; TTFT P99 +50.0% (worse)" in second
    assert "It is kept" in second and second.endswith(
        "to record the baseline again: pytest t.py::a --goodput-update-baseline")


def test_the_command_repeats_the_command_line_settings_and_replaces_the_kept_sessions():
    s = Settings(update=True, sessions=4, history=10, serve="python -m sim --port {port}",
                 strict=True, baseline_dir="perf/base", json_path="out.json",
                 sources={"sessions": "--goodput-sessions", "history": "ini goodput_history",
                          "serve": "--goodput-serve", "strict": "--goodput-strict",
                          "baseline_dir": "--goodput-baseline", "json_path": "--goodput-json"})
    assert record_again_command("tests/test_perf.py::test_a[x y]", s) == (
        "pytest 'tests/test_perf.py::test_a[x y]' --goodput-update-baseline "
        "'--goodput-serve=python -m sim --port {port}' --goodput-strict "
        "--goodput-baseline=perf/base --goodput-sessions=4 --goodput-history=4")


NOTE = (f"{OUTLIER_NOTE}: session 3 of 5 (recorded now): TPOT P99 +40.0% (worse) against the "
        "other 4 sessions (prediction limit +14.8%, tolerance 10.0%). It is kept, and its spread "
        "widens every later verdict of these metrics; to record the baseline again: pytest "
        "t.py::test_a --goodput-update-baseline --goodput-sessions=5 --goodput-history=5")


def test_the_summary_shows_the_outlier_as_a_warning_of_its_own():
    o = Outcome(nodeid="t.py::test_a", scenario="server", baseline_status="updated",
                    notes=["5 session(s) recorded", NOTE])
    out = render_summary([o])
    assert f"warning: t.py::test_a: {NOTE}" in out
    assert "note: t.py::test_a: 5 session(s) recorded" in out
    assert out.count("session 3 of 5") == 1


def test_the_markdown_report_quotes_the_outlier():
    o = Outcome(nodeid="t.py::test_a", scenario="server", baseline_status="updated", notes=[NOTE])
    md = render_markdown([o])
    assert "> **Outlier session recorded:** session 3 of 5 (recorded now): TPOT P99 +40.0%" in md


LAUNCHER = """
import os, sys
count = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launches")
n = int(open(count).read()) + 1 if os.path.exists(count) else 1
open(count, "w").write(str(n))
slowdown = "5.0" if n == 3 else "1.0"  # the third recorded session runs on a slow engine
os.execv(sys.executable, [sys.executable, "-m", "pytest_goodput", "sim", "--port", sys.argv[1],
                          "--slowdown", slowdown])
"""

SERVED = """
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=24, isl=16, osl=16)
def test_served(goodput):
    goodput.run()
"""


def test_recording_names_the_slowed_session_keeps_it_and_says_how_to_record_again(pytester):
    pytester.makepyfile(test_perf=SERVED)
    pytester.makepyfile(launcher=LAUNCHER)
    serve = f"--goodput-serve={sys.executable} launcher.py {{port}}"
    res = pytester.runpytest("-p", "no:cacheprovider", serve, "--goodput-update-baseline",
                             "--goodput-sessions=5", "--goodput-json=out.json",
                             "--goodput-report=report.md")
    res.assert_outcomes(passed=1)
    assert (pytester.path / "launches").read_text() == "5"
    out = res.stdout.str()
    lines = [line for line in out.splitlines() if OUTLIER_NOTE in line]
    assert len(lines) == 1, out  # only the slowed session, named once
    line = lines[0]
    assert line.startswith(f"warning: test_perf.py::test_served: {OUTLIER_NOTE}: session 3 of 5 "
                           "(recorded now): "), line
    # Five times slower: named on whichever gated metrics the other four sessions pin down
    # (throughput, TPOT P50, TTFT P99), always as worse.
    assert "(worse)" in line and "(better)" not in line
    assert line.endswith("to record the baseline again: pytest test_perf.py::test_served "
                         f"--goodput-update-baseline '{serve}' --goodput-sessions=5 "
                         "--goodput-history=5"), line
    # Nothing is dropped: the user decides.
    doc = json.loads((pytester.path / ".goodput/baselines/test_perf/test_served.json").read_text())
    assert len(doc["sessions"]) == 5
    results = json.loads((pytester.path / "out.json").read_text())
    notes = [n for t in results["tests"] for n in t["outcome"]["notes"] if n.startswith(OUTLIER_NOTE)]
    assert len(notes) == 1 and "session 3 of 5" in notes[0]
    assert "**Outlier session recorded:** session 3 of 5" in (pytester.path / "report.md").read_text()

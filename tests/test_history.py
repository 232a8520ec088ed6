"""The history store, change points, drift, creep and trend charts, on hand-made series."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_goodput.judge import changepoints as cp
from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.report.md.trend import PALETTE, trend_chart
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.history import HistoryEntry, Trend, TrendPoint
from pytest_goodput.run.history import series_of
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome
from pytest_goodput.store import history as store
from pytest_goodput.store.files import WriteError

pytest.importorskip("ruptures")

NODEID = "tests/test_perf.py::test_chat"
ENV = Fingerprint(identity={"hardware": "h100", "model": "m", "scenario_hash": "abc"},
                  provenance={"git_commit": "0123456789ab"})


def entry(i: int, value: float, **kw: object) -> HistoryEntry:
    return HistoryEntry(nodeid=NODEID, recorded_at=f"2026-01-{i % 28 + 1:02d}T00:00:00+00:00",
                        commit=f"c{i:03d}", environment=kw.pop("environment", ENV),  # type: ignore[arg-type]
                        metrics={"goodput.requests_per_s": value}, gated=["goodput.requests_per_s"],
                        tolerances={"goodput.requests_per_s": 0.05}, **kw)  # type: ignore[arg-type]


# --- the store --------------------------------------------------------------------------


def test_history_file_sits_next_to_the_baselines_one_jsonl_per_test(tmp_path):
    hist = store.default_dir(tmp_path / ".goodput" / "baselines")
    assert hist == tmp_path / ".goodput" / "history"
    path = store.path_for(hist, NODEID)
    assert path == hist / "tests" / "test_perf" / "test_chat.jsonl"
    assert store.path_for(hist, "t.py::TestA::test_b[x.y]").name == "TestA.test_b[x.y].jsonl"


def test_append_then_read_back_in_order(tmp_path):
    path = store.path_for(tmp_path, NODEID)
    for i in range(3):
        assert store.append(path, entry(i, 10.0 + i)) == i + 1
    read = store.read(path, NODEID)
    assert read.warnings == []
    assert [e.commit for e in read.entries] == ["c000", "c001", "c002"]
    assert [e.metrics["goodput.requests_per_s"] for e in read.entries] == [10.0, 11.0, 12.0]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["kind"] == "pytest-goodput-history"
    assert store.find_all(tmp_path) == {NODEID: path}


def test_the_file_is_bounded_keeping_the_newest_entries(tmp_path):
    path = store.path_for(tmp_path, NODEID)
    counts = [store.append(path, entry(i, 10.0), keep=5) for i in range(8)]
    assert counts == [1, 2, 3, 4, 5, 5, 5, 5]
    assert [e.commit for e in store.read(path).entries] == ["c003", "c004", "c005", "c006", "c007"]
    assert len(path.read_text(encoding="utf-8").splitlines()) == 5


def test_damaged_lines_are_skipped_with_a_warning_naming_file_and_line(tmp_path):
    path = store.path_for(tmp_path, NODEID)
    store.append(path, entry(0, 10.0))
    with open(path, "ab") as fh:
        fh.write(b"{not json\n")
        fh.write(b'{"kind": "something-else"}\n')
        fh.write(b"\xff\xfe\n")
        fh.write(entry(1, 11.0).model_dump_json().replace('"schema_version":1', '"schema_version":9').encode() + b"\n")
        fh.write(b'{"kind": "pytest-goodput-history", "schema_version": 1, "nodeid": "x"}\n')
        fh.write(b'{"kind": "pytest-goodput-his')  # a crash mid-append: no newline
    store.append(path, entry(2, 12.0))  # closes the partial line first
    read = store.read(path, NODEID)
    assert [e.commit for e in read.entries] == ["c000", "c002"]
    assert len(read.warnings) == 6
    assert read.warnings[0] == f"{path}:2: not valid JSON (Expecting property name enclosed in double quotes), line skipped"
    assert "not a history entry" in read.warnings[1] and ":3:" in read.warnings[1]
    assert "not UTF-8" in read.warnings[2]
    assert "schema_version 9" in read.warnings[3]
    assert "invalid at recorded_at: Field required" in read.warnings[4]
    assert f"{path}:7: not valid JSON" in read.warnings[5]


def test_compaction_drops_damaged_lines_and_keeps_valid_ones(tmp_path):
    path = store.path_for(tmp_path, NODEID)
    store.append(path, entry(0, 10.0), keep=3)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("garbage\n")
    store.append(path, entry(1, 11.0), keep=3)
    store.append(path, entry(2, 12.0), keep=3)  # 3 lines + 1 > keep: compacted
    read = store.read(path)
    assert [e.commit for e in read.entries] == ["c000", "c001", "c002"] and read.warnings == []


def test_a_history_path_that_is_a_directory_is_a_write_error(tmp_path):
    path = store.path_for(tmp_path, NODEID)
    path.mkdir(parents=True)
    with pytest.raises(WriteError, match="it is a directory"):
        store.append(path, entry(0, 10.0))
    with pytest.raises(store.HistoryError, match="it is a directory"):
        store.read(path)


def test_record_stores_the_median_of_the_sessions_and_the_commit(tmp_path):
    path = store.record(tmp_path, NODEID,
                        [{"goodput.requests_per_s": 9.0, "metrics.ttft_ms.p99": 400.0},
                         {"goodput.requests_per_s": 11.0, "metrics.ttft_ms.p99": None},
                         {"goodput.requests_per_s": 10.5, "metrics.ttft_ms.p99": float("nan")}],
                        ENV, tolerances={"goodput.requests_per_s": 0.05}, environ={})
    (e,) = store.read(path).entries
    assert e.metrics == {"goodput.requests_per_s": 10.5, "metrics.ttft_ms.p99": 400.0}
    assert e.sessions == 3 and e.commit == "0123456789ab" and e.gated == ["goodput.requests_per_s"]
    path = store.record(tmp_path, NODEID, [{}], ENV, tolerances={}, environ={"GITHUB_SHA": "f" * 40})
    assert store.read(path).entries[-1].commit == "f" * 40
    bare = Fingerprint(identity=ENV.identity)
    assert store.commit_of(bare, {}) is None


# --- change points ----------------------------------------------------------------------

STEP = [10.0, 10.1, 9.9, 10.0, 10.05, 9.95, 9.0, 9.1, 8.9, 9.0, 9.05, 8.95]


def test_a_clear_step_is_found_at_its_index_with_hand_computed_figures():
    (point,) = cp.detect(STEP)
    assert point.index == 6
    assert point.before == pytest.approx(10.0) and point.after == pytest.approx(9.0)
    assert point.change == pytest.approx(-0.1)
    # Student's two-sample t-test, pooled variance: t = 1.0 / sqrt(0.05 / 10 * (1/6 + 1/6)) = 24.5
    scipy_stats = pytest.importorskip("scipy.stats")
    expected = scipy_stats.ttest_ind(STEP[:6], STEP[6:]).pvalue
    assert point.pvalue == pytest.approx(expected, rel=1e-6)
    assert point.pvalue < 1e-9


def test_a_flat_series_has_no_change_point():
    flat = [10.0 + 0.1 * ((i * 7) % 5 - 2) for i in range(40)]
    assert cp.detect(flat) == []
    assert cp.detect([10.0] * 20) == []


def test_significance_and_magnitude_settings_filter_change_points():
    small = [10.0, 10.02, 9.98] * 3 + [9.9, 9.92, 9.88] * 3  # a 1 % step, tight noise
    assert [p.index for p in cp.detect(small, cp.ChangepointSettings(min_magnitude=0.005))] == [9]
    assert cp.detect(small, cp.ChangepointSettings(min_magnitude=0.02)) == []
    assert cp.detect(small, cp.ChangepointSettings(max_pvalue=1e-30, min_magnitude=0.0)) == []


def test_too_short_a_series_has_no_change_point():
    assert cp.detect([10.0, 9.0, 8.0, 7.0, 6.0]) == []


@pytest.mark.parametrize("kw, message", [
    ({"max_pvalue": 0.0}, "max p-value must be in (0, 1)"),
    ({"max_pvalue": 1.5}, "max p-value must be in (0, 1)"),
    ({"min_magnitude": -0.1}, "minimum magnitude must be in [0, 10)"),
    ({"min_size": 1}, "min_size must be at least 2"),
])
def test_bad_settings_say_what_is_allowed(kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        cp.ChangepointSettings(**kw)


def test_without_ruptures_detection_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ruptures", None)
    with pytest.raises(cp.ChangePointsUnavailable, match=r'pip install "pytest-goodput\[history\]"'):
        cp.detect(STEP)


# --- drift and creep --------------------------------------------------------------------


def test_drift_is_the_change_between_medians_of_three_runs():
    d = cp.drift([10.0, 11.0, 12.0, 9.0, 8.0, 7.0], 0)
    assert (d.start, d.end) == (11.0, 8.0)
    assert d.change == pytest.approx(-3 / 11)
    d = cp.drift([10.0, 11.0, 12.0, 9.0, 8.0, 7.0], 4)
    assert (d.start, d.end, d.change) == (7.5, 8.0, pytest.approx(8.0 / 7.5 - 1))
    assert cp.drift([1.0], 3) is None


CREEP = [10.0, 10.1, 9.9, 10.0, 9.8, 9.7, 9.75, 9.6, 9.5, 9.55]


def test_creep_hand_computed_loss_fails_past_the_tolerance():
    c = cp.creep(CREEP, 9.3, direction="higher", tolerance=0.051)
    assert c.window_start == 0 and c.step_at is None
    assert c.start == 10.0  # median(10.0, 10.1, 9.9)
    assert c.end == 9.5  # median(9.5, 9.55, 9.3)
    assert c.loss == pytest.approx(0.05) and c.own_loss == pytest.approx(0.07)
    assert not c.crept  # the window lost 5.0 %, within 5.1 %
    c = cp.creep(CREEP, 9.3, direction="higher", tolerance=0.049)
    assert c.crept


def test_a_run_that_undoes_the_creep_passes():
    c = cp.creep(CREEP, 10.0, direction="higher", tolerance=0.03)
    assert c.loss == pytest.approx(0.045) and c.own_loss == pytest.approx(0.0)
    assert not c.crept


def test_creep_direction_comes_from_the_metric():
    latency = [100.0, 101.0, 99.0, 100.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0]
    c = cp.creep(latency, 109.0, direction="lower", tolerance=0.05)
    assert c.start == 100.0 and c.end == 107.0
    assert c.loss == pytest.approx(0.07) and c.crept
    assert not cp.creep(latency, 109.0, direction="higher", tolerance=0.05).crept


def test_the_window_bounds_how_far_back_creep_is_counted():
    slow = [10.0 - 0.05 * i for i in range(40)]  # 0.5 % per run
    assert cp.creep(slow, slow[-1] - 0.05, direction="higher", tolerance=0.05, window=20).crept
    assert not cp.creep(slow, slow[-1] - 0.05, direction="higher", tolerance=0.05, window=6).crept


def test_only_a_regression_the_gate_called_restarts_the_window():
    series = [10.0, 10.1, 9.9] * 4 + [9.0, 9.1, 8.9] * 4
    assert cp.is_step(series, 12, 0.05)
    accepted = [i == 12 for i in range(len(series))]
    c = cp.creep(series, 9.0, direction="higher", tolerance=0.05, accepted=accepted)
    assert c.step_at == 12 and c.window_start == 12 and c.start == 9.0 and not c.crept
    assert c.unaccepted_step is None
    # The same sharp step, never called regressed: it is counted, not a restart.
    c = cp.creep(series, 9.0, direction="higher", tolerance=0.05)
    assert c.step_at is None and c.window_start == 4 and c.start == 10.0 and c.crept
    assert c.unaccepted_step.index == 12
    ramp = [10.0 * 0.97 ** i for i in range(24)]  # 3 % per run: a creep, not a step
    assert not any(cp.is_step(ramp, i, 0.05) for i in range(3, 21))
    assert cp.creep(ramp, ramp[-1] * 0.97, direction="higher", tolerance=0.05).crept


def test_an_accepted_regression_just_recorded_leaves_too_few_runs_to_judge():
    series = [10.0] * 12 + [9.0]
    accepted = [False] * 12 + [True]
    assert cp.creep(series, 9.0, direction="higher", tolerance=0.05, accepted=accepted) is None
    assert cp.creep(series, 9.0, direction="higher", tolerance=0.05).crept


#: Issue 31 item 9: a +18 % step the gate called inconclusive, then +1 % a run.
STEP_THEN_CREEP = [400.0] * 12 + [472.0 * 1.01 ** j for j in range(16)]


def test_every_check_after_an_unaccepted_step_and_creep_is_flagged():
    checks = [cp.creep(STEP_THEN_CREEP[:i], STEP_THEN_CREEP[i], direction="lower", tolerance=0.15)
              for i in range(13, len(STEP_THEN_CREEP))]
    assert all(c.crept for c in checks)
    assert checks[-1].loss == pytest.approx(472.0 * 1.01 ** 14 / 400.0 - 1)  # median of the newest 3


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(steps=st.lists(st.tuples(st.floats(0.0, 0.25), st.integers(1, 4)), min_size=1, max_size=8),
       noise=st.lists(st.floats(-0.003, 0.003), min_size=20, max_size=20),
       verdicts=st.lists(st.sampled_from([None, "pass", "inconclusive", "underpowered", "improved"]),
                         min_size=20, max_size=20),
       direction=st.sampled_from(["higher", "lower"]),
       tolerance=st.sampled_from([0.05, 0.1, 0.15]))
def test_small_steps_adding_up_past_the_tolerance_are_flagged_whatever_their_sizes(
        steps, noise, verdicts, direction, tolerance):
    """Worse steps of any size, each held 1–4 runs, none called regressed when recorded, that
    add up to more than the tolerance fail the creep gate once the new level holds, while the
    old level is inside the window."""
    worse = 1.0
    levels = [1.0] * 6
    for size, runs in steps:
        worse *= 1 + size
        levels += [worse] * runs
    levels += [worse] * 3
    loss = worse - 1 if direction == "lower" else 1 - 1 / worse
    assume(loss > tolerance + 0.01 and len(levels) <= cp.DEFAULT_WINDOW)
    values = [100.0 * (w if direction == "lower" else 1 / w) * (1 + e) for w, e in zip(levels, noise)]
    path = "metrics.ttft_ms.p99" if direction == "lower" else "goodput.requests_per_s"
    entries = [entry(i, v).model_copy(update={
        "metrics": {path: v}, "verdicts": {path: verdicts[i]} if verdicts[i] else {}})
        for i, v in enumerate(values[:-1])]
    series = {path: series_of(entries, path)}
    comps, _ = cp.creep_gate(series, {path: values[-1]}, [(path, direction, tolerance)])
    assert [(c.verdict, c.method) for c in comps] == [("regressed", "creep")], levels


# --- trend charts -----------------------------------------------------------------------


def _trend() -> Trend:
    pts = [TrendPoint(label=f"{i:07d}abcdef", value=v) for i, v in enumerate([10.0, 9.8, 9.5])]
    return Trend(metric="goodput.requests_per_s", reason="crept", start=10.0, tolerance=0.05,
                 points=[*pts, TrendPoint(label="this run", value=9.2, current=True)])


def test_trend_chart_has_colour_blind_safe_colours_runs_start_and_limit():
    chart = trend_chart(_trend())
    lines = chart.splitlines()
    assert lines[0].startswith("%%{init: ") and all(c in lines[0] for c in PALETTE)
    assert PALETTE == ("#0072B2", "#E69F00", "#D55E00")
    assert lines[1] == "xychart-beta"
    assert 'x-axis ["0000000", "0000001", "0000002", "this run"]' in chart
    assert "    line [10, 9.8, 9.5, 9.2]" in lines
    assert "    line [10, 10, 10, 10]" in lines
    assert "    line [9.5, 9.5, 9.5, 9.5]" in lines  # 10 less the 5 % tolerance


def test_the_pr_report_shows_the_trend_of_a_crept_metric():
    outcome = Outcome(nodeid=NODEID, scenario="server", trends=[_trend()])
    md = render_markdown([outcome])
    assert "**Trend of goodput (req/s) on main** (crept; 4 runs): 10 → 9.2 (-8.0%)" in md
    assert "```mermaid\n%%{init:" in md

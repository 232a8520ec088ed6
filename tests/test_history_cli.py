"""``python -m pytest_goodput history DIR`` as users run it: output and exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.history import HistoryEntry
from pytest_goodput.store import history as store

pytest.importorskip("ruptures")

NODEID = "tests/test_perf.py::test_chat"
ENV = Fingerprint(identity={"hardware": "h100", "model": "m", "scenario_hash": "abc"})
#: A step of -8 % at run 13 (commit c012…), then flat: fixed values, no randomness.
NOISE = [0.0, 0.01, -0.01, 0.005, -0.005]
STEP = [10.0 * (1 + NOISE[i % 5]) for i in range(12)] + [9.2 * (1 + NOISE[i % 5]) for i in range(12)]
#: The gate called the step regressed when run 13 was recorded, and it was merged: accepted.
ACCEPTED = {12: {"goodput.requests_per_s": "regressed"}}


def commit(i: int) -> str:
    return f"c{i:03d}" + "0" * 36


def write_history(directory: Path, values: list[float], *, nodeid: str = NODEID,
                  env: Fingerprint = ENV, verdicts: dict[int, dict[str, str]] | None = None) -> Path:
    """``verdicts``: run index → each metric's verdict when the run was recorded."""
    path = store.path_for(directory, nodeid)
    for i, v in enumerate(values):
        store.append(path, HistoryEntry(
            nodeid=nodeid, recorded_at="2026-01-01T00:00:00+00:00", commit=commit(i),
            environment=env, metrics={"goodput.requests_per_s": v, "metrics.ttft_ms.p99": 400.0},
            gated=["goodput.requests_per_s"], tolerances={"goodput.requests_per_s": 0.05},
            verdicts=(verdicts or {}).get(i, {})))
    return path


def write_series(directory: Path, path: str, tolerance: float, values: list[float],
                 verdicts: dict[int, str] | None = None) -> Path:
    """One gated metric's history; ``verdicts``: run index → the gate's verdict when recorded."""
    out = store.path_for(directory, NODEID)
    for i, v in enumerate(values):
        store.append(out, HistoryEntry(
            nodeid=NODEID, recorded_at="2026-01-01T00:00:00+00:00", commit=commit(i),
            environment=ENV, metrics={path: v}, gated=[path], tolerances={path: tolerance},
            verdicts={path: verdicts[i]} if verdicts and i in verdicts else {}))
    return out


#: Issue 31 item 9: TTFT P99 flat at 400 ms, a +18 % step at run 13 (tolerance 15 %), then
#: +1 % per run for 15 runs: 37 % above the old level at the end.
STEP_THEN_CREEP = ([400.0 * (1 + NOISE[i % 5]) for i in range(12)]
                   + [472.0 * 1.01 ** j * (1 + NOISE[j % 5]) for j in range(16)])


def history(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", "history", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_a_step_is_printed_at_its_commit_with_before_after_change_and_p(tmp_path):
    write_history(tmp_path / "hist", STEP, verdicts=ACCEPTED)
    proc = history("hist", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"{NODEID}: 24 runs (hardware=h100, model=m, scenario_hash=abc)\n")
    assert "  goodput (req/s) — higher is better, tolerance 5%, 24 runs\n" in out
    # before: mean of runs 1-12 = 10 × (1 + 0.01/12); after: 9.2 × (1 + 0.01/12) = 9.2077
    assert "    change point at c01200000000 (run 13): 10 → 9.21 -8.0% (worse), p = 1.2e-18\n" in out
    assert "drift since c00000000000 (run 1): 10 → 9.2 -8.0% (worse; medians of 3 runs)" in out
    assert ("creep: within tolerance — the newest 12 runs after the regression accepted at c01200000000: "
            "9.2 → 9.2 +0.0%, the newest run alone +1.0% (medians of 3 runs)") in out
    assert "TTFT" not in out  # only the gated metric unless --metric names others


def test_metric_and_since_choose_what_is_analysed(tmp_path):
    write_history(tmp_path / "hist", STEP, verdicts=ACCEPTED)
    proc = history("hist", "--metric", "ttft_p99_ms", "--since", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "TTFT P99 (ms) — lower is better, tolerance 15%, 24 runs" in proc.stdout
    assert "no change point" in proc.stdout
    assert "drift since c02000000000 (run 21): 400 → 400 +0.0%" in proc.stdout
    proc = history("hist", "--since", "c012000", cwd=tmp_path)
    assert "drift since c01200000000 (run 13): 9.2 → 9.2 +0.0% (better;" in proc.stdout


def test_a_creep_on_the_newest_run_exits_1(tmp_path):
    creep = [10.0 * (1 + NOISE[i % 5]) * 0.995 ** i for i in range(24)]  # 0.5 % per run
    write_history(tmp_path / "hist", creep)
    proc = history("hist", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "creep: CREPT — the newest 21 runs: " in proc.stdout
    assert proc.stdout.rstrip().endswith(f"creep beyond tolerance: {NODEID} goodput (req/s)")
    proc = history("hist", "--tolerance", "0.2", cwd=tmp_path)
    assert proc.returncode == 0 and "creep: within tolerance" in proc.stdout


def test_other_identities_are_not_mixed_into_the_series(tmp_path):
    other = Fingerprint(identity={**ENV.identity, "hardware": "a100"})
    path = write_history(tmp_path / "hist", [5.0] * 6, env=other)
    for i, v in enumerate(STEP):
        store.append(path, HistoryEntry(nodeid=NODEID, recorded_at="2026-01-02T00:00:00+00:00",
                                        commit=commit(100 + i), environment=ENV,
                                        metrics={"goodput.requests_per_s": v},
                                        gated=["goodput.requests_per_s"], verdicts=ACCEPTED.get(i, {})))
    proc = history("hist", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "24 runs (hardware=h100" in proc.stdout
    assert "6 runs of another hardware, model or scenario not compared" in proc.stdout
    assert proc.stdout.count("change point at") == 1


def test_damaged_lines_warn_and_the_rest_is_analysed(tmp_path):
    path = write_history(tmp_path / "hist", STEP, verdicts=ACCEPTED)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("{oops\n")
    proc = history(str(path), cwd=tmp_path)
    assert proc.returncode == 0
    assert f"warning: {path}:25: not valid JSON" in proc.stderr
    assert "change point at c01200000000" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["missing"], "error: history directory missing does not exist"),
    (["hist", "--since", "deadbeef"], "error: --since deadbeef: no test's history has that run"),
    (["hist", "--metric", "bogus"], "error: unknown metric 'bogus'"),
    (["hist", "--max-pvalue", "2"], "error: max p-value must be in (0, 1), got 2.0"),
    (["hist", "--window", "3"], "error: --window must be at least 6, got 3"),
    (["hist", "--test", "nothing"], "error: no history of a test matching 'nothing' under hist"),
    (["empty"], "error: no history of any test under empty"),
])
def test_bad_input_exits_2_with_one_clear_line(tmp_path, args, message):
    write_history(tmp_path / "hist", STEP, verdicts=ACCEPTED)
    (tmp_path / "empty").mkdir()
    proc = history(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(message), proc.stderr
    assert "Traceback" not in proc.stderr


def test_without_the_extra_the_command_says_what_to_install(tmp_path):
    write_history(tmp_path / "hist", STEP, verdicts=ACCEPTED)
    blocker = tmp_path / "block"
    (blocker / "ruptures").mkdir(parents=True)
    (blocker / "ruptures" / "__init__.py").write_text("raise ImportError('not installed')\n")
    proc = history("hist", cwd=tmp_path, env={"PYTHONPATH": str(blocker)})
    assert proc.returncode == 2
    assert proc.stderr.strip() == ('error: change-point detection needs ruptures: '
                                   'pip install "pytest-goodput[history]"')


def test_plot_draws_the_series_with_its_change_point(tmp_path):
    pytest.importorskip("matplotlib")
    write_history(tmp_path / "hist", STEP, verdicts=ACCEPTED)
    proc = history("hist", "--plot", "plots", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    svg = tmp_path / "plots" / "tests_test_perf.py_test_chat__goodput.requests_per_s.svg"
    assert f"    plot: plots/{svg.name}\n" in proc.stdout
    text = svg.read_text()
    assert text.startswith("<?xml") and "<svg" in text
    assert "-8.0%" in text and "c01200000000" in text  # the change point's label and its commit
    again = history("hist", "--plot", "plots", cwd=tmp_path)
    assert again.returncode == 0 and svg.read_text() == text  # reproducible: diffs cleanly


def test_plot_without_matplotlib_says_what_to_install(tmp_path):
    write_history(tmp_path / "hist", STEP, verdicts=ACCEPTED)
    blocker = tmp_path / "block"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('not installed')\n")
    proc = history("hist", "--plot", "plots", cwd=tmp_path, env={"PYTHONPATH": str(blocker)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == 'error: trend plots need matplotlib: pip install "pytest-goodput[plot]"'


@pytest.mark.parametrize("verdicts", [None, {12: "inconclusive"}], ids=["unjudged", "inconclusive"])
def test_a_step_the_gate_did_not_call_regressed_does_not_restart_the_creep_window(tmp_path, verdicts):
    # Nobody accepted the +18 % step (the gate called it inconclusive, or never judged it):
    # the window keeps the old level and the cumulative +37 % is a creep.
    write_series(tmp_path / "hist", "metrics.ttft_ms.p99", 0.15, STEP_THEN_CREEP, verdicts)
    proc = history("hist", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("    creep: CREPT — the newest 21 runs (the step at c01200000000 +20.3% was not called "
            "regressed: counted): 398 → 540 +35.6%, the newest run alone +37.7% (medians of 3 runs)\n"
            ) in proc.stdout
    assert proc.stdout.rstrip().endswith(f"creep beyond tolerance: {NODEID} TTFT P99 (ms)")


def test_a_step_the_gate_called_regressed_and_was_merged_restarts_the_window(tmp_path):
    write_series(tmp_path / "hist", "metrics.ttft_ms.p99", 0.15, STEP_THEN_CREEP, {12: "regressed"})
    proc = history("hist", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("    creep: within tolerance — the newest 16 runs after the regression accepted at "
            "c01200000000: 477 → 540 +13.3%, the newest run alone +15.0%") in proc.stdout

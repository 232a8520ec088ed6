"""``python -m pytest_goodput frontier``: file formats, table, comparison exit code, plots, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_goodput.cli import main
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.report import plot as plot_mod
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec

N, TOKENS = 20, 11

# concurrency -> (TPOT ms, output tokens/s): interactivity is 1000 / TPOT.
# 64 users (16.7 tok/s/user, 850 tok/s) is dominated by 48 users (20, 900).
BASE = {1: (10.0, 100.0), 4: (12.5, 320.0), 16: (20.0, 800.0), 48: (50.0, 900.0), 64: (60.0, 850.0)}
# 30 % less throughput from 16 users up; unchanged at 1 and 4.
SLOWER = {c: (t, y * (0.7 if c >= 16 else 1.0)) for c, (t, y) in BASE.items()}


def point_run(users: int, tpot_ms: float, tokens_per_s: float) -> RunResult:
    """``N`` identical requests of ``TOKENS`` tokens over a window giving ``tokens_per_s``."""
    spec = ScenarioSpec(scenario="concurrency", concurrency=users, tpot_ms=30.0, attainment=0.9,
                        requests=N)
    window = N * TOKENS / tokens_per_s
    recs = [
        RequestRecord(index=i, ok=True, output_tokens=TOKENS, prompt_tokens=8,
                      token_count_source="usage", scheduled_at=0.0, sent_at=0.0,
                      first_token_at=0.1, last_token_at=window, end_at=window,
                      ttft_ms=100.0 + i, tpot_ms=tpot_ms, e2e_ms=window * 1000)
        for i in range(N)
    ]
    return summarize(recs, spec, ClientHealth(valid=True, cpu_utilization=0.1),
                     load={"concurrency": float(users)})


def sweep_runs(table: dict[int, tuple[float, float]]) -> list[RunResult]:
    return [point_run(c, t, y) for c, (t, y) in table.items()]


def write_runs(path: Path, runs: list[RunResult]) -> Path:
    path.write_text("[" + ",".join(r.model_dump_json() for r in runs) + "]")
    return path


def session_doc(path: Path, runs: list[RunResult], keep_runs: bool = True) -> Path:
    from pytest_goodput.measure.frontier import pareto_frontier, point_from_result

    points = [point_from_result(r) for r in runs]
    sweep = Outcome(
        nodeid="tests/test_perf.py::test_sweep", scenario="sweep",
        frontier={"points": [p.model_dump(mode="json") for p in points],
                  "frontier": [p.model_dump(mode="json") for p in pareto_frontier(points)]},
    )
    other = Outcome(nodeid="tests/test_perf.py::test_server", scenario="server")
    doc = {"schema_version": 1, "tests": [
        {"outcome": other.model_dump(mode="json"), "runs": [runs[0].model_dump(mode="json")]},
        {"outcome": sweep.model_dump(mode="json"),
         "runs": [r.model_dump(mode="json") for r in runs] if keep_runs else []},
    ]}
    path.write_text(json.dumps(doc))
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["frontier", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def row(out: str, start: str, after: str = "") -> list[str]:
    """The cells of the table row beginning with ``start`` (split on runs of 2+ spaces), in
    the first table after the line holding ``after``."""
    import re

    lines = out.splitlines()
    first = next(i for i, ln in enumerate(lines) if after in ln) if after else 0
    line = next(ln for ln in lines[first:] if ln.startswith(start))
    return re.split(r"\s{2,}", line.strip())


# ------------------------------------------------------------------ table


def test_table_lists_points_frontier_and_best_under_slo(tmp_path: Path, capsys) -> None:
    code, out, err = run_cli(capsys, write_runs(tmp_path / "r.json", sweep_runs(BASE)))
    assert code == 0 and err == ""
    assert "5 points, 4 on the frontier" in out
    # TTFT P50 of 100..119 ms is the 10th smallest (nearest rank): 109
    assert row(out, "16 users") == ["16 users", "50", "800", "109", "20", "ok", "*"]
    assert row(out, "48 users") == ["48 users", "20", "900", "109", "50", "FAIL", "*"]
    assert row(out, "64 users") == ["64 users", "16.67", "850", "109", "60", "FAIL"]
    assert "max throughput under SLO: 800 tok/s at 16 users (50 tok/s/user)" in out
    # rows sorted by load
    loads = [ln.split()[0] for ln in out.splitlines() if " user" in ln and " at " not in ln]
    assert loads == ["1", "4", "16", "48", "64"]


def test_session_document_takes_sweep_tests_only(tmp_path: Path, capsys) -> None:
    code, out, _ = run_cli(capsys, session_doc(tmp_path / "s.json", sweep_runs(BASE)))
    assert code == 0
    assert "frontier of tests/test_perf.py::test_sweep" in out and "test_server" not in out


def test_session_document_with_stored_points_only(tmp_path: Path, capsys) -> None:
    code, out, _ = run_cli(capsys, session_doc(tmp_path / "s.json", sweep_runs(BASE), keep_runs=False))
    assert code == 0 and row(out, "4 users")[:3] == ["4 users", "80", "320"]


def test_single_run_result(tmp_path: Path, capsys) -> None:
    path = tmp_path / "one.json"
    path.write_text(point_run(4, 12.5, 320.0).model_dump_json())
    code, out, _ = run_cli(capsys, path)
    assert code == 0 and "1 points, 1 on the frontier" in out


# ------------------------------------------------------------------ comparison


EQUAL = "at equal load"


def baseline_file(path: Path, runs: list[RunResult], sessions: int) -> Path:
    """A stored baseline of the sweep, recorded ``sessions`` times (the default is 5)."""
    from pytest_goodput.judge.evidence import from_sweep_runs
    from pytest_goodput.schema.runs.session import Session, Sweep
    from pytest_goodput.schema.environment import Fingerprint
    from pytest_goodput.store import baseline as store

    ev = from_sweep_runs(runs)
    for _ in range(sessions):
        run = Session(recorded_at=store.now_iso(), environment=Fingerprint(), samples=ev.latest,
                      sweep=Sweep(frontier=ev.frontier or []))
        store.record(path, nodeid="tests/test_perf.py::test_sweep", spec=ev.spec.model_dump(mode="json"),
                     spec_hash=ev.spec_hash, run=run, existing=None)
    return path


def test_same_sweep_against_a_default_baseline_passes(tmp_path: Path, capsys) -> None:
    cur = write_runs(tmp_path / "cur.json", sweep_runs(BASE))
    base = baseline_file(tmp_path / "base.json", sweep_runs(BASE), sessions=5)
    code, out, _ = run_cli(capsys, cur, "--baseline", base)
    assert code == 0
    assert "at equal load, against 5 baseline session(s) (the verdict):" in out
    # identical sessions (s = 0, ν = 4) shrink the 1.5 % prior: var = 3·(0.015²·1.2)/7,
    # h = t(7, 0.99)·√var = 2.998 · 0.01076 = 0.0323 → [e^−h − 1, e^h − 1] = [−3.2 %, +3.3 %]
    assert row(out, "16 users", EQUAL)[1:4] == ["800", "800", "+0.0% [-3.2%, +3.3%]"]
    assert row(out, "16 users", EQUAL)[-1] == "✅ pass"
    assert "verdict: ✅ pass (worst at load" in out
    # the step lookup is shown, not the verdict
    assert "step lookup of the frontiers (newest baseline session; shown, not the verdict): " \
           "worst ratio 1.000" in out


def test_one_baseline_session_is_underpowered_and_fails_only_when_strict(tmp_path: Path, capsys) -> None:
    """One session: the machine prior alone (1.5 %, t with 3 df) cannot resolve 5 %."""
    cur = write_runs(tmp_path / "cur.json", sweep_runs(BASE))
    base = write_runs(tmp_path / "base.json", sweep_runs(BASE))
    code, out, _ = run_cli(capsys, cur, "--baseline", base)
    assert code == 0 and "verdict: 🔍 underpowered" in out
    assert "could only detect a worse change beyond 9.2%" in out
    code, out, _ = run_cli(capsys, cur, "--baseline", base, "--strict")
    assert code == 1 and "verdict: 🔍 underpowered" in out


def test_regression_at_high_load_exits_1(tmp_path: Path, capsys) -> None:
    cur = write_runs(tmp_path / "cur.json", sweep_runs(SLOWER))
    base = session_doc(tmp_path / "base.json", sweep_runs(BASE))
    code, out, _ = run_cli(capsys, cur, "--baseline", base)
    assert code == 1
    # equal load decides: -30 % at 16, 48 and 64 users; 1 and 4 users unchanged
    assert row(out, "16 users", EQUAL)[1:4] == ["800", "560", "-30.0% [-36.4%, -22.9%]"]
    assert row(out, "16 users", EQUAL)[-1] == "❌ regressed" and row(out, "64 users", EQUAL)[-1] == "❌ regressed"
    assert row(out, "1 user ", EQUAL)[-1] != "❌ regressed" and row(out, "4 users", EQUAL)[-1] != "❌ regressed"
    assert "verdict: ❌ regressed (worst at load 16 (throughput -30.0%) of 5 points" in out
    assert "3 regressed" in out
    # the step lookup is still shown
    assert row(out, ">= 50")[1:] == ["800 (16 users)", "560 (16 users)", "0.700"]


def test_tolerance_flag_changes_the_verdict(tmp_path: Path, capsys) -> None:
    cur = write_runs(tmp_path / "cur.json", sweep_runs(SLOWER))
    base = baseline_file(tmp_path / "base.json", sweep_runs(BASE), sessions=5)
    code, out, _ = run_cli(capsys, cur, "--baseline", base, "--tolerance", "0.35")
    assert code == 0 and "verdict: ✅ pass" in out and "tolerance 35%" in out


def test_baseline_store_file_and_directory_are_accepted(tmp_path: Path, capsys) -> None:
    base = baseline_file(tmp_path / "dir" / "base.json", sweep_runs(BASE), sessions=2)
    cur = write_runs(tmp_path / "cur.json", sweep_runs(SLOWER))
    for where in (base, base.parent):
        code, out, _ = run_cli(capsys, cur, "--baseline", where)
        assert code == 1 and "against baseline tests/test_perf.py::test_sweep" in out
        assert "against 2 baseline session(s)" in out


def test_another_sweep_is_incomparable_not_judged(tmp_path: Path, capsys) -> None:
    """A baseline of other loads is a different spec: the gate does not compare it."""
    other = {c: v for c, v in BASE.items() if c != 64}
    base = baseline_file(tmp_path / "base.json", sweep_runs(other), sessions=5)
    cur = write_runs(tmp_path / "cur.json", sweep_runs(SLOWER))
    code, out, _ = run_cli(capsys, cur, "--baseline", base)
    assert code == 0 and "incomparable: the scenario spec changed" in out
    code, _, _ = run_cli(capsys, cur, "--baseline", base, "--strict")
    assert code == 1


def test_comparison_needs_the_runs(tmp_path: Path, capsys) -> None:
    cur = write_runs(tmp_path / "cur.json", sweep_runs(SLOWER))
    base = session_doc(tmp_path / "s.json", sweep_runs(BASE), keep_runs=False)
    code, _, err = run_cli(capsys, cur, "--baseline", base)
    assert code == 2 and "has frontier points but no per-request runs" in err


# ------------------------------------------------------------------ plots


def test_plot_file_is_written(tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    cur = write_runs(tmp_path / "cur.json", sweep_runs(SLOWER))
    base = write_runs(tmp_path / "base.json", sweep_runs(BASE))
    out_svg = tmp_path / "plots" / "front.svg"
    code, out, _ = run_cli(capsys, cur, "--baseline", base, "--plot", out_svg)
    assert code == 1 and out_svg.read_text().lstrip().startswith("<?xml")
    assert f"plot written to {out_svg}" in out


def test_missing_matplotlib_is_a_notice_and_the_verdict_still_decides(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable(*a: object, **k: object) -> Path:
        raise plot_mod.PlotUnavailable("frontier plots need matplotlib: pip install x")

    monkeypatch.setattr(plot_mod, "plot_frontiers", unavailable)
    cur = write_runs(tmp_path / "cur.json", sweep_runs(SLOWER))
    base = write_runs(tmp_path / "base.json", sweep_runs(BASE))
    code, _, err = run_cli(capsys, cur, "--baseline", base, "--plot", tmp_path / "f.png")
    assert code == 1
    assert "notice: frontier plots need matplotlib: pip install x; no plot written" in err
    code, _, _ = run_cli(capsys, base, "--baseline", base, "--plot", tmp_path / "f.png")
    assert code == 0 and not (tmp_path / "f.png").exists()


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read results file {path}: No such file or directory"),
        ("{not json", "{path} is not a JSON results file (Expecting property name"),
        ('{"hello": 1}', "{path} is neither a --goodput-json session document"),
        ('[{"spec": {}}]', "{path}: item[0] is invalid at"),
        ('{"schema_version": 1, "tests": []}', "{path} holds no sweep results"),
    ],
)
def test_bad_files_exit_2_naming_the_file(tmp_path: Path, capsys, content, message) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    code, out, err = run_cli(capsys, path)
    assert code == 2 and out == ""
    assert f"error: {message.format(path=path)}" in err


def test_bad_baseline_file_names_it(tmp_path: Path, capsys) -> None:
    cur = write_runs(tmp_path / "cur.json", sweep_runs(BASE))
    code, _, err = run_cli(capsys, cur, "--baseline", tmp_path / "nope.json")
    assert code == 2 and f"cannot read results file {tmp_path / 'nope.json'}" in err


def test_bad_plot_extension_and_tolerance(tmp_path: Path, capsys) -> None:
    cur = write_runs(tmp_path / "cur.json", sweep_runs(BASE))
    code, _, err = run_cli(capsys, cur, "--plot", tmp_path / "f.pdf")
    assert code == 2 and "--plot must end in .svg or .png" in err
    code, _, err = run_cli(capsys, cur, "--tolerance", "1.5")
    assert code == 2 and "--tolerance must be a fraction" in err

"""``python -m pytest_goodput compare``: file formats, matching, exit codes."""

from __future__ import annotations

import json

import pytest

import sys
from pathlib import Path

from pytest_goodput.cli import main

sys.path.insert(0, str(Path(__file__).parent))

from closed_loop_results import result  # noqa: E402


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, scale, seed in (("a", 1.0, 1), ("a2", 1.0, 2), ("slow", 1.5, 3)):
        p = tmp_path / f"{name}.json"
        p.write_text(result(scale, seed).model_dump_json())
        paths[name] = str(p)
    return paths


def test_same_engine_passes_and_slower_regresses(files, tmp_path, capsys):
    assert main(["compare", files["a"], files["a2"]]) == 0
    report = tmp_path / "r.md"
    assert main(["compare", files["a"], files["slow"], "--report", str(report)]) == 1
    out = capsys.readouterr().out
    assert "regressed" in out and "output throughput" in out
    assert "regressed" in report.read_text()


def test_session_json_and_baseline_files_are_read(files, tmp_path):
    r = result(1.0, 5)
    doc = {"schema_version": 1, "tests": [{
        "outcome": {"nodeid": "t.py::x", "scenario": "concurrency"},
        "runs": [json.loads(r.model_dump_json())]}]}
    session = tmp_path / "session.json"
    session.write_text(json.dumps(doc))
    assert main(["compare", str(session), str(session)]) == 0


@pytest.mark.parametrize("content,needle", [
    ("{", "not valid JSON"),
    ('{"hello": 1}', "not a pytest-goodput baseline, session JSON"),
    ('{"spec": {"scenario": "nope"}, "requests": []}', "not a pytest-goodput file this version reads"),
])
def test_bad_files_exit_2_with_the_file_named(files, tmp_path, capsys, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["compare", files["a"], str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and needle in err


def test_a_blanket_tolerance_does_not_widen_the_error_rates_absolute_one(tmp_path, capsys):
    """``--tolerance 0.2`` is 20 % on relative metrics; on the error rate it would be 20
    percentage points, so the error rate keeps its own (0.5 point) tolerance."""
    from pytest_goodput.measure.metrics import summarize
    from pytest_goodput.schema.registry import tolerance_for
    from pytest_goodput.schema.scenario.spec import build_spec

    spec = build_spec({"scenario": "concurrency", "concurrency": 4, "requests": 400, "tolerance": 0.2})
    assert tolerance_for(spec, "error_rate", 0.3) == 0.005
    assert tolerance_for(spec, "goodput.requests_per_s", 0.3) == 0.2
    named = build_spec({"scenario": "concurrency", "concurrency": 4, "tolerances": {"error_rate": 0.1}})
    assert tolerance_for(named, "error_rate", 0.3) == 0.1

    base = result(1.0, 1)
    failing = result(1.0, 2)
    records = [r.model_copy(update={"ok": False, "error_kind": "http_status", "output_tokens": 0})
               if r.index % 20 == 0 else r for r in failing.requests]  # 20 of 400: 5 %
    current = summarize(records, failing.spec, failing.client, load={"concurrency": 4})
    a, b = tmp_path / "base.json", tmp_path / "cur.json"
    a.write_text(base.model_dump_json())
    b.write_text(current.model_dump_json())
    assert main(["compare", str(a), str(b), "--tolerance", "0.2"]) == 1
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.strip().startswith("error rate "))
    assert "regressed" in row, out


def _baseline_of_one_sitting(path, sessions: int = 5) -> str:
    """A stored baseline of ``sessions`` sessions recorded back to back on 2026-11-01."""
    from pytest_goodput.judge.evidence import samples_of
    from pytest_goodput.schema.runs.session import Session
    from pytest_goodput.schema.environment import Fingerprint
    from pytest_goodput.store import baseline as store

    for k in range(sessions):
        r = result(1.0, 10 + k)
        run = Session(recorded_at=f"2026-11-01T10:0{k}:00+00:00", environment=Fingerprint(),
                          samples=samples_of([r]))
        store.record(path, nodeid="run", spec=r.spec.model_dump(mode="json"),
                     spec_hash=r.spec.identity_hash(), run=run, existing=None)
    return str(path)


@pytest.mark.parametrize("measured_at,outside", [
    ("2026-12-01T09:00:00+00:00", True),    # a month later: outside the baseline's sitting
    ("2026-11-01T10:30:00+00:00", False),   # the same morning: inside it
    (None, False),                          # a run file without a time: judged as inside
])
def test_compare_places_a_run_file_in_or_outside_the_baselines_sitting(tmp_path, capsys, measured_at, outside):
    """``compare`` judges a run file as the gate judges the same run: the run's ``measured_at``
    says whether the between-sitting term applies (docs/statistics.md, "Sittings")."""
    base = _baseline_of_one_sitting(tmp_path / "base.json")
    cur = tmp_path / "cur.json"
    cur.write_text(result(1.0, 99).model_copy(update={"measured_at": measured_at}).model_dump_json())
    assert main(["compare", base, str(cur)]) == 0
    out = capsys.readouterr().out
    assert ("share one sitting and this run is not in it" in out) is outside

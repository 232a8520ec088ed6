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

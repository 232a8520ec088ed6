"""Baseline store: paths, validation, history, atomic writes."""

from __future__ import annotations

import json
import os

import pytest

from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.store import baseline as store


def run(hardware: str = "h100", ttft: float = 10.0) -> Session:
    return Session(
        recorded_at="2026-11-29T00:00:00+00:00",
        environment=Fingerprint(identity={"hardware": hardware, "model": "m", "scenario_hash": "x"},
                                provenance={"engine_version": "1"}),
        summary={"metrics.ttft_ms.p99": ttft},
        samples=[Samples(window_s=1.0, ok=[True], ttft_ms=[ttft], tpot_ms=[1.0], e2e_ms=[20.0],
                         output_tokens=[8], prompt_tokens=[16])],
    )


def test_path_for_is_readable_and_safe(tmp_path):
    p = store.path_for(tmp_path, "tests/perf/test_x.py::TestA::test_b[rate=4-chat]")
    assert p == tmp_path / "tests/perf/test_x/TestA.test_b[rate=4-chat].json"
    evil = store.path_for(tmp_path, "../../etc/test_x.py::test a/b")
    assert tmp_path in evil.parents and evil.name.startswith("test_a_b-")


def test_sanitised_names_never_collide(tmp_path):
    ids = ["t.py::test_m[meta-llama/Llama-3-8B]", "t.py::test_m[meta-llama_Llama-3-8B]",
           "t.py::test_m[a b]", "t.py::test_m[a:b]", "t.py::test_" + "x" * 200, "t.py::test_" + "x" * 201]
    paths = {store.path_for(tmp_path, i) for i in ids}
    assert len(paths) == len(ids)


def test_a_baseline_of_another_test_is_an_error(tmp_path):
    path = tmp_path / "b.json"
    store.record(path, nodeid="t.py::a", spec={}, spec_hash="h", run=run(), existing=None)
    assert store.load(path, "t.py::a") is not None
    with pytest.raises(store.BaselineError, match="belongs to 't.py::a', not 't.py::b'"):
        store.load(path, "t.py::b")


def test_round_trip_and_history(tmp_path):
    path = tmp_path / "b.json"
    assert store.load(path) is None
    doc = None
    for i in range(7):
        doc = store.record(path, nodeid="t.py::t", spec={"rate": 1}, spec_hash="x",
                           run=run(ttft=float(i)), existing=doc, history=5)
    loaded = store.load(path)
    assert loaded is not None and len(loaded.sessions) == 5
    assert [r.summary["metrics.ttft_ms.p99"] for r in loaded.sessions] == [2.0, 3.0, 4.0, 5.0, 6.0]
    # a new identity (other hardware) or a new spec starts a fresh history
    doc = store.record(path, nodeid="t.py::t", spec={"rate": 1}, spec_hash="x",
                       run=run(hardware="a100"), existing=loaded)
    assert len(doc.sessions) == 1
    doc = store.record(path, nodeid="t.py::t", spec={"rate": 2}, spec_hash="y", run=run(), existing=doc)
    assert len(store.load(path).sessions) == 1 and store.load(path).spec_hash == "y"


@pytest.mark.parametrize(
    "content,needle",
    [
        ("{oops", "is not valid JSON"),
        ("[]", "is not a pytest-goodput baseline"),
        ('{"kind": "pytest-goodput-baseline", "schema_version": 0}', "schema_version 0"),
        ('{"kind": "pytest-goodput-baseline", "schema_version": 1, "nodeid": 3}', "is invalid at"),
    ],
)
def test_bad_files_are_named_errors(tmp_path, content, needle):
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(store.BaselineError) as ei:
        store.load(path)
    assert str(path) in str(ei.value) and needle in str(ei.value)


def test_interrupted_write_leaves_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "b.json"
    store.write_atomic(path, '{"old": true}')

    def crash(src, dst):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        store.write_atomic(path, '{"new": true}')
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]  # no temp file left behind


def test_find_all_skips_foreign_files(tmp_path):
    store.record(tmp_path / "a/x.json", nodeid="a.py::x", spec={}, spec_hash="h", run=run(), existing=None)
    (tmp_path / "a/other.json").write_text('{"foo": 1}')
    (tmp_path / "a/broken.json").write_text("{")
    assert store.find_all(tmp_path) == {"a.py::x": tmp_path / "a/x.json"}


def test_committed_example_baselines_stay_comparable():
    """A change to the spec schema must not silently orphan users' baselines."""
    from pathlib import Path

    from pytest_goodput.schema.scenario.spec import ScenarioSpec

    root = Path(__file__).resolve().parent.parent / "example_suite" / "baselines"
    files = sorted(root.rglob("*.json"))
    tests = sum(p.read_text().count("\ndef test_") for p in root.parent.glob("test_*.py"))
    assert len(files) == tests >= 7  # one baseline per example test
    for p in files:
        doc = store.load(p)
        spec = ScenarioSpec.model_validate(doc.spec)
        assert spec.identity_hash() == doc.spec_hash, p
        assert all(r.environment.identity["scenario_hash"] == doc.spec_hash for r in doc.sessions)
        assert len(doc.sessions) >= 3, "keep a history so the gate knows the run-to-run spread"


def test_identity_ignores_new_fields_at_default_and_gate_settings():
    from pytest_goodput.schema.scenario.spec import build_spec

    a = build_spec({"rate": 5, "ttft_ms": 100})
    assert a.identity() == {"scenario": "server", "rate": 5.0, "requests": 200, "ttft_ms": 100.0}
    b = build_spec({"rate": 5, "ttft_ms": 100, "max_error_rate": 0.1, "workers": 2, "tolerance": 0.2})
    assert a.identity_hash() == b.identity_hash()


def test_an_older_session_keeps_its_own_numbers_not_the_engines_view():
    """Only the newest stored session keeps the engine's clocks and gauges (the report shows the
    newest's); the acceptance rate, judged per session, stays on every one."""
    from pytest_goodput.run.engine_view import without_server_view
    from pytest_goodput.schema.runs.session import Session

    s = Session(summary={"metrics.ttft_ms.p50": 12.0, "server.engine_ttft_mean_ms": 10.0,
                         "server.running_max": 4.0, "server.spec_decode_acceptance_rate": 0.7})
    assert without_server_view(s).summary == {"metrics.ttft_ms.p50": 12.0,
                                              "server.spec_decode_acceptance_rate": 0.7}
    plain = Session(summary={"metrics.ttft_ms.p50": 12.0})
    assert without_server_view(plain) is plain

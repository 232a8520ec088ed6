"""The baseline format: a small reviewable JSON and a compressed samples file it names by digest."""

from __future__ import annotations

import difflib
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.store import baseline as store

ROOT = Path(__file__).resolve().parent.parent
ENV = Fingerprint(identity={"hardware": "h100", "model": "m", "scenario_hash": "x"},
                  provenance={"engine_version": "1"})


def samples(shift: float = 0.0, n: int = 40) -> Samples:
    """A run without reasoning: TTFO is TTFT, the answer's TPOT is the TPOT, no reasoning TPOT."""
    ttft = [10.0 + shift + i * 0.1234567 for i in range(n)]
    tpot = [1.0 + shift + i * 0.001 for i in range(n)]
    return Samples(window_s=2.5, ok=[True] * (n - 1) + [False], good=[True] * n,
                   ttft_ms=ttft[:-1] + [None], tpot_ms=tpot[:-1] + [None],
                   e2e_ms=[50.0 + i for i in range(n - 1)] + [None], output_tokens=[8] * (n - 1) + [0],
                   prompt_tokens=[16] * n, ttfo_ms=ttft[:-1] + [None], reasoning_tokens=[0] * n,
                   reasoning_tpot_ms=[None] * n, answer_tpot_ms=tpot[:-1] + [None])


def session(k: int) -> Session:
    return Session(recorded_at=f"2026-12-0{k + 1}T00:00:00+00:00", environment=ENV,
                   summary={"metrics.ttft_ms.p99": 10.0 + k, "metrics.tpot_ms.p50": 1.0 + k / 100},
                   samples=[samples(k / 10)])


def record(path: Path, k: int) -> store.BaselineFile:
    return store.record(path, nodeid="t.py::t", spec={"rate": 1}, spec_hash="x", run=session(k),
                        existing=None, history=5)


def as_stored(k: int) -> list[Samples]:
    """Session ``k``'s samples as any baseline keeps them (milliseconds to 0.1 µs)."""
    return [Samples.model_validate(s.model_dump(mode="json")) for s in session(k).samples]


def samples_files(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.stem}.*.samples.json.gz"))


def test_every_sample_reads_back_exactly_and_repeated_columns_are_stored_once(tmp_path):
    path = tmp_path / "t.json"
    for k in range(3):
        record(path, k)
    doc = store.load(path)
    assert doc is not None and [s.samples for s in doc.sessions] == [as_stored(k) for k in range(3)]
    # rounded as stored: 0.1 µs, far below any clock's noise
    assert doc.sessions[0].samples[0].ttft_ms[1] == round(10.0 + 0.1234567, 4)
    [file] = samples_files(path)
    stored = json.loads(gzip.decompress(file.read_bytes()))
    run = stored["sessions"][0][0]
    assert run["same"] == {"ttfo_ms": "ttft_ms", "answer_tpot_ms": "tpot_ms"}
    assert run["null"] == ["reasoning_tpot_ms"]
    assert not {"ttfo_ms", "answer_tpot_ms", "reasoning_tpot_ms", "ttft_later_ms"} & set(run)
    # the JSON names the samples file and keeps no sample
    data = json.loads(path.read_text())
    assert data["schema_version"] == 2 and data["samples"]["file"] == file.name
    assert all("samples" not in s for s in data["sessions"])


def test_a_re_record_is_a_readable_diff_and_leaves_one_samples_file(tmp_path):
    path = tmp_path / "t.json"
    for k in range(5):
        record(path, k)
    before = path.read_text().splitlines()
    old = samples_files(path)
    record(path, 5)
    after = path.read_text().splitlines()
    changed = [line for line in difflib.unified_diff(before, after, lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    # the oldest session out, the newest in, the samples file's name and digest: no more
    assert len(changed) < 2 * len(after) / 3 and len(changed) <= 50, changed
    summary = [line for line in after if "metrics.ttft_ms.p99" in line]
    assert len(summary) == 5 and all(line.strip().startswith('"metrics.ttft_ms.p99": ') for line in summary)
    assert samples_files(path) != old and len(samples_files(path)) == 1


def test_a_version_1_baseline_reads_and_is_rewritten_on_the_next_record(tmp_path):
    path = tmp_path / "t.json"
    first = session(0)
    v1 = {"kind": "pytest-goodput-baseline", "schema_version": 1, "nodeid": "t.py::t",
          "spec": {"rate": 1}, "spec_hash": "x",
          "runs": [{"recorded_at": first.recorded_at, "environment": ENV.model_dump(mode="json"),
                    "summary": first.summary, "samples": [s.model_dump(mode="json") for s in first.samples],
                    "frontier": None, "capacity": None}]}
    path.write_text(json.dumps(v1, indent=1))
    doc = store.load(path)
    assert doc is not None and doc.sessions[0].samples == as_stored(0)
    assert doc.sessions[0].summary == first.summary
    record(path, 1)
    assert json.loads(path.read_text())["schema_version"] == 2 and len(samples_files(path)) == 1
    again = store.load(path)
    assert again is not None and [s.samples for s in again.sessions] == [as_stored(0), as_stored(1)]


def test_a_samples_file_that_is_not_the_pair_of_its_json_is_a_named_error(tmp_path):
    path = tmp_path / "t.json"
    record(path, 0)
    [file] = samples_files(path)
    other = tmp_path / "o.json"
    record(other, 1)
    file.write_bytes(samples_files(other)[0].read_bytes())  # another write's samples
    with pytest.raises(store.BaselineError, match="is not the one baseline .* was written with"):
        store.load(path)
    file.unlink()
    with pytest.raises(store.BaselineError, match=f"{file.name}: No such file"):
        store.load(path)


def test_compare_reads_both_versions_to_the_same_outcome(tmp_path):
    """The CLI on a version-1 file and on its version-2 rewrite: the same verdicts, byte for byte."""
    v2 = tmp_path / "v2" / "t.json"
    for k in range(3):
        record(v2, k)
    doc = store.load(v2)
    assert doc is not None
    v1 = tmp_path / "v1" / "t.json"
    v1.parent.mkdir()
    v1.write_text(json.dumps({
        "kind": "pytest-goodput-baseline", "schema_version": 1, "nodeid": doc.nodeid, "spec": doc.spec,
        "spec_hash": doc.spec_hash,
        "runs": [{"recorded_at": s.recorded_at, "environment": ENV.model_dump(mode="json"),
                  "summary": s.summary, "samples": [x.model_dump(mode="json") for x in s.samples]}
                 for s in doc.sessions]}))
    spec = {"scenario": "server", "rate": 1.0, "requests": 40}
    for p in (v1, v2):  # a spec the CLI can read, the same in both
        data = json.loads(p.read_text())
        data["spec"] = spec
        p.write_text(json.dumps(data))
    outs = []
    for p in (v1, v2):
        out = tmp_path / f"{p.parent.name}.json"
        res = subprocess.run([sys.executable, "-m", "pytest_goodput", "compare", str(p), str(p),
                              "--json", str(out)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    assert json.loads(outs[1])["outcomes"][0]["baseline_status"] == "compared"


def test_the_committed_example_baselines_are_small():
    """The README's gate at five sessions: a JSON to review, its samples compressed beside it."""
    files = sorted((ROOT / "example_suite" / "baselines").rglob("*.json"))
    assert files
    for p in files:
        doc = store.load(p)
        assert doc is not None and len(doc.sessions) == 5
        assert p.stat().st_size <= 16 * 1024, p
        [file] = samples_files(p)
        assert file.stat().st_size <= 64 * 1024, file


def test_a_re_record_removes_only_its_own_older_samples(tmp_path):
    """``TestA.test_b`` and ``TestA.test_b[p]`` share a directory and a name prefix."""
    plain = store.path_for(tmp_path, "t.py::TestA::test_b")
    param = store.path_for(tmp_path, "t.py::TestA::test_b[rate=4]")
    for k in range(3):
        record(plain, k)
        record(param, k + 1)
    assert len(samples_files(plain)) == 1 and store.load(plain) is not None
    assert len(list(tmp_path.glob("**/TestA.test_b[[]rate=4].*.samples.json.gz"))) == 1
    assert store.load(param) is not None


def test_a_fresh_session_is_stored_byte_for_byte_as_its_stored_fields(tmp_path):
    """What a fresh session carries beyond the stored fields (its spec, runs, notes, what
    keeping it valid took) never reaches a baseline file: it is written as the same session
    without them."""
    from pytest_goodput.measure.metrics import summarize
    from pytest_goodput.schema.runs.results import ClientHealth
    from pytest_goodput.schema.scenario.spec import build_spec

    spec = build_spec({"scenario": "offline", "requests": 1})
    run = summarize([], spec, ClientHealth(valid=True, cpu_utilization=0.1))
    fresh = session(0).model_copy(update={"spec": spec, "results": [run], "notes": ["re-measured"],
                                          "provenance": {"remeasured": "send lag"}})
    plain, full = tmp_path / "plain" / "t.json", tmp_path / "full" / "t.json"
    for path, s in ((plain, session(0)), (full, fresh)):
        store.record(path, nodeid="t.py::t", spec={"rate": 1}, spec_hash="x", run=s, existing=None, history=5)
    assert full.read_bytes() == plain.read_bytes()
    assert [f.read_bytes() for f in samples_files(full)] == [f.read_bytes() for f in samples_files(plain)]
    assert fresh.model_dump() == session(0).model_dump()

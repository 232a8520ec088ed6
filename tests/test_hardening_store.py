"""Damaged baseline files and concurrent recorders, as users meet them.

A non-UTF-8 file in the baseline directory, a baseline whose sample columns disagree, and
several ``--goodput-update-baseline`` runs on one directory at once.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import multiprocessing
import subprocess
import sys

import pytest

import fake_selfcheck

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# and exception classes (httpx) must not be loaded twice, so the plugin's lazily loaded
# core is imported before any pytester run.
import pytest_goodput.load.coordinator  # noqa: E402,F401
import pytest_goodput.plugin.harness  # noqa: E402,F401
import pytest_goodput.plugin.session  # noqa: E402,F401
import pytest_goodput.report.files  # noqa: E402,F401

import pytest_goodput.judge.scalar.verdicts  # noqa: F401  (pytester: import C-extension users once)
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.report.github  # noqa: F401
import pytest_goodput.report.md.markdown  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.store import baseline as store

pytest_plugins = ["pytester"]

NODEID = "t.py::t"


def run(ttft: float = 10.0, n: int = 3) -> Session:
    return Session(
        recorded_at="2026-11-29T00:00:00+00:00",
        environment=Fingerprint(identity={"hardware": "h100", "model": "m", "scenario_hash": "x"},
                                provenance={"engine_version": "1"}),
        summary={"metrics.ttft_ms.p99": ttft},
        samples=[Samples(window_s=1.0, ok=[True] * n, ttft_ms=[ttft] * n, tpot_ms=[1.0] * n,
                         e2e_ms=[20.0] * n, output_tokens=[8] * n, prompt_tokens=[16] * n)],
    )


def damage(path, change) -> None:
    """Change the first run's sample columns in the baseline's samples file (``change`` edits
    the columns dict in place) and name the new file in the JSON: damage, not a mismatched pair."""
    data = json.loads(path.read_text())
    old = path.parent / data["samples"]["file"]
    doc = json.loads(gzip.decompress(old.read_bytes()))
    change(doc["sessions"][0][0])
    raw = gzip.compress(json.dumps(doc).encode())
    old.write_bytes(raw)
    data["samples"]["sha256"] = hashlib.sha256(raw).hexdigest()
    path.write_text(json.dumps(data))


def _append(args: tuple[str, int]) -> None:
    path, i = args
    from pathlib import Path
    # Every writer read the file before any of them wrote: the stale ``existing`` must not win.
    store.record(Path(path), nodeid=NODEID, spec={"rate": 1}, spec_hash="x",
                 run=run(ttft=float(i)), existing=None, history=100)


def test_concurrent_recorders_keep_every_run(tmp_path):
    path = tmp_path / "b" / "t.json"
    writers = 24
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(8) as pool:
        pool.map(_append, [(str(path), i) for i in range(writers)], chunksize=1)
    doc = store.load(path, NODEID)
    assert doc is not None
    assert sorted(r.summary["metrics.ttft_ms.p99"] for r in doc.sessions) == [float(i) for i in range(writers)]


def test_concurrent_recorders_respect_the_history_limit(tmp_path):
    path = tmp_path / "t.json"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_limited, args=(str(path), i)) for i in range(12)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    doc = store.load(path, NODEID)
    assert doc is not None and len(doc.sessions) == 5


def _limited(path: str, i: int) -> None:
    from pathlib import Path
    store.record(Path(path), nodeid=NODEID, spec={"rate": 1}, spec_hash="x",
                 run=run(ttft=float(i)), existing=None, history=5)


def _bad_columns(tmp_path):
    path = tmp_path / "base" / "t.json"
    store.record(path, nodeid=NODEID, spec={"rate": 1}, spec_hash="x", run=run(), existing=None)
    damage(path, lambda c: c.update(tpot_ms=[1.0]))  # 1 value for 3 requests
    return path


def test_unequal_sample_columns_are_a_named_error(tmp_path):
    path = _bad_columns(tmp_path)
    with pytest.raises(store.BaselineError) as ei:
        store.load(path)
    msg = str(ei.value)
    assert str(path) in msg and "tpot_ms" in msg and "1 values for 3 requests" in msg


def test_compare_of_a_damaged_baseline_exits_2_naming_file_and_column(tmp_path):
    path = _bad_columns(tmp_path)
    for target in (path, path.parent):
        res = subprocess.run([sys.executable, "-m", "pytest_goodput", "compare", str(target), str(target)],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, res.stdout + res.stderr
        assert str(path) in res.stderr and "tpot_ms" in res.stderr
        assert "Traceback" not in res.stderr


def test_non_utf8_baseline_is_a_named_error(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"kind": "\xff\xfe"}')
    with pytest.raises(store.BaselineError, match="is not UTF-8"):
        store.load(path)
    assert store.find_all(tmp_path) == {}


def test_non_utf8_json_in_the_baseline_directory_does_not_break_a_passing_run(pytester, sim_url, monkeypatch):
    # What is decided is that a junk file breaks nothing, not the client's pace: the self-check
    # passes (in-process sessions), and the gate is goodput alone (an open loop's goodput under
    # SLOs no request misses is the schedule's rate), so both sessions pass on a busy machine
    # too: the default gate's TTFT P90 of about 10 ms moved +16 % client-side beside neighbours.
    fake_selfcheck.install(monkeypatch)
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="server", requests=20, rate=40.0, isl=16, osl=8, tpot_ms=1000,
                     ttft_ms=5000, attainment=0.9, gate=["goodput.requests_per_s"])
def test_server():
    pass
""")
    junk = pytester.path / ".goodput/baselines/other/junk.json"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"\xff\xfe\x00garbage")
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline").assert_outcomes(passed=1)
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline")
    # The end-of-run summary lists the baselines: it ran, with the junk file in the directory.
    res.stdout.fnmatch_lines(["*goodput: 1 test - 1 *"])
    res.assert_outcomes(passed=1)
    assert "Traceback" not in res.stdout.str() + res.stderr.str()
    assert "INTERNALERROR" not in res.stdout.str() + res.stderr.str()


def test_damaged_baseline_fails_the_test_by_name(pytester, sim_url):
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="server", requests=20, rate=40.0, isl=16, osl=8)
def test_server():
    pass
""")
    # One session: the damage is in the file, whatever the noise.
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                       "--goodput-sessions=1").assert_outcomes(passed=1)
    base = pytester.path / ".goodput/baselines/test_perf/test_server.json"
    damage(base, lambda c: c.update(ok=c["ok"][:-1]))
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline")
    out = res.stdout.str() + res.stderr.str()
    assert res.ret != 0 and "INTERNALERROR" not in out
    assert "test_server.json" in out and "(the length of ok)" in out


def test_written_files_are_readable_by_others(tmp_path):
    """Baselines and reports get the mode a plain open() would give, not mkstemp's 0600."""
    import os
    import stat

    from pytest_goodput.store.files import write_atomic

    old = os.umask(0o022)
    try:
        target = tmp_path / "b.json"
        write_atomic(target, "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


@pytest.mark.parametrize("column, value, words", [
    ("ttft_ms", 1e300, "1e+300 is not a measured value"),  # overflowed the comparison
    ("e2e_ms", float("nan"), "nan is not a measured value"),
    ("output_tokens", -3, "-3 is not a measured value"),
    ("window_s", 0, "0.0 is not a window"),
])
def test_impossible_sample_values_are_a_named_error(tmp_path, column, value, words):
    path = tmp_path / "t.json"
    store.record(path, nodeid=NODEID, spec={"rate": 1}, spec_hash="x", run=run(), existing=None)
    # json writes NaN as NaN, and reads it back
    damage(path, lambda c: c.update({column: value if column == "window_s" else [c[column][0]] * 2 + [value]}))
    with pytest.raises(store.BaselineError) as ei:
        store.load(path)
    assert str(path) in str(ei.value) and f"samples.0.{column}: {words}" in str(ei.value)


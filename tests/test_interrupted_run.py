"""Ctrl-C at half a run leaves its evidence: the requests done so far and why it stopped,
marked interrupted, in the JSON and the reports; never a baseline.

As users meet it: ``python -m pytest_goodput run ... --json`` and ``pytest --goodput-json``
in a subprocess against a simulator started here, sent SIGINT once the engine has generated
tokens (the run is under way, far from its end: 200 requests at 20 req/s are 10 s of load).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions such as
# numpy cannot be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.run.gating  # noqa: F401
from pytest_goodput.engines.engine import Engine, simulator
from pytest_goodput.load.pools import RunStopped
from pytest_goodput.plugin import harness as harness_mod
from pytest_goodput.schema.runs.results import Interrupted

pytest_plugins = ["pytester"]

LOAD = ["--scenario", "server", "--rate", "20", "--requests", "200", "--warmup", "0", "--isl", "16", "--osl", "8"]


@pytest.fixture
def sim() -> Iterator[Engine]:
    with simulator() as engine:
        yield engine


def generated(engine: Engine) -> float:
    text = httpx.get(engine.base_url.removesuffix("/v1") + "/metrics", timeout=5).text
    found = re.search(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def interrupted(argv: list[str], engine: Engine, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``argv``; SIGINT once the engine generated 80 tokens of the run (about 10 requests)."""
    before = generated(engine)
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while generated(engine) - before < 80 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_ctrl_c_at_half_a_cli_run_writes_the_partial_json_marked_interrupted(sim: Engine, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "pytest_goodput", "run", "--url", sim.base_url, *LOAD, "--json", "out.json"]
    proc = interrupted(argv, sim, tmp_path)
    assert proc.returncode == 130, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "out.json").read_text())
    stop = doc["interrupted"]
    assert stop["reason"] == "interrupted (Ctrl-C)" and stop["planned"] == 200
    assert 0 < stop["done"] < 200 and stop["unfinished"] == 200 - stop["done"]
    assert len(doc["requests"]) == doc["issued"] == stop["done"]  # the requests done, each kept
    assert "PARTIAL RESULT" in proc.stdout and f"{stop['done']} of 200 requests done" in proc.stdout
    assert "interrupted: partial result written to out.json" in proc.stderr


TEST = """
import pytest

@pytest.mark.goodput(scenario="server", rate=20, requests=200, warmup_requests=0, isl=16, osl=8)
def test_slow():
    pass
"""


def test_ctrl_c_mid_recording_reports_the_partial_run_and_writes_no_baseline(sim: Engine, tmp_path: Path) -> None:
    (tmp_path / "test_slow.py").write_text(TEST)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_slow.py", f"--goodput-url={sim.base_url}",
            "--goodput-update-baseline", "--goodput-sessions=1", "--goodput-json=out.json", "--goodput-report=r.md"]
    proc = interrupted(argv, sim, tmp_path)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, proc.stdout[-3000:]
    test = json.loads((tmp_path / "out.json").read_text())["tests"][0]
    stop = test["runs"][0]["interrupted"]
    assert stop["reason"] == "interrupted (Ctrl-C)" and 0 < stop["done"] < 200
    said = f"interrupted (Ctrl-C): {stop['done']} of 200 requests done, {200 - stop['done']} unfinished"
    assert test["outcome"]["interrupted"] == said
    assert test["outcome"]["error"] == f"{said}: a partial result, not judged, no baseline written"
    assert said in proc.stdout and said in (tmp_path / "r.md").read_text()
    assert not (tmp_path / ".goodput").exists()  # no baseline, no history


def test_a_run_stopped_by_a_worker_out_of_time_fails_its_test_with_the_partial_run(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The load engine's stop (``RunStopped``, tested in tests/test_event_loop_sigint.py) as the
    plugin meets it: planted on a real measurement, whose last run is marked as the stop left it."""
    real = harness_mod.measure
    why = "stopped: load generator worker 1 of 1 (in this process) did not finish within 31 s"

    def stopped(spec, engine, progress=None, stage=None):  # type: ignore[no-untyped-def]
        m = real(spec, engine, progress=progress, stage=stage)
        done = len(m.results[-1].requests)
        m.results[-1] = m.results[-1].model_copy(update={"interrupted": Interrupted(
            reason=why, planned=done + 4, done=done, unfinished=4)})
        raise RunStopped(why, m)
    monkeypatch.setattr(harness_mod, "measure", stopped)
    pytester.makepyfile(test_slow="""
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=6, warmup_requests=0, isl=16, osl=4)
def test_slow():
    pass
""")
    res = pytester.runpytest("--goodput-update-baseline", "--goodput-sessions=1", "--goodput-json=out.json")
    res.assert_outcomes(failed=1)
    said = f"{why}: 6 of 10 requests done, 4 unfinished"
    res.stdout.fnmatch_lines([f"*pytest-goodput: {said}: a partial result, not judged, no baseline written*"])
    test = json.loads((pytester.path / "out.json").read_text())["tests"][0]
    assert test["outcome"]["interrupted"] == said and test["runs"][0]["interrupted"]["done"] == 6
    assert not (pytester.path / ".goodput/baselines").exists()

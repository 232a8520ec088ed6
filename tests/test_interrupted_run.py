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

from pytest_goodput.engines.engine import Engine, simulator

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

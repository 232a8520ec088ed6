"""What a recording costs in engine launches: one per session for the whole suite.

``--goodput-update-baseline`` records ``--goodput-sessions`` sessions; each session of a
launched engine is one launch, shared by every goodput test (plugin/recording.py). The
launches are counted by the engine handles and reported in the JSON document and the
terminal summary; these tests hold the reported count against the processes the serve
command actually started (each start appends a line to a file).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

THREE = '''
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=6, warmup_requests=1, isl=16, osl=4)
def test_a():
    pass

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=6, warmup_requests=1, isl=16, osl=6)
def test_b():
    pass

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=6, warmup_requests=1, isl=16, osl=8)
def test_c():
    pass
'''


def counted(serve: str, starts: Path) -> str:
    """``serve``, run by a shell that first appends a line to ``starts``: one line a process."""
    return shlex.join(["sh", "-c", f"echo started >> {shlex.quote(str(starts))}; exec {serve}"])


def record(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp / "test_three.py").write_text(THREE)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_three.py",
                           "--goodput-update-baseline", "--goodput-json=out.json", *args],
                          cwd=tmp, capture_output=True, text=True, timeout=300, check=False)
    assert (tmp / "out.json").is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads((tmp / "out.json").read_text())


def runs_recorded(tmp: Path) -> dict[str, int]:
    return {p.stem: len(json.loads(p.read_text())["sessions"])
            for p in (tmp / ".goodput/baselines/test_three").glob("*.json")}


def test_three_tests_three_sessions_cost_three_launches(tmp_path: Path) -> None:
    """Per test it was 1 + 3 × (3 − 1) = 7 starts; session-major it is 3."""
    starts = tmp_path / "starts.log"
    sim = f"{shlex.quote(sys.executable)} -m pytest_goodput sim --port {{port}}"
    proc, doc = record(tmp_path, "--goodput-sessions=3", f"--goodput-serve={counted(sim, starts)}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(starts.read_text().splitlines()) == 3
    assert doc["engines"]["launches"] == 3 and doc["engines"]["tests"] == 3
    assert [t["outcome"]["cost"]["launches"] for t in doc["tests"]] == [3, 3, 3]
    assert runs_recorded(tmp_path) == {"test_a": 3, "test_b": 3, "test_c": 3}
    assert "cost: 3 engine launches (" in proc.stdout
    assert "goodput: recording session 2 of 3: 3 test(s) on one engine launch" in proc.stdout


def test_an_attached_engine_is_never_relaunched_and_says_so(tmp_path: Path) -> None:
    from pytest_goodput.engines.engine import simulator

    with simulator() as sim:
        proc, doc = record(tmp_path, "--goodput-sessions=2", f"--goodput-url={sim.base_url}")
        pid = sim.pid
        assert sim.launches == 1 and sim.running and pid is not None
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert doc["engines"]["launches"] == 0
    assert [t["outcome"]["cost"]["launches"] for t in doc["tests"]] == [0, 0, 0]
    assert runs_recorded(tmp_path) == {"test_a": 2, "test_b": 2, "test_c": 2}
    for t in doc["tests"]:
        assert any("share one engine process" in n for n in t["outcome"]["notes"]), t["outcome"]["notes"]


@pytest.mark.llamacpp
def test_llamacpp_suite_records_on_one_launch_per_session(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp", reason="needs the llamacpp extra")
    pytest.importorskip("gguf", reason="needs the llamacpp extra")
    from pytest_goodput.engines.tinyllama import write_tiny_llama

    model = write_tiny_llama(tmp_path / "tiny.gguf")
    starts = tmp_path / "starts.log"
    serve = shlex.join(["nice", "-n", "10", sys.executable, "-m", "pytest_goodput.engines.llamacpp_server",
                        "--model", model, "--port", "{port}", "--parallel", "2", "--threads", "1"])
    proc, doc = record(tmp_path, "--goodput-sessions=2", f"--goodput-serve={counted(serve, starts)}")
    assert len(starts.read_text().splitlines()) == 2  # per test: 1 + 3 × 1 = 4
    assert doc["engines"]["launches"] == 2
    assert [t["outcome"]["cost"]["launches"] for t in doc["tests"]] == [2, 2, 2]
    assert "cost: 2 engine launches (" in proc.stdout

"""``python -m pytest_goodput run --slice-duration S`` as users meet it: a subprocess against the
embedded simulator, and a bad value refused with exit status 2 and no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_run_prints_and_writes_the_slices(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    res = cli("run", "--scenario", "concurrency", "--concurrency", "8", "--requests", "160",
              "--isl", "16", "--osl", "16", "--slice-duration", "0.4", "--json", str(out))
    assert res.returncode == 0, res.stderr  # the self-check is forced valid in the processes tests start
    assert "time slices: " in res.stdout and " x 0.4 s, " in res.stdout
    assert "out tok/s" in res.stdout and "TPOT p50" in res.stdout
    data = json.loads(out.read_text())
    slices = data["slices"]
    assert slices["slice_s"] == 0.4 and len(slices["slices"]) >= 4
    assert sum(s["completed"] for s in slices["slices"]) <= data["completed"]
    assert "Traceback" not in res.stderr


def test_a_bad_slice_duration_is_a_usage_error() -> None:
    res = cli("run", "--scenario", "concurrency", "--concurrency", "2", "--slice-duration", "0")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "slice_s: Input should be greater than 0" in res.stderr and "Traceback" not in res.stderr
    res = cli("run", "--slice-duration", "soon")
    assert res.returncode == 2 and "--slice-duration: invalid float value: 'soon'" in res.stderr

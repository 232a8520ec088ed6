"""``python -m pytest_goodput ab`` end to end, against two simulators (docs/ab.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

SMALL = ["--scenario", "concurrency", "--concurrency", "4", "--requests", "40",
         "--isl", "32", "--osl", "16", "--seed", "1"]


def ab(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", "ab", *args],
                          check=False, capture_output=True, text=True, timeout=timeout)


def test_the_same_simulator_on_both_sides_passes(tmp_path: Path) -> None:
    out = tmp_path / "ab.json"
    p = ab(*SMALL, "--max-rounds", "4", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads(out.read_text())
    verdicts = {c["metric"]: c["verdict"] for c in result["comparisons"]}
    # A/A: nothing regressed; the steady median passes (a busy machine may widen an
    # interval beyond the tolerance: underpowered, never a false regression).
    assert "regressed" not in verdicts.values()
    steady = (verdicts["throughput.output_tokens_per_s"], verdicts["metrics.tpot_ms.p50"])
    assert "pass" in steady and set(steady) <= {"pass", "underpowered"}
    assert result["rounds_used"] + result["rounds_dropped"] <= 4
    assert re.search(r"after \d rounds \(ABBA order, seed 1\)", p.stdout)


def test_a_slowed_head_is_a_regression() -> None:
    p = ab(*SMALL, "--head-sim", "slowdown=1.3", "--max-rounds", "4")
    assert p.returncode == 1, p.stdout + p.stderr
    rows = {line.split("  ")[0]: line for line in p.stdout.splitlines()}
    assert "regressed" in rows["TPOT P50 (ms)"], p.stdout  # +30 %: decided at the first look
    assert re.search(r"decided after [34] rounds \(ABBA order, seed 1\): .*metrics\.tpot_ms\.p50", p.stdout)


@pytest.mark.parametrize("args,message", [
    (["--head-sim", "slowdown"], "error: --head-sim: 'slowdown' is not knob=value"),
    (["--head-sim", "warp=2"], "error: --head-sim: unknown simulator knob(s): warp"),
    (["--min-rounds", "1"], "error: --min-rounds: 1 is too few"),
    (["--base-url", "http://127.0.0.1:9", "--base-sim", "slowdown=1"], "exclude each other"),
    (["--scenario", "sweep", "--sweep", "1,2"], "A/B mode compares single-load scenarios"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    ([*SMALL, "--engine-cpus", "x"], "error: --engine-cpus: 'x' is not a CPU number or range"),
    ([*SMALL, "--base-url", "http://127.0.0.1:9", "--engine-cpus", "0"],
     "error: --engine-cpus: applies to engines this command starts, not to one attached by --base-url"),
    ([*SMALL, "--gate", ","], "error: --gate: ',' names no metric"),
    ([*SMALL, "--gate", "metrics.bogus"], "unknown metric 'metrics.bogus'"),
])
def test_bad_input_is_one_clear_line_and_exit_2(args: list[str], message: str) -> None:
    p = ab(*args, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr
    assert "Traceback" not in p.stderr
    assert [line for line in p.stderr.splitlines() if line.startswith("error") or ": error:" in line]

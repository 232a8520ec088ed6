"""``python -m pytest_goodput ab`` end to end, against two simulators (docs/ab.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_goodput.engines.ports import free_port
from pytest_goodput.judge.sequential.ab import round_order

SMALL = ["--scenario", "concurrency", "--concurrency", "4", "--requests", "40",
         "--isl", "32", "--osl", "16", "--seed", "1"]


def ab(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", "ab", *args],
                          check=False, capture_output=True, text=True, timeout=timeout)


def test_the_same_simulator_on_both_sides_passes(tmp_path: Path) -> None:
    out = tmp_path / "ab.json"
    p = ab(*SMALL, "--min-rounds", "3", "--max-rounds", "4", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads(out.read_text())
    verdicts = {c["metric"]: c["verdict"] for c in result["comparisons"]}
    # A/A: nothing regressed; the steady metrics pass or, when a busy machine widens the
    # interval beyond the tolerance in 4 rounds, are underpowered: never a false regression.
    assert "regressed" not in verdicts.values()
    steady = (verdicts["throughput.output_tokens_per_s"], verdicts["metrics.tpot_ms.p50"])
    assert set(steady) <= {"pass", "underpowered"}
    assert result["rounds_used"] + result["rounds_dropped"] <= 4
    # a fresh order seed per job, printed and kept, the orders drawn from it
    seed = result["seed"]
    assert re.search(rf"after \d rounds \(balanced order, order seed {seed}\)", p.stdout)
    assert [r["order"] for r in result["rounds"]] == [round_order(seed, r["index"]) for r in result["rounds"]]


def test_a_slowed_head_is_a_regression() -> None:
    p = ab(*SMALL, "--head-sim", "slowdown=1.3", "--min-rounds", "3", "--max-rounds", "4",
           "--order-seed", "5")
    assert p.returncode == 1, p.stdout + p.stderr
    rows = {line.split("  ")[0]: line for line in p.stdout.splitlines()}
    assert "regressed" in rows["TPOT P50 (ms)"], p.stdout  # +30 %: decided at the first look
    assert re.search(r"decided after [34] rounds \(balanced order, order seed 5\): "
                     r".*metrics\.tpot_ms\.p50", p.stdout)  # the replayed seed
    orders = [line.split(": ", 1)[1] for line in p.stderr.splitlines() if line.startswith("round ")
              and ", then " in line]
    assert orders[:3] == [("base, then head" if round_order(5, r) == "base-head" else "head, then base")
                          for r in (1, 2, 3)]
    assert "one engine at a time" not in p.stdout  # both fit: both stay up


def test_engines_that_cannot_run_together_run_one_at_a_time() -> None:
    # Both commands bind the same fixed port: the head cannot start beside the base, so the
    # command stops the base and runs each side on a freshly started engine. Every round starts
    # two engines: three rounds (a +30 % head is decided at the first look), and the simulator's
    # own module, which starts without the CLI's imports.
    port = free_port()
    sim = f"{sys.executable} -m pytest_goodput.sim.server --port {port}"
    p = ab(*SMALL, "--base-serve", sim, "--head-serve", f"{sim} --slowdown 1.3",
           "--min-rounds", "3", "--max-rounds", "3")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "the head engine did not start beside the base (" in p.stderr  # the port was taken
    rows = {line.split("  ")[0]: line for line in p.stdout.splitlines()}
    assert "regressed" in rows["TPOT P50 (ms)"], p.stdout
    used = int(re.search(r"decided after (\d) rounds", p.stdout).group(1))
    assert f"note: one engine at a time: each run started its engine afresh ({2 * used} starts," in p.stdout


@pytest.mark.parametrize("args,message", [
    (["--head-sim", "slowdown"], "error: --head-sim: 'slowdown' is not knob=value"),
    (["--head-sim", "warp=2"], "error: --head-sim: unknown simulator knob(s): warp"),
    (["--min-rounds", "1"], "error: --min-rounds: 1 is too few"),
    (["--base-url", "http://127.0.0.1:9", "--base-sim", "slowdown=1"], "exclude each other"),
    (["--scenario", "capacity", "--slo", "ttft_ms=500"], "A/B mode does not compare capacity searches"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--exclusive", "--head-url", "http://127.0.0.1:9"], "--exclusive starts and stops both engines"),
    (["--relaunch", "--base-url", "http://127.0.0.1:9"], "--relaunch starts and stops both engines"),
    ([*SMALL, "--engine-cpus", "x"], "error: --engine-cpus: 'x' is not a CPU number or range"),
    ([*SMALL, "--base-url", "http://127.0.0.1:9", "--engine-cpus", "0"],
     "error: --engine-cpus: applies to engines this command starts, not to one attached by --base-url"),
    ([*SMALL, "--gate", ","], "error: --gate: ',' names no metric"),
    ([*SMALL, "--gate", "metrics.bogus"], "unknown metric 'metrics.bogus'"),
    # a trace replay's file is read where the spec is built: before any engine starts
    (["--scenario", "trace", "--trace", "no-such-trace.jsonl"], "no-such-trace.jsonl"),
])
def test_bad_input_is_one_clear_line_and_exit_2(args: list[str], message: str) -> None:
    p = ab(*args, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr
    assert "Traceback" not in p.stderr
    assert [line for line in p.stderr.splitlines() if line.startswith("error") or ": error:" in line]

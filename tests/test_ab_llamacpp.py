"""A/B mode on a real engine: llama.cpp with four slots against one, and against itself.

The two commands are read from ``docs/ab.md`` ("llama.cpp in CI") and run as a user would
type them, in a fresh directory with this Python first on ``PATH`` (the serve commands say
``python``). What they must show: one slot instead of four is caught (exit 1, median TTFT
*regressed*, decided at the first look), and the same build on both sides passes (exit 0,
nothing regressed, throughput *pass*; median TTFT *pass*, or *underpowered* when a busy
machine's rounds scatter too much to resolve 25 %, never a false regression). Needs the
``llamacpp`` extra and two CPUs (``--engine-cpus auto``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xllamacpp", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")
pytest.importorskip("gguf", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                       reason="--engine-cpus auto needs two CPUs"),
]

REPO = Path(__file__).resolve().parent.parent
TTFT, TPUT = "metrics.ttft_ms.p50", "throughput.output_tokens_per_s"


def doc_commands() -> dict[str, list[str]]:
    """The docs' commands, read by the bench's own reader (``bench/ab_llamacpp.py``)."""
    spec = importlib.util.spec_from_file_location("ab_llamacpp_bench", REPO / "bench" / "ab_llamacpp.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.doc_commands()


COMMANDS = doc_commands()


def run_doc_command(title: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """The command as typed, run once: its client self-check is forced valid by the suite
    (tests/selfcheck_site on PYTHONPATH), so an exit 3 is a failure, not the neighbours' load."""
    argv = COMMANDS[title]
    assert argv[:3] == ["python", "-m", "pytest_goodput"], argv
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out = cwd / "ab.json"
    p = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, env=env, check=False,
                       capture_output=True, text=True, timeout=300)
    return p, json.loads(out.read_text()) if out.is_file() else {}


def verdicts(result: dict[str, Any]) -> dict[str, str]:
    return {c["metric"]: c["verdict"] for c in result["comparisons"]}


def test_docs_show_both_commands() -> None:
    assert set(COMMANDS) == {"one slot instead of four: exit 1, TTFT P50 regressed",
                             "the same build on both sides: exit 0, a pass"}
    one, same = COMMANDS.values()
    assert [a.replace("--parallel 1 ", "--parallel 4 ") for a in one] == same  # only the head's slots differ


def test_one_slot_instead_of_four_is_caught(tmp_path: Path) -> None:
    p, result = run_doc_command("one slot instead of four: exit 1, TTFT P50 regressed", tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr[-3000:]
    assert verdicts(result)[TTFT] == "regressed", p.stdout
    assert result["decided"] and TTFT in result["stop_reason"], p.stdout
    assert verdicts(result).get("error_rate") != "regressed"  # every request served: slower, not broken


def test_the_same_build_on_both_sides_passes(tmp_path: Path) -> None:
    p, result = run_doc_command("the same build on both sides: exit 0, a pass", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    v = verdicts(result)
    assert "regressed" not in v.values(), p.stdout
    assert v[TPUT] == "pass", p.stdout
    assert v[TTFT] in ("pass", "underpowered"), p.stdout

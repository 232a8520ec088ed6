"""The README as a new user follows it: its gate test and its record/gate commands run as
written (the simulator standing in for vLLM), its numbers are the product's, and its
documentation index lists every page of ``docs/``."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_goodput.schema.scenario.spec import build_spec
from pytest_goodput.stats.binomial import percentile_proof

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
#: The engine the README's serve command launches, and what stands in for it here: the
#: simulator with every step twice as long, so a loaded machine's client keeps up.
README_ENGINE = "vllm serve meta-llama/Llama-3.1-8B-Instruct"
STAND_IN = f"{sys.executable} -m pytest_goodput sim --time-scale 2"


def section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.DOTALL)


def gate_test() -> tuple[str, str]:
    """The "Writing a gate" section's file name and code."""
    text = section("Writing a gate")
    name = re.search(r"`([\w/]+\.py)`:", text)
    assert name, "the section names the file its test goes in"
    return name.group(1), blocks(text, "python")[0]


def marker_args() -> dict:
    """The README test's marker arguments, read by running its code."""
    namespace: dict = {}
    exec(compile(gate_test()[1], "README.md", "exec"), namespace)
    (test,) = [v for k, v in namespace.items() if k.startswith("test_")]
    (mark,) = test.pytestmark
    assert mark.name == "goodput" and not mark.args
    return dict(mark.kwargs)


def test_the_readme_marker_can_prove_its_percentile_slos() -> None:
    """480 requests prove a P99 with none over the limit; 240 could not (docs/metrics.md)."""
    spec = build_spec(marker_args())
    assert spec.percentile_slos, "the README's example states percentile SLOs"
    n = spec.requests * spec.repeats
    for name in spec.percentile_slos:
        p = float(re.search(r"_p([\d.]+)_ms$", name).group(1))
        assert percentile_proof(n, 0, p) == (True, None), name
        assert not percentile_proof(spec.requests, 0, p)[0], f"{name}: one repeat alone proves it"
    # The figures the README quotes (its text as read, line breaks aside).
    words = " ".join(README.split())
    assert percentile_proof(1, 0, 99.0)[1] == 459 and "459 requests with none over the limit" in words
    assert percentile_proof(1, 1, 99.0)[1] == 662 and "662 with one" in words


def test_the_docs_index_lists_every_page() -> None:
    index = section("Documentation")
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", index))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set(), f"pages missing from the README's index: {sorted(pages - linked)}"
    assert linked - pages == set(), f"the index links pages that do not exist: {sorted(linked - pages)}"


def test_the_readme_keeps_the_commands_ci_runs() -> None:
    """``.ci/run`` runs these as the README's commands: they stay in it, verbatim, and the one
    test command runs every tier in order."""
    test_command = 'pip install -e ".[test]" && bash scripts/test'
    for command in ("pip install -e . && pytest example_suite --goodput-baseline",
                    "GOODPUT_SIM_SLOWDOWN=1.2 pytest example_suite --goodput-baseline",
                    test_command):
        assert command in README, command
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pytest example_suite --goodput-baseline" in ci
    assert test_command + " -p no:cacheprovider" in ci
    script = (ROOT / "scripts" / "test").read_text()
    # scripts/test's tier() runs `pytest tests -m EXPR ARGS`: fast, integration, solo, in order
    # (the wheel's llama.cpp gate, wheel_engine, in none of them: .ci/run runs it on its own)
    tiers = ['tier fast "fast and not wheel_engine" -n auto',
             'tier integration "integration and not solo and not wheel_engine" -n 3 --dist loadfile',
             'tier solo "solo and not wheel_engine"']
    at = [script.index(t) for t in tiers]
    assert at == sorted(at) and "lint-imports" in script
    assert "pytest tests -m wheel_engine" in ci and "pytest tests -m wheel_engine" in README
    assert '[ "$rc" -eq 5 ]' in script  # no test collected fails the command


def test_the_readme_loop_records_then_gates_as_written(tmp_path: Path) -> None:
    """The gate test in its file, the README's ``pytest.ini`` with the engine it launches, then
    each command of the record/gate block, as written. Smaller than the README's sizes
    (``GOODPUT_SCALE``, ``GOODPUT_SESSIONS``: the environment, not the commands), so its
    percentile SLOs are unproven here: a note, not a failure."""
    name, code = gate_test()
    (tmp_path / name).parent.mkdir(parents=True)
    (tmp_path / name).write_text(code)
    loop = section("Record on main, gate every pull request")
    (ini,) = [b for b in blocks(loop, "ini") if "goodput_serve" in b]
    assert README_ENGINE in ini
    (tmp_path / "pytest.ini").write_text(ini.replace(README_ENGINE, STAND_IN))
    commands = [shlex.split(line, comments=True) for line in blocks(loop, "bash")[-1].splitlines()]
    commands = [c for c in commands if c]
    assert [c[-1] for c in commands] == ["--goodput-update-baseline", "--goodput-baseline"]
    # The user's settings cleared; the suite's own (GOODPUT_TEST_*, and the PYTHONPATH that
    # carries them to the processes started here: tests/conftest.py) kept.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOODPUT_") or k.startswith("GOODPUT_TEST_")}
    env.update(GOODPUT_SCALE="0.05", GOODPUT_SESSIONS="2",
               PYTHONPATH=os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p))
    runs = []
    for command in commands:
        assert command[0] == "pytest"
        proc = subprocess.run([sys.executable, "-m", *command], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        runs.append(proc)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    record, gate = (p.stdout for p in runs)
    # The report's first line names the engine the ini launched.
    for out in (record, gate):
        assert "engine: " in out and "pytest_goodput sim --time-scale 2" in out, out[-2000:]
    # The baseline is where the README's comment says: <module>/<test>.json, two sessions.
    stem = Path(name).with_suffix("")
    test = re.search(r"def (test_\w+)", code).group(1)
    baseline = tmp_path / ".goodput" / "baselines" / stem / f"{test}.json"
    assert baseline.is_file(), sorted(str(p) for p in tmp_path.rglob("*.json"))
    assert len(json.loads(baseline.read_text())["sessions"]) == 2  # one entry per session
    # The summary line (a progress line such as "goodput: <test>: measuring again" is not one)
    summary = [line for line in gate.splitlines() if re.match(r"goodput: \d+ tests? - ", line)]
    # Unchanged engine: not regressed; at these sizes a metric may be underpowered or
    # inconclusive, which the gate shows and passes (``--goodput-strict`` would fail it).
    assert len(summary) == 1 and re.fullmatch(
        r"goodput: 1 test - 1 (passed|underpowered|inconclusive)", summary[0]), summary

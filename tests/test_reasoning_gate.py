"""The example TTFO gate of docs/workloads.md, run as written against the simulator: the A/A
run passes, an injected regression fails. (A model that thinks longer, named as a workload
change: tests/test_reasoning_plugin.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# pytester's in-process runs drop modules first imported inside them (see test_reasoning_plugin)
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.engines.engine import simulator

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parent.parent / "docs" / "workloads.md"
HEADING = "### Example: a TTFO gate for a reasoning model"
REASONING = 24  # the docs' GOODPUT_SIM_REASONING_TOKENS
SCALE = 3  # and GOODPUT_SIM_TIME_SCALE


def doc_example() -> str:
    """The first python block after the example's heading, byte for byte."""
    text = DOC.read_text(encoding="utf-8")
    after = text[text.index(HEADING):]
    m = re.search(r"```python\n(.*?)```", after, re.S)
    assert m is not None, f"{DOC} has no python block after {HEADING!r}"
    return m.group(1)


def test_the_documented_example_sets_what_it_says():
    code = doc_example()
    assert "ttfo_p99_ms=" in code and '"metrics.ttfo_ms.p99"' in code and 'api="chat"' in code
    doc = DOC.read_text(encoding="utf-8")
    assert f"GOODPUT_SIM_REASONING_TOKENS={REASONING}" in doc and f"GOODPUT_SIM_TIME_SCALE={SCALE}" in doc


def test_documented_ttfo_gate_passes_aa_and_catches_regressions(pytester):
    pytester.makepyfile(test_docs_reasoning_gate=doc_example())
    with simulator(reasoning_tokens=REASONING, time_scale=SCALE) as sim:
        url = f"--goodput-url={sim.base_url}"
        pytester.runpytest(url, "--goodput-update-baseline", "--goodput-sessions=2"
                           ).assert_outcomes(passed=1)
        aa = pytester.runpytest(url, "--goodput-baseline")
        aa.assert_outcomes(passed=1)
        text = aa.stdout.str()
        assert "workload changed" not in text
        # the summary shows TTFO baseline -> current for a reasoning test
        assert re.search(r"TTFO P99 [\d,.]+ → [\d,.]+ ms; reasoning tokens/request 24 → 24 tok", text), text
    with simulator(reasoning_tokens=REASONING, time_scale=SCALE, slowdown=2) as slow:
        res = pytester.runpytest(f"--goodput-url={slow.base_url}", "--goodput-baseline")
        res.assert_outcomes(failed=1)
        text = res.stdout.str()
        assert re.search(r"regressed: TTFO P99 [\d,.]+ -> [\d,.]+ ms", text), text
        assert "workload changed" not in text  # the same work, done slower

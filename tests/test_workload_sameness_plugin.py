"""Workload sameness end to end: a baseline recorded on the simulator, then an engine that
stops its outputs early (named as a workload change), then edited prompts (incomparable)."""

from __future__ import annotations

import json
import re


# pytester's in-process runs drop modules first imported inside them (see test_reasoning_plugin)
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.engines.engine import simulator

pytest_plugins = ["pytester"]

#: Steps 3x the default: a busy CI machine's client keeps up with the token pace.
SCALE = 3
TEST = """
import pytest

@pytest.mark.goodput(scenario="server", rate=10.0, requests=20, ignore_eos=False, osl=24,
                     workload="jsonl", dataset="prompts.jsonl")
def test_gate(goodput):
    r = goodput.run()
    assert r.prompt_set is not None and r.prompt_set.requests == 20
"""


def prompts(edit: bool = False) -> str:
    rows = [{"prompt": f"question {i} " + "word " * 20, "output_len": 24} for i in range(10)]
    if edit:
        rows[4]["prompt"] += "and one more word"
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def test_shorter_outputs_are_named_and_edited_prompts_are_incomparable(pytester):
    pytester.makepyfile(test_perf=TEST)
    (pytester.path / "prompts.jsonl").write_text(prompts())
    with simulator(eos_prob=0.0, time_scale=SCALE) as sim:
        url = f"--goodput-url={sim.base_url}"
        # a baseline recorded against a simulator that never stops early
        pytester.runpytest(url, "--goodput-update-baseline", "--goodput-sessions=2"
                           ).assert_outcomes(passed=1)
        # the same workload on the same engine: nothing named
        res = pytester.runpytest(url, "--goodput-baseline", "--goodput-strict")
        assert "workload changed" not in res.stdout.str()
        assert "prompts not checked" not in res.stdout.str()  # both sides have a fingerprint
        # edited prompts: a different workload, not compared (a failure in strict mode)
        (pytester.path / "prompts.jsonl").write_text(prompts(edit=True))
        res = pytester.runpytest(url, "--goodput-baseline", "--goodput-strict")
        res.assert_outcomes(failed=1)
        text = res.stdout.str()
        assert "not compared with the baseline: the prompts differ from the baseline's (prompt " \
               "fingerprint" in text, text
        assert "goodput incomparable" in text
    (pytester.path / "prompts.jsonl").write_text(prompts())
    # an engine that ends each answer with 15 % chance per token: ~6 tokens instead of 24
    with simulator(eos_prob=0.15, time_scale=SCALE) as early:
        res = pytester.runpytest(f"--goodput-url={early.base_url}", "--goodput-baseline",
                                 "--goodput-strict")
    res.assert_outcomes(failed=1)
    text = res.stdout.str()
    assert re.search(r"workload changed: outputs are \d+ % shorter \(output tokens per request 24 → "
                     r"[\d.]+\): a workload change, not a performance change", text), text

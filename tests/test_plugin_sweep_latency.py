"""A sweep's latency through the plugin: an engine whose prefill is slower fails an open-loop
sweep whose throughput cannot move (it equals the offered rate), and the report names the
point and the metric (docs/frontiers.md, "Comparing with a baseline")."""

from __future__ import annotations

import re

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# must not be loaded twice, so the plugin's lazily loaded core is imported first.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
from pytest_goodput.engines.engine import simulator

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

SWEEP = """
import pytest

@pytest.mark.goodput(scenario="sweep", sweep=[2, 4, 8], sweep_over="rate", duration_s=2.0,
                     isl=512, osl=16, gate=["metrics.ttft_ms.p50", "metrics.tpot_ms.p50"])
def test_frontier():
    pass
"""


def test_open_loop_sweep_fails_on_slower_prefill_and_names_the_metric(pytester) -> None:
    pytester.makepyfile(test_perf=SWEEP)
    with simulator() as eng:
        pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-update-baseline",
                           "--goodput-sessions=2").assert_outcomes(passed=1)
    # Prefill ten times slower: TTFT grows several times at every rate; decode steps wait behind
    # the longer prefills, so TPOT rises too. Either may be the worst point's metric (the one
    # whose interval clears its tolerance by most): the test decides that the sweep fails at
    # equal load and names the point and a latency metric, not which of the two moved most.
    with simulator(prefill_per_token_ms=0.25) as eng:
        res = pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-baseline")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert re.search(r"frontier: (TTFT|TPOT) P50", out) and "regressed" in out and "worst at load" in out

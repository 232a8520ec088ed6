"""JUnit XML properties: baseline, current, change and verdict per gated metric.

Hand-computed from the report fixtures, then end to end through pytester with ``--junitxml``:
a baseline recorded on the simulator, then a run against a 1.5x slower one.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import report_fixtures as fx

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# and exception classes (httpx) must not be loaded twice, so the plugin's lazily loaded
# core is imported before any pytester run.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.junit  # noqa: F401
from pytest_goodput.engines.engine import simulator
from pytest_goodput.report.junit import junit_properties

pytest_plugins = ["pytester"]


def test_every_compared_metric_has_baseline_current_change_and_verdict():
    props = dict(junit_properties(fx.regressed()))
    assert props["goodput.status"] == "regressed"
    # goodput 8 -> 6.8 req/s: change (6.8 - 8) / 8 = -15.0 %.
    assert props["goodput.goodput.requests_per_s.baseline"] == "8"
    assert props["goodput.goodput.requests_per_s.current"] == "6.8"
    assert props["goodput.goodput.requests_per_s.change"] == "-15.0%"
    assert props["goodput.goodput.requests_per_s.verdict"] == "regressed"
    # TTFT P99 300 -> 345 ms: +15.0 %, inconclusive.
    assert props["goodput.metrics.ttft_ms.p99.change"] == "+15.0%"
    assert props["goodput.metrics.ttft_ms.p99.verdict"] == "inconclusive"
    # The current run's headline numbers stay (six significant digits).
    assert props["goodput.throughput.output_tokens_per_s"] == "512.3"
    assert "goodput.baseline" not in props


def test_a_sweep_row_names_the_metric_its_values_are_of():
    worst = fx.cmp("frontier_throughput", 40.0, 48.0, "regressed").model_copy(
        update={"direction": "lower", "basis": "metrics.tpot_ms.p50"})
    props = dict(junit_properties(fx.sweep_regressed().model_copy(update={"comparisons": [worst]})))
    assert props["goodput.frontier_throughput.basis"] == "metrics.tpot_ms.p50"
    assert props["goodput.frontier_throughput.current"] == "48"
    assert "goodput.goodput.requests_per_s.basis" not in dict(junit_properties(fx.regressed()))


def test_new_test_says_it_has_no_baseline_and_remeasure_reason_is_kept():
    props = junit_properties(fx.new(), ["send lag P99 212 ms > 50 ms"])
    assert ("goodput.baseline", "new") in props
    assert ("goodput.remeasured_because", "send lag P99 212 ms > 50 ms") in props
    assert not [n for n, _ in props if n.endswith(".verdict")]


def _properties(path) -> dict[str, str]:
    root = ET.parse(path).getroot()
    return {p.get("name"): p.get("value") for p in root.iter("property")}


@pytest.mark.slow
def test_junit_xml_carries_the_comparison_end_to_end(pytester):
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests=60, isl=16, osl=16,
                     gate=["throughput.output_tokens_per_s"])
def test_tps():
    pass
""")
    junit = pytester.path / "junit.xml"
    with simulator() as eng:
        pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-update-baseline",
                           "--goodput-sessions=2").assert_outcomes(passed=1)
    # twice as slow: a two-session baseline's spread on a busy machine can hide a 1.5× step;
    # what this test decides is what the JUnit file carries, not the gate's sensitivity
    with simulator(slowdown=2.0) as slow:
        res = pytester.runpytest(f"--goodput-url={slow.base_url}", "--goodput-baseline",
                                 f"--junitxml={junit}")
    res.assert_outcomes(failed=1)
    props = _properties(junit)
    key = "goodput.throughput.output_tokens_per_s"
    base, cur = float(props[f"{key}.baseline"]), float(props[f"{key}.current"])
    assert cur < base
    assert props[f"{key}.change"] == f"{(cur - base) / base * 100:+.1f}%"
    assert props[f"{key}.verdict"] == "regressed" and props["goodput.status"] == "regressed"

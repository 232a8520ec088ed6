"""Marker arguments that validate as numbers but break a run, or have the wrong type: a
usage error at collection naming the test and the argument, never an INTERNALERROR."""

from __future__ import annotations

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# and exception classes (httpx) must not be loaded twice, so the plugin's lazily loaded
# core is imported before any pytester run.
import pytest_goodput.load.coordinator  # noqa: E402,F401
import pytest_goodput.plugin.harness  # noqa: E402,F401
import pytest_goodput.plugin.session  # noqa: E402,F401
import pytest_goodput.report.files  # noqa: E402,F401

# pytester's in-process runs drop modules first imported inside them; C extensions such as
# numpy cannot be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.judge.scalar.verdicts  # noqa: F401
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.report.github  # noqa: F401
import pytest_goodput.report.md.markdown  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("args,needle", [
    ('scenario="sweep", sweep=[float("inf")]', "sweep.0: Input should be a finite number"),
    ('scenario="sweep", sweep=[0.5]', "concurrencies must be whole numbers >= 1"),
    ('scenario="server", rate=float("inf")', "rate: Input should be a finite number"),
    ('scenario="server", rate=1, ttft_p99_ms=float("nan")', "percentile SLO 'ttft_p99_ms'"),
    ('scenario="server", rate=1, timeout_s=float("inf")', "timeout_s: Input should be a finite number"),
    ('scenario="server", rate=1, duration_s=float("inf")', "duration_s: Input should be a finite number"),
    ('scenario="server", rate=1, attainment=float("nan")', "attainment: Input should be a finite number"),
    ('scenario="server", rate=1, tolerances={"ttft_ms": float("nan")}', "tolerances.ttft_ms"),
    ('scenario="server", rate=1, slo=["x"]', "slo must be a preset name"),
    ('scenario="server", rate=1, percentile_slos={1: 1}', "percentile_slos: key 1"),
    ('scenario="server", rate=1, percentile_slos=[1]', "percentile_slos must be a dict"),
])
def test_bad_marker_values_are_collection_errors_naming_test_and_argument(pytester, args, needle):
    pytester.makepyfile(test_perf=f"""
import pytest

@pytest.mark.goodput({args})
def test_perf():
    pass
""")
    res = pytester.runpytest()
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.INTERRUPTED, out  # a collection error
    assert "invalid goodput arguments" in out and "(in test_perf.py::test_perf)" in out
    assert needle in out, out
    assert "INTERNALERROR" not in out and "Traceback" not in out


def test_gate_is_refused_where_runs_of_different_loads_would_be_pooled():
    from pytest_goodput.schema.scenario.spec import SpecError, build_spec

    args = {"scenario": "capacity", "gate": ["metrics.ttft_ms.p99"], "ttft_ms": 100.0}
    with pytest.raises(SpecError, match="gate= does not apply to scenario"):
        build_spec(args)


def test_a_sweeps_gate_is_judged_per_point_never_on_its_runs_pooled():
    from pytest_goodput.judge.judge import metric_defs
    from pytest_goodput.schema.registry import sweep_point_gate
    from pytest_goodput.schema.scenario.spec import build_spec

    spec = build_spec({"scenario": "sweep", "sweep": [1, 4], "gate": ["metrics.ttft_ms.p99"]})
    assert metric_defs(spec) == [] and sweep_point_gate(spec) == ("metrics.ttft_ms.p99",)

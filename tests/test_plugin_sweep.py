"""Sweeps and capacity searches through the plugin: stored frontiers gate like any metric.

Each baseline is one recorded session (``--goodput-sessions=1``): these tests are about what a
sweep or a search records and how it is compared, not about the noise of several sessions
(tests/test_sessions.py), and each session is a whole sweep or search.
"""

from __future__ import annotations


import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# and exception classes (httpx) must not be loaded twice, so the plugin's lazily loaded
# core is imported before any pytester run.
import pytest_goodput.load.coordinator  # noqa: E402,F401
import pytest_goodput.plugin.harness  # noqa: E402,F401
import pytest_goodput.plugin.session  # noqa: E402,F401
import pytest_goodput.report.files  # noqa: E402,F401

import pytest_goodput.judge.noise.frontier_noise
import pytest_goodput.judge.scalar.verdicts
import pytest_goodput.load.coordinator
import pytest_goodput.report.md.markdown  # noqa: F401
from pytest_goodput.store import baseline as baseline_store
from pytest_goodput.engines.engine import simulator

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

SWEEP = """
import pytest

@pytest.mark.goodput(scenario="sweep", sweep=[1, 16, 32], duration_s=2.0, isl=128, osl=32,
                     osl_dist="uniform", range_ratio=0.5)
def test_frontier():
    pass
"""


def test_sweep_baseline_then_same_engine_passes_and_half_kv_regresses(pytester, monkeypatch):
    pytester.makepyfile(test_perf=SWEEP)
    with simulator(kv_capacity_tokens=2048) as eng:
        res = pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-update-baseline",
                                 "--goodput-sessions=1")
        res.assert_outcomes(passed=1)
        doc = baseline_store.load(pytester.path / ".goodput/baselines/test_perf/test_frontier.json")
        run = doc.sessions[0]
        assert len(run.samples) == 3 and run.sweep is not None and run.sweep.frontier
        assert run.summary["frontier.max_output_tokens_per_s"] > 0
        # The engine's own gauges, sampled during the runs, are kept for the report's "why" block.
        assert run.summary["server.running_max"] >= 1 and "server.kv_cache_usage_mean" in run.summary
        pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-baseline").assert_outcomes(passed=1)
    summary = pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    with simulator(kv_capacity_tokens=1024) as eng:
        report = pytester.path / "r.md"
        res = pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-baseline",
                                 f"--goodput-report={report}")
    res.assert_outcomes(failed=1)
    # On GitHub: one failing test, exactly one annotation, at the start of its own line.
    errors = [ln for ln in res.outlines if "::error" in ln]
    assert len(errors) == 1 and errors[0].startswith("::error file=test_perf.py,line=")
    # The step summary holds the frontier chart, both lines in their own colours.
    step = summary.read_text()
    assert 'line "current"' in step and 'line "baseline"' in step
    assert '"plotColorPalette": "#D55E00, #0072B2"' in step
    out = res.stdout.str()
    assert "regressed" in out and "frontier" in out.lower()
    assert "test_perf.py::test_frontier: frontier: 3 of 3 points compared at equal load" in out
    text = report.read_text()
    assert "xychart-beta" in text and '"plotColorPalette": "#D55E00, #0072B2"' in text
    assert "Lines: 🟧 **current** (vermillion, `#D55E00`) · 🟦 **baseline** (blue, `#0072B2`)" in text
    assert "| load | tok/s/user | output tok/s | SLO met | baseline tok/s |" in text
    assert "| concurrency 32 |" in text
    assert "| engine metric | baseline | current | change |" in text  # why: the engine's /metrics
    assert "| **hardware** | label " in text  # the four questions, baseline | current


RATE_SWEEP = """
import pytest

@pytest.mark.goodput(scenario="sweep", sweep_over="rate", sweep=[2, 8, 64, 128, 256], duration_s=2.0,
                     isl=128, osl=32)
def test_rates():
    pass
"""


def test_a_rate_sweep_stops_past_the_knee_and_names_where_saturation_began(pytester):
    """A small KV cache (about six requests) puts the knee between 8 and 64 req/s: the sweep
    stops at the first point past saturation and skips the rest, saying so."""
    pytester.makepyfile(test_perf=RATE_SWEEP)
    with simulator(kv_capacity_tokens=1024) as eng:
        res = pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-update-baseline",
                                 "--goodput-sessions=1")
    res.assert_outcomes(passed=1)
    doc = baseline_store.load(pytester.path / ".goodput/baselines/test_perf/test_rates.json")
    run = doc.sessions[0]
    step = int(run.summary["sweep.saturation_step"])
    began = run.summary["sweep.saturation_load"]
    loads = [2.0, 8.0, 64.0, 128.0, 256.0]
    assert 1 <= step <= 2 and began == loads[step]  # rate 2 keeps up; 64 is past the knee
    assert len(run.samples) == step + 1  # nothing measured above it
    skipped = loads[step + 1:]
    out = res.stdout.str()
    assert f"test_perf.py::test_rates: saturation: began at rate {began:g} req/s (" in out
    assert (f"sweep stopped, skipped rate {', '.join(f'{v:g}' for v in skipped)} req/s: "
            f"{len(skipped)} points, ~") in out


def test_capacity_search_is_recorded_and_compared(pytester):
    pytester.makepyfile(test_cap="""
import pytest

@pytest.mark.goodput(scenario="capacity", rate=4.0, duration_s=2.0, isl=64, osl=16,
                     ttft_ms=300, tpot_ms=25, attainment=0.9, capacity_resolution=0.1)
def test_capacity():
    pass
""")
    with simulator(slowdown=4.0) as eng:
        res = pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-update-baseline",
                                 "--goodput-sessions=1")
        res.assert_outcomes(passed=1)
        doc = baseline_store.load(pytester.path / ".goodput/baselines/test_cap/test_capacity.json")
        cap = doc.sessions[0].capacity
        assert cap is not None and cap.requests_per_s > 0 and cap.probes
        assert doc.sessions[0].summary["capacity.requests_per_s"] == cap.requests_per_s
        assert "test_cap.py::test_capacity: capacity: " in res.stdout.str()

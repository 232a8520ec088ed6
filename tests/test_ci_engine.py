"""In CI a goodput test measures the engine it was told to measure, never the simulator unasked;
and every report says first which engine it measured."""

from __future__ import annotations

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions such as
# numpy cannot be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401

pytest_plugins = ["pytester"]

TESTS = """
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, isl=32, osl=4)
def test_marked_only():
    pass

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, isl=32, osl=4)
def test_runs_itself(goodput):
    assert goodput.run().completed == 8

def test_plain():
    pass
"""


@pytest.mark.parametrize("variable", ["CI", "GITHUB_ACTIONS"])
def test_in_ci_an_unnamed_engine_fails_every_goodput_test_naming_the_three_ways(
        pytester, monkeypatch, variable):
    monkeypatch.setenv(variable, "true")
    pytester.makepyfile(test_perf=TESTS)
    res = pytester.runpytest("-p", "no:cacheprovider")
    res.assert_outcomes(passed=1, failed=2)  # the plain test still passes
    out = res.stdout.str()
    assert out.count(f"no engine is named and this is CI ({variable}=true)") >= 2
    for way in ("--goodput-url URL", '--goodput-serve "CMD"', "--goodput-engine=sim",
                "goodput_engine = sim", "GOODPUT_URL"):
        assert way in out, way
    assert "FAILED test_perf.py::test_marked_only" in out and "FAILED test_perf.py::test_runs_itself" in out
    assert "Traceback" not in out
    assert "engine: embedded simulator" not in out  # nothing was measured


@pytest.mark.parametrize("how", ["option", "ini"])
def test_in_ci_the_simulator_chosen_by_name_is_measured_and_named_first(pytester, monkeypatch, how):
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(test_perf=TESTS)
    args = ["-p", "no:cacheprovider", "--goodput-report=report.md"]
    if how == "option":
        args.append("--goodput-engine=sim")
    else:
        pytester.makeini("[pytest]\ngoodput_engine = sim\n")
    res = pytester.runpytest(*args)
    res.assert_outcomes(passed=3)
    res.stdout.fnmatch_lines(["*= goodput =*", "engine: embedded simulator", "goodput: 2 tests - 2 passed"])
    first = (pytester.path / "report.md").read_text().splitlines()[0]
    assert first == "## pytest-goodput report — engine: embedded simulator"


def test_a_named_engine_is_the_reports_first_line(pytester, sim_url):
    pytester.makepyfile(test_perf=TESTS)
    res = pytester.runpytest("-p", "no:cacheprovider", f"--goodput-url={sim_url}",
                             "--goodput-report=report.md")
    res.assert_outcomes(passed=3)
    res.stdout.fnmatch_lines(["*= goodput =*", f"engine: {sim_url}"])
    first = (pytester.path / "report.md").read_text().splitlines()[0]
    assert first == f"## pytest-goodput report — engine: `{sim_url}`"


def test_an_engine_named_on_the_command_line_wins_over_the_ini_simulator(pytester, monkeypatch, sim_url):
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(test_perf=TESTS)
    pytester.makeini("[pytest]\ngoodput_engine = sim\n")
    res = pytester.runpytest("-p", "no:cacheprovider", f"--goodput-url={sim_url}",
                             "-k", "test_runs_itself")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines([f"engine: {sim_url}"])


def test_the_simulator_and_a_url_on_one_command_line_are_a_usage_error(pytester):
    pytester.makepyfile(test_perf=TESTS)
    res = pytester.runpytest("-p", "no:cacheprovider", "--goodput-engine=sim",
                             "--goodput-url=http://127.0.0.1:9")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--goodput-engine: 'sim' is invalid for engine: names the simulator and --goodput-url "
            "names another engine: name one") in res.stderr.str()

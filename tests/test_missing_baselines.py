"""A gate that compares against nothing says so — loudly, and as a failure where it must."""

from __future__ import annotations

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions such as
# numpy cannot be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401

pytest_plugins = ["pytester"]

TEST = """
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=12, isl=64, osl=8)
def test_closed():
    pass
"""


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_perf=TEST)
    return pytester


def test_missing_directory_warns_but_passes_on_a_developer_machine(suite, sim_url):
    res = suite.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline=nowhere/baselines")
    assert res.ret == pytest.ExitCode.OK
    res.stdout.fnmatch_lines(["*warning: *nowhere/baselines does not exist: no goodput test was "
                              "compared, so the gate judged nothing*"])


@pytest.mark.parametrize("env", ["CI", "GITHUB_ACTIONS"])
def test_missing_directory_fails_in_ci(suite, sim_url, monkeypatch, env):
    monkeypatch.setenv(env, "true")
    res = suite.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline=nowhere")
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    res.stdout.fnmatch_lines(["*error: *nowhere does not exist*"])
    # ...unless new baselines are allowed there.
    res = suite.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline=nowhere", "--goodput-allow-new")
    assert res.ret == pytest.ExitCode.OK


def test_empty_directory_fails_in_strict_mode(suite, sim_url):
    (suite.path / "empty").mkdir()
    res = suite.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline=empty", "--goodput-strict")
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    res.stdout.fnmatch_lines(["*error: *empty holds no baseline of these tests*"])

"""Installing the plugin costs unrelated test suites nothing: the entry point defers loading
the gate's core until a goodput test is collected or a run records baselines.

Each run is a subprocess (``runpytest_subprocess``): an in-process run would share this
process's ``sys.modules``, where the core is already loaded. A conftest records what is
imported once collection has finished. Timings are bench/plugin_overhead.py's business.
"""

from __future__ import annotations

import json
import os

import pytest

pytest_plugins = ["pytester"]

HEAVY = ("pydantic", "pydantic_core", "numpy", "httpx", "httptools", "uvloop", "tabulate")
CORE = ("pytest_goodput.schema", "pytest_goodput.stats", "pytest_goodput.judge",
        "pytest_goodput.measure", "pytest_goodput.load", "pytest_goodput.engines",
        "pytest_goodput.sim", "pytest_goodput.run", "pytest_goodput.store", "pytest_goodput.report",
        "pytest_goodput.cli", "pytest_goodput.plugin.core", "pytest_goodput.plugin.session",
        "pytest_goodput.plugin.harness", "pytest_goodput.plugin.machine")
#: Plain-Python modules (no pydantic, no third-party import) the settings table checks values
#: with: the syntax of a CPU list, the forms of a Ray address.
SETTINGS_CHECKS = ("pytest_goodput.schema", "pytest_goodput.schema.cpus", "pytest_goodput.schema.addresses",
                   "pytest_goodput.schema.precedence")

RECORD_MODULES = """
import json
import sys


def pytest_collection_finish(session):
    path = session.config.rootpath / "modules.json"
    path.write_text(json.dumps(sorted(sys.modules)))
"""

PLAIN_TEST = "def test_x():\n    pass\n"


def _collect(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, set[str]]:
    pytester.makeconftest(RECORD_MODULES)
    res = pytester.runpytest_subprocess("--co", "-q", "-p", "no:cacheprovider", *args)
    modules_file = pytester.path / "modules.json"
    modules = set(json.loads(modules_file.read_text())) if modules_file.exists() else set()
    return res, modules


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules
                  if m.split(".")[0] in HEAVY or (m.startswith(CORE) and m not in SETTINGS_CHECKS))


@pytest.fixture(autouse=True)
def _no_goodput_environment(monkeypatch):
    """A GOODPUT_* variable in the caller's environment is a goodput setting: not here."""
    for key in [k for k in os.environ if k.startswith("GOODPUT_")]:
        monkeypatch.delenv(key)


def test_collecting_a_plain_suite_imports_nothing_heavy(pytester):
    pytester.makepyfile(test_one=PLAIN_TEST)
    res, modules = _collect(pytester)
    assert res.ret == pytest.ExitCode.OK, res.stdout.str() + res.stderr.str()
    assert "pytest_goodput.plugin" in modules  # the plugin was active ...
    assert _heavy(modules) == []  # ... and loaded neither pydantic, numpy nor the core


def test_goodput_settings_that_change_nothing_import_nothing_heavy(pytester):
    pytester.makepyfile(test_one=PLAIN_TEST)
    pytester.makeini("[pytest]\ngoodput_tolerance = 0.1\n")
    res, modules = _collect(pytester, "--goodput-scale=0.5", "--goodput-baseline")
    assert res.ret == pytest.ExitCode.OK, res.stdout.str() + res.stderr.str()
    assert _heavy(modules) == []


#: Settings whose check needs part of the core, as a CI job's environment may set them for
#: every pytest run of the job.
MACHINE_SETTINGS = {"GOODPUT_ENGINE_CPUS": "auto", "GOODPUT_CLIENT_CPUS": "0", "GOODPUT_CAPTURE": "on",
                    "GOODPUT_BASE_SIM": "slowdown=1.2", "GOODPUT_RAY": "local"}


def test_goodput_settings_in_the_environment_import_nothing_heavy_without_goodput_work(pytester, monkeypatch):
    for key, value in MACHINE_SETTINGS.items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_one=PLAIN_TEST)
    res, modules = _collect(pytester)
    assert res.ret == pytest.ExitCode.OK, res.stdout.str() + res.stderr.str()
    assert _heavy(modules) == [] and "pytest_goodput.plugin.machine" not in modules


@pytest.mark.parametrize("marked", [True, False])
def test_a_setting_this_machine_cannot_honour_is_a_usage_error_once_there_is_goodput_work(pytester, marked):
    """Marked, or a test asking for a goodput fixture: checked at collection, before any test."""
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="server", rate=2.0, requests=4)
def test_perf():
    pass
""" if marked else """
def test_engine(goodput_engine_factory):
    pass
""")
    res, _ = _collect(pytester, "--goodput-base-sim=slowdwn=2")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--goodput-base-sim: unknown simulator knob(s): slowdwn" in res.stderr.str()
    assert "Traceback" not in res.stderr.str()


def test_a_bad_setting_is_still_a_usage_error_naming_its_source(pytester):
    pytester.makepyfile(test_one=PLAIN_TEST)
    pytester.makeini("[pytest]\ngoodput_history = 0\n")
    res, _ = _collect(pytester)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert ("ini goodput_history: 0 is invalid for history: "
            "Input should be greater than or equal to 1") in res.stderr.str()


def test_collecting_a_goodput_test_loads_the_core(pytester):
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="server", rate=2.0, requests=4)
def test_perf():
    pass

def test_plain():
    pass
""")
    res, modules = _collect(pytester)
    assert res.ret == pytest.ExitCode.OK, res.stdout.str() + res.stderr.str()
    assert {"pytest_goodput.schema.scenario.spec", "pytest_goodput.plugin.session"} <= modules
    # The load generator waits for a test that measures.
    assert "pytest_goodput.plugin.harness" not in modules and "httptools" not in modules


@pytest.mark.parametrize("marker,needles", [
    ('scenario="server", rat=3', ["invalid goodput arguments: rat (in test_perf.py::test_perf)",
                                  "rat=3: unknown argument; did you mean rate=?"]),
    ('"server", rate=1', ["goodput marker takes keyword arguments only, got positional ('server',)"]),
])
def test_goodput_markers_are_still_validated_at_collection(pytester, marker, needles):
    pytester.makepyfile(test_perf=f"""
import pytest

@pytest.mark.goodput({marker})
def test_perf():
    pass
""")
    res, _ = _collect(pytester)
    assert res.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    out = res.stdout.str()
    assert all(n in out for n in needles), out
    assert "Traceback" not in out


def test_recording_without_goodput_tests_still_reports_unused_baselines(pytester):
    pytester.makepyfile(test_perf=PLAIN_TEST)
    stale = pytester.path / ".goodput/baselines/test_perf/test_gone.json"
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps({"kind": "pytest-goodput-baseline", "schema_version": 1,
                                 "nodeid": "test_perf.py::test_gone"}))
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--goodput-update-baseline")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*unused baseline*test_gone.json"])

"""Recording a baseline records several sessions, relaunching the engine between them, and the
session — not the repeat — is the unit of run-to-run noise (through pytester, as users run it).
Sessions are session-major: every goodput test runs once per session on that session's launch."""

from __future__ import annotations


import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions such as
# numpy cannot be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.run.gating  # noqa: F401
from pytest_goodput.store import baseline as baseline_store

pytest_plugins = ["pytester"]

RELAUNCHED = """
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=16, isl=16, osl=8)
def test_closed(goodput, goodput_engine):
    first = goodput_engine.base_url
    goodput.run()
    urls.append((first, goodput_engine.base_url))

urls = []

def test_zz_each_session_ran_on_a_launch_of_its_own():
    # the test ran once per session; the engine was relaunched between sessions, not within one
    assert len(urls) == 3 and all(a == b for a, b in urls), urls
    assert len({a for a, _ in urls}) == 3, urls
"""


def test_update_records_every_session_and_relaunches_the_simulator(pytester):
    pytester.makepyfile(test_perf=RELAUNCHED)
    res = pytester.runpytest("--goodput-update-baseline", "--goodput-sessions=3")
    res.assert_outcomes(passed=2)
    doc = baseline_store.load(pytester.path / ".goodput/baselines/test_perf/test_closed.json")
    assert doc is not None and len(doc.sessions) == 3
    assert all(len(run.samples) == 1 for run in doc.sessions)  # one repeat per session
    res.stdout.fnmatch_lines(["*3 session(s) recorded*"])
    # The recording ends with what the baseline lets one PR launch detect (its power plan).
    res.stdout.fnmatch_lines(["*baseline written:*test_closed.json",
                              "power plan: test_perf.py::test_closed: 3 session(s) x 1 run(s), *",
                              "*metric*tolerance*within a launch*between launches*one PR launch detects*"])
    # The next gate compares against three sessions.
    res = pytester.runpytest("--goodput-baseline", "-k", "test_closed")
    res.assert_outcomes(passed=1)


@pytest.mark.parametrize("sessions", ["0", "21", "x"])
def test_sessions_option_is_validated(pytester, sessions):
    pytester.makepyfile(test_perf="def test_a():\n    pass\n")
    res = pytester.runpytest(f"--goodput-sessions={sessions}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*sessions*"])

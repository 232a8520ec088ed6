"""Every knob's one precedence rule, marker > command line > ini > environment, as users meet it.

One pytester session sets a knob from each source, each also set in every weaker source:
``workers`` by the marker (the command line, the ini and the environment say otherwise) and
by the command line, ``capture`` by the ini (the environment's ``on`` would refuse the run where
packets cannot be captured, and say so) and ``scale`` by the environment alone.
"""

from __future__ import annotations

import pytest

# pytester's in-process runs drop modules first imported inside them: the plugin's lazily
# loaded core is imported before any run.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
from pytest_goodput.engines.engine import simulator

pytest_plugins = ["pytester"]

BODY = """
import pytest

SMALL = dict(scenario="server", rate=40.0, requests=8, isl=16, osl=8, ttft_ms=5000, tpot_ms=1000)


@pytest.mark.goodput(**SMALL, workers=1)
def test_marker_wins(goodput):
    r = goodput.run()
    assert r.spec.workers == 1  # the marker, over the command line's 2
    assert r.spec.capture == "off"  # the ini, over the environment's on
    assert r.completed == 4  # the environment's scale 0.5, set nowhere else


@pytest.mark.goodput(**SMALL)
def test_command_line_wins(goodput):
    r = goodput.run()
    assert r.spec.workers == 2  # the command line, over the ini's 3 and the environment's 4
    assert r.completed == 4
"""


def test_marker_beats_command_line_beats_ini_beats_environment(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_knobs=BODY)
    pytester.makeini("[pytest]\ngoodput_workers = 3\ngoodput_capture = off\n")
    for name, value in (("GOODPUT_WORKERS", "4"), ("GOODPUT_CAPTURE", "on"), ("GOODPUT_SCALE", "0.5")):
        monkeypatch.setenv(name, value)
    with simulator() as eng:
        res = pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-workers=2", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=2)

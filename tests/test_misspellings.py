"""A misspelt goodput marker or ini key stops the run naming the name meant: pytest's own
warning would let the build pass having measured nothing, or the wrong engine."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

DOCSTRING_GATE = '''
import pytest

@pytest.mark.{name}(scenario="server", rate=8.0, requests=20)
def test_chat_serving():
    """Requests at 8 req/s meet the SLOs."""

def test_plain():
    pass
'''


@pytest.mark.parametrize("name", ["goodputs", "goodput_ab", "Goodput", "godput"])
def test_a_misspelt_marker_is_a_collection_error_naming_the_marker_meant(pytester, name):
    pytester.makepyfile(test_perf=DOCSTRING_GATE.format(name=name))
    res = pytester.runpytest("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.INTERRUPTED
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines([
        f"unknown marker @pytest.mark.{name}: did you mean @pytest.mark.goodput? A misspelt marker "
        "measures nothing and the test passes (in test_perf.py::test_chat_serving)",
    ])
    assert "passed" not in res.stdout.str()


def test_a_registered_marker_or_an_unrelated_one_is_left_alone(pytester):
    pytester.makeini("[pytest]\nmarkers =\n    goodput_smoke: the quick perf tests\n")
    pytester.makepyfile(test_perf='''
import pytest

@pytest.mark.goodput_smoke
def test_registered():
    pass

@pytest.mark.slowish
def test_unrelated():
    pass
''')
    res = pytester.runpytest("-p", "no:cacheprovider")
    res.assert_outcomes(passed=2)


@pytest.mark.parametrize("key,meant", [
    ("goodput_urll", "goodput_url"), ("goodput_hardwear", "goodput_hardware"),
    ("goodput_sesions", "goodput_sessions"), ("godput_serve", "goodput_serve"),
])
def test_a_misspelt_ini_key_is_a_usage_error_naming_the_key_meant(pytester, key, meant):
    pytester.makeini(f"[pytest]\n{key} = http://127.0.0.1:9/v1\n")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    res = pytester.runpytest("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert (f"pytest-goodput: unknown ini key {key!r} in tox.ini: did you mean {meant!r}?"
            in res.stderr.str())
    assert "passed" not in res.stdout.str()


def test_a_key_of_another_tool_still_only_warns(pytester):
    pytester.makeini("[pytest]\nflake8_max_line_length = 100\n")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    res = pytester.runpytest("-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)


def test_under_strict_markers_pytest_refuses_the_marker_and_the_marker_meant_is_named(pytester):
    """``init`` writes --strict-markers: pytest then refuses the marker as the module is
    imported, before the plugin sees the test; its error still names the marker meant."""
    pytester.makeini("[pytest]\naddopts = --strict-markers --strict-config\n")
    pytester.makepyfile(test_perf=DOCSTRING_GATE.format(name="goodputs"))
    res = pytester.runpytest("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.INTERRUPTED
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines([
        "'goodputs' not found in `markers` configuration option",
        "*- pytest-goodput -*",
        "unknown marker @pytest.mark.goodputs: did you mean @pytest.mark.goodput?",
    ])

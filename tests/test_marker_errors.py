"""A bad goodput marker teaches: the name meant, the kind of value wanted in words, the percentile
SLO's right form, why an argument does not apply to the scenario; and the collection error
cannot be read as success."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_goodput.schema.scenario.applicability import not_applicable
from pytest_goodput.schema.scenario.arg_errors import percentile_slo_form, type_words
from pytest_goodput.schema.scenario.marker import check_marker
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


def collect(pytester: pytest.Pytester, marker: str, *args: str) -> tuple[pytest.RunResult, str]:
    pytester.makepyfile(test_perf=f"""
import pytest

@pytest.mark.goodput({marker})
def test_bad():
    pass

def test_plain():
    pass
""")
    res = pytester.runpytest("-p", "no:cacheprovider", *args)
    return res, res.stdout.str() + res.stderr.str()


def test_an_unknown_argument_gets_the_name_meant_and_the_valid_names(pytester):
    res, out = collect(pytester, 'scenario="server", rate=4, reqeusts=200')
    assert "invalid goodput arguments: reqeusts (in test_perf.py::test_bad)" in out
    assert "reqeusts=200: unknown argument; did you mean requests=?" in out
    valid = out[out.index("valid arguments (docs/markers.md):"):]
    for name in ("requests", "warmup_requests", "base_sim", "ttft_ms",
                 "<ttft|ttfo|tpot|itl|e2e|reasoning_tpot|answer_tpot>_p<P>_ms"):
        assert re.search(rf"(?<![\w<|]){re.escape(name)}(?![\w|>])", valid), name
    assert "Extra inputs are not permitted" not in out


def test_a_wrong_kind_of_value_is_said_in_words_with_the_fix(pytester):
    res, out = collect(pytester, 'scenario="server", rate=4, gate="metrics.ttft_ms.p99"')
    assert ("gate='metrics.ttft_ms.p99': gate= takes a list of strings, not the string "
            "'metrics.ttft_ms.p99'; write gate=['metrics.ttft_ms.p99']") in out
    assert "valid tuple" not in out
    res, out = collect(pytester, 'scenario="server", rate="fast"')
    assert "rate='fast': rate= takes a number, not the string 'fast'" in out
    res, out = collect(pytester, 'scenario="sweep", sweep=[1, "4"], requests=8')
    assert ("sweep=[1, '4']: sweep= takes a list of numbers, not the string '4' (a quoted value "
            "is text); write sweep=[1, 4]") in out
    res, out = collect(pytester, 'scenario="sweep", sweep=[1, "four"], requests=8')
    assert ("sweep=[1, 'four']: sweep= takes a list of numbers, not the list [1, 'four']: item 2, "
            "the string 'four', is not a number") in out
    res, out = collect(pytester, 'scenario="servr", rate=4')
    assert "scenario='servr': scenario= takes one of 'offline', 'server'" in out
    assert "did you mean scenario='server'?" in out


@pytest.mark.parametrize("marker,needle", [
    ('rate="8"', "rate='8': rate= takes a number, not the string '8' (a quoted value is text); "
     "write rate=8"),
    ('rate=8, requests="240"', "requests='240': requests= takes a whole number, not the string "
     "'240' (a quoted value is text); write requests=240"),
    ('rate=8, stream="false"', "stream='false': stream= takes True or False, not the string "
     "'false' (a quoted value is text); write stream=False"),
    ('rate=8, ttft_p99_ms="450"', "ttft_p99_ms='450': ttft_p99_ms= takes a number, not the string "
     "'450' (a quoted value is text); write ttft_p99_ms=450"),
])
def test_a_number_written_as_a_string_is_refused_with_the_value_meant(pytester, marker, needle):
    res, out = collect(pytester, marker)
    assert res.ret == pytest.ExitCode.INTERRUPTED
    res.assert_outcomes(errors=1)
    assert needle in out, out


def test_a_number_in_quotes_in_goodput_run_is_refused_as_in_the_marker(pytester):
    pytester.makeini("[pytest]\ngoodput_engine = sim\n")
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="server", rate=4, requests=8)
def test_override(goodput):
    goodput.run(rate="8")
""")
    res = pytester.runpytest("-p", "no:cacheprovider")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines([
        "*test_perf.py::test_override: invalid goodput arguments: rate",
        "*rate='8': rate= takes a number, not the string '8' (a quoted value is text); write rate=8",
    ])
    assert "engine:" not in res.stdout.str()  # refused before anything was measured


def test_a_misspelt_slo_preset_gets_the_preset_meant(pytester):
    res, out = collect(pytester, 'rate=8, slo="mlperf/llama3.1-8b/interactiv"')
    assert res.ret == pytest.ExitCode.INTERRUPTED
    assert ("unknown SLO preset 'mlperf/llama3.1-8b/interactiv'; did you mean "
            "slo='mlperf/llama3.1-8b/interactive'?") in out


def test_a_misspelt_percentile_slo_gets_its_right_form(pytester):
    res, out = collect(pytester, 'scenario="server", rate=4, ttft_ms_p99=450')
    assert ("ttft_ms_p99=450: unknown argument; a percentile SLO is written "
            "<metric>_p<percentile>_ms: did you mean ttft_p99_ms=450?") in out


@pytest.mark.parametrize("marker,needle", [
    ('scenario="concurrency", concurrency=4, rate=2',
     "rate=2 does not apply to scenario 'concurrency': a closed loop sends when a user's last request "
     "ends; it applies to server, interactive, capacity"),
    ('scenario="sweep", sweep=[1, 4], repeats=3',
     "repeats=3 does not apply to a concurrency sweep: each point is one run: record more sessions "
     "(--goodput-sessions) to measure the noise"),
    ('scenario="sweep", sweep=[1, 4], concurrency=8',
     "concurrency=8 does not apply to a concurrency sweep: a concurrency sweep's points take their "
     "users from sweep="),
    ('scenario="offline", requests=8, arrival="gamma"',
     "arrival='gamma' does not apply to scenario 'offline': offline sends every request at once"),
    ('scenario="server", rate=4, capacity_resolution=0.1',
     "capacity_resolution=0.1 does not apply to scenario 'server': only a capacity search probes rates"),
    ('scenario="server", rate=4, attainment=0.9',
     "attainment=0.9 is the share of requests within every per-request limit: it needs ttft_ms=, "
     "ttfo_ms=, tpot_ms=, e2e_ms= or slo="),
])
def test_an_argument_the_scenario_would_ignore_is_refused_with_the_reason(pytester, marker, needle):
    res, out = collect(pytester, marker)
    assert res.ret == pytest.ExitCode.INTERRUPTED
    assert needle in out, out


def test_the_collection_error_reads_as_a_failure_naming_test_and_argument(pytester):
    res, out = collect(pytester, 'scenario="server", rate=4, reqeusts=200')
    assert res.ret == pytest.ExitCode.INTERRUPTED  # non-zero: nothing ran
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines([
        "collected 2 items / 1 error",
        "*= ERRORS =*",
        "*ERROR collecting test_perf.py*",
        "invalid goodput arguments: reqeusts (in test_perf.py::test_bad)",
        "*short test summary info*",
        "ERROR test_perf.py::test_bad - invalid goodput arguments: reqeusts*",
        "*Interrupted: 1 error during collection*",
        "*= 1 error in *",
    ])
    assert "passed" not in out and "no tests ran" not in out
    # The other tests may run on: the session still fails.
    res = pytester.runpytest("-p", "no:cacheprovider", "--continue-on-collection-errors")
    res.assert_outcomes(passed=1, errors=1)
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    # Listing the tests fails too.
    res = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert res.ret == pytest.ExitCode.INTERRUPTED


def test_the_example_suite_and_the_readme_marker_are_accepted(pytester):
    for path in (ROOT / "example_suite").glob("test_*.py"):
        pytester.makepyfile(**{path.stem: path.read_text()})
    readme = (ROOT / "README.md").read_text()
    pytester.makepyfile(test_readme=re.search(r"```python\n(.*?)```", readme, re.S).group(1))
    res = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert res.ret == pytest.ExitCode.OK, res.stdout.str()
    res.stdout.fnmatch_lines(["8 tests collected*"])


# ---- the rules behind the messages (no session) ----

def test_types_in_words():
    fields = ScenarioSpec.model_fields
    assert type_words(fields["gate"].annotation) == "a list of strings"
    assert type_words(fields["requests"].annotation) == "a whole number"
    assert type_words(fields["images_per_request"].annotation) == "a whole number or a list of whole numbers"
    assert type_words(fields["tolerances"].annotation) == "a dict of names to numbers"
    assert type_words(fields["arrival"].annotation) == "one of 'poisson', 'gamma', 'constant'"
    assert type_words(fields["stream"].annotation) == "True or False"


@pytest.mark.parametrize("name,form", [
    ("ttft_ms_p99", "ttft_p99_ms"), ("p99_ttft_ms", "ttft_p99_ms"), ("tpot_p90", "tpot_p90_ms"),
    ("answer_tpot_ms_p99.9", "answer_tpot_p99.9_ms"), ("reasoning_tpot_p50", "reasoning_tpot_p50_ms"),
    ("ttft_p99_ms", None), ("ttft_ms", None), ("requests", None), ("p99", None),
])
def test_the_percentile_slo_form_a_misspelling_meant(name, form):
    assert percentile_slo_form(name) == form


@pytest.mark.parametrize("args,refused", [
    ({"scenario": "offline", "requests": 8, "ttft_ms": 450, "ttft_p99_ms": 500}, []),  # SLOs are checked
    ({"scenario": "sweep", "sweep": [1, 2], "sweep_over": "rate", "arrival": "gamma", "burstiness": 0.5,
      "concurrency": 8}, []),  # a rate sweep's points are open loops with a ceiling
    ({"scenario": "sweep", "sweep": [1, 2], "sweep_over": "rate", "rate": 3}, ["rate"]),
    ({"scenario": "capacity", "rate": 2, "concurrency": 8, "ttft_ms": 100, "attainment": 0.9}, []),
    ({"scenario": "trace", "trace": "t.jsonl", "min_len": 4}, ["min_len"]),
    ({"scenario": "server", "rate": 2, "gpus": 2, "trace_start_s": 1}, ["gpus", "trace_start_s"]),
    ({"rate": 2, "turns": 2, "think_time_s": 1.0}, []),  # the default scenario is server
    ({"scenario": "capacity", "gate": ["metrics.ttft_ms.p99"]}, ["gate"]),
    ({"scenario": "nonsense", "rate": 2}, []),  # left to the type check
])
def test_what_applies_to_which_scenario(args, refused):
    assert [name for name, _ in not_applicable(args)] == refused


def test_every_problem_of_a_marker_is_named_at_once():
    with pytest.raises(SpecError) as ei:
        check_marker({"scenario": "sweep", "sweep": [1, 2], "repeats": 2, "rate": 3, "timeout_s": "x"},
                     where="t.py::test_x")
    lines = str(ei.value).splitlines()
    assert lines[0] == "t.py::test_x: invalid goodput arguments: repeats, rate, timeout_s"
    assert [ln.split("=")[0].strip() for ln in lines[1:]] == ["repeats", "rate", "timeout_s"]

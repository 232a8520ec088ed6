"""The pytest plugin as users meet it, driven through ``pytester``.

One simulator (and one deliberately slowed one) serve every test here; the runs are small,
so the numbers only need to be plausible, while verdicts, messages and files are exact.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# and exception classes (httpx) must not be loaded twice, so the plugin's lazily loaded
# core is imported before any pytester run.
import pytest_goodput.load.coordinator  # noqa: E402,F401
import pytest_goodput.plugin.harness  # noqa: E402,F401
import pytest_goodput.plugin.session  # noqa: E402,F401
import pytest_goodput.report.files  # noqa: E402,F401

import pytest_goodput.judge.scalar.verdicts

# pytester's in-process runs drop modules first imported inside them; C extensions such as
# numpy cannot be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.load.coordinator
import pytest_goodput.report.github  # noqa: F401
import pytest_goodput.report.md.markdown  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.engines.engine import simulator
from pytest_goodput.store import baseline as baseline_store

pytest_plugins = ["pytester"]

# 32 output tokens: a stream of ~160 ms, so a busy machine's late read never finds every
# token of a request at once (which would leave it without a TPOT and fail a TPOT SLO).
SMALL = "requests=40, rate=40.0, isl=16, osl=32"

#: A recording of one session, for tests about files, messages and a gross regression rather
#: than the noise of several sessions (the default five are tested in the first test below).
#: A test that needs an A/A comparison to pass keeps the five: one session's prior spread can
#: call a busy machine's TTFT P99 regressed.
ONE_SESSION = ("--goodput-sessions=1",)


@pytest.fixture(scope="module")
def sim_url():
    with simulator() as eng:
        yield eng.base_url


def write_test(pytester: pytest.Pytester, body: str, name: str = "test_perf") -> None:
    pytester.makepyfile(**{name: "import pytest\n\n" + body})


SERVER_TEST = f"""
@pytest.mark.goodput(scenario="server", {SMALL}, tpot_ms=1000, ttft_ms=5000, attainment=0.9)
def test_server(goodput):
    r = goodput.run()
    assert r.completed == 40
"""


def test_marker_validation_names_test_argument_and_allowed_values(pytester):
    write_test(pytester, """
@pytest.mark.goodput(scenario="servr", rate=1)
def test_a():
    pass

@pytest.mark.goodput(rate=-2)
def test_b():
    pass
""")
    res = pytester.runpytest()
    assert res.ret == pytest.ExitCode.INTERRUPTED  # collection errors: nothing runs
    out = res.stdout.str()
    assert "invalid goodput arguments: scenario (in test_perf.py::test_a)" in out
    assert "scenario= takes one of 'offline', 'server', 'interactive'" in out
    assert "test_perf.py::test_b" in out and "rate: Input should be greater than 0" in out
    assert "Traceback" not in out


def test_marker_is_registered_for_strict_markers(pytester):
    write_test(pytester, """
@pytest.mark.goodput(scenario="offline", requests=1)
def test_a():
    pass
""")
    res = pytester.runpytest("--strict-markers", "--collect-only", "-q")
    assert res.ret == 0
    res.stdout.fnmatch_lines(["*test_a*"])
    res2 = pytester.runpytest("--markers")
    res2.stdout.fnmatch_lines(["@pytest.mark.goodput*"])


def test_bad_option_value_names_its_source(pytester):
    write_test(pytester, SERVER_TEST)
    pytester.makeini("[pytest]\ngoodput_scale = lots\n")
    res = pytester.runpytest()
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "ini goodput_scale: 'lots' is not a valid float for scale" in res.stderr.str()


def test_attach_compare_new_then_pass_then_unused(pytester, sim_url):
    write_test(pytester, SERVER_TEST)
    # No baseline yet: reported as new, passes.
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*goodput*", "*test_server*new*"])
    # Record it, then compare against it: same engine -> pass.
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline")
    res.assert_outcomes(passed=1)
    base = pytester.path / ".goodput/baselines/test_perf/test_server.json"
    doc = baseline_store.load(base)
    assert doc is not None and doc.nodeid == "test_perf.py::test_server"
    # One update records five sessions; an attached engine is not relaunched between them,
    # and the session says so.
    assert len(doc.sessions) == 5 and len(doc.sessions[0].samples[0].ttft_ms) == 40
    assert doc.sessions[0].environment.identity["hardware"] == "unlabelled"
    res.stdout.fnmatch_lines(["*note: test_perf.py::test_server: the 5 recorded sessions share one "
                              "engine process (attach*"])
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline")
    res.assert_outcomes(passed=1)
    # The test is renamed: its old baseline is reported as unused (the module was collected).
    write_test(pytester, SERVER_TEST.replace("test_server", "test_renamed"))
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline")
    res.stdout.fnmatch_lines(["*unused baseline*test_server.json"])


def test_regression_fails_with_readable_message(pytester, sim_url, slow_sim_url):
    write_test(pytester, """
@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests=60, isl=16, osl=16)
def test_closed_loop():
    pass
""")
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                       *ONE_SESSION).assert_outcomes(passed=1)
    res = pytester.runpytest(f"--goodput-url={slow_sim_url}", "--goodput-baseline")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "regressed: output throughput" in out and "tolerance 5.0%" in out
    assert "interval [" in out
    assert "Traceback" not in out
    assert res.ret == pytest.ExitCode.TESTS_FAILED


def test_corrupt_and_foreign_baselines_are_errors_never_overwritten(pytester, sim_url):
    write_test(pytester, SERVER_TEST)
    base = pytester.path / ".goodput/baselines/test_perf/test_server.json"
    base.parent.mkdir(parents=True)
    for content, needle in (("{not json", "is not valid JSON"),
                            ('{"some": "other tool"}', "is not a pytest-goodput baseline"),
                            ('{"kind": "pytest-goodput-baseline", "schema_version": 99}',
                             "schema_version 99")):
        base.write_text(content)
        res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline", *ONE_SESSION)
        res.assert_outcomes(failed=1)
        assert needle in res.stdout.str()
        assert base.read_text() == content


def test_slo_failure_fails_and_json_written(pytester, sim_url):
    write_test(pytester, f"""
@pytest.mark.goodput(scenario="server", {SMALL}, ttft_ms=0.001, attainment=0.5)
def test_impossible():
    pass
""")
    out = pytester.path / "out.json"
    res = pytester.runpytest(f"--goodput-url={sim_url}", f"--goodput-json={out}")
    res.assert_outcomes(failed=1)
    assert "attainment" in res.stdout.str()
    doc = json.loads(out.read_text())
    (test,) = doc["tests"]
    slos = {s["name"]: s for s in test["outcome"]["slos"]}
    assert slos["attainment"]["ok"] is False and slos["attainment"]["value"] == 0.0
    assert slos["error_rate"]["ok"] is True and slos["error_rate"]["value"] == 0.0
    assert len(test["runs"][0]["requests"]) == 40


def test_launch_selection_and_junit_properties(pytester):
    write_test(pytester, SERVER_TEST)
    cmd = f"{sys.executable} -m pytest_goodput sim --port {{port}}"
    junit = pytester.path / "junit.xml"
    res = pytester.runpytest(f"--goodput-serve={cmd}", f"--junitxml={junit}")
    res.assert_outcomes(passed=1)
    xml = junit.read_text()
    assert 'name="goodput.throughput.output_tokens_per_s"' in xml
    assert 'name="goodput.status" value="passed"' in xml


def test_default_is_the_simulator_and_scale(pytester):
    write_test(pytester, SERVER_TEST.replace("r.completed == 40", "r.completed == 10"))
    res = pytester.runpytest("--goodput-scale=0.25")
    res.assert_outcomes(passed=1)


def test_cli_beats_ini_beats_env(pytester, sim_url, monkeypatch):
    write_test(pytester, SERVER_TEST.replace("r.completed == 40", "r.completed == 20"))
    monkeypatch.setenv("GOODPUT_SCALE", "0.1")  # would give 4 requests
    monkeypatch.setenv("GOODPUT_URL", sim_url)
    pytester.makeini("[pytest]\ngoodput_scale = 0.25\n")  # would give 10
    res = pytester.runpytest("--goodput-scale=0.5")
    res.assert_outcomes(passed=1)


def test_marker_tolerance_beats_cli(pytester, sim_url, slow_sim_url):
    body = """
@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests=60, isl=16, osl=16,
                     tolerance=0.9, gate=["throughput.output_tokens_per_s"])
def test_closed_loop():
    pass
"""
    write_test(pytester, body)
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                       *ONE_SESSION).assert_outcomes(passed=1)
    # Throughput halves; the marker tolerates a 90 % drop, so the CLI's 1 % does not apply.
    res = pytester.runpytest(f"--goodput-url={slow_sim_url}", "--goodput-baseline", "--goodput-tolerance=0.01")
    res.assert_outcomes(passed=1)


def test_xdist_workers_refuse_goodput_tests_before_measuring(pytester, sim_url):
    pytest.importorskip("xdist")
    marker = pytester.path / "measured"
    write_test(pytester, SERVER_TEST.replace(
        "    r = goodput.run()", f"    open({str(marker)!r}, 'w').close()\n    r = goodput.run()")
        + "\n\ndef test_plain():\n    assert True\n")
    res = pytester.runpytest("-n", "1", f"--goodput-url={sim_url}")  # one worker is xdist enough
    res.assert_outcomes(passed=1, errors=1)
    assert "refuse to run under pytest-xdist" in res.stdout.str()
    assert not marker.exists()  # refused at setup: the test body never ran


def test_collect_only_starts_no_engine(pytester, monkeypatch):
    write_test(pytester, SERVER_TEST)
    import pytest_goodput.engines.engine as eng

    def boom(*a, **k):
        raise AssertionError("engine started during collection")

    monkeypatch.setattr(eng, "select", boom)
    res = pytester.runpytest("--co", "-q")
    assert res.ret == 0


def test_unmarked_test_can_use_goodput_with_overrides(pytester, sim_url):
    write_test(pytester, """
def test_free_form(goodput):
    r = goodput.run(scenario="offline", requests=5, isl=8, osl=4)
    assert r.completed == 5
    with pytest.raises(RuntimeError, match="already called"):
        goodput.run()
""")
    pytester.runpytest(f"--goodput-url={sim_url}").assert_outcomes(passed=1)


def test_bad_override_is_a_clean_failure(pytester, sim_url):
    write_test(pytester, """
def test_free_form(goodput):
    goodput.run(scenario="offline", requests=0)
""")
    res = pytester.runpytest(f"--goodput-url={sim_url}")
    res.assert_outcomes(failed=1)
    assert "requests: Input should be greater than or equal to 1" in res.stdout.str()


def test_unreachable_engine_is_a_clear_failure(pytester):
    write_test(pytester, SERVER_TEST)
    res = pytester.runpytest("--goodput-url=http://127.0.0.1:9/v1", "--goodput-model=m")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "127.0.0.1:9" in out and "Traceback" not in out


def test_baseline_dir_argument(pytester, sim_url):
    write_test(pytester, SERVER_TEST)
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                             "--goodput-baseline=perf", *ONE_SESSION)
    res.assert_outcomes(passed=1)
    assert (Path(pytester.path) / "perf/test_perf/test_server.json").is_file()


def test_baseline_dir_after_a_space_is_refused(pytester):
    write_test(pytester, SERVER_TEST)
    res = pytester.runpytest("--goodput-baseline", "test_perf.py")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--goodput-baseline=test_perf.py (with '=')" in res.stderr.str()


def test_failed_requests_fail_the_test_and_are_never_recorded(pytester):
    write_test(pytester, SERVER_TEST.replace("    assert r.completed == 40\n", ""))
    with simulator(error_rate=0.3) as eng:
        res = pytester.runpytest(f"--goodput-url={eng.base_url}", "--goodput-update-baseline", *ONE_SESSION)
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "error rate BROKEN" in out and "http_status" in out
    assert "baseline NOT written" in out
    assert not (pytester.path / ".goodput/baselines/test_perf/test_server.json").exists()
    # a test that tolerates errors says so
    write_test(pytester, SERVER_TEST.replace("    assert r.completed == 40\n", "").replace(
        "attainment=0.9", "attainment=0.5, max_error_rate=0.6"))
    with simulator(error_rate=0.3) as eng:
        pytester.runpytest(f"--goodput-url={eng.base_url}").assert_outcomes(passed=1)


def test_secrets_never_reach_baselines_or_reports(pytester, monkeypatch):
    monkeypatch.setenv("GOODPUT_TEST_KEY", "sk-live-123456")
    write_test(pytester, SERVER_TEST)
    cmd = (f"env VLLM_API_KEY=sk-live-123456 {sys.executable} -m pytest_goodput sim "
           "--port {port}")
    report, out_json = pytester.path / "r.md", pytester.path / "r.json"
    res = pytester.runpytest(f"--goodput-serve={cmd}", "--goodput-api-key-env=GOODPUT_TEST_KEY",
                             "--goodput-update-baseline", *ONE_SESSION, f"--goodput-report={report}",
                             f"--goodput-json={out_json}")
    res.assert_outcomes(passed=1)
    files = [report, out_json, *(pytester.path / ".goodput").rglob("*.json")]
    assert len(files) == 3
    for f in files:
        assert "sk-live" not in f.read_text(), f
    assert "sk-live" not in res.stdout.str()


def test_strict_fails_when_the_baseline_is_incomparable(pytester, sim_url):
    write_test(pytester, SERVER_TEST)
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                       "--goodput-hardware=h100", *ONE_SESSION).assert_outcomes(passed=1)
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline",
                             "--goodput-hardware=a100")
    res.assert_outcomes(passed=1)
    assert "hardware differs" in res.stdout.str()
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline",
                             "--goodput-hardware=a100", "--goodput-strict")
    res.assert_outcomes(failed=1)


def test_selecting_one_test_by_node_id_reports_no_unused_baseline(pytester, sim_url):
    # No request SLO and a wide tolerance: what is decided is which baselines are reported,
    # not whether a neighbour's load moved a 40-request run.
    one = f"""
@pytest.mark.goodput(scenario="server", {SMALL}, tolerance=0.9)
def test_server():
    pass
"""
    two = one + one.replace("def test_server", "def test_other")
    write_test(pytester, two)
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                       *ONE_SESSION).assert_outcomes(passed=2)
    res = pytester.runpytest("test_perf.py::test_server", f"--goodput-url={sim_url}", "--goodput-baseline")
    res.assert_outcomes(passed=1)
    assert "unused baseline" not in res.stdout.str()


def test_compare_mode_without_any_baseline_says_so(pytester, sim_url):
    write_test(pytester, SERVER_TEST)
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline")
    res.assert_outcomes(passed=1)
    assert "does not exist: no goodput test was compared" in res.stdout.str()

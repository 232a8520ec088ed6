"""A/B mode inside pytest, as users meet it: ``--goodput-base-*``, the marker, ``run(base=)``.

Every A/B run here is base against head on two simulators started by the session; the
verdicts, messages and files are asserted, never a timing.
"""

from __future__ import annotations

import json
import sys

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# must not be loaded twice, so the plugin's lazily loaded core is imported first.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.md.markdown  # noqa: F401
from pytest_goodput.engines.ports import free_port

pytest_plugins = ["pytester"]

SMALL = 'scenario="concurrency", concurrency=4, requests=40, isl=16, osl=8'
#: Receive times from a packet capture where the machine allows it (docs/capture.md): a busy
#: machine's late event loop then does not drop rounds as invalid.
EXACT = ("--goodput-capture=auto",)


def write(pytester: pytest.Pytester, body: str) -> None:
    pytester.makepyfile(test_ab_gate_perf="import pytest\n\n" + body)


def test_a_slower_head_fails_against_its_base_and_no_baseline_is_written(pytester, monkeypatch):
    monkeypatch.setenv("GOODPUT_SIM_SLOWDOWN", "1.5")  # the head's knob; the base ignores it
    write(pytester, f"""
@pytest.mark.goodput({SMALL})
def test_decode(goodput):
    assert goodput.run().completed == 40
""")
    r = pytester.runpytest("-p", "no:cacheprovider", "--goodput-base-sim=default",
                           "--goodput-report=report.md", "--goodput-json=out.json", *EXACT)
    out = r.stdout.str()
    assert r.ret == 1, out
    assert "goodput regressed" in out and "A/B in one job: base simulator vs head simulator" in out
    assert "round 1:" in out  # progress names each round's order
    assert not (pytester.path / ".goodput").exists()  # A/B reads and writes no baseline
    report = (pytester.path / "report.md").read_text()
    assert "| base | head |" in report and "A/B in one job" in report
    doc = json.loads((pytester.path / "out.json").read_text())
    (test,) = doc["tests"]
    ab = test["outcome"]["ab"]
    assert ab["rounds_used"] >= 4 and ab["decided"] and "regressed" in ab["stop_reason"]
    assert len(ab["orders"]) == ab["rounds_used"] + ab["rounds_dropped"]
    assert len(test["runs"]) == ab["rounds_used"]  # the head's runs, one per judged round


def test_the_same_engine_on_both_sides_passes(pytester):
    write(pytester, f"""
@pytest.mark.goodput({SMALL})
def test_decode(goodput):
    goodput.run()
""")
    r = pytester.runpytest("-p", "no:cacheprovider", "--goodput-base-sim=default",
                           "--goodput-ab-max-rounds=4", *EXACT)
    out = r.stdout.str()
    assert r.ret == 0, out
    assert "A/B in one job" in out
    assert "regressed" not in out.split("= goodput =")[-1]


def test_run_takes_a_base_engine_from_the_factory(pytester):
    write(pytester, f"""
@pytest.mark.goodput({SMALL}, ab_min_rounds=3, ab_max_rounds=4)
def test_faster_than_old(goodput, goodput_engine_factory):
    r = goodput.run(base=goodput_engine_factory(slowdown=2.0))
    assert r.completed == 40
    assert goodput.ab.result.rounds_used >= 3
    assert "improved" in [c.verdict for c in goodput.ab.result.comparisons]
""")
    r = pytester.runpytest("-p", "no:cacheprovider", *EXACT)
    assert r.ret == 0, r.stdout.str()


@pytest.mark.parametrize("marker, message", [
    ("base_sim='slowdown', " + SMALL, "base_sim: 'slowdown' is not knob=value"),
    ("ab_min_rounds=1, base_sim='default', " + SMALL, "ab_min_rounds: Input should be greater than or equal to 2"),
    ("base_url='http://127.0.0.1:9', base_sim='default', " + SMALL, "base_url and base_sim exclude each other"),
])
def test_bad_ab_marker_arguments_are_named_before_anything_runs(pytester, marker, message):
    write(pytester, f"""
@pytest.mark.goodput({marker})
def test_decode():
    pass
""")
    r = pytester.runpytest("-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    r.stdout.fnmatch_lines([f"*test_ab_gate_perf.py::test_decode*"])
    assert message in r.stdout.str()


@pytest.mark.parametrize("args, message", [
    (["--goodput-base-sim=slowdwn=2"], "--goodput-base-sim: unknown simulator knob(s): slowdwn"),
    (["--goodput-base-sim=default", "--goodput-base-url=http://127.0.0.1:9"], "give one base engine"),
    (["--goodput-base-sim=default", "--goodput-update-baseline"], "records no baseline"),
    (["--goodput-base-sim=default", "--goodput-ab-max-rounds=1"], "ab_max_rounds"),
    (["--goodput-base-url=http://127.0.0.1:9", "--goodput-ab-exclusive"], "cannot be restarted"),
])
def test_bad_ab_options_are_usage_errors(pytester, args, message):
    write(pytester, f"""
@pytest.mark.goodput({SMALL})
def test_decode():
    pass
""")
    r = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert message in r.stderr.str()


@pytest.mark.parametrize("base, message", [
    (f"--goodput-base-serve={sys.executable} -c 'import sys; sys.exit(3)' --port {{port}} "
     "--api-key sk-secret-xyz", "engine exited with code 3"),
    ("--goodput-base-url=http://127.0.0.1:9/v1?key=sk-secret-xyz", "cannot reach"),
])
def test_a_base_that_cannot_start_fails_the_test_with_its_reason(pytester, sim_url, base, message):
    """The head is attached (it cannot be restarted to make room) and the base's command exits,
    or its URL does not answer: the test fails with the reason, redacted, and no traceback."""
    write(pytester, f"""
@pytest.mark.goodput({SMALL})
def test_decode(goodput):
    goodput.run()
""")
    r = pytester.runpytest("-p", "no:cacheprovider", f"--goodput-url={sim_url}", base)
    out = r.stdout.str()
    assert r.ret == 1, out
    r.assert_outcomes(failed=1)
    assert message in out and "sk-secret-xyz" not in out, out
    assert "Traceback" not in out and "During handling" not in out


def test_a_capacity_search_cannot_run_in_ab_mode_and_says_why(pytester):
    capacity = """
@pytest.mark.goodput(scenario="capacity", ttft_ms=500, requests=10, isl=16, osl=8{})
def test_capacity():
    pass
"""
    write(pytester, capacity.format(""))
    r = pytester.runpytest("-p", "no:cacheprovider", "--goodput-base-sim=default")
    assert r.ret == 1
    r.stdout.fnmatch_lines(["*A/B mode: A/B mode does not compare capacity searches*"])
    # A base engine named on the marker is refused with the test, before anything runs.
    write(pytester, capacity.format(', base_sim="default"'))
    r = pytester.runpytest("-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.INTERRUPTED
    assert ("base_sim='default' does not apply to scenario 'capacity': A/B mode does not compare "
            "capacity searches") in r.stdout.str()


def test_a_sweep_is_judged_point_by_point_and_drawn_as_two_frontiers(pytester, monkeypatch):
    monkeypatch.setenv("GOODPUT_SIM_SLOWDOWN", "1.5")  # the head's
    write(pytester, """
@pytest.mark.goodput(scenario="sweep", sweep=[1, 4], sweep_over="concurrency", requests=30, isl=16,
                     osl=8, base_sim="default", ab_min_rounds=3, ab_max_rounds=4)
def test_frontier(goodput):
    goodput.run()
""")
    r = pytester.runpytest("-p", "no:cacheprovider", "--goodput-report=report.md", *EXACT)
    out = r.stdout.str()
    assert r.ret == 1 and "goodput regressed" in out, out
    assert "regressed: frontier: " in out and "compared at equal load" in out
    report = (pytester.path / "report.md").read_text()
    assert "| base | head |" in report and "xychart" in report  # both frontiers drawn


def test_a_base_that_cannot_start_beside_the_head_runs_one_engine_at_a_time(pytester):
    # Both commands bind one fixed port: the base cannot start while the session's engine (the
    # head) is up, so the gate stops the head and restarts each side before its run. Every
    # round starts two engines: three rounds, and the simulator's own module, which starts
    # without the CLI's imports.
    port = free_port()
    sim = f"{sys.executable} -m pytest_goodput.sim.server --port {port}"
    write(pytester, f"""
@pytest.mark.goodput({SMALL}, ab_min_rounds=3, ab_max_rounds=3)
def test_decode(goodput):
    goodput.run()
""")
    r = pytester.runpytest("-p", "no:cacheprovider", f"--goodput-serve={sim} --slowdown 1.5",
                           f"--goodput-base-serve={sim}", *EXACT)
    out = r.stdout.str()
    assert r.ret == 1 and "goodput regressed" in out, out
    assert "one engine at a time: each run started its engine afresh" in out

"""The plugin's gate and ``python -m pytest_goodput compare`` judge through one function.

The same files give the same verdicts, metric by metric, whichever entry point judges them:
a plain scenario, a sweep (frontier, also through ``frontier``), a capacity search, an
identity change, and a broken SLO.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions such as
# numpy cannot be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.run.gating  # noqa: F401
from pytest_goodput.engines.engine import simulator
from pytest_goodput.judge import Policy, fails, from_results, judge
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.outcomes import outcome as outcome_schema

pytest_plugins = ["pytester"]


# Engines slow enough (ITL ≈ 10 ms and more) that the client's self-check keeps its widest
# limit on a busy machine: this test is about verdicts, not about a starved client.
@pytest.fixture(scope="module")
def sim_url():
    with simulator(slowdown=2.0) as eng:
        yield eng.base_url


@pytest.fixture(scope="module")
def slow_sim_url():
    with simulator(slowdown=3.2) as eng:
        yield eng.base_url

# Small on purpose: the subject is that two entry points agree, not the size of a change. The
# capacity search starts at 8 req/s (2 probes up to its 16 req/s cap, not 4 from 2 req/s), and
# two baseline sessions give the CLI a multi-session baseline to read.
TESTS = """
import pytest

@pytest.mark.goodput(scenario="server", requests=40, rate=40.0, isl=16, osl=8, tpot_ms=1000,
                     ttft_ms=5000, attainment=0.9)
def test_server(goodput):
    goodput.run()

@pytest.mark.goodput(scenario="sweep", sweep=[1, 4], requests=24, isl=128, osl=16)
def test_sweep(goodput):
    goodput.run()

@pytest.mark.goodput(scenario="capacity", requests=20, rate=8.0, isl=16, osl=16, tpot_ms=20,
                     attainment=0.9, capacity_max_rate=16.0, capacity_resolution=0.2)
def test_capacity(goodput):
    goodput.run()
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", *args], capture_output=True,
                          text=True, timeout=120)


def _verdicts(outcomes: list[dict]) -> dict[str, dict[str, str]]:
    return {o["nodeid"]: {c["metric"]: c["verdict"] for c in o["comparisons"]} for o in outcomes}


def test_gate_and_compare_cli_give_the_same_verdicts(pytester, sim_url, slow_sim_url, tmp_path):
    pytester.makepyfile(test_perf=TESTS)
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                       "--goodput-sessions=2").assert_outcomes(passed=3)
    session = tmp_path / "session.json"
    res = pytester.runpytest(f"--goodput-url={slow_sim_url}", "--goodput-baseline",
                             f"--goodput-json={session}")
    gate_outcomes = [t["outcome"] for t in json.loads(session.read_text())["tests"]]
    gate = _verdicts(gate_outcomes)
    assert set(gate) == {"test_perf.py::test_server", "test_perf.py::test_sweep",
                         "test_perf.py::test_capacity"}
    assert "frontier_throughput" in gate["test_perf.py::test_sweep"]
    assert "capacity.requests_per_s" in gate["test_perf.py::test_capacity"]
    assert any(v == "regressed" for v in gate["test_perf.py::test_server"].values()), gate
    cli_json = tmp_path / "cli.json"
    cli = _cli("compare", str(pytester.path / ".goodput" / "baselines"), str(session),
               "--json", str(cli_json))
    # Both fail the same way: pytest with failed tests (exit 1), the CLI with exit 1.
    assert res.ret == 1 and cli.returncode == 1, cli.stdout + cli.stderr
    cli_outcomes = json.loads(cli_json.read_text())["outcomes"]
    assert _verdicts(cli_outcomes) == gate
    by_id = {o["nodeid"]: o for o in cli_outcomes}
    for o in gate_outcomes:
        c = by_id[o["nodeid"]]
        assert (c["baseline_status"], _status(c)) == (o["baseline_status"], _status(o))
        assert [s["ok"] for s in c["slos"]] == [s["ok"] for s in o["slos"]]
        for mine, theirs in zip(o["comparisons"], c["comparisons"]):
            assert mine["change"] == pytest.approx(theirs["change"])
    # The frontier command on the same files: the gate's sweep verdict, point by point.
    baselines = pytester.path / ".goodput" / "baselines"
    fr = _cli("frontier", str(session), "--baseline", str(baselines))
    sweep = next(o for o in gate_outcomes if o["nodeid"] == "test_perf.py::test_sweep")
    verdict = gate["test_perf.py::test_sweep"]["frontier_throughput"]
    assert fr.returncode == int(fails(outcome_schema.TestOutcome.model_validate(sweep), Policy())), fr.stdout
    assert f"verdict: {outcome_schema.VERDICT_SYMBOL[verdict]} {verdict} (" in fr.stdout
    table = fr.stdout[fr.stdout.index("at equal load"):fr.stdout.index("step lookup")]
    for point in sweep["frontier"]["comparison"]["by_load"]:
        label = f"{point['load']:g} {'user' if point['load'] == 1 else 'users'}  "
        row = next(ln for ln in table.splitlines() if ln.startswith(label))
        assert row.rstrip().endswith(f" {point['verdict']}"), (row, point["verdict"])


def _status(outcome: dict) -> str:
    return outcome_schema.TestOutcome.model_validate(outcome).status


def test_identity_and_slos_are_judged_by_the_cli_too(tmp_path, sim_url):
    """What the CLI used to skip: another hardware label is incomparable; a broken SLO fails."""
    from pytest_goodput.engines.engine import attach
    from pytest_goodput.run.runner import measure
    from pytest_goodput.schema.scenario.spec import build_spec

    spec = build_spec(dict(scenario="server", requests=30, rate=30.0, isl=16, osl=8, ttft_ms=0.001))
    with attach(sim_url) as eng:
        m = measure(spec, eng)
    env_a = Fingerprint(identity={"hardware": "A100", "model": "m", "scenario_hash": spec.identity_hash()})
    env_b = Fingerprint(identity={"hardware": "H100", "model": "m", "scenario_hash": spec.identity_hash()})
    base, cur = from_results(m.results, env_a), from_results(m.results, env_b)
    outcome = judge("t::x", cur, base, Policy())
    assert outcome.baseline_status == "incomparable"
    assert any("hardware differs" in r for r in outcome.incomparable_reasons)
    assert outcome.slo_failed and fails(outcome, Policy())
    # Through the CLI, on run results: the broken attainment SLO fails the comparison.
    path = tmp_path / "run.json"
    path.write_text(m.result.model_dump_json())
    cli = _cli("compare", str(path), str(path))
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "slo-failed" in cli.stdout

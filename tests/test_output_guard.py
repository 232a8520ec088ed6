"""The output guard: faster but wrong must not pass (issue 41).

On the simulator, through the plugin (``--goodput-update-baseline`` then
``--goodput-baseline``) and ``python -m pytest_goodput compare``: unchanged outputs pass at the
baseline's agreement; the output-changing knob (``output_drift``, faster decoding) fails the
gate on ``output.agreement`` while throughput reads *improved*. Random sampling turns the
guard off, and the report says so. ``python -m pytest_goodput run --temperature 0`` and
``compare`` on its result files judge the same way.
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

pytest_plugins = ["pytester"]

GUARDED = """
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests=48, isl=32, osl=16,
                     temperature=0, repeats=2)
def test_greedy(goodput):
    goodput.run()

@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests=24, isl=32, osl=16,
                     temperature=0.8)
def test_sampled(goodput):
    goodput.run()
"""


@pytest.fixture(scope="module")
def sim_url():
    with simulator(slowdown=2.0) as eng:
        yield eng.base_url


@pytest.fixture(scope="module")
def drifted_url():
    # half the prompts generate other text, every step 25 % shorter
    with simulator(slowdown=2.0, output_drift=0.5) as eng:
        yield eng.base_url


def _outcomes(path) -> dict[str, dict]:
    return {t["outcome"]["nodeid"].split("::")[1]: t["outcome"] for t in json.loads(path.read_text())["tests"]}


def _verdicts(outcome: dict) -> dict[str, str]:
    return {c["metric"]: c["verdict"] for c in outcome["comparisons"]}


def test_faster_but_wrong_fails_the_gate_while_unchanged_outputs_pass(pytester, sim_url, drifted_url, tmp_path):
    pytester.makepyfile(test_perf=GUARDED)
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline").assert_outcomes(passed=2)

    same = tmp_path / "same.json"
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline", f"--goodput-json={same}")
    greedy = _outcomes(same)["test_greedy"]
    agreement = next(c for c in greedy["comparisons"] if c["metric"] == "output.agreement")
    assert (agreement["verdict"], agreement["baseline"], agreement["current"]) == ("pass", 1.0, 1.0)
    sampled = _outcomes(same)["test_sampled"]
    assert "output.agreement" not in _verdicts(sampled)
    assert any(n.startswith("output guard off: sampling not deterministic") for n in sampled["notes"])
    # The guard's verdicts above decide; the other metrics of this A/A are not its subject.

    wrong = tmp_path / "wrong.json"
    res = pytester.runpytest(f"--goodput-url={drifted_url}", "--goodput-baseline", f"--goodput-json={wrong}")
    verdicts = _verdicts(_outcomes(wrong)["test_greedy"])
    assert verdicts["output.agreement"] == "regressed", verdicts
    assert verdicts["throughput.output_tokens_per_s"] == "improved", verdicts
    res.assert_outcomes(passed=1, failed=1)
    assert "output agreement" in res.stdout.str()

    # The CLI judges the same files the same way.
    cli_json = tmp_path / "cli.json"
    cli = subprocess.run([sys.executable, "-m", "pytest_goodput", "compare",
                          str(pytester.path / ".goodput" / "baselines"), str(wrong), "--json", str(cli_json)],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    by_id = {o["nodeid"]: o for o in json.loads(cli_json.read_text())["outcomes"]}
    assert _verdicts(by_id["test_perf.py::test_greedy"])["output.agreement"] == "regressed"


def _run_cli(url: str, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", "run", "--url", url, "--scenario", "concurrency",
                           "--concurrency", "2", "--requests", "32", "--isl", "32", "--osl", "8",
                           "--temperature", "0", "--repeats", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=180)


def test_the_cli_runs_greedy_and_compare_fails_changed_outputs(sim_url, drifted_url, tmp_path):
    base, same, wrong = tmp_path / "base.json", tmp_path / "same.json", tmp_path / "wrong.json"
    for url, out in ((sim_url, base), (sim_url, same), (drifted_url, wrong)):
        proc = _run_cli(url, out)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = {}
    for name, current in (("same", same), ("wrong", wrong)):
        out = tmp_path / f"{name}.outcome.json"
        cmp = subprocess.run([sys.executable, "-m", "pytest_goodput", "compare", str(base), str(current),
                              "--json", str(out)], capture_output=True, text=True, timeout=120)
        verdicts[name] = (cmp.returncode, _verdicts(json.loads(out.read_text())["outcomes"][0])["output.agreement"])
    assert verdicts["same"][1] == "pass"
    assert verdicts["wrong"] == (1, "regressed")

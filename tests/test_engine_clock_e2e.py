"""Whose clock moved, end to end: a planted client delay and a slower engine, through the plugin.

A baseline is recorded on the simulator; then the same test runs (a) through a proxy that
holds every request 60 ms before the engine sees it: our TTFT regresses, the engine's own
TTFT (its histograms, measured on the simulator's clock) does not, and the verdict's note and
the Markdown report say client/network; (b) against a simulator twice as slow: both clocks
move and they say engine-side.
"""

from __future__ import annotations

import json

import pytest

# pytester's in-process runs drop modules first imported inside them (see test_one_judge.py).
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.run.gating  # noqa: F401
from delayproxy import delay_proxy
from pytest_goodput.engines.engine import simulator

pytest_plugins = ["pytester"]

TEST = """
import pytest

@pytest.mark.goodput(scenario="server", requests=60, rate=20.0, isl=16, osl=8)
def test_chat(goodput):
    goodput.run()
"""


@pytest.fixture(scope="module")
def sim_url():
    with simulator(slowdown=2.0) as eng:
        yield eng.base_url


def _gate(pytester, url: str, tmp_path) -> tuple[dict, str]:
    res = pytester.runpytest("-p", "no:cacheprovider", f"--goodput-url={url}", "--goodput-baseline",
                             f"--goodput-json={tmp_path / 'out.json'}", f"--goodput-report={tmp_path / 'r.md'}")
    assert res.ret == 1, res.stdout.str()
    outcome = json.loads((tmp_path / "out.json").read_text())["tests"][0]["outcome"]
    return outcome, (tmp_path / "r.md").read_text()


def _ttft_regressed(outcome: dict) -> list[dict]:
    moved = [c for c in outcome["comparisons"] if c["metric"].startswith("metrics.ttft_ms.")
             and c["verdict"] == "regressed"]
    assert moved, outcome["comparisons"]
    return moved


def test_planted_client_delay_is_not_the_engine_and_a_slower_engine_is(pytester, sim_url, tmp_path):
    pytester.makepyfile(test_perf=TEST)
    pytester.runpytest("-p", "no:cacheprovider", f"--goodput-url={sim_url}", "--goodput-update-baseline",
                       "--goodput-sessions=2").assert_outcomes(passed=1)

    with delay_proxy(sim_url, 0.06) as url:
        (tmp_path / "a").mkdir()
        outcome, report = _gate(pytester, url, tmp_path / "a")
    for c in _ttft_regressed(outcome):
        assert "client/network side: the engine's own TTFT did not move with ours" in c["note"]
    assert any("client/network" in n for n in outcome["notes"])
    server = outcome["server"]
    assert server["current"]["engine_ttft_count"] == 60 and server["baseline"]["engine_ttft_count"] == 60
    assert "**The engine's clock**" in report and "**Whose clock moved:** TTFT regressed on the client/network" in report

    with simulator(slowdown=4.0) as slow:
        (tmp_path / "b").mkdir()
        outcome, report = _gate(pytester, slow.base_url, tmp_path / "b")
    for c in _ttft_regressed(outcome):
        assert "TTFT regressed engine-side: the engine's own TTFT moved with ours" in c["note"]
    assert "**Whose clock moved:** TTFT regressed engine-side" in report

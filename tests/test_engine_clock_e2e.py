"""Whose clock moved, end to end: a planted client delay and a slower engine, through the plugin.

A baseline of three sessions is recorded on the simulator (three: on a busy machine two
sessions' spread can leave a 4x TTFT change underpowered); then the same test runs (a)
through a proxy that holds every request 150 ms before the engine sees it: our TTFT
regresses, the engine's own TTFT (its histograms, measured on the simulator's clock) does
not, and the verdict's note and the Markdown report say client/network; (b) against a
simulator three times as slow: both clocks move and they say engine-side.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# pytester's in-process runs drop modules first imported inside them (see test_one_judge.py).
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.run.gating  # noqa: F401
from delayproxy import delay_proxy
from refserver import serve_in_thread
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
                       "--goodput-sessions=3").assert_outcomes(passed=1)
    # Only the newest stored session keeps the engine's own view (the report shows its):
    # the older ones keep their own numbers, not the engine's clock and gauges.
    stored = json.loads((pytester.path / ".goodput/baselines/test_perf/test_chat.json").read_text())["sessions"]
    assert [any(k.startswith("server.engine_") for k in s["summary"]) for s in stored] == [False, False, True]

    with delay_proxy(sim_url, 0.15) as url:
        (tmp_path / "a").mkdir()
        outcome, report = _gate(pytester, url, tmp_path / "a")
    for c in _ttft_regressed(outcome):
        assert "client/network: the engine's mean TTFT did not move" in c["note"]
    assert any("TTFT regressed on the client/network side: the engine's own TTFT did not move with ours"
               in n for n in outcome["notes"])
    server = outcome["server"]
    assert server["current"]["engine_ttft_count"] == 60 and server["baseline"]["engine_ttft_count"] == 60
    assert "**The engine's clock**" in report and "**Whose clock moved:** TTFT regressed on the client/network" in report

    with simulator(slowdown=6.0) as slow:
        (tmp_path / "b").mkdir()
        outcome, report = _gate(pytester, slow.base_url, tmp_path / "b")
    for c in _ttft_regressed(outcome):
        assert "engine-side (engine mean TTFT +" in c["note"]
    assert any("TTFT regressed engine-side: the engine's own TTFT moved with ours" in n for n in outcome["notes"])
    assert "**Whose clock moved:** TTFT regressed engine-side" in report


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", *args], capture_output=True,
                          text=True, timeout=120)


def test_cli_run_and_compare_with_per_request_metrics(tmp_path):
    """vLLM's per-request ``metrics`` (the simulator's, on its own clock): kept on each record,
    shown by ``run`` beside ours, and ``compare`` attributes a planted delay by them."""
    load = ["--scenario", "server", "--rate", "20", "--requests", "40", "--isl", "16", "--osl", "8"]
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    with simulator(slowdown=2.0, per_request_metrics=True) as eng:
        run = _cli("run", "--url", eng.base_url, *load, "--json", str(base))
        with delay_proxy(eng.base_url, 0.06) as url:
            assert _cli("run", "--url", url, *load, "--json", str(head)).returncode == 0
    assert run.returncode == 0, run.stderr
    assert "the engine's clock" in run.stdout and "TTFT per request (queue + TTFT)" in run.stdout
    records = json.loads(base.read_text())["requests"]
    timed = [r["engine"] for r in records if r["ok"] and not r["warmup"]]
    assert len(timed) == 40 and all(t["time_to_first_token_ms"] > 0 for t in timed)
    cmp = _cli("compare", str(base), str(head), "--json", str(tmp_path / "cmp.json"))
    assert cmp.returncode == 1, cmp.stdout + cmp.stderr
    outcome = json.loads((tmp_path / "cmp.json").read_text())["outcomes"][0]
    assert any(n.startswith("TTFT regressed on the client/network side") and "(per-request metrics)" in n
               for n in outcome["notes"]), outcome["notes"]
    assert outcome["server"]["current"]["engine_requests"] == 40


def test_an_engine_without_a_clock_breaks_nothing_and_says_so(tmp_path):
    """The reference server has no ``/metrics``: no engine clock in ``run``'s output or the
    result, and a TTFT regression ``compare`` finds says it cannot be attributed."""
    load = ["--scenario", "concurrency", "--concurrency", "1", "--requests", "6", "--warmup", "0",
            "--isl", "8", "--osl", "8", "--model", "ref-model"]
    out = {}
    for name, ttft in (("base", 20.0), ("head", 120.0)):
        out[name] = tmp_path / f"{name}.json"
        with serve_in_thread(ttft_ms=ttft, itl_ms=5.0) as srv:
            res = _cli("run", "--url", f"http://127.0.0.1:{srv.port}", *load, "--json", str(out[name]))
        assert res.returncode == 0 and "engine's clock" not in res.stdout, res.stdout + res.stderr
        result = json.loads(out[name].read_text())
        assert result["engine_histograms"] == {} and all(r["engine"] is None for r in result["requests"])
    cmp = _cli("compare", str(out["base"]), str(out["head"]), "--json", str(tmp_path / "cmp.json"))
    assert cmp.returncode == 1, cmp.stdout + cmp.stderr
    outcome = json.loads((tmp_path / "cmp.json").read_text())["outcomes"][0]
    assert outcome["server"] is None
    assert "TTFT regressed; no engine clock on either side" in " ".join(outcome["notes"]), outcome["notes"]
    assert any(c["note"].endswith("no engine clock on either side") for c in outcome["comparisons"]
               if c["metric"].startswith("metrics.ttft_ms.") and c["verdict"] == "regressed")

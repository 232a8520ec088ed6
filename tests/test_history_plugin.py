"""The history as the plugin keeps and uses it, through ``pytester``: recording appends on
main, ``--goodput-history-gate`` fails a pull request that continues a creep."""

from __future__ import annotations

import json
import sys

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# must not be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.cli.history  # noqa: F401
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
from pytest_goodput.engines.engine import simulator
from pytest_goodput.schema.runs.history import HistoryEntry
from pytest_goodput.store import history as store

ruptures = pytest.importorskip("ruptures")

pytest_plugins = ["pytester"]

NODEID = "test_perf.py::test_server"
TEST = """
import pytest

@pytest.mark.goodput(scenario="server", requests=16, rate=5.0, isl=8, osl=4,
                     ttft_ms=5000, attainment=0.9, gate=["goodput.requests_per_s"], tolerance=0.5)
def test_server(goodput):
    goodput.run()
"""


@pytest.fixture(scope="module")
def sim_url():
    # Slow steps make latencies long enough for the client's self-check to tolerate a busy
    # machine's event-loop lag (its limit scales with the latencies measured). The test sets no
    # TPOT limit: a loop stall reads a 4-token answer at once, which meets no TPOT limit.
    with simulator(slowdown=4.0) as eng:
        yield eng.base_url


@pytest.fixture
def recorded(pytester, sim_url, monkeypatch):
    """One recording on main: the test's history file with one entry."""
    monkeypatch.setenv("GITHUB_SHA", "a" * 40)
    pytester.makepyfile(test_perf=TEST)
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                             "--goodput-sessions=2", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    monkeypatch.delenv("GITHUB_SHA")
    return store.path_for(pytester.path / ".goodput" / "history", NODEID)


def test_recording_a_baseline_appends_one_history_entry(pytester, sim_url, recorded):
    (entry,) = store.read(recorded).entries
    assert entry.nodeid == NODEID and entry.commit == "a" * 40 and entry.sessions == 2
    assert entry.gated == ["goodput.requests_per_s"]
    assert entry.tolerances == {"goodput.requests_per_s": 0.5}
    assert entry.environment.identity["hardware"] == "unlabelled"
    assert entry.metrics["goodput.requests_per_s"] > 0
    assert "metrics.ttft_ms.p99" in entry.metrics
    line = json.loads(recorded.read_text(encoding="utf-8").splitlines()[0])
    assert line["kind"] == "pytest-goodput-history" and line["schema_version"] == 1
    assert entry.verdicts == {} and "verdicts" not in line  # a first recording judged nothing
    # A comparing run (a pull request) does not append.
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline", "-p", "no:cacheprovider")
    assert len(store.read(recorded).entries) == 1
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                       "--goodput-sessions=1", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    _, second = store.read(recorded).entries
    # The second recording keeps what the gate said of it against the baseline it replaced.
    assert list(second.verdicts) == ["goodput.requests_per_s"]
    assert second.verdicts["goodput.requests_per_s"] in ("pass", "improved", "regressed",
                                                         "inconclusive", "underpowered")


def test_a_history_dir_option_moves_the_history(pytester, sim_url):
    pytester.makepyfile(test_perf=TEST)
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline",
                             "--goodput-sessions=1", "--goodput-history-dir=perf-history",
                             "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    assert len(store.read(store.path_for(pytester.path / "perf-history", NODEID)).entries) == 1
    assert not (pytester.path / ".goodput" / "history").exists()


def _rewrite(path, factors: list[float], verdicts: dict[int, str] | None = None) -> None:
    """Replace the history with one entry per factor: the recorded run's numbers scaled;
    ``verdicts``: run index → what the gate said of goodput when that run was recorded."""
    (entry,) = store.read(path).entries[-1:]
    path.unlink()
    for i, f in enumerate(factors):
        scaled = {k: v * f for k, v in entry.metrics.items()}
        said = {"goodput.requests_per_s": verdicts[i]} if verdicts and i in verdicts else {}
        store.append(path, HistoryEntry(**{**entry.model_dump(), "metrics": scaled,
                                           "commit": f"{i:02d}" + "b" * 38, "verdicts": said}))


def _gate(pytester, sim_url, *extra: str):
    return pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-history-gate",
                              "-p", "no:cacheprovider", *extra)


def test_history_gate_fails_a_run_continuing_a_creep(pytester, sim_url, recorded):
    # goodput fell from 4x to 1.4x this run's level, 10 % a run (a creep, no step); the window
    # lost 1 - 0.9^9 = 61 % (medians of 3 runs at each end) and this run (1x) continues it:
    # beyond the 50 % tolerance.
    _rewrite(recorded, [4.0 * 0.9 ** i for i in range(11)])
    report = pytester.path / "report.md"
    res = _gate(pytester, sim_url, f"--goodput-report={report}")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "creep: the last 11 main-branch runs and this run lost" in out
    assert "Traceback" not in out
    md = report.read_text(encoding="utf-8")
    assert "**Trend of goodput (req/s) on main** (crept; 12 runs)" in md
    assert "```mermaid\n%%{init:" in md and '"this run"' in md


@pytest.mark.parametrize("said, fails", [("inconclusive", True), ("regressed", False)])
def test_history_gate_counts_a_step_unless_the_gate_called_it_regressed(
        pytester, sim_url, recorded, said, fails):
    # Goodput fell from 3x to this run's level in one step at run 9 (-67 %, tolerance 50 %).
    # Called only inconclusive, nobody accepted it: the window keeps 3x and this run fails.
    # Called regressed and merged anyway, it is accepted: the window restarts there.
    _rewrite(recorded, [3.0] * 8 + [1.0] * 5, {8: said})
    res = _gate(pytester, sim_url)
    out = res.stdout.str()
    if fails:
        res.assert_outcomes(failed=1)
        assert "creep: the last 13 main-branch runs and this run lost" in out
        assert "the step of -66.7% at 08bbbbbbbbbb was not called regressed, so it counts" in out
    else:
        res.assert_outcomes(passed=1)
        assert "creep" not in out


def test_history_gate_passes_a_flat_history(pytester, sim_url, recorded):
    _rewrite(recorded, [1.0] * 11)
    res = _gate(pytester, sim_url)
    res.assert_outcomes(passed=1)
    assert "creep" not in res.stdout.str()


def test_history_gate_without_the_extra_says_what_to_install(pytester, sim_url, recorded, monkeypatch):
    _rewrite(recorded, [1.0] * 11)
    monkeypatch.setitem(sys.modules, "ruptures", None)
    res = _gate(pytester, sim_url)
    res.assert_outcomes(failed=1)
    assert ('--goodput-history-gate: change-point detection needs ruptures: '
            'pip install "pytest-goodput[history]"') in res.stdout.str()


def test_history_window_is_checked_with_its_source(pytester):
    pytester.makepyfile(test_perf=TEST)
    res = pytester.runpytest("--goodput-history-window=3")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--goodput-history-window: 3 is invalid for history_window: "
                              "Input should be greater than or equal to 6*"])

"""A test gates a result file its own code produced (``goodput.judge_file``): recorded as a
baseline like any run, then judged by the same gate, with the same report."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_goodput.store import baseline as baseline_store

pytest_plugins = ["pytester"]

VLLM = Path(__file__).parent / "data" / "vllm_bench"

TEST = '''
import os

def test_vllm_bench(goodput):
    # In a team's suite this file is what its `vllm bench serve ... --save-result` just wrote.
    goodput.judge_file(os.environ["BENCH_RESULT"])
'''


def run(pytester, monkeypatch, name: str, *flags: str):
    monkeypatch.setenv("BENCH_RESULT", str(VLLM / name))
    return pytester.runpytest("-p", "no:cacheprovider", *flags)


def test_recorded_file_then_unchanged_passes_and_half_slots_fails(pytester, monkeypatch):
    pytester.makepyfile(test_bench=TEST)
    for name in ("base-1.json", "base-2.json"):
        run(pytester, monkeypatch, name, "--goodput-update-baseline").assert_outcomes(passed=1)
    doc = baseline_store.load(pytester.path / ".goodput/baselines/test_bench/test_vllm_bench.json")
    assert doc is not None and len(doc.sessions) == 2
    assert all(s.source is not None and s.source.tool == "vllm-bench" for s in doc.sessions)
    res = run(pytester, monkeypatch, "base-3.json", "--goodput-baseline")
    res.assert_outcomes(passed=1)
    res = run(pytester, monkeypatch, "half-slots-1.json", "--goodput-baseline")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*regressed*output throughput*"])


def test_summary_only_file_says_so_and_a_definition_change_is_refused(pytester, monkeypatch):
    pytester.makepyfile(test_bench=TEST)
    run(pytester, monkeypatch, "summary-base.json", "--goodput-update-baseline").assert_outcomes(passed=1)
    res = run(pytester, monkeypatch, "summary-half-slots.json", "--goodput-baseline")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*summary only: no spread known*"])
    res = run(pytester, monkeypatch, "base-1.json", "--goodput-baseline")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*tpot_ms is defined differently*"])


SLO_TEST = '''
import os

def test_vllm_bench(goodput):
    goodput.judge_file(os.environ["BENCH_RESULT"], **eval(os.environ["JUDGING"]))
'''


@pytest.mark.parametrize("name, judging, outcome, line", [
    ("base-1.json", "{'slo': 'guidellm/chat'}", "passed", None),
    ("half-slots-1.json", "{'slo': 'guidellm/chat'}", "failed", "*SLO attainment BROKEN*16 of 64 requests*"),
    ("summary-base.json", "{'ttft_ms': 200}", "failed",
     "*ttft_ms: this vllm-bench file has summaries only, so no request is known to meet a per-request SLO*"),
    ("base-1.json", "{'concurrency': 8}", "failed", "*concurrency: an imported file's load is the file's*"),
])
def test_slos_of_the_test_judge_an_imported_file(pytester, monkeypatch, name, judging, outcome, line):
    """The load is the file's, the SLOs the test's (GuideLLM's chat preset: P99 TTFT 200 ms)."""
    pytester.makepyfile(test_bench=SLO_TEST)
    monkeypatch.setenv("JUDGING", judging)
    res = run(pytester, monkeypatch, name)
    res.assert_outcomes(**{outcome: 1})
    if line:
        res.stdout.fnmatch_lines([line])

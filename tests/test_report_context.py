"""The report's top block (the four questions), the "why" block, sweep and capacity tables,
and the terminal's sweep/capacity lines: hand-computed from the fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import report_fixtures as fx

from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.report.md.md_context import questions_table, why_block
from pytest_goodput.report.md.md_shapes import capacity_block, points_table, step_table
from pytest_goodput.report.text.terminal import failure_message, render_summary

GOLDEN = Path(__file__).parent / "golden"


def test_golden_sweep_regression_and_capacity():
    text = render_markdown([fx.sweep_regressed(), fx.capacity()], title="PR #7: goodput")
    path = GOLDEN / "report_shapes.md"
    if os.environ.get("GOODPUT_REGEN_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), "set GOODPUT_REGEN_GOLDEN=1 to regenerate if intended"


def test_four_questions_side_by_side_with_changes_bold_even_when_the_baseline_lacks_them():
    rows = questions_table(fx.sweep_regressed()).splitlines()
    software = next(r for r in rows if r.startswith("| **software**"))
    base, cur = software.removesuffix(" |").split(" | ")[1:3]
    assert base == "version 0.6.1<br>name vllm<br>commit a1b2c3d4e5f6"
    # The flags exist only in the current run: bold, and the baseline cell does not invent them.
    assert cur == "**version 0.6.3**<br>**flags GOODPUT_SIM_SLOWDOWN=1.2**<br>name vllm<br>**commit 0f9e8d7c6b5a**"
    hardware = next(r for r in rows if r.startswith("| **hardware**"))
    assert hardware == "| **hardware** | label 1xH100-80GB | label 1xH100-80GB |"
    assert "CPU AMD EPYC 7763 x2" in next(r for r in rows if r.startswith("| **load generator**"))
    slos = next(r for r in rows if r.startswith("| **SLOs**"))
    assert slos == "| **SLOs** | TTFT ≤ 450 ms<br>TPOT ≤ 80 ms | TTFT ≤ 450 ms<br>TPOT ≤ 80 ms |"


def test_four_questions_without_a_baseline_and_unlabelled_hardware():
    o = fx.new().model_copy(update={"current_env": {**fx.ENV_CUR, "hardware": "unlabelled"}})
    text = questions_table(o)
    assert "| **scenario** | – | offline<br>requests 200<br>ISL 128<br>OSL 64<br>model tinyllama |" in text
    assert "**" not in text.split("\n", 2)[2].replace("| **", "|").replace("** |", "|")  # nothing bold
    assert "The hardware is unlabelled: name the engine's accelerator with `--goodput-hardware`" in text


def test_why_block_baseline_vs_current_hand_computed():
    text = why_block(fx.sweep_regressed())
    # waiting mean 0.5 -> 6: (6 - 0.5) / 0.5 = +1100 %; KV-cache 40 % -> 85 %: +45 percentage points.
    assert "| queue: requests waiting, mean | 0.5 | 6 | +1100.0% |" in text
    assert "| batch: requests running, mean | 12 | 9.6 | -20.0% |" in text
    assert "| KV-cache usage, mean | 40.0% | 85.0% | +45.00 pp |" in text
    assert "| preemptions per run | 0 | 12 | from 0 |" in text
    assert "| prefix-cache hit rate | – | 25.0% | – |" in text
    assert "| --- | ---: | ---: | ---: |" in text  # numbers right-aligned


def test_why_block_says_what_is_missing_and_stays_off_passing_tests():
    o = fx.sweep_regressed()
    only_current = o.model_copy(update={"server": {"current": fx.SERVER_CUR, "baseline": None}})
    assert "The baseline has no server metrics" in why_block(only_current)
    assert "| queue: requests waiting, mean | – | 6 | – |" in why_block(only_current)
    none = o.model_copy(update={"server": None})
    assert "the engine exported no Prometheus `/metrics`" in why_block(none)
    assert why_block(fx.passed()) == ""
    assert why_block(fx.capacity()) == ""  # probes at other rates than the baseline's


def _slo_failed_with_server_metrics(**update):
    o = fx.slo_failed().model_copy(update={"server": {"current": fx.SERVER_CUR, "baseline": None}})
    return o.model_copy(update=update)


def test_the_report_says_there_is_no_baseline_when_there_is_none():
    for status, why in [("new", "none is stored for this test yet"),
                        ("off", "the run was not compared with one")]:
        o = _slo_failed_with_server_metrics(baseline_status=status, baseline_env=None, what_changed={},
                                            comparisons=[])
        text = render_markdown([o])
        assert "**Why — the engine's own `/metrics` in the current run:**" in text
        assert f"There is no baseline to compare them with ({why})." in text
        assert "| engine metric | current |" in text and "| queue: requests waiting, mean | 6 |" in text
        assert "recorded before they were kept" not in text and "The baseline has no server metrics" not in text
    silent = _slo_failed_with_server_metrics(baseline_status="new", baseline_env=None, server=None)
    assert "the engine exported no Prometheus `/metrics` for this run" in render_markdown([silent])


def test_the_report_says_a_baseline_without_server_metrics_has_none():
    o = _slo_failed_with_server_metrics()  # compared with a baseline recorded without them
    text = render_markdown([o])
    assert "**Why — the engine's own `/metrics`, baseline vs current:**" in text
    assert ("The baseline has no server metrics (recorded before they were kept, or its engine exported "
            "none): current values only; record the baseline again to compare them.") in text
    assert "| queue: requests waiting, mean | – | 6 | – |" in text
    assert "There is no baseline to compare" not in text


def test_sweep_points_table_and_unreached_interactivity_in_words():
    o = fx.sweep_regressed()
    rows = points_table(o).splitlines()
    assert rows[1] == "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- |"
    # concurrency 1: 174 / 209 = 0.83 of the baseline's tok/s; TPOT 40 -> 48 ms: interactivity 40/48 = 0.83.
    assert rows[2] == "| concurrency 1 | 20.8 | 174 | ✅ yes | 209 | 0.83 | 0.83 | ❌ regressed |"
    assert rows[4] == "| concurrency 16 | 10.4 | 1,333 | ❌ no | 1,600 | 0.83 | 0.83 | ❌ regressed |"
    step = step_table(o).splitlines()
    assert step[2] == "| 25 | 209 | no current point reaches this interactivity | – | ❌ regressed |"
    assert step[3] == "| 20 | 640 | 174 | 0.27 | ❌ regressed |"  # 174 / 640
    text = render_markdown([o])
    assert "-100" not in text and "→ –" not in text


def test_capacity_probe_table_says_why_a_probe_failed():
    text = capacity_block(fx.capacity())
    assert text.startswith("**Capacity:** 6 → 5 req/s (bracket [5, 6), 5 probes) · baseline bracket [6, 7) req/s")
    assert "| probe | rate (req/s) | attainment | goodput (req/s) | good / issued | SLO met | why not |" in text
    assert "| 3 | 8 | 60.0% | 4.8 | 96 / 160 | ❌ no | attainment 60.0% &lt; target 90.0% |" in text
    assert "| 5 | 5 | 91.0% | 4.55 | 91 / 100 | ✅ yes | – |" in text


def test_terminal_shows_sweep_and_capacity_results():
    text = render_summary([fx.sweep_regressed(), fx.capacity()], ascii=True)
    assert "frontier max tok/s" in text and "capacity req/s" in text
    assert "tests/test_cap.py::test_capacity: capacity: 6 -> 5 req/s (bracket [5, 6), 5 probes)" in text
    assert ("tests/test_sweep.py::test_frontier_slower: frontier: 3 of 3 points compared at equal load "
            "(3 regressed); lowest throughput at concurrency 1: 209 -> 174 tok/s (ratio 0.83); "
            "1 baseline frontier point(s): no current point reaches this interactivity") in text


def test_a_frontier_with_no_current_point_that_interactive_is_said_in_words():
    o = fx.sweep_regressed()
    unreached = o.comparisons[0].model_copy(update={"baseline": 209.0, "current": None, "change": -1.0})
    o = o.model_copy(update={"comparisons": [unreached]})
    msg = failure_message(o)
    assert "209 -> - no current point reaches this interactivity" in msg and "-100" not in msg
    assert "| frontier throughput (tok/s) | 209 | no current point reaches this interactivity | – |" in render_markdown([o])

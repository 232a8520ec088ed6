"""Terminal summary, failure messages, shared number formats, progress lines, schema export."""

from __future__ import annotations

import io
import json

import report_fixtures as fx

from pytest_goodput.report.exports import export_schemas
from pytest_goodput.report.vocabulary import (
    canonical_metric,
    fmt_change,
    fmt_interval,
    fmt_num,
    fmt_percent,
    metric_sort_key,
    worst_comparison,
)
from pytest_goodput.report.progress import Progress
from pytest_goodput.report.text.terminal import (
    INVALID_REMEDY,
    failure_message,
    render_summary,
    supports_unicode,
)


def test_number_formats():
    assert fmt_num(None) == "–"
    assert fmt_num(0) == "0"
    assert fmt_num(7.84) == "7.84"
    assert fmt_num(512.34) == "512"
    assert fmt_num(12345.6) == "12,346"
    assert fmt_change(-0.15) == "-15.0%"
    assert fmt_change(0.0123) == "+1.2%"
    assert fmt_interval((-0.19, -0.11)) == "[-19.0%, -11.0%]"
    assert fmt_interval((-1.0, float("inf"))) == "[-100.0%, +inf]"
    # A shortfall never rounds up to 100 %.
    assert fmt_percent(0.9625) == "96.2%"
    assert fmt_percent(0.9996) == "99.96%"
    assert fmt_percent(1.0) == "100.0%"


def test_metric_names_and_order():
    assert canonical_metric("ttft_p99_ms") == "metrics.ttft_ms.p99"
    assert canonical_metric("tpot_ms.p50") == "metrics.tpot_ms.p50"
    names = ["zzz_custom", "metrics.ttft_ms.p99", "goodput.requests_per_s", "goodput.attainment"]
    assert sorted(names, key=metric_sort_key) == [
        "goodput.requests_per_s", "goodput.attainment", "metrics.ttft_ms.p99", "zzz_custom",
    ]


def test_worst_comparison_prefers_verdict_then_bad_change():
    o = fx.regressed()
    assert worst_comparison(o).metric == "goodput.requests_per_s"  # regressed beats inconclusive
    # Among passes, the largest move in the bad direction: TPOT +1.6% (lower is better).
    assert worst_comparison(fx.passed()).metric == "metrics.tpot_ms.p99"


def test_summary_rows_sorted_with_worst_metric():
    text = render_summary(fx.all_outcomes())
    lines = text.splitlines()
    assert lines[0] == "engine: vllm 0.6.3"  # the engine the numbers come from, first
    assert lines[1] == (
        "goodput: 8 tests - 2 passed, 1 regressed, 1 new, 1 slo-failed, 1 invalid, 1 error, 1 incomparable"
    )
    rows = [ln for ln in lines if ln.startswith("tests/")]
    assert [r.split()[0] for r in rows[:8]] == sorted(o.nodeid for o in fx.all_outcomes())
    row = next(r for r in rows if r.startswith("tests/test_serve.py::test_param[a|b]"))
    cells = row.split()
    # goodput 7.84, out tok/s 512, TTFT 312, TPOT 31.5, attainment 98.0%, worst: goodput 8 -> 6.8
    assert cells[2:7] == ["7.84", "512", "312", "31.5", "98.0%"]
    assert cells[7:11] == ["goodput", "8", "6.8", "-15.0%"]
    assert cells[-2:] == ["✗", "regressed"]


def test_details_only_for_tests_needing_a_look():
    text = render_summary(fx.all_outcomes())
    assert "✗ regressed: tests/test_serve.py::test_param[a|b]" in text
    assert "? inconclusive" in text and "[-2.0%, +31.0%]" in text
    assert "SLO TTFT P99 BROKEN: limit 450 ms, value 512 ms; proven" in text
    assert "send lag P99 212 ms > 50 ms" in text
    assert "hardware differs" in text
    # Passing and new tests get a row but no detail block.
    assert "passed: tests/test_serve.py::test_chat_server" not in text
    assert "new: tests/test_offline.py" not in text


def test_ascii_and_width():
    text = render_summary(fx.all_outcomes(), width=110, ascii=True)
    text.encode("ascii")  # no Unicode at all
    table = text.split("\n\n")[1]
    assert max(len(line) for line in table.splitlines()) == 110
    assert "goodput req/s" not in table  # key-metric columns went first
    assert "XX regressed" in table and "...rve.py::test_param[a|b]" in table


def test_empty_summary():
    assert render_summary([]) == "goodput: no goodput tests ran"


def test_supports_unicode():
    assert supports_unicode(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert not supports_unicode(io.TextIOWrapper(io.BytesIO(), encoding="ascii"))


def test_failure_message_regression():
    msg = failure_message(fx.regressed())
    assert msg.splitlines()[0] == "goodput regressed: tests/test_serve.py::test_param[a|b] (scenario server)"
    assert (
        "regressed: goodput 8 -> 6.8 req/s (change -15.0%; interval [-19.0%, -11.0%]; "
        "tolerance 5.0%; method bootstrap)"
    ) in msg
    assert "inconclusive: TTFT P99 300 -> 345 ms" in msg
    assert "  note: worse than tolerance\n        but not significant" in msg
    assert "what changed since the baseline: engine_version 0.6.1 -> 0.6.3; git_commit" in msg


def test_failure_message_slo_invalid_error():
    slo = failure_message(fx.slo_failed())
    assert "SLO attainment BROKEN: limit 99.0%, value 96.2% - 385 of 400 requests" in slo
    assert "SLO TTFT P99 BROKEN: limit 450 ms, value 512 ms; proven" in slo
    assert "TPOT P99" not in slo  # a held, proven SLO is not news
    inv = failure_message(fx.invalid())
    assert "invalid run" in inv and "client CPU 98% of one core" in inv
    assert inv.splitlines()[-1] == INVALID_REMEDY  # what to change, after why
    assert "--goodput-engine-cpus=auto" in INVALID_REMEDY and "--goodput-capture=auto" in INVALID_REMEDY
    assert INVALID_REMEDY not in failure_message(fx.regressed())
    err = failure_message(fx.errored())
    assert "error: engine did not become ready within 60 s" in err
    assert failure_message(fx.new()).endswith("no baseline stored for this test yet")


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_progress_plain_prints_periodic_lines_only():
    clock, out = FakeClock(), io.StringIO()
    p = Progress(400, "server", out, live=False, interval_s=10.0, clock=clock)
    for done in range(1, 401):  # 400 updates over 50 s
        clock.t += 0.125
        p.update(done)
    p.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    # One line per 10 s (at 10, 20, 30, 40 s) plus the final one at 50 s.
    assert len(lines) == 5
    assert lines[0] == "server: 80/400 (20%) 10s, 8.0 req/s, ETA 40s"
    assert lines[3] == "server: 320/400 (80%) 40s, 8.0 req/s, ETA 10s"
    assert lines[-1] == "server: 400/400 (100%) 50s, 8.0 req/s - done"


def test_progress_plain_short_run_is_silent():
    clock, out = FakeClock(), io.StringIO()
    p = Progress(50, "quick", out, live=False, clock=clock)
    for done in range(1, 51):
        clock.t += 0.125
        p.update(done)
    p.close()
    assert out.getvalue() == ""


def test_progress_live_rate_limited():
    clock, out = FakeClock(), io.StringIO()
    p = Progress(None, "sweep", out, live=True, max_hz=10, clock=clock)
    for done in range(1, 129):  # 128 updates in 1 s: at most ~10 rewrites
        clock.t += 0.0078125
        p.update(done)
    p.close(keep=True)
    text = out.getvalue()
    assert 9 <= text.count("\r") <= 12
    assert text.endswith("sweep: 128 1.0s, 128.0 req/s\n")


def test_progress_auto_detects_non_tty():
    assert Progress(10, stream=io.StringIO()).live is False


def test_export_schemas(tmp_path):
    paths = export_schemas(tmp_path)
    assert [p.name for p in paths] == ["run_result.schema.json", "test_outcome.schema.json", "ab_result.schema.json"]
    outcome_schema = json.loads(paths[1].read_text())
    assert outcome_schema["title"] == "TestOutcome"
    assert "comparisons" in outcome_schema["properties"]


def test_committed_schemas_are_current(tmp_path):
    """docs/schema/ must match the models: regenerate with report.exports.export_schemas('docs/schema')."""
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs" / "schema"
    for p in export_schemas(tmp_path):
        assert (docs / p.name).read_text() == p.read_text(), f"docs/schema/{p.name} is stale"


def test_a_sweep_judged_on_its_tpot_shows_tpot_under_its_own_name_and_unit():
    """A sweep's row holds its worst point's worse metric: when that is TPOT (40 -> 48 ms,
    +20 %), every report names TPOT and ms, never tok/s under "frontier throughput"."""
    from pytest_goodput.report.github import annotations
    from pytest_goodput.report.md.markdown import render_markdown

    worst = fx.cmp("frontier_throughput", 40.0, 48.0, "regressed", interval=(0.15, 0.25),
                   note="worst at load 16 (TPOT +20.0%) of 3 points compared at equal load")
    worst = worst.model_copy(update={"direction": "lower", "basis": "metrics.tpot_ms.p50"})
    o = fx.sweep_regressed().model_copy(update={"comparisons": [worst]})
    summary, message = render_summary([o]), failure_message(o)
    assert "frontier: TPOT P50 (ms)  40          48         +20.0%" in summary
    assert "regressed: frontier: TPOT P50 40 -> 48 ms (change +20.0%" in message
    assert "| frontier: TPOT P50 (ms) | 40 | 48 | +20.0% |" in render_markdown([o])
    assert "frontier%3A TPOT P50 +20.0%25" in "".join(annotations([o]))
    for text in (summary, message, render_markdown([o])):
        assert "frontier throughput" not in text and "48 tok/s" not in text


def test_a_percentile_on_a_failed_request_reads_plus_infinity():
    """Three requests at 10 ms and one timeout: P90 (rank 4 of 4) is the timeout, +∞; the
    terminal line and the Markdown table say so rather than "no value"."""
    from pytest_goodput.judge.slos import run_slo_outcomes
    from pytest_goodput.measure.metrics import summarize
    from pytest_goodput.report.md.markdown import render_markdown
    from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord
    from pytest_goodput.schema.scenario.spec import build_spec

    spec = build_spec({"rate": 1, "ttft_p90_ms": 15})
    def rec(i: int, ok: bool = True) -> RequestRecord:
        return RequestRecord(index=i, ok=ok, error_kind=None if ok else "timeout", scheduled_at=i * 0.1,
                             sent_at=i * 0.1, end_at=i * 0.1 + 0.05, ttft_ms=10.0 if ok else None,
                             tpot_ms=5.0 if ok else None, e2e_ms=50.0 if ok else None,
                             output_tokens=9 if ok else 0, prompt_tokens=100, send_lag_ms=0.5,
                             itl_ms=[5.0] * 8 if ok else [], token_count_source="usage")
    records = [rec(0), rec(1), rec(2), rec(3, ok=False)]
    run = summarize(records, spec, ClientHealth(valid=True, cpu_utilization=0.1))
    slo = {s.name: s for s in run_slo_outcomes(run, strict=False)}["ttft_p90_ms"]
    assert slo.value is None and slo.infinite and not slo.ok
    assert slo.note == "1 of 4 samples over the limit; P90 falls on a failed request (+∞)"
    outcome = fx.slo_failed().model_copy(update={"slos": [slo]})
    assert ("SLO TTFT P90 BROKEN: limit 15 ms, value +∞ - 1 of 4 samples over the limit; "
            "P90 falls on a failed request (+∞)") in failure_message(outcome)
    assert "| +∞ |" in render_markdown([outcome]).replace("  ", " ")

"""Markdown report: golden files, escaping, Mermaid hook, truncation under a byte budget.

Regenerate the goldens after an intended change with::

    GOODPUT_REGEN_GOLDEN=1 python -m pytest tests/test_report_markdown.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import report_fixtures as fx

from pytest_goodput.report.md import markdown as md
from pytest_goodput.report.md.markdown import (
    code_span,
    escape_cell,
    render_markdown,
    summary_line,
)

GOLDEN = Path(__file__).parent / "golden"


def fake_chart(current, baseline=None, title=""):
    """A stand-in for the Mermaid renderer so goldens do not depend on its exact output."""
    xs = ", ".join(f"{p.interactivity:g}" for p in current)
    return f'xychart-beta\n    title "{title}"\n    x-axis [{xs}]'


@pytest.fixture
def chart(monkeypatch):
    monkeypatch.setattr(md, "_load_mermaid", lambda: fake_chart)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GOODPUT_REGEN_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{name} differs; set GOODPUT_REGEN_GOLDEN=1 to regenerate if intended"


def test_golden_full_report(chart):
    check_golden("report_all.md", render_markdown(fx.all_outcomes()))


def test_golden_truncated_report(chart):
    check_golden("report_truncated.md", render_markdown(fx.all_outcomes(), max_bytes=7000))


def test_golden_single_regression(chart):
    check_golden("report_regressed.md", render_markdown([fx.regressed()], title="PR #42: goodput"))


def test_ordering_is_stable():
    a = render_markdown(fx.all_outcomes())
    b = render_markdown(list(reversed(fx.all_outcomes())))
    assert a == b
    # Sections follow node ids; metrics follow the fixed order (goodput before latencies).
    assert a.index("test_engine_down` —") < a.index("test_heavy` —") < a.index("test_frontier` —")
    sec = a[a.index("test_param[a|b]` —"):]
    assert sec.index("| goodput (req/s) |") < sec.index("| TTFT P99 (ms) |") < sec.index("| TPOT P99 (ms) |")


def test_summary_line_counts():
    assert summary_line(fx.all_outcomes()) == (
        "❌ **8 goodput tests:** 2 passed · 1 regressed · 0 inconclusive · 1 new · 1 SLO-failed"
        " · 1 invalid · 1 error · 1 incomparable"
    )
    assert summary_line([fx.passed()]) == (
        "✅ **1 goodput test:** 1 passed · 0 regressed · 0 inconclusive · 0 new · 0 SLO-failed"
        " · 0 invalid · 0 error"
    )


def test_escape_cell():
    assert escape_cell("a|b") == "a\\|b"
    assert escape_cell("line1\nline2\r\nline3") == "line1<br>line2<br>line3"
    assert escape_cell("<details>") == "&lt;details&gt;"
    assert escape_cell("C:\\x|y") == "C:\\\\x\\|y"


def test_code_span_with_backticks():
    assert code_span("plain") == "`plain`"
    assert code_span("a`b") == "``a`b``"
    assert code_span("`x`") == "`` `x` ``"


def test_cells_with_pipes_and_newlines_keep_the_table_intact():
    text = render_markdown([fx.regressed()])
    assert "| tests/test_serve.py::test_param[a\\|b] |" in text
    assert "worse than tolerance<br>but not significant" in text
    for line in text.splitlines():
        if line.startswith("| goodput (req/s) |"):
            assert line.count(" | ") == 6  # seven cells, no stray separators


def test_slo_table_and_environment():
    text = render_markdown([fx.slo_failed()])
    assert "| SLO | limit | value | ok | proven | note |" in text
    assert "| attainment | 99.0% | 96.2% | ❌ | – | 385 of 400 requests met every per-request SLO |" in text
    assert "| TTFT P99 | 450 ms | 512 ms | ❌ | yes |  |" in text
    # Four questions, baseline vs current; changed provenance is bold.
    for q in ("| scenario | rate | 8.0 | 8.0 |", "| SLOs | ttft_ms | 450.0 | 450.0 |",
              "| software | engine_version | 0.6.1 | **0.6.3** |", "| hardware | hardware | 1xH100-80GB | 1xH100-80GB |"):
        assert q in text


def test_frontier_uses_mermaid_when_available(chart):
    text = render_markdown([fx.sweep()])
    assert '```mermaid\nxychart-beta\n    title "tests/test_sweep.py::test_frontier frontier"' in text
    # 396 / 400 = 0.99 at concurrency 4, the lowest of the three equal-load ratios.
    assert ("**Frontier — ✅ pass:** 3 of 3 points compared at equal load (3 pass); lowest throughput "
            "at concurrency 4: 400 → 396 tok/s (ratio 0.99)") in text
    assert "Lines: 🟧 **current** (vermillion, `#D55E00`) · 🟦 **baseline** (blue, `#0072B2`)" in text


def test_frontier_with_the_real_chart_renderer():
    # A sweep's outcome as the session records it: the current frontier under "frontier".
    o = fx.sweep()
    fr = o.frontier.model_dump(mode="json")
    fr["frontier"] = fr.pop("current")
    text = render_markdown([o.model_validate({**o.model_dump(mode="json"), "frontier": fr})])
    block = text.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert block.startswith('%%{init: {"theme": "base", "themeVariables": {"xyChart": '
                            '{"plotColorPalette": "#D55E00, #0072B2"}}}}%%\nxychart-beta\n')
    assert 'line "current"' in block and 'line "baseline"' in block


def test_frontier_falls_back_to_a_table(monkeypatch):
    monkeypatch.setattr(md, "_load_mermaid", lambda: None)
    text = render_markdown([fx.sweep()])
    assert "```mermaid" not in text
    # Per point: 610 / 600 = 1.02 times the baseline's throughput, TPOT 50 -> 50 ms (ratio 1.00).
    assert "| concurrency 16 | 20 | 610 | ❌ no | 600 | 1.02 | 1.00 | ✅ pass |" in text
    # Without per-point data the two frontiers are listed as numbers.
    o = fx.sweep()
    fr = {k: v for k, v in o.frontier.model_dump(mode="json").items() if k != "points" and k != "comparison"}
    bare = render_markdown([o.model_validate({**o.model_dump(mode="json"), "frontier": fr})])
    assert "| baseline | 33.3 | 400 |" in bare and "| current | 20 | 610 |" in bare


def test_frontier_renderer_failure_is_not_fatal(monkeypatch):
    def broken(*a, **k):
        raise ValueError("bad points")

    monkeypatch.setattr(md, "_load_mermaid", lambda: broken)
    assert "| concurrency 1 | 50 | 180 | ✅ yes | 175 | 1.03 | 1.00 | ✅ pass |" in render_markdown([fx.sweep()])


def test_under_budget_nothing_cut():
    text = render_markdown(fx.all_outcomes())
    assert "✂️" not in text and text.count("<details>") == 17  # 2 per test, the sweep's step lookup


@pytest.mark.parametrize("budget", [12000, 4000, 3000, 1200, 600])
def test_truncation_keeps_summary_and_says_what_was_cut(budget):
    full = render_markdown(fx.all_outcomes())
    assert len(full.encode()) > 12000
    text = render_markdown(fx.all_outcomes(), max_bytes=budget)
    assert len(text.encode()) <= budget
    assert summary_line(fx.all_outcomes()) in text
    assert f"Report shortened to fit {budget:,} bytes" in text
    assert "<details>" not in text  # details go first
    assert "environment and configuration details omitted for all 8 tests" in text


def test_truncation_drops_passing_tables_before_failing_ones():
    text = render_markdown(fx.all_outcomes(), max_bytes=7000)
    assert "verdict tables of 3 passing tests omitted" in text
    assert "### ✅" not in text and "### 🆕" not in text
    assert "### ❌ `tests/test_serve.py::test_param[a|b]` — regressed" in text


def test_truncation_at_tiny_budget_cuts_overview_rows():
    text = render_markdown(fx.all_outcomes(), max_bytes=900)
    assert len(text.encode()) <= 900
    assert "sections of all 5 failing or doubtful tests omitted" in text
    assert "overview lists" in text


def test_budget_smaller_than_headline_is_still_respected():
    text = render_markdown(fx.all_outcomes(), max_bytes=50)
    assert len(text.encode()) <= 50
    text.encode().decode()  # never cuts a character in half

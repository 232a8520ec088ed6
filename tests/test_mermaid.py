"""Mermaid xychart-beta rendering, checked against the grammar's rules and hand-computed values.

The validator follows mermaid's xychart lexer/grammar: quoted text is ``"[^"]*"`` (no
escapes), numbers are ``[+-]?(\\d+(\\.\\d+)?|\\.\\d+)`` (no exponents), the x band is a
bracketed comma list of texts, the y range is ``min --> max``, a line is ``line [text]
[numbers]``, and ``%%`` starts a comment anywhere outside quotes.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Optional

import pytest

from pytest_goodput.report.md.mermaid import (
    legend,
    mermaid_xychart,
    nice_ceiling,
    number,
    quote,
    x_labels,
)
from pytest_goodput.schema.outcomes.frontier import FrontierPoint

STR = r'"[^"`\n]*"'
NUM = r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)"


def validate(block: str) -> dict[str, Any]:
    """Parse a chart the way xychart-beta's grammar does; fail on anything it would reject."""
    lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
    # The init directive is the one line allowed to hold %% (it is parsed as JSON).
    m = re.fullmatch(r"%%\{init: (.*)\}%%", lines.pop(0))
    assert m, "the chart starts with its init directive"
    palette = json.loads(m.group(1))["themeVariables"]["xyChart"]["plotColorPalette"].split(", ")
    block = "\n".join(lines)
    assert "%%" not in block and "`" not in block
    assert lines[0] == "xychart-beta"
    out: dict[str, Any] = {"lines": [], "palette": palette}
    for ln in lines[1:]:
        if m := re.fullmatch(rf"title ({STR})", ln):
            out["title"] = m.group(1)[1:-1]
        elif m := re.fullmatch(rf"x-axis (?:{STR} )?\[((?:{STR}, )*{STR})\]", ln):
            out["x"] = [s[1:-1] for s in re.findall(STR, m.group(1))]
        elif m := re.fullmatch(rf"y-axis (?:{STR} )?({NUM}) --> ({NUM})", ln):
            out["y"] = (float(m.group(1)), float(m.group(2)))
        elif m := re.fullmatch(rf"line (?:({STR}) )?\[((?:{NUM}, )*{NUM})\]", ln):
            name = (m.group(1) or '""')[1:-1]
            out["lines"].append((name, [float(v) for v in m.group(2).split(", ")]))
        else:
            raise AssertionError(f"not xychart-beta grammar: {ln!r}")
    assert len(set(out["x"])) == len(out["x"]), "a band axis merges equal labels"
    assert len(palette) == len(out["lines"]), "one colour per line"
    for name, vals in out["lines"]:
        assert len(vals) == len(out["x"]), f"line {name} does not align with the x axis"
        assert all(out["y"][0] <= v <= out["y"][1] for v in vals)
    return out


def pt(x: Optional[float], y: Optional[float]) -> FrontierPoint:
    return FrontierPoint(load=1, load_kind="rate", interactivity=x, throughput=y)


CUR = [pt(10, 1000), pt(20, 800), pt(40, 500)]
BASE = [pt(10, 900), pt(30, 700), pt(60, 300)]


def test_two_frontiers_on_a_shared_step_grid() -> None:
    chart = validate(mermaid_xychart(CUR, BASE, title="Frontier"))
    assert chart["title"] == "Frontier"
    assert chart["x"] == ["10", "20", "30", "40", "60"]
    # step lookup: best throughput at interactivity >= x; 0 beyond the right end
    assert chart["lines"] == [
        ("current", [1000, 800, 500, 500, 0]),
        ("baseline", [900, 700, 700, 300, 300]),
    ]
    assert chart["y"] == (0, 1100)  # 1000 * 1.05 = 1050 -> 1100
    # Okabe-Ito vermillion for the current line, blue for the baseline: never Mermaid's pale default.
    assert chart["palette"] == ["#D55E00", "#0072B2"]


def test_legend_names_each_colour() -> None:
    assert legend() == ("Lines: 🟧 **current** (vermillion, `#D55E00`) · "
                        "🟦 **baseline** (blue, `#0072B2`)")
    assert legend(["current"]) == "Lines: 🟧 **current** (vermillion, `#D55E00`)"


def test_exact_text() -> None:
    assert mermaid_xychart([pt(12.5, 333.3333)], title="t") == (
        '%%{init: {"theme": "base", "themeVariables": {"xyChart": {"plotColorPalette": "#D55E00"}}}}%%\n'
        "xychart-beta\n"
        '    title "t"\n'
        '    x-axis "interactivity (tok/s/user)" ["12.5"]\n'
        '    y-axis "output tok/s" 0 --> 350\n'
        '    line "current" [333.33]\n'
    )


def test_dominated_points_and_non_finite_values_are_ignored() -> None:
    chart = validate(mermaid_xychart(CUR + [pt(15, 100), pt(math.nan, 5000), pt(None, 1)]))
    assert chart["x"] == ["10", "20", "40"]
    assert "title" not in chart and len(chart["lines"]) == 1


def test_hostile_title_is_made_safe() -> None:
    title = 'PR #12: "fast" path\nline two %% comment `code` #quot; ' + "x" * 200
    block = mermaid_xychart(CUR, title=title)
    chart = validate(block)
    assert chart["title"].startswith("PR #12: 'fast' path line two % comment 'code' #quot x")
    assert len(chart["title"]) == 120
    assert quote('a"b') == "\"a'b\""


def test_labels_stay_distinct_when_rounding_would_merge_them() -> None:
    assert x_labels([10.001, 10.002, 10.0031]) == ["10.001", "10.002", "10.003"]
    assert x_labels([1234.4, 0.25, 33.333]) == ["1234", "0.25", "33.3"]  # whole units kept
    chart = validate(mermaid_xychart([pt(10.001, 3), pt(10.002, 2), pt(10.0031, 1)]))
    assert chart["x"] == ["10.001", "10.002", "10.003"]


def test_numbers_never_use_exponents() -> None:
    assert number(1e-7) == "0" and number(2.5e12) == "2500000000000"
    assert number(-0.0001) == "0" and number(math.inf) == "0" and number(3.10) == "3.1"
    chart = validate(mermaid_xychart([pt(1e-5, 1e9), pt(2e6, 1e-6)]))
    assert chart["x"] == ["0.00001", "2000000"]
    assert re.search(r"\de[+-]?\d", mermaid_xychart([pt(1e-5, 1e9)])) is None


@pytest.mark.parametrize(("value", "top"), [(1000, 1100), (95, 100), (0.42, 0.45), (0, 1), (12345, 13000)])
def test_nice_ceiling(value: float, top: float) -> None:
    assert nice_ceiling(value) == pytest.approx(top)


def test_empty_frontiers_give_no_chart() -> None:
    assert mermaid_xychart([], []) == ""
    assert mermaid_xychart([pt(None, 1)]) == ""


def test_per_gpu_axis_title() -> None:
    assert '"output tok/s/GPU"' in mermaid_xychart(CUR, per_gpu=True)

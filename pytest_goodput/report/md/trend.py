"""Trend charts of metrics that regressed or crept, as Mermaid ``xychart-beta`` blocks.

Pure string building, like the frontier charts (``report/md/mermaid.py``, whose quoting and
number formats it shares). Colours come from the Okabe–Ito palette, which stays
distinguishable under the common colour-vision deficiencies, set in the chart's init
directive because xychart has no per-line colour syntax and no legend (the title names
the lines instead).
"""

from __future__ import annotations

import json
import math
from typing import Optional

from pytest_goodput.report.md.mermaid import nice_ceiling, number, quote
from pytest_goodput.report.vocabulary import fmt_change, fmt_value, metric_info, metric_label
from pytest_goodput.schema.runs.history import Trend
from pytest_goodput.schema.registry import lookup_info

#: Okabe–Ito blue (the runs), orange (the window's start level), vermillion (the tolerance limit).
PALETTE: tuple[str, str, str] = ("#0072B2", "#E69F00", "#D55E00")
_INIT = {"themeVariables": {"xyChart": {"plotColorPalette": ", ".join(PALETTE)}}}


def _labels(t: Trend) -> list[str]:
    """Short commit labels, made unique (a categorical axis merges equal labels)."""
    out: list[str] = []
    for p in t.points:
        base = p.label if p.current or p.label.startswith("run ") else p.label[:7]
        name, n = base, 1
        while name in out:
            n += 1
            name = f"{base} #{n}"
        out.append(name)
    return out


def _limit(t: Trend) -> Optional[float]:
    """The value at which the loss from the window's start reaches the tolerance."""
    info = lookup_info(t.metric)
    if t.start is None or t.tolerance is None or info is None:
        return None
    return t.start * (1 - t.tolerance if info.direction == "higher" else 1 + t.tolerance)


def trend_chart(t: Trend) -> str:
    """The body of a ```` ```mermaid ```` block: the runs, and for a creep the window's start
    level and the tolerance limit as flat lines. "" when there is nothing finite to draw."""
    values = [p.value for p in t.points if math.isfinite(p.value)]
    if len(values) != len(t.points) or not values:
        return ""
    limit = _limit(t)
    flat = [v for v in (t.start, limit) if v is not None and math.isfinite(v)]
    lo, hi = min(values + flat), max(values + flat)
    bottom = max(0.0, lo - 0.1 * (hi - lo or abs(hi) or 1.0))
    label = metric_info(t.metric)[0]
    what = "crept" if t.reason == "crept" else "regressed"
    lines_named = "blue runs" + (", orange window start, red tolerance limit" if flat else "")
    lines = [f"%%{{init: {json.dumps(_INIT)}}}%%", "xychart-beta",
             f"    title {quote(f'{label} {what}: {lines_named}')}",
             f"    x-axis [{', '.join(quote(s) for s in _labels(t))}]",
             f"    y-axis {quote(metric_label(t.metric))} {number(bottom, 4)} --> {number(nice_ceiling(hi), 4)}",
             f"    line [{', '.join(number(v, 4) for v in values)}]"]
    for level in (t.start, limit):
        if level is not None:
            lines.append(f"    line [{', '.join(number(level, 4) for _ in values)}]")
    return "\n".join(lines) + "\n"


def trend_section(trends: list[Trend]) -> str:
    """Markdown for a test's trends: one line of figures and one chart per metric."""
    parts = []
    for t in trends:
        unit = metric_info(t.metric)[1]
        first, last = t.points[0].value, t.points[-1].value
        change = last / first - 1 if first else math.nan
        head = (f"**Trend of {metric_label(t.metric)} on main** ({t.reason}; {len(t.points)} runs): "
                f"{fmt_value(first, unit)} → {fmt_value(last, unit)} ({fmt_change(change)})")
        chart = trend_chart(t)
        parts.append(head + (f"\n\n```mermaid\n{chart}```" if chart else ""))
    return "\n\n".join(parts)

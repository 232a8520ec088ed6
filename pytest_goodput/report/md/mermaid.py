"""Frontier charts as Mermaid ``xychart-beta`` blocks: they render on GitHub with no images.

Pure string building. The grammar (mermaid's xychart parser) has no escapes inside quoted
text and no exponent notation in numbers, so text is sanitized and numbers are written in
fixed notation. ``docs/frontiers.md`` shows an example.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Optional

from pytest_goodput.measure.frontier import pareto_frontier, step_lookup
from pytest_goodput.schema.outcomes.frontier import FrontierPoint

X_TITLE = "interactivity (tok/s/user)"
MAX_TEXT = 120
#: Line colours, current first (Okabe-Ito: distinguishable with every common colour-vision
#: deficiency, and both dark enough to read on white): current vermillion, baseline blue.
SERIES_COLOURS: dict[str, tuple[str, str]] = {
    "current": ("#D55E00", "vermillion"),
    "baseline": ("#0072B2", "blue"),
}
SERIES_MARKS = {"current": "🟧", "baseline": "🟦"}


def init_directive(names: Sequence[str]) -> str:
    """The ``%%{init}%%`` line that gives each line its colour (xychart draws no legend)."""
    palette = ", ".join(SERIES_COLOURS[n][0] for n in names)
    return ('%%{init: {"theme": "base", "themeVariables": {"xyChart": {"plotColorPalette": "'
            + palette + '"}}}}%%')


def legend(names: Sequence[str] = ("current", "baseline")) -> str:
    """The line under a chart naming which colour is which line."""
    return "Lines: " + " · ".join(
        f"{SERIES_MARKS[n]} **{n}** ({SERIES_COLOURS[n][1]}, `{SERIES_COLOURS[n][0]}`)" for n in names)


def quote(text: str) -> str:
    """A double-quoted xychart string: quotes and backticks become ', line breaks spaces,
    ``%%`` (a comment) a single %, and entity-like ``#name;`` loses its semicolon."""
    s = re.sub(r"[\r\n\t]+", " ", text).replace('"', "'").replace("`", "'")
    while "%%" in s:
        s = s.replace("%%", "%")
    s = re.sub(r"#(\w+);", r"#\1", s).strip()
    if len(s) > MAX_TEXT:
        s = s[: MAX_TEXT - 1] + "…"
    return f'"{s}"'


def number(value: float, decimals: int = 2) -> str:
    """Fixed notation (the grammar has no exponents), trailing zeros dropped."""
    if not math.isfinite(value):
        value = 0.0
    s = f"{value:.{decimals}f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _significant(value: float, digits: int) -> str:
    if value == 0 or not math.isfinite(value):
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return number(value, decimals)


def x_labels(xs: Sequence[float]) -> list[str]:
    """Rounded labels (3 significant digits, whole units kept), more digits until no two collide:
    a categorical axis merges equal labels."""
    for digits in range(3, 18):
        labels = [_significant(x, digits) for x in xs]
        if len(set(labels)) == len(labels):
            return labels
    return [repr(float(x)) for x in xs]


def nice_ceiling(value: float) -> float:
    """An axis top a little above ``value``, rounded to two significant digits."""
    if not value > 0 or not math.isfinite(value):
        return 1.0
    top = value * 1.05
    step = 10.0 ** (math.floor(math.log10(top)) - 1)
    return math.ceil(top / step) * step


def mermaid_xychart(
    current_frontier: Sequence[FrontierPoint],
    baseline_frontier: Optional[Sequence[FrontierPoint]] = None,
    title: str = "",
    *,
    per_gpu: bool = False,
) -> str:
    """The body of a ```` ```mermaid ```` block: one ``line`` per frontier, current first.

    Both lines share one x grid (every frontier interactivity, ascending); each value is
    :func:`~pytest_goodput.measure.frontier.step_lookup` of that frontier there, 0 beyond its right
    end (nothing that interactive). Empty frontiers give "" (no chart).
    """
    series: list[tuple[str, list[FrontierPoint]]] = [("current", pareto_frontier(current_frontier))]
    if baseline_frontier is not None:
        series.append(("baseline", pareto_frontier(baseline_frontier)))
    grid = sorted({p.interactivity for _, front in series for p in front if p.interactivity is not None})
    if not grid:
        return ""
    values = {
        name: [step_lookup(front, x) or 0.0 for x in grid] for name, front in series
    }
    top = nice_ceiling(max(v for vs in values.values() for v in vs))
    y_title = "output tok/s/GPU" if per_gpu else "output tok/s"
    lines = [init_directive([name for name, _ in series]), "xychart-beta"]
    if title:
        lines.append(f"    title {quote(title)}")
    lines.append(f"    x-axis {quote(X_TITLE)} [{', '.join(quote(s) for s in x_labels(grid))}]")
    lines.append(f"    y-axis {quote(y_title)} 0 --> {number(top)}")
    for name, _ in series:
        lines.append(f"    line {quote(name)} [{', '.join(number(v) for v in values[name])}]")
    return "\n".join(lines) + "\n"

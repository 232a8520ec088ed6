"""Time slices in words, a table and a chart: the terminal line and the Markdown block.

The terminal gets one line per test (the slices' output throughput and medians, where the
steady state began, the degradation); Markdown gets the same headline, a Mermaid line chart
of output throughput per slice (it renders on GitHub with no image and no matplotlib) and the
table of every slice, which stands alone when the chart cannot be drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable, Optional

from pytest_goodput.report.md.mdtable import escape_cell, table
from pytest_goodput.report.md.mermaid import init_directive, nice_ceiling, number, quote
from pytest_goodput.report.vocabulary import fmt_num
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.registry import metric
from pytest_goodput.schema.runs.slices import Slice, Slices

#: Slices the terminal line lists one by one; longer runs show first, …, last.
MAX_LISTED = 8
#: Rows of the Markdown table; a longer run shows its first and last halves.
MAX_ROWS = 24
ChartFn = Callable[[Slices, str], str]


def _series(values: Sequence[Optional[float]], arrow: str) -> str:
    shown = [fmt_num(v) for v in values]
    if len(shown) > MAX_LISTED:
        shown = [*shown[:MAX_LISTED - 2], "…", shown[-1]]
    return f" {arrow} ".join(shown)


def degradation_text(s: Slices) -> str:
    """``degradation: output throughput -12.0 %, TPOT P50 +30.1 %`` (empty when none measured)."""
    parts = [f"{metric(p).label.removeprefix('degradation: ')} {d.value * 100:+.1f} %"
             for p, d in s.degradation.items()]
    return "degradation: " + ", ".join(parts) if parts else ""


def steady_text(s: Slices) -> str:
    if s.steady_at_s is None:
        return "no steady state"
    return f"steady from {s.steady_at_s:g} s"


def slices_line(o: TestOutcome, arrow: str = "→") -> Optional[str]:
    """``slices: 5 × 2 s, steady from 0 s; output tok/s 90 → 100 …; TPOT P50 ms …; degradation: …``."""
    s = o.slices
    if s is None:
        return None
    if not s.slices:
        return f"slices: none (the run's window is empty; slice_s={s.slice_s:g})"
    parts = [f"slices: {len(s.slices)} × {s.slice_s:g} s, {steady_text(s)}",
             f"output tok/s {_series([x.output_tokens_per_s for x in s.slices], arrow)}",
             f"TTFT P50 ms {_series([x.ttft_ms_p50 for x in s.slices], arrow)}",
             f"TPOT P50 ms {_series([x.tpot_ms_p50 for x in s.slices], arrow)}"]
    few = sum(x.too_few for x in s.slices)
    if few:
        parts.append(f"{few} slice(s) with too few requests")
    deg = degradation_text(s)
    if deg:
        parts.append(deg)
    return "; ".join(parts)


def slices_chart(s: Slices, title: str) -> str:
    """The body of a ```` ```mermaid ```` block: output tok/s per slice, one line."""
    if not s.slices:
        return ""
    top = nice_ceiling(max(x.output_tokens_per_s for x in s.slices))
    labels = ", ".join(quote(f"{x.start_s:g}") for x in s.slices)
    return "\n".join([
        init_directive(["current"]), "xychart-beta", f"    title {quote(title)}",
        f"    x-axis {quote('slice start (s)')} [{labels}]",
        f"    y-axis {quote('output tok/s')} 0 --> {number(top)}",
        f"    line {quote('current')} [{', '.join(number(x.output_tokens_per_s) for x in s.slices)}]",
    ]) + "\n"


def _row(i: int, x: Slice, steady: Optional[int]) -> list[str]:
    mark = "steady from here" if i == steady else ("too few requests" if x.too_few else "")
    return [str(i + 1), f"{x.start_s:g}", f"{x.seconds:g}", str(x.completed), str(x.failed),
            fmt_num(x.output_tokens_per_s), fmt_num(x.ttft_ms_p50), fmt_num(x.tpot_ms_p50), mark]


def slices_table(s: Slices) -> str:
    """Every slice, or the first and last :data:`MAX_ROWS` / 2 of a long run (a report has a size limit)."""
    rows = [_row(i, x, s.steady_from) for i, x in enumerate(s.slices)]
    if len(rows) > MAX_ROWS:
        half = MAX_ROWS // 2
        rows = [*rows[:half], ["…"] + [""] * 8, *rows[-half:]]
    return table(["slice", "start s", "s", "completed", "failed", "output tok/s", "TTFT P50 ms",
                  "TPOT P50 ms", ""], rows, "rrrrrrrrl")


def slices_block(o: TestOutcome, render: Optional[ChartFn] = slices_chart) -> str:
    """Headline, chart (when it can be drawn) and the table of a test's slices."""
    s = o.slices
    if s is None or not s.slices:
        return ""
    head = f"{len(s.slices)} × {s.slice_s:g} s, {steady_text(s)}"
    deg = degradation_text(s)
    parts = [f"**Time slices:** {escape_cell(head)}" + (f"; {escape_cell(deg)}" if deg else "")]
    chart = None
    if render is not None:
        try:
            chart = render(s, f"{o.nodeid} output tok/s per slice")
        except Exception:  # a chart must never take the report down; the table still shows
            chart = None
    if chart:
        parts.append(f"```mermaid\n{chart.strip()}\n```")
    parts.append(slices_table(s))
    return "\n\n".join(parts)

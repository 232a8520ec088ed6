"""Markdown for sweeps and capacity searches: the frontier chart with its legend, a table per
sweep point, the step-lookup matches, and a table of capacity probes.

Pure. The chart renderer is a seam (``render``) so a report never fails on a chart: a chart
that cannot be drawn leaves the tables, which always carry every number.
"""

from __future__ import annotations

from typing import Callable, Optional

from pytest_goodput.report.md.mdtable import escape_cell, table
from pytest_goodput.report.md.mermaid import legend
from pytest_goodput.report.text.shapes import (
    UNREACHED,
    bracket_text,
    capacity_headline,
    capacity_sides,
    frontier_headline,
    load_text,
    saturation_headline,
    point_rows,
    probe_verdict,
    step_rows,
)
from pytest_goodput.report.vocabulary import fmt_num, fmt_percent
from pytest_goodput.schema.outcomes.shapes import SweepOutcome
from pytest_goodput.schema.outcomes.outcome import VERDICT_SYMBOL, TestOutcome

ChartFn = Callable[..., str]


def _yes_no(ok: Optional[bool]) -> str:
    return "–" if ok is None else ("✅ yes" if ok else "❌ no")


def _verdict(v: Optional[str]) -> str:
    return "–" if not v else f"{VERDICT_SYMBOL.get(v, '')} {v}"


def _ratio(r: Optional[float]) -> str:
    return "–" if r is None else f"{r:.2f}"


def points_table(o: TestOutcome) -> str:
    """One row per current sweep point: its numbers and how it compares at the same load."""
    rows = []
    for r in point_rows(o):
        rows.append([
            escape_cell(load_text(r.load, r.load_kind)), fmt_num(r.interactivity), fmt_num(r.throughput),
            _yes_no(r.slo_ok), fmt_num(r.baseline_throughput), _ratio(r.throughput_ratio),
            _ratio(r.interactivity_ratio), _verdict(r.verdict),
        ])
    head = ["load", "tok/s/user", "output tok/s", "SLO met", "baseline tok/s", "tok/s ratio",
            "tok/s/user ratio", "verdict"]
    return table(head, rows, "lrrlrrrl") if rows else ""


def step_table(o: TestOutcome) -> str:
    """Each baseline frontier point against the best current point at least as interactive."""
    rows = []
    for p in step_rows(o):
        cur = p.current
        rows.append([
            fmt_num(p.interactivity), fmt_num(p.baseline.throughput),
            UNREACHED if cur is None else fmt_num(cur.throughput),
            "–" if cur is None else _ratio(p.ratio), _verdict(p.verdict),
        ])
    head = ["baseline tok/s/user", "baseline tok/s", "current tok/s", "ratio", "verdict"]
    return table(head, rows, "rrrrl") if rows else ""


def _sides_table(frontier: SweepOutcome) -> str:
    """Both frontiers as numbers: what the chart shows, when it cannot be drawn."""
    rows = []
    for side, pts in (("baseline", frontier.baseline or []), ("current", frontier.current)):
        rows += [[side, fmt_num(p.interactivity), fmt_num(p.throughput)] for p in pts]
    return table(["frontier", "tok/s/user", "output tok/s"], rows, "lrr") if rows else ""


def frontier_block(o: TestOutcome, render: Optional[ChartFn]) -> str:
    """Headline, chart and legend, and the per-point table."""
    fr = o.frontier if o.frontier is not None else SweepOutcome()
    parts = []
    headline = frontier_headline(o)
    verdict_of = fr.comparison.verdict if fr.comparison is not None else None
    if headline:
        verdict = f" — {_verdict(verdict_of)}" if verdict_of else ""
        parts.append(f"**Frontier{verdict}:** " + escape_cell(headline.removeprefix("frontier: ")))
    saturation = saturation_headline(o)
    if saturation:
        parts.append("**Saturation:** " + escape_cell(saturation.removeprefix("saturation: ")))
    chart = None
    if render is not None and fr.current:
        try:
            chart = render(list(fr.current), fr.baseline, title=f"{o.nodeid} frontier")
        except Exception:  # a chart must never take the report down; the tables still show
            chart = None
    if chart:
        chart = chart.strip()
        parts.append(chart if chart.startswith("```") else f"```mermaid\n{chart}\n```")
        parts.append(legend(["current", "baseline"] if fr.baseline else ["current"]))
    elif not point_rows(o):
        sides = _sides_table(fr)
        if sides:
            parts.append(sides)
    points = points_table(o)
    if points:
        parts.append(points)
    return "\n\n".join(parts)


def step_details(o: TestOutcome) -> str:
    """The step lookup, collapsed (it goes with the other details when a report must shrink)."""
    step = step_table(o)
    if not step:
        return ""
    return ("<details><summary>Frontier matched by interactivity (step lookup)</summary>\n\n"
            + step + "\n\n</details>")


def capacity_block(o: TestOutcome) -> str:
    """The capacity against the baseline's, then every probe of the current search."""
    current, baseline = capacity_sides(o)
    if current is None:
        return ""
    parts = ["**Capacity:** " + escape_cell((capacity_headline(o) or "").removeprefix("capacity: "))]
    if baseline is not None:
        parts[0] += f" · baseline bracket {escape_cell(bracket_text(baseline))} req/s"
    target = current.target
    rows = []
    for i, p in enumerate(current.probes, 1):
        met, why = probe_verdict(p, target)
        good, issued = p.good, p.issued
        rows.append([
            str(i), fmt_num(p.rate), fmt_percent(p.attainment), fmt_num(p.goodput_rps),
            f"{good} / {issued}" if good is not None and issued is not None else "–",
            _yes_no(met), escape_cell(why) or "–",
        ])
    if rows:
        parts.append(table(["probe", "rate (req/s)", "attainment", "goodput (req/s)", "good / issued",
                            "SLO met", "why not"], rows, "rrrrrll"))
    return "\n\n".join(parts)

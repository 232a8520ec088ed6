"""The per-PR Markdown report: verdicts per metric, SLOs, frontiers, and the four questions.

Pure: outcomes in, one Markdown string out. Renders on GitHub (tables, ``<details>``,
Mermaid ``xychart-beta``) with no image hosting, and stays under a byte budget (GitHub's
step summary and PR comments cap their size) by cutting the least useful parts first.
"""

from __future__ import annotations

from typing import Callable, Optional

from pytest_goodput.judge.noise.main_level import MAIN_LEVEL_NOTE
from pytest_goodput.judge.noise.outliers import OUTLIER_NOTE
from pytest_goodput.judge.output_guard import GUARD_OFF_NOTE
from pytest_goodput.measure.sketched import SKETCH_NOTE
from pytest_goodput.run.launches import RECORDING_NOTE
from pytest_goodput.report.text.cost import cost_lines
from pytest_goodput.report.text.engine_line import engine_line
from pytest_goodput.report.md.md_context import details as env_details
from pytest_goodput.report.md.clock import clock_block
from pytest_goodput.report.md.md_context import questions_table, why_block
from pytest_goodput.report.md.md_shapes import capacity_block, frontier_block, step_details
from pytest_goodput.report.md.mdtable import code_span, escape_cell, table
from pytest_goodput.report.md.mermaid import mermaid_xychart
from pytest_goodput.report.text.shapes import UNREACHED
from pytest_goodput.report.text.slices import slices_block
from pytest_goodput.report.md.trend import trend_section
from pytest_goodput.schema.outcomes.cost import EngineUse
from pytest_goodput.report.vocabulary import (
    FAILING,
    STATUSES,
    comparison_label,
    comparison_unit,
    fmt_change,
    fmt_interval,
    fmt_value,
    metric_info,
    sides,
    sorted_comparisons,
    sorted_outcomes,
    status_counts,
    worst_comparison,
)
from pytest_goodput.schema.outcomes.outcome import VERDICT_SYMBOL, TestOutcome

STATUS_EMOJI: dict[str, str] = {
    "passed": "✅", "regressed": "❌", "inconclusive": "⚠️", "underpowered": "🔍", "new": "🆕",
    "slo-failed": "❌", "invalid": "🚫", "error": "💥", "incomparable": "⛔", "workload-changed": "🔀",
}
_STATUS_WORD = {"slo-failed": "SLO-failed"}
_BASELINE_WORDS = {
    "compared": "compared with the baseline",
    "new": "no baseline yet",
    "incomparable": "baseline not comparable",
    "updated": "baseline updated",
    "off": "baseline comparison off",
}
#: Tests whose sections go when the report must shrink (after every details block).
_PASSING = frozenset({"passed", "new"})

#: Kept for callers of the old names; the report's tables come from ``mdtable``.
_table = table


def _status(status: str) -> str:
    return f"{STATUS_EMOJI.get(status, '')} {_STATUS_WORD.get(status, status)}"


def summary_line(outcomes: list[TestOutcome]) -> str:
    """One line with the count of every status; it is never cut from the report."""
    counts = status_counts(outcomes)
    names = [s for s in STATUSES
             if s not in ("incomparable", "underpowered", "workload-changed") or counts[s]]
    parts = [f"{counts[s]} {_STATUS_WORD.get(s, s)}" for s in names]
    failing = any(counts[s] for s in FAILING)
    mark = "❌" if failing else ("⚠️" if counts["inconclusive"] or counts["underpowered"] else "✅")
    n = len(outcomes)
    return f"{mark} **{n} goodput test{'s' if n != 1 else ''}:** " + " · ".join(parts)


def _overview_row(o: TestOutcome) -> list[str]:
    w = worst_comparison(o)
    cells = [escape_cell(o.nodeid), escape_cell(o.scenario), _status(o.status)]
    if w is None:
        return cells + ["–", "–", "–", "–"]
    unit = comparison_unit(w)
    return cells + [
        escape_cell(comparison_label(w)),
        fmt_value(w.baseline, unit),
        fmt_value(w.current, unit),
        fmt_change(w.change, scale=w.scale),
    ]


_OVERVIEW_HEAD = ["test", "scenario", "status", "worst metric", "baseline", "current", "change"]


def _metrics_table(o: TestOutcome) -> str:
    rows = []
    for c in sorted_comparisons(o):
        unit = comparison_unit(c)
        unreached = c.metric == "frontier_throughput" and c.current is None and c.baseline is not None
        rows.append([
            escape_cell(comparison_label(c)),
            fmt_value(c.baseline, unit),
            UNREACHED if unreached else fmt_value(c.current, unit),
            "–" if unreached else fmt_change(c.change, scale=c.scale),
            fmt_interval(c.interval, scale=c.scale),
            f"{VERDICT_SYMBOL.get(c.verdict, '')} {c.verdict}",
            escape_cell(c.note),
        ])
    head = ["metric", *sides(o), "change", "interval", "verdict", "note"]
    return _table(head, rows, "lrrrlll")


def _slo_table(o: TestOutcome) -> str:
    rows = []
    for s in o.slos:
        label, unit = metric_info(s.name)
        proven = "–" if s.proven is None else ("yes" if s.proven else "no")
        rows.append([
            escape_cell(label),
            fmt_value(s.limit, unit, with_unit=True),
            fmt_value(s.value, unit, missing="+∞" if s.infinite else "–", with_unit=True),
            "✅" if s.ok else "❌",
            proven,
            escape_cell(s.note),
        ])
    return _table(["SLO", "limit", "value", "ok", "proven", "note"], rows, "lrrlll")


MermaidFn = Callable[..., str]


def _load_mermaid() -> Optional[MermaidFn]:
    """The Mermaid chart renderer (a seam: tests swap it for a failing or absent one)."""
    return mermaid_xychart


def _section(o: TestOutcome) -> str:
    """Heading, verdict tables and problems of one test (everything but the details)."""
    parts = [f"### {STATUS_EMOJI.get(o.status, '')} {code_span(o.nodeid)} — {_STATUS_WORD.get(o.status, o.status)}"]
    against = (f"A/B in one job: base `{escape_cell(o.ab.base)}` vs head `{escape_cell(o.ab.head)}`, "
               f"{'decided' if o.ab.decided else 'undecided'} after {o.ab.rounds_used} rounds"
               if o.ab is not None else _BASELINE_WORDS.get(o.baseline_status, o.baseline_status))
    parts.append(f"Scenario **{escape_cell(o.scenario)}** · {against}")
    parts.append(questions_table(o))
    if o.error:
        parts.append(f"> **Error:** {escape_cell(o.error)}")
    if not o.client_valid:
        reasons = "; ".join(o.client_reasons) or "no reason recorded"
        parts.append(f"> **Invalid run** — the load generator, not the server, set the pace: {escape_cell(reasons)}")
    for note in (n for n in o.notes if n.startswith(SKETCH_NOTE)):  # a run too large to ship
        parts.append("> **Sketched:** " + escape_cell(note))
    for note in (n for n in o.notes if n.startswith(RECORDING_NOTE)):  # re-measured, launches replaced
        parts.append("> **Recording kept what is valid:** " + escape_cell(note[len(RECORDING_NOTE) + 2:]))
    for note in (n for n in o.notes if n.startswith(OUTLIER_NOTE)):  # recording: the user decides
        parts.append("> **Outlier session recorded:** " + escape_cell(note[len(OUTLIER_NOTE) + 2:]))
    level = [escape_cell(n[len(MAIN_LEVEL_NOTE) + 2:]) for n in o.notes if n.startswith(MAIN_LEVEL_NOTE)]
    if level:  # main moved: judged against its current level, the report says so
        parts.append("> **Main's level:** " + "<br>".join(level))
    for note in (n for n in o.notes if n.startswith(GUARD_OFF_NOTE)):  # random sampling: outputs unchecked
        parts.append("> **Output guard off:** " + escape_cell(note[len(GUARD_OFF_NOTE) + 2:]))
    if o.incomparable_reasons:
        parts.append("> **Not compared with the baseline:** " + escape_cell("; ".join(o.incomparable_reasons)))
    if o.workload_changes:
        parts.append("> **Workload changed** (not a performance change): "
                     + escape_cell("; ".join(o.workload_changes)))
    if o.comparisons:
        parts.append(_metrics_table(o))
    if o.trends:
        parts.append(trend_section(o.trends))
    if o.slos:
        parts.append(_slo_table(o))
    for block in (why_block(o), clock_block(o), frontier_block(o, _load_mermaid()) if o.frontier else "", capacity_block(o),
                  slices_block(o)):
        if block:
            parts.append(block)
    if o.what_changed:
        changes = ", ".join(
            f"{code_span(k)} {escape_cell(old or 'unset')} → {escape_cell(new or 'unset')}"
            for k, (old, new) in sorted(o.what_changed.items())
        )
        parts.append(f"**What changed since the {sides(o)[0]}:** {changes}")
    return "\n\n".join(parts)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut_note(max_bytes: int, cuts: list[str]) -> str:
    return (f"> ✂️ **Report shortened to fit {max_bytes:,} bytes:** " + "; ".join(cuts)
            + ". The JSON results hold every number.")


def render_markdown(outcomes: list[TestOutcome], *, title: str = "pytest-goodput report",
                    max_bytes: int = 1_000_000, engines: Optional[EngineUse] = None) -> str:
    """The whole report; when over ``max_bytes``, cut details, then passing tests, and say so.
    Its first line names the engine measured; what the verdicts cost follows the summary."""
    ordered = sorted_outcomes(outcomes)
    head = [f"## {escape_cell(title)} — {engine_line(ordered, code_span, escape_cell)}", summary_line(ordered)]
    cost = cost_lines(ordered, engines, name=code_span)
    if cost:
        head.append("**" + cost[0].replace(": ", ":** ", 1) + "".join(f"<br>\n{c.strip()}" for c in cost[1:]))
    rows = [_overview_row(o) for o in ordered]
    sections = [_section(o) for o in ordered]
    details = ["\n\n".join(d for d in (step_details(o), env_details(o)) if d) for o in ordered]

    def compose(keep_details: bool, keep_passing: bool, n_sections: int, n_rows: int, cuts: list[str]) -> str:
        parts = list(head)
        if cuts:
            parts.append(_cut_note(max_bytes, cuts))
        if n_rows:
            parts.append(_table(_OVERVIEW_HEAD, rows[:n_rows]))
        shown = 0
        for o, sec, det in zip(ordered, sections, details):
            if not keep_passing and o.status in _PASSING:
                continue
            if shown >= n_sections:
                break
            shown += 1
            parts.append(sec + ("\n\n" + det if keep_details else ""))
        return "\n\n".join(parts) + "\n"

    n = len(ordered)
    text = compose(True, True, n, n, [])
    if _size(text) <= max_bytes:
        return text
    cuts = [f"environment and configuration details omitted for all {n} tests"]
    text = compose(False, True, n, n, cuts)
    if _size(text) <= max_bytes:
        return text
    n_pass = sum(1 for o in ordered if o.status in _PASSING)
    if n_pass:
        cuts.append(f"verdict tables of {n_pass} passing tests omitted")
    rest = n - n_pass
    text = compose(False, False, rest, n, cuts)
    if _size(text) <= max_bytes:
        return text

    def fit(make: Callable[[int], str], hi: int) -> tuple[int, str]:
        lo, best = 0, make(0)
        while lo < hi:  # largest k whose text fits
            mid = (lo + hi + 1) // 2
            candidate = make(mid)
            if _size(candidate) <= max_bytes:
                lo, best = mid, candidate
            else:
                hi = mid - 1
        return lo, best

    def with_sections(k: int) -> str:
        return compose(False, False, k, n, cuts + [f"sections of {rest - k} failing or doubtful tests omitted"])

    k, text = fit(with_sections, rest)
    if _size(text) <= max_bytes:
        return text
    if rest:
        cuts.append(f"sections of all {rest} failing or doubtful tests omitted")
    k, text = fit(lambda r: compose(False, False, 0, r, cuts + [f"overview lists {r} of {n} tests"]), n)
    if _size(text) <= max_bytes:
        return text
    # Not even the headline fits: keep what fits of it, cut on a character boundary.
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")

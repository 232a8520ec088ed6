"""The terminal summary table and the message a failing test shows (pure: returns strings).

Terminal symbols are single-width characters (✓ ✗ ? + ≠ !) rather than the emoji the
Markdown report uses: emoji are two columns wide in most terminals and would misalign the
table. ``ascii=True`` swaps them for plain ASCII on terminals without Unicode.
"""

from __future__ import annotations

from typing import Optional, TextIO

from tabulate import tabulate

from pytest_goodput.judge.noise.outliers import OUTLIER_NOTE
from pytest_goodput.report.text.cost import cost_lines
from pytest_goodput.report.text.engine_line import engine_line
from pytest_goodput.schema.outcomes.cost import EngineUse
from pytest_goodput.report.text.shapes import UNREACHED, capacity_headline, frontier_headline, saturation_headline
from pytest_goodput.report.text.slices import slices_line
from pytest_goodput.report.vocabulary import (
    NOTEWORTHY,
    STATUSES,
    comparison_label,
    comparison_unit,
    fmt_change,
    fmt_interval,
    fmt_percent,
    fmt_value,
    key_metric_values,
    metric_info,
    sides,
    sorted_comparisons,
    sorted_outcomes,
    status_counts,
    worst_comparison,
)
from pytest_goodput.report.text.workload_lines import reasoning_line, unrecorded_prompts_line
from pytest_goodput.schema.outcomes.outcome import MetricComparison, SLOOutcome, TestOutcome

STATUS_SYMBOL = {
    "passed": "✓", "regressed": "✗", "inconclusive": "?", "underpowered": "~", "new": "+",
    "slo-failed": "✗", "invalid": "!", "error": "✗", "incomparable": "≠", "workload-changed": "≠",
}
STATUS_ASCII = {
    "passed": "ok", "regressed": "XX", "inconclusive": "??", "underpowered": "~~", "new": "++",
    "slo-failed": "XX", "invalid": "!!", "error": "XX", "incomparable": "!=", "workload-changed": "!=",
}
VERDICT_SYMBOL = {
    "pass": "✓", "improved": "✓", "regressed": "✗", "inconclusive": "?", "underpowered": "~", "new": "+",
    "incomparable": "≠",
}
VERDICT_ASCII = {
    "pass": "ok", "improved": "ok", "regressed": "XX", "inconclusive": "??", "underpowered": "~~",
    "new": "++", "incomparable": "!=",
}

#: Key-metric columns of the summary, dropped from the right when the terminal is narrow.
SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("goodput.requests_per_s", "goodput req/s"),
    ("throughput.output_tokens_per_s", "out tok/s"),
    ("metrics.ttft_ms.p99", "TTFT P99 ms"),
    ("metrics.tpot_ms.p99", "TPOT P99 ms"),
    ("metrics.tokens_per_chunk.mean", "tok/chunk"),
    ("goodput.attainment", "attain"),
    ("frontier.max_output_tokens_per_s", "frontier max tok/s"),
    ("capacity.requests_per_s", "capacity req/s"),
)
_MIN_NAME = 24


def supports_unicode(stream: Optional[TextIO]) -> bool:
    """Whether ``stream`` can encode the report's symbols (False means: use ``ascii=True``)."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        "✓✗≠–…".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _status(status: str, ascii: bool) -> str:
    return f"{(STATUS_ASCII if ascii else STATUS_SYMBOL).get(status, '?')} {status}"


def _verdict(verdict: str, ascii: bool) -> str:
    return f"{(VERDICT_ASCII if ascii else VERDICT_SYMBOL).get(verdict, '?')} {verdict}"


def _shorten(name: str, limit: int, ascii: bool) -> str:
    """Keep the end of a node id (the test name) when it must be cut."""
    if len(name) <= limit:
        return name
    mark = "..." if ascii else "…"
    return mark + name[len(name) - (limit - len(mark)):]


def _summary_table(outcomes: list[TestOutcome], columns, name_limit: Optional[int], ascii: bool) -> str:
    missing = "-" if ascii else "–"
    headers = ["test", "scenario", *(h for _, h in columns), "worst metric", "baseline", "current", "change", "verdict"]
    rows = []
    for o in outcomes:
        km = key_metric_values(o)
        name = o.nodeid if name_limit is None else _shorten(o.nodeid, name_limit, ascii)
        row = [name, o.scenario]
        for path, _ in columns:
            row.append(fmt_value(km.get(path), metric_info(path)[1], missing))
        w = worst_comparison(o)
        if w is None:
            row += [missing, missing, missing, missing]
        else:
            unit = comparison_unit(w)
            row += [
                comparison_label(w, with_unit=False),
                fmt_value(w.baseline, unit, missing),
                fmt_value(w.current, unit, missing),
                fmt_change(w.change, missing, w.scale),
            ]
        row.append(_status(o.status, ascii))
        rows.append(row)
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def _width_of(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _headline(outcomes: list[TestOutcome]) -> str:
    counts = status_counts(outcomes)
    parts = [f"{counts[s]} {s}" for s in STATUSES if counts.get(s)]
    n = len(outcomes)
    return f"goodput: {n} test{'s' if n != 1 else ''}" + (f" - {', '.join(parts)}" if parts else "")


def _metric_table(comparisons: list[MetricComparison], ascii: bool,
                  names: tuple[str, str] = ("baseline", "current")) -> str:
    missing = "-" if ascii else "–"
    rows = []
    for c in comparisons:
        unit = comparison_unit(c)
        rows.append([
            comparison_label(c),
            fmt_value(c.baseline, unit, missing),
            fmt_value(c.current, unit, missing),
            fmt_change(c.change, missing, c.scale),
            fmt_interval(c.interval, missing, scale=c.scale),
            _verdict(c.verdict, ascii),
            c.note,
        ])
    headers = ["metric", *names, "change", "interval", "verdict", "note"]
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def _detail(o: TestOutcome, ascii: bool) -> list[str]:
    lines = [f"{_status(o.status, ascii)}: {o.nodeid} (scenario {o.scenario})"]
    if o.error:
        lines.append(f"  error: {o.error}")
    if o.comparisons:
        lines += ["  " + line for line in _metric_table(sorted_comparisons(o), ascii, sides(o)).splitlines()]
    lines += [f"  {line}" for line in _problem_lines(o, ascii)]
    return lines


def render_summary(outcomes: list[TestOutcome], width: Optional[int] = None, ascii: bool = False,
                   engines: Optional[EngineUse] = None) -> str:
    """One row per goodput test (its worst metric), what the verdicts cost (``engines``: the
    session's launches), then details of every test needing a look.

    ``width`` (terminal columns) drops key-metric columns from the right, then shortens
    node ids, until the table fits.
    """
    ordered = sorted_outcomes(outcomes)
    if not ordered:
        return "goodput: no goodput tests ran"
    columns = [
        (path, head)
        for path, head in SUMMARY_COLUMNS
        if any(key_metric_values(o).get(path) is not None for o in ordered)
    ]
    table = _summary_table(ordered, columns, None, ascii)
    while width is not None and _width_of(table) > width and columns:
        columns.pop()
        table = _summary_table(ordered, columns, None, ascii)
    if width is not None and _width_of(table) > width:
        longest = max(len(o.nodeid) for o in ordered)
        limit = max(_MIN_NAME, longest - (_width_of(table) - width))
        table = _summary_table(ordered, columns, limit, ascii)
    parts = [engine_line(ordered) + "\n" + _headline(ordered), table]
    cost = cost_lines(ordered, engines)
    if cost:
        parts.append("\n".join(cost))
    shapes = [f"{o.nodeid}: {line}" for o in ordered
              for line in (frontier_headline(o, "->" if ascii else "→"), saturation_headline(o),
                           capacity_headline(o, "->" if ascii else "→"),
                           slices_line(o, "->" if ascii else "→"))
              if line]
    if shapes:
        parts.append("\n".join(shapes))
    for o in ordered:
        if o.status in NOTEWORTHY:
            parts.append("\n".join(_detail(_without_outliers(o), ascii)))
    notes = [f"note: {o.nodeid}: {n}" for o in ordered if o.status not in NOTEWORTHY for n in o.notes
             if not n.startswith(OUTLIER_NOTE)]
    if notes:
        parts.append("\n".join(notes))
    # Recording: a session far from the others is named on its own, where it cannot be missed.
    outliers = [f"warning: {o.nodeid}: {n}" for o in ordered for n in o.notes if n.startswith(OUTLIER_NOTE)]
    if outliers:
        parts.append("\n".join(outliers))
    arrow = "->" if ascii else "→"
    reasoning = [f"{o.nodeid}: {line}" for o in ordered
                 if (line := reasoning_line(o, arrow, "-" if ascii else "–"))]
    if reasoning:
        parts.append("reasoning (baseline " + arrow + " current):\n" + "\n".join(reasoning))
    unrecorded = unrecorded_prompts_line(ordered)
    if unrecorded:
        parts.append(unrecorded)
    return "\n\n".join(parts)


def _without_outliers(o: TestOutcome) -> TestOutcome:
    """The outcome without its outlier-session notes (the summary shows them on their own)."""
    if not any(n.startswith(OUTLIER_NOTE) for n in o.notes):
        return o
    return o.model_copy(update={"notes": [n for n in o.notes if not n.startswith(OUTLIER_NOTE)]})


def _slo_line(s: SLOOutcome) -> str:
    label, unit = metric_info(s.name)
    limit = fmt_value(s.limit, unit, with_unit=True)
    value = fmt_value(s.value, unit, missing="+∞" if s.infinite else "no value", with_unit=True)
    proof = ""
    if s.proven is not None and not s.note:
        proof = "; proven" if s.proven else "; not proven"
    state = "held" if s.ok else "BROKEN"
    text = f"SLO {label} {state}: limit {limit}, value {value}{proof}"
    return text + (f" - {s.note}" if s.note else "")


def _comparison_line(c: MetricComparison, arrow: str) -> str:
    unit = comparison_unit(c)
    label = comparison_label(c, with_unit=False)
    base = fmt_value(c.baseline, unit, missing="none")
    cur = fmt_value(c.current, unit, missing="none", with_unit=True)
    bits = [f"change {fmt_change(c.change, scale=c.scale)}"]
    if c.metric == "frontier_throughput" and c.current is None and c.baseline is not None:
        cur, bits = f"- {UNREACHED}", []
    if c.interval is not None:
        bits.append(f"interval {fmt_interval(c.interval, scale=c.scale)}")
    bits.append(f"tolerance {fmt_percent(c.tolerance)}")
    if c.method:
        bits.append(f"method {c.method}")
    text = f"{c.verdict}: {label} {base} {arrow} {cur} ({'; '.join(bits)})"
    return text + ("\n  note: " + c.note.replace("\n", "\n        ") if c.note else "")


def _problem_lines(o: TestOutcome, ascii: bool) -> list[str]:
    """SLOs, client validity, comparability and provenance changes, one fact per line."""
    arrow = "->" if ascii else "→"
    lines = [_slo_line(s) for s in o.slos if not s.ok or s.proven is False]
    if not o.client_valid:
        reasons = "; ".join(o.client_reasons) or "no reason recorded"
        lines.append(f"invalid run - the load generator, not the server, set the pace: {reasons}")
    if o.incomparable_reasons:
        lines.append("not compared with the baseline: " + "; ".join(o.incomparable_reasons))
    if o.what_changed:
        changes = "; ".join(
            f"{k} {old or 'unset'} {arrow} {new or 'unset'}" for k, (old, new) in sorted(o.what_changed.items())
        )
        lines.append(f"what changed since the {sides(o)[0]}: {changes}")
    lines += [f"note: {n}" for n in o.notes]
    lines += [f"workload changed: {w}" for w in o.workload_changes]
    return lines


#: What an invalid run's user can change: the run measured the load generator, not the engine.
INVALID_REMEDY = ("to measure the engine, give the client CPUs of its own (--goodput-engine-cpus=auto "
                  "with a launched engine, --goodput-client-cpus=auto), time arrivals from a packet "
                  "capture (--goodput-capture=auto), shard the load (--goodput-workers N), or lower "
                  "the load (docs/guide.md, Options)")


def failure_message(outcome: TestOutcome) -> str:
    """The readable explanation a failed (or doubtful) goodput test shows in pytest's output."""
    o = outcome
    lines = [f"goodput {o.status}: {o.nodeid} (scenario {o.scenario})"]
    if o.error:
        lines.append(f"error: {o.error}")
    for c in sorted_comparisons(o):
        if c.verdict in ("regressed", "inconclusive", "underpowered"):
            lines.append(_comparison_line(c, "->"))
    lines += _problem_lines(o, ascii=True)
    if o.status == "invalid":
        lines.append(INVALID_REMEDY)
    if o.status == "new":
        lines.append("no baseline stored for this test yet")
    elif o.status == "passed" and len(lines) == 1:
        lines.append("every gated metric and SLO held")
    return "\n".join(lines)

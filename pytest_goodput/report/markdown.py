"""The per-PR Markdown report: verdicts per metric, SLOs, frontiers, and the four questions.

Pure: outcomes in, one Markdown string out. Renders on GitHub (tables, ``<details>``,
Mermaid ``xychart-beta``) with no image hosting, and stays under a byte budget (GitHub's
step summary and PR comments cap their size) by cutting the least useful parts first.
"""

from __future__ import annotations

import json
from typing import Callable, Optional

from pytest_goodput.report.mermaid import mermaid_xychart
from pytest_goodput.report.trend import trend_section
from pytest_goodput.report.vocabulary import (
    FAILING,
    STATUSES,
    fmt_change,
    fmt_interval,
    fmt_value,
    metric_info,
    metric_label,
    sorted_comparisons,
    sorted_outcomes,
    status_counts,
    worst_comparison,
)
from pytest_goodput.schema.frontier import FrontierPoint
from pytest_goodput.schema.outcome import VERDICT_SYMBOL, TestOutcome
from pytest_goodput.schema.spec import ScenarioSpec

STATUS_EMOJI: dict[str, str] = {
    "passed": "✅", "regressed": "❌", "inconclusive": "⚠️", "underpowered": "🔍", "new": "🆕",
    "slo-failed": "❌", "invalid": "🚫", "error": "💥", "incomparable": "⛔",
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

#: Spec fields shown under "which scenario" and "under which SLOs", in this order.
SCENARIO_FIELDS = (
    "scenario", "rate", "arrival", "burstiness", "concurrency", "sweep", "sweep_over",
    "requests", "duration_s", "warmup_requests", "api", "workload", "dataset", "isl", "osl",
    "isl_dist", "osl_dist", "seed",
)
SLO_FIELDS = ("slo", "ttft_ms", "tpot_ms", "e2e_ms", "attainment", "percentile_slos")
_SCENARIO_ENV = ("model", "scenario_hash")
_HARDWARE_HINTS = ("hardware", "gpu", "cpu", "accelerator", "machine", "host", "memory")


def escape_cell(text: object) -> str:
    """Make any value safe inside a Markdown table cell (pipes, newlines, raw HTML)."""
    s = str(text)
    s = s.replace("\\", "\\\\").replace("|", "\\|")
    s = s.replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def code_span(text: str) -> str:
    """Inline code that survives backticks in the text."""
    text = text.replace("\n", " ")
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _fence_for(body: str) -> str:
    longest = run = 0
    for ch in body:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _table(headers: list[str], rows: list[list[str]], align: str = "") -> str:
    """A GFM table; ``align`` has one of l/r per column (default left). Cells are pre-escaped."""
    align = align or "l" * len(headers)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _status(status: str) -> str:
    return f"{STATUS_EMOJI.get(status, '')} {_STATUS_WORD.get(status, status)}"


def summary_line(outcomes: list[TestOutcome]) -> str:
    """One line with the count of every status; it is never cut from the report."""
    counts = status_counts(outcomes)
    names = [s for s in STATUSES if s not in ("incomparable", "underpowered") or counts[s]]
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
    unit = metric_info(w.metric)[1]
    return cells + [
        escape_cell(metric_label(w.metric)),
        fmt_value(w.baseline, unit),
        fmt_value(w.current, unit),
        fmt_change(w.change, scale=w.scale),
    ]


_OVERVIEW_HEAD = ["test", "scenario", "status", "worst metric", "baseline", "current", "change"]


def _metrics_table(o: TestOutcome) -> str:
    rows = []
    for c in sorted_comparisons(o):
        unit = metric_info(c.metric)[1]
        rows.append([
            escape_cell(metric_label(c.metric)),
            fmt_value(c.baseline, unit),
            fmt_value(c.current, unit),
            fmt_change(c.change, scale=c.scale),
            fmt_interval(c.interval, scale=c.scale),
            f"{VERDICT_SYMBOL.get(c.verdict, '')} {c.verdict}",
            escape_cell(c.note),
        ])
    head = ["metric", "baseline", "current", "change", "interval", "verdict", "note"]
    return _table(head, rows, "lrrrlll")


def _slo_table(o: TestOutcome) -> str:
    rows = []
    for s in o.slos:
        label, unit = metric_info(s.name)
        proven = "–" if s.proven is None else ("yes" if s.proven else "no")
        rows.append([
            escape_cell(label),
            fmt_value(s.limit, unit, with_unit=True),
            fmt_value(s.value, unit, with_unit=True),
            "✅" if s.ok else "❌",
            proven,
            escape_cell(s.note),
        ])
    return _table(["SLO", "limit", "value", "ok", "proven", "note"], rows, "lrrlll")


MermaidFn = Callable[..., str]


def _load_mermaid() -> Optional[MermaidFn]:
    """The Mermaid chart renderer (a seam: tests swap it for a failing or absent one)."""
    return mermaid_xychart


def _current_points(frontier: dict) -> list:
    """The current frontier: ``current`` per the outcome schema, ``frontier`` as a sweep records it."""
    return list(frontier.get("current") or frontier.get("frontier") or [])


def _as_points(raw: Optional[list]) -> Optional[list]:
    if raw is None:
        return None

    return [FrontierPoint.model_validate(p) if isinstance(p, dict) else p for p in raw]


def _points_table(frontier: dict) -> str:
    rows = []
    for side, points in (("baseline", frontier.get("baseline") or []), ("current", _current_points(frontier))):
        for p in points:
            if isinstance(p, dict):
                rows.append([side, fmt_value(p.get("interactivity")), fmt_value(p.get("throughput"))])
    return _table(["frontier", "tok/s/user", "output tok/s"], rows, "lrr") if rows else ""


def _frontier_block(o: TestOutcome) -> str:
    fr = o.frontier or {}
    parts = []
    comp = fr.get("comparison") or {}
    worst = comp.get("worst") or {}
    if comp:
        bits = [f"verdict {VERDICT_SYMBOL.get(comp.get('verdict', ''), '')} {comp.get('verdict', '–')}"]
        if isinstance(worst, dict) and worst.get("ratio") is not None:
            bits.append(f"worst throughput ratio {fmt_value(worst['ratio'])}"
                        f" at {fmt_value(worst.get('interactivity'))} tok/s/user")
        parts.append("**Frontier:** " + escape_cell("; ".join(bits)))
    chart = None
    render = _load_mermaid()
    if render is not None and _current_points(fr):
        try:
            chart = render(_as_points(_current_points(fr)), _as_points(fr.get("baseline")),
                           title=f"{o.nodeid} frontier")
        except Exception:  # a chart must never take the report down; the table still shows
            chart = None
    if chart:
        chart = chart.strip()
        parts.append(chart if chart.startswith("```") else f"```mermaid\n{chart}\n```")
    else:
        table = _points_table(fr)
        if table:
            parts.append(table)
    return "\n\n".join(parts)


#: Scenario fields shown even at their default; others only when set to something else.
_ALWAYS_SHOWN = frozenset({"scenario", "rate", "concurrency", "sweep", "requests", "duration_s", "isl", "osl"})


def _spec_defaults() -> dict[str, object]:
    """Default values of the spec's fields, in JSON form (a tuple default reads as a list)."""

    out: dict[str, object] = {}
    for name, field in ScenarioSpec.model_fields.items():
        if not field.is_required() and field.default_factory is None:
            d = field.default
            out[name] = list(d) if isinstance(d, tuple) else d
    return out


def _env_rows(o: TestOutcome) -> list[list[str]]:
    """Baseline vs current for the four questions; values that differ are bold."""
    spec = o.spec or {}
    base_env = o.baseline_env or {}
    compared = o.baseline_status == "compared"
    rows = []

    def row(question: str, key: str, base: object, cur: object) -> None:
        b = "–" if base is None else escape_cell(base)
        c = "–" if cur is None else escape_cell(cur)
        if base is not None and cur is not None and b != c:
            c = f"**{c}**"
        rows.append([question, escape_cell(key), b, c])

    def spec_value(key: str) -> Optional[str]:
        v = spec.get(key)
        return None if v in (None, {}, []) else json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)

    defaults = _spec_defaults()
    for key in SCENARIO_FIELDS:
        if spec_value(key) is not None and (key in _ALWAYS_SHOWN or spec.get(key) != defaults.get(key)):
            row("scenario", key, spec_value(key) if compared else None, spec_value(key))
    for key in _SCENARIO_ENV:
        if key in o.current_env or key in base_env:
            row("scenario", key, base_env.get(key), o.current_env.get(key))
    # The attainment target only means something when per-request SLOs define "good".
    has_request_slos = any(spec.get(k) is not None for k in ("ttft_ms", "tpot_ms", "e2e_ms"))
    for key in SLO_FIELDS:
        if key == "attainment" and not has_request_slos and spec.get(key) == defaults.get(key):
            continue
        if spec_value(key) is not None:
            row("SLOs", key, spec_value(key) if compared else None, spec_value(key))
    env_keys = sorted((set(o.current_env) | set(base_env)) - set(_SCENARIO_ENV))
    hardware = [k for k in env_keys if any(h in k.lower() for h in _HARDWARE_HINTS)]
    for key in [k for k in env_keys if k not in hardware]:
        row("software", key, base_env.get(key), o.current_env.get(key))
    for key in hardware:
        row("hardware", key, base_env.get(key), o.current_env.get(key))
    return rows


def _details(o: TestOutcome) -> str:
    env = _table(["question", "field", "baseline", "current"], _env_rows(o))
    spec = json.dumps(o.spec or {}, indent=2, sort_keys=True)
    fence = _fence_for(spec)
    return (
        "<details><summary>Environment: baseline vs current</summary>\n\n" + env + "\n\n</details>\n\n"
        "<details><summary>Run configuration</summary>\n\n"
        f"{fence}json\n{spec}\n{fence}\n\n</details>"
    )


def _section(o: TestOutcome) -> str:
    """Heading, verdict tables and problems of one test (everything but the details)."""
    parts = [f"### {STATUS_EMOJI.get(o.status, '')} {code_span(o.nodeid)} — {_STATUS_WORD.get(o.status, o.status)}"]
    parts.append(f"Scenario **{escape_cell(o.scenario)}** · {_BASELINE_WORDS.get(o.baseline_status, o.baseline_status)}")
    if o.error:
        parts.append(f"> **Error:** {escape_cell(o.error)}")
    if not o.client_valid:
        reasons = "; ".join(o.client_reasons) or "no reason recorded"
        parts.append(f"> **Invalid run** — the load generator, not the server, set the pace: {escape_cell(reasons)}")
    if o.incomparable_reasons:
        parts.append("> **Not compared with the baseline:** " + escape_cell("; ".join(o.incomparable_reasons)))
    if o.comparisons:
        parts.append(_metrics_table(o))
    if o.trends:
        parts.append(trend_section(o.trends))
    if o.slos:
        parts.append(_slo_table(o))
    if o.frontier:
        block = _frontier_block(o)
        if block:
            parts.append(block)
    if o.what_changed:
        changes = ", ".join(
            f"{code_span(k)} {escape_cell(old or 'unset')} → {escape_cell(new or 'unset')}"
            for k, (old, new) in sorted(o.what_changed.items())
        )
        parts.append(f"**What changed since the baseline:** {changes}")
    return "\n\n".join(parts)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut_note(max_bytes: int, cuts: list[str]) -> str:
    return (f"> ✂️ **Report shortened to fit {max_bytes:,} bytes:** " + "; ".join(cuts)
            + ". The JSON results hold every number.")


def render_markdown(outcomes: list[TestOutcome], *, title: str = "pytest-goodput report",
                    max_bytes: int = 1_000_000) -> str:
    """The whole report; when over ``max_bytes``, cut details, then passing tests, and say so."""
    ordered = sorted_outcomes(outcomes)
    head = [f"## {escape_cell(title)}", summary_line(ordered)]
    rows = [_overview_row(o) for o in ordered]
    sections = [_section(o) for o in ordered]
    details = [_details(o) for o in ordered]

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

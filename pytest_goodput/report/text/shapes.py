"""Sweeps and capacity searches as reports show them: per-point rows, probes, one-line headlines.

Pure; shared by the terminal summary and the Markdown report so both say the same thing.
A sweep point is compared with the baseline's point at the same load (the gate's rule);
the step lookup (best current throughput at an interactivity at least the baseline point's)
is the frontier view, where a baseline point no current point is as interactive as is said
in words ("no current point reaches this interactivity"), never as a -100 % change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pytest_goodput.report.vocabulary import fmt_num, fmt_percent
from pytest_goodput.schema.outcomes.comparison import MetricComparison
from pytest_goodput.schema.outcomes.frontier import FrontierPointComparison
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.session import Capacity, CapacityProbe

UNREACHED = "no current point reaches this interactivity"


@dataclass(frozen=True)
class PointRow:
    """One current sweep point and its comparison with the baseline's point at the same load."""

    load: float
    load_kind: str
    interactivity: Optional[float]
    throughput: Optional[float]
    slo_ok: Optional[bool]
    baseline_throughput: Optional[float] = None
    throughput_ratio: Optional[float] = None  # current / baseline output tok/s, same load
    interactivity_ratio: Optional[float] = None  # baseline TPOT / current TPOT, same load
    verdict: Optional[str] = None


def _ratio(comparison: Optional[MetricComparison]) -> Optional[float]:
    """current / baseline of a stored comparison (``1 + change``), None when not computable."""
    if comparison is None or comparison.change is None:
        return None
    return 1.0 + float(comparison.change)


def point_rows(o: TestOutcome) -> list[PointRow]:
    """Every current sweep point (in sweep order) with its equal-load comparison, if any."""
    fr = o.frontier
    if fr is None:
        return []
    by_load = {c.load: c for c in (fr.comparison.by_load if fr.comparison is not None else [])}
    rows = []
    for p in fr.points:
        cmp = by_load.get(p.load)
        thr = cmp.throughput if cmp is not None else None
        tpot_ratio = _ratio(cmp.tpot if cmp is not None else None)
        rows.append(PointRow(
            load=p.load, load_kind=p.load_kind, interactivity=p.interactivity, throughput=p.throughput,
            slo_ok=p.slo_ok, baseline_throughput=thr.baseline if thr is not None else None,
            throughput_ratio=_ratio(thr), interactivity_ratio=1.0 / tpot_ratio if tpot_ratio else None,
            verdict=None if cmp is None else cmp.verdict,
        ))
    return rows


def load_text(value: float, kind: str) -> str:
    """``concurrency 16`` or ``rate 8 req/s``."""
    return f"rate {fmt_num(value)} req/s" if kind == "rate" else f"concurrency {fmt_num(value)}"


def step_rows(o: TestOutcome) -> list[FrontierPointComparison]:
    """The step-lookup comparison per baseline frontier point (stored by the judge)."""
    comparison = o.frontier.comparison if o.frontier is not None else None
    return list(comparison.points) if comparison is not None else []


def frontier_headline(o: TestOutcome, arrow: str = "→") -> Optional[str]:
    """``frontier: 2 of 3 points pass at equal load; worst concurrency 16: 2,310 → 1,850 tok/s
    (ratio 0.80)``; None for a test that is not a sweep."""
    rows = point_rows(o)
    if not rows:
        return None
    compared = [r for r in rows if r.verdict is not None]
    best = max((r.throughput or 0.0 for r in rows), default=0.0)
    if not compared:
        return f"frontier: {len(rows)} points, best {fmt_num(best)} output tok/s (no baseline points to compare)"
    counts: dict[str, int] = {}
    for r in compared:
        counts[r.verdict or ""] = counts.get(r.verdict or "", 0) + 1
    verdicts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    worst = min(compared, key=lambda r: (r.throughput_ratio if r.throughput_ratio is not None else 9.0))
    text = f"frontier: {len(compared)} of {len(rows)} points compared at equal load ({verdicts})"
    if worst.throughput_ratio is not None:
        text += (f"; lowest throughput at {load_text(worst.load, worst.load_kind)}: "
                 f"{fmt_num(worst.baseline_throughput)} {arrow} {fmt_num(worst.throughput)} tok/s "
                 f"(ratio {worst.throughput_ratio:.2f})")
    unreached = [p for p in step_rows(o) if p.current is None]
    if unreached:
        text += f"; {len(unreached)} baseline frontier point(s): {UNREACHED}"
    return text


def saturation_headline(o: TestOutcome) -> Optional[str]:
    """``saturation: began at rate 8 req/s (…); skipped rate 16, 32 req/s: 2 points, ~10 s of
    load``; None when the sweep kept no reading (``docs/scenarios.md``)."""
    sat = o.frontier.saturation if o.frontier is not None else None
    if sat is None:
        return None
    kind = sat.load_kind
    if sat.began_at is None:
        return f"saturation: no measured point past saturation ({len(sat.measured)} measured)"
    text = f"saturation: began at {load_text(sat.began_at, kind)} ({sat.reason})"
    skipped = sat.skipped
    if skipped:
        values = ", ".join(fmt_num(float(v)) for v in skipped)
        loads = f"rate {values} req/s" if kind == "rate" else f"concurrency {values}"
        text += (f"; sweep stopped, skipped {loads}: "
                 f"{len(skipped)} point{'s' if len(skipped) != 1 else ''}, "
                 f"~{fmt_num(float(sat.saved_s or 0.0))} s of load")
    return text


def capacity_sides(o: TestOutcome) -> tuple[Optional[Capacity], Optional[Capacity]]:
    """(current, baseline) capacity searches of a test, None where unknown."""
    if o.capacity is None:
        return None, None
    return o.capacity.current, o.capacity.baseline


def bracket_text(search: Capacity) -> str:
    """``[12.5, 13.8) req/s``: the passing rate and the lowest failing one (∞ when none failed)."""
    upper = search.upper
    return f"[{fmt_num(search.lower)}, {'∞' if upper is None else fmt_num(upper)})"


def capacity_headline(o: TestOutcome, arrow: str = "→") -> Optional[str]:
    """``capacity: 15 → 12.5 req/s (bracket [12.5, 13.8), 6 probes)``; None for other tests."""
    current, baseline = capacity_sides(o)
    if current is None:
        return None
    probes = len(current.probes)
    now = f"{fmt_num(current.requests_per_s)} req/s"
    text = (f"capacity: {fmt_num(baseline.requests_per_s)} {arrow} {now}" if baseline is not None
            else f"capacity: {now}")
    text += f" (bracket {bracket_text(current)}, {probes} probe{'s' if probes != 1 else ''})"
    if current.stopped:
        text += f"; {current.stopped}"
    return text


def probe_verdict(probe: CapacityProbe, target: Optional[float]) -> tuple[Optional[bool], str]:
    """(SLO met, why not) of one capacity probe."""
    if probe.invalid:
        return None, "invalid: the client, not the server, set the pace"
    if probe.passed:
        return True, ""
    att = probe.attainment
    goal = f" < target {fmt_percent(target)}" if target is not None else ""
    return False, f"attainment {fmt_percent(att)}{goal}"

"""A new Pareto frontier against a baseline frontier, point by point (pure).

A new frontier regresses where its best throughput at an interactivity at least as high as
a baseline point's falls below tolerance beyond noise (``docs/frontiers.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Callable, Optional

from pytest_goodput.measure.frontier import best_at_or_above, pareto_frontier
from pytest_goodput.schema.outcomes.frontier import (
    FrontierComparison,
    FrontierPoint,
    FrontierPointComparison,
    NoiseFn,
    Side,
)
from pytest_goodput.judge.scalar.verdicts import compare_metric, metric_value
from pytest_goodput.schema import registry
from pytest_goodput.schema.outcomes.outcome import MetricComparison, Verdict
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.judge.vocabulary import CONFIDENCE, MetricDef

#: Interactivity slack when matching points: run-to-run noise of a P50 TPOT is ~1 %, so a
#: twin point within 5 % still serves the baseline point's users.
DEFAULT_X_TOLERANCE = 0.05


def _half_width(noise: Optional[NoiseFn], p: Optional[FrontierPoint], side: Side) -> float:
    if noise is None or p is None:
        return 0.0
    h = noise(p, side)
    if h is None or not math.isfinite(h) or h < 0:
        return 0.0
    return h


def ratio_interval(ratio: float, h_current: float, h_baseline: float) -> tuple[float, float]:
    """Worst-case bounds of current/baseline when each has a relative half-width.

    [r(1-hc)/(1+hb), r(1+hc)/(1-hb)]: interval arithmetic, conservative on purpose (fewer
    false alarms); the upper bound is infinite when the baseline half-width reaches 1.
    """
    lo = ratio * max(0.0, 1.0 - h_current) / (1.0 + h_baseline)
    hi = ratio * (1.0 + h_current) / (1.0 - h_baseline) if h_baseline < 1.0 else math.inf
    if ratio == 0.0:
        hi = 0.0
    return lo, hi


def point_verdict(ratio: float, interval: tuple[float, float], tolerance: float) -> Verdict:
    """regressed: the whole interval is below 1-tol; inconclusive: only the estimate is;
    improved: the whole interval is above 1+tol; otherwise pass."""
    lo, hi = interval
    if ratio < 1.0 - tolerance:
        return "regressed" if hi < 1.0 - tolerance else "inconclusive"
    if lo > 1.0 + tolerance:
        return "improved"
    return "pass"


def overall_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    """Worst state wins: regressed > inconclusive > improved > pass; no points is ``new``."""
    if not verdicts:
        return "new"
    for state in ("regressed", "inconclusive", "improved"):
        if state in verdicts:
            return state  # type: ignore[return-value]
    return "pass"


def compare_frontiers(
    baseline: list[FrontierPoint],
    current: list[FrontierPoint],
    tolerance: float = 0.05,
    noise: Optional[NoiseFn] = None,
    x_tolerance: Optional[float] = None,
) -> FrontierComparison:
    """The step-lookup view: ``current`` read at every baseline frontier point (docs/frontiers.md).

    The gate's verdict is :func:`compare_by_load`; this view is reported beside it. Interactivity
    is measured too, so it is noisy: a current point counts as serving a baseline point when its
    interactivity is at least the baseline's × (1 − ``x_tolerance``) (default 0.05). Without
    this, a twin point measured 0.01 % less interactive misses the lookup and the view of a
    same-engine rerun shows a regression.

    ``noise(point, side)`` gives a point's relative throughput half-width (e.g. from
    :func:`throughput_interval`); it is asked for each baseline point (side "baseline")
    and its matched current point (side "current"). Without it, tolerance alone decides.
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    x_tol = DEFAULT_X_TOLERANCE if x_tolerance is None else x_tolerance
    if not 0 <= x_tol < 1:
        raise ValueError(f"x_tolerance must be in [0, 1), got {x_tol}")
    base_front = pareto_frontier(baseline)
    cur_front = pareto_frontier(current)
    rows: list[FrontierPointComparison] = []
    for b in base_front:
        assert b.interactivity is not None and b.throughput is not None
        c = best_at_or_above(cur_front, b.interactivity * (1.0 - x_tol))
        if c is None:
            ratio = 0.0
        elif b.throughput > 0:
            ratio = c.throughput / b.throughput  # type: ignore[operator]
        else:
            ratio = 1.0  # nothing to lose against a zero baseline
        interval = ratio_interval(
            ratio, _half_width(noise, c, "current"), _half_width(noise, b, "baseline")
        )
        rows.append(
            FrontierPointComparison(
                interactivity=b.interactivity,
                baseline=b,
                current=c,
                ratio=ratio,
                interval=interval,
                verdict=point_verdict(ratio, interval, tolerance),
            )
        )
    worst = min(rows, key=lambda r: (r.ratio, r.interactivity)) if rows else None
    return FrontierComparison(
        tolerance=tolerance,
        points=rows,
        worst=worst,
        verdict=overall_verdict([r.verdict for r in rows]),
        baseline_frontier=base_front,
        current_frontier=cur_front,
    )


_SEVERITY = {"improved": 0, "pass": 1, "new": 2, "underpowered": 3, "inconclusive": 4, "regressed": 5}


def _worst(a: MetricComparison, b: Optional[MetricComparison]) -> MetricComparison:
    if b is None:
        return a
    return b if _SEVERITY.get(b.verdict, 0) > _SEVERITY.get(a.verdict, 0) else a


def worst_of(comparisons: Sequence[MetricComparison]) -> MetricComparison:
    """The comparison with the most severe verdict (the first of equals)."""
    worst = comparisons[0]
    for c in comparisons[1:]:
        worst = _worst(worst, c)
    return worst


#: A sweep point's throughput, compared at equal load.
FRONTIER_THROUGHPUT = "throughput.output_tokens_per_s"


def frontier_tpot(percentile: float) -> Optional[str]:
    """The TPOT percentile a sweep point is compared on (its interactivity), when gateable."""
    stat = f"p{int(percentile)}" if float(percentile).is_integer() else None
    path = f"metrics.tpot_ms.{stat}"
    return path if stat is not None and registry.is_gateable(path) else None


def family_confidence(confidence: float, comparisons: int) -> float:
    """Bonferroni: each of a sweep's ``comparisons`` at (1 − α/m), so the sweep as a whole
    keeps the one-metric false-alarm rate α however many points and metrics it judges."""
    return 1.0 - (1.0 - confidence) / max(1, comparisons)


def family_verdict(at: Callable[[float], MetricComparison], confidence: float, family: float,
                   comparisons: int) -> MetricComparison:
    """One comparison of a sweep: judged and powered at the metric's ``confidence``, but
    *regressed* only when it still is at the sweep's ``family`` confidence (Bonferroni on the
    decisions: the false alarms of all its points and metrics together stay at α; its power
    and interval are the one metric's, as for any test)."""
    c = at(confidence)
    if c.verdict != "regressed" or family <= confidence:
        return c
    if at(family).verdict == "regressed":
        return c
    return c.model_copy(update={"verdict": "inconclusive", "note": (
        f"{c.note}; regressed alone, not across the sweep's {comparisons} comparisons "
        f"(Bonferroni: confidence {family:.4g})").lstrip("; ")})


def compare_by_load(
    loads: Sequence[float],
    baseline_sessions: Sequence[Sequence[Samples]],
    current: Sequence[Samples],
    tolerance: float,
    percentile: float = 50.0,
    seed: int = 0,
    latency: Sequence[MetricDef] = (),
    confidence: float = CONFIDENCE,
) -> list[dict]:
    """Each sweep point against the same load in every baseline session, by the scalar rule.

    A point is worse when its output throughput fell, its TPOT (at the frontier's percentile,
    so interactivity) rose beyond the tolerance, or one of its ``latency`` metrics (the
    sweep's per-point gate: TTFT and TPOT percentiles) rose beyond its own, beyond noise: the
    same prediction interval as every scalar metric, from the baseline's sessions. The
    frontier's two axes keep the one-metric budget they always had; the latency comparisons
    of all points share one more (:func:`family_confidence`), so they add at most α. A
    point every baseline session measured and the current sweep did not reach is regressed.
    """
    tpot_path = frontier_tpot(percentile)
    extra = [d for d in latency if d.path not in (FRONTIER_THROUGHPUT, tpot_path)]
    measured = sum(1 for i in range(min(len(loads), len(current)))
                   if any(len(s) > i for s in baseline_sessions))
    family = measured * len(extra)
    conf = family_confidence(confidence, family)
    out = []
    for i, load in enumerate(loads):
        base = [[s[i]] for s in baseline_sessions if len(s) > i]
        if not base:
            continue
        if i >= len(current):
            out.append(unreached_point(load, base, len(baseline_sessions), tolerance))
            continue

        def judged(defn: MetricDef, offset: int, family_conf: float) -> MetricComparison:
            return family_verdict(
                lambda c: compare_metric(defn, base, [current[i]], seed=seed + offset + i,
                                         paired=True, confidence=c),
                confidence, family_conf, family)

        thr = judged(MetricDef.of(FRONTIER_THROUGHPUT, tolerance), 0, confidence)
        tpot = (judged(MetricDef.of(tpot_path, tolerance), 1000, confidence)
                if tpot_path is not None else None)
        lat = [judged(d, 2000 + 1000 * k, conf) for k, d in enumerate(extra)]
        out.append(load_point(load, thr, tpot, lat))
    return out


def unreached_point(load: float, base: Sequence[Sequence[Samples]], sessions: int,
                    tolerance: float) -> dict:
    """A point the baseline measured and the current sweep never reached (it stopped past
    saturation or failed first): *regressed* when every baseline session measured it, else
    *inconclusive* (the baseline's own sweeps stopped short of it too)."""
    values = [v for s in base if (v := metric_value(s[0], FRONTIER_THROUGHPUT)) is not None]
    verdict: Verdict = "regressed" if len(base) == sessions else "inconclusive"
    thr = MetricComparison(
        metric=FRONTIER_THROUGHPUT, direction="higher", tolerance=tolerance, verdict=verdict,
        baseline=sum(values) / len(values) if values else None, method="point not reached",
        note=f"not reached: the current sweep stopped before this load (past saturation or "
             f"failed); {len(base)} of {sessions} baseline session(s) measured it")
    return load_point(load, thr, None)


def load_point(load: float, thr: MetricComparison, tpot: Optional[MetricComparison],
               latency: Sequence[MetricComparison] = ()) -> dict:
    """One sweep point's equal-load comparison: its worst metric decides its verdict."""
    worst = thr
    for c in (tpot, *latency):
        worst = _worst(worst, c)
    point = {"load": float(load), "verdict": worst.verdict, "throughput": thr.model_dump(mode="json"),
             "tpot": tpot.model_dump(mode="json") if tpot is not None else None,
             "worst": worst.model_dump(mode="json")}
    if latency:
        point["latency"] = [c.model_dump(mode="json") for c in latency]
    return point


def frontier_metric(by_load: list[dict], step: Optional[FrontierComparison], tolerance: float
                    ) -> MetricComparison:
    """The sweep as one gated metric: its worst point by load, with the step lookup noted."""
    if not by_load:
        return MetricComparison(metric="frontier_throughput", direction="higher", tolerance=tolerance,
                                verdict="new", note="no sweep point to compare")
    rank = lambda p: (_SEVERITY.get(p["verdict"], 0), -p["load"])  # noqa: E731
    worst = max(by_load, key=rank)
    w = MetricComparison.model_validate(worst["worst"])
    what = "throughput" if w.metric == FRONTIER_THROUGHPUT else registry.metric(w.metric).label
    counts = {v: sum(1 for p in by_load if p["verdict"] == v)
              for v in ("regressed", "inconclusive", "underpowered", "improved")}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "all points pass"
    change = f" {w.change:+.1%}" if w.change is not None else ""
    note = (f"worst at load {worst['load']:g} ({what}{change}) of {len(by_load)} points "
            f"compared at equal load; {summary}")
    if step is not None and step.worst is not None:
        note += f"; step lookup: worst throughput ratio {step.worst.ratio:.3g}"
    if w.note:
        note += f"; {w.note}"
    verdict = worst["verdict"]
    return w.model_copy(update={"metric": "frontier_throughput", "verdict": verdict, "note": note,
                                "method": f"equal-load points: {w.method}", "basis": w.metric})

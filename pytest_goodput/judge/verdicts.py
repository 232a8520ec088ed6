"""Regression verdicts: baseline runs vs current runs, per metric (pure).

A metric *regressed* only when its change is both practically significant (the point
estimate is worse than the tolerance) and statistically significant (the confidence
interval of the relative change lies entirely on the worse side of zero). The interval
combines within-run noise (requests, from ``intervals``) with run-to-run noise (machine
state), the latter estimated from the baseline history and shrunk towards a documented
default. Runs of one spec replay one schedule, so with ``paired=True`` request i of
every run is compared with request i of the others (a paired bootstrap over request
indices).
``docs/statistics.md`` gives every formula and the measurements behind the defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Literal, Optional, Sequence

import numpy as np

from pytest_goodput import stats
from pytest_goodput.judge.intervals import (
    Kind,
    finite,
    latencies,
    paired_half_widths,
    rate_column,
    unpaired_interval,
)
from pytest_goodput.schema import registry
from pytest_goodput.schema.outcome import MetricComparison
from pytest_goodput.schema.results import Samples

#: Two-sided confidence of the interval of the relative change (one-sided α = 0.5 %).
CONFIDENCE = 0.99
#: Weight of the registry's run-to-run prior, in pseudo-runs (degrees of freedom).
PRIOR_RUNS = 3.0
_UNBOUNDED = 1e9


@dataclass(frozen=True)
class MetricDef:
    """A gated metric: its result path, which way is good, and its relative tolerance."""

    path: str
    direction: Literal["higher", "lower"]
    tolerance: float

    @classmethod
    def of(cls, path: str, tolerance: Optional[float] = None) -> "MetricDef":
        """The metric as the registry defines it (its default tolerance unless one is given)."""
        info = registry.metric(path)
        return cls(path, info.direction, info.tolerance if tolerance is None else tolerance)


#: The metrics the default gates of the scenarios use, with their default tolerances.
DEFAULT_METRICS: dict[str, MetricDef] = {
    p: MetricDef.of(p)
    for p in (
        "goodput.requests_per_s",
        "goodput.attainment",
        "throughput.output_tokens_per_s",
        "metrics.ttft_ms.p99",
        "metrics.tpot_ms.p99",
        "metrics.e2e_ms.p50",
    )
}


def _kind(path: str) -> tuple[Kind, Optional[float]]:
    """The registry's noise model of a gateable metric and, for percentiles, P."""
    info = registry.metric(path)
    if not info.gateable:
        raise ValueError(f"metric {path!r} cannot be recomputed from per-request samples")
    return info.kind, info.percentile  # type: ignore[return-value]


def default_run_cv(path: str) -> float:
    """The prior run-to-run CV of a metric (the registry's noise prior)."""
    return registry.metric(path).run_cv


def _window(s: Samples) -> Optional[float]:
    return s.window_s if finite(s.window_s) else None


def metric_value(samples: Samples, path: str) -> Optional[float]:
    """Recompute a metric from raw samples, as ``metrics.summarize`` defines it.

    Percentiles are nearest-rank over successful requests; rates divide by the window
    (0.0 for an empty window). None when the metric is undefined (no successful request,
    no goodput column, no requests at all).
    """
    kind, pct = _kind(path)
    if kind == "proportion":
        if samples.good is None or not samples.ok:
            return None
        return sum(bool(g) and bool(o) for g, o in zip(samples.good, samples.ok)) / len(samples.ok)
    if kind == "rate":
        x, w = rate_column(samples, path), _window(samples)
        if x is None or w is None:
            return None
        return float(x.sum()) / w if w > 0 else 0.0
    xs = latencies(samples, path)
    if xs.size == 0:
        return None
    if kind == "mean":
        return math.fsum(xs.tolist()) / xs.size
    assert pct is not None
    return float(xs[stats.nearest_rank(xs.size, pct) - 1])


def _pooled(runs: Sequence[Samples], path: str) -> Optional[Samples]:
    """All runs' requests as one sample (windows add up)."""
    if not runs:
        return None
    good = None if any(r.good is None for r in runs) else [g for r in runs for g in r.good or []]
    return Samples(
        window_s=sum(r.window_s for r in runs),
        ok=[v for r in runs for v in r.ok],
        good=good,
        ttft_ms=[v for r in runs for v in r.ttft_ms],
        tpot_ms=[v for r in runs for v in r.tpot_ms],
        e2e_ms=[v for r in runs for v in r.e2e_ms],
        output_tokens=[v for r in runs for v in r.output_tokens],
        prompt_tokens=[v for r in runs for v in r.prompt_tokens],
    )


def _geomean(runs: Sequence[Samples], path: str) -> Optional[float]:
    """Geometric mean of the per-run values (None unless every run has a positive value)."""
    vals = [metric_value(r, path) for r in runs]
    if not vals or any(v is None or not v > 0 or not math.isfinite(v) for v in vals):
        return None
    return math.exp(math.fsum(math.log(v) for v in vals if v is not None) / len(vals))


def pairable(baseline_runs: Sequence[Samples], current_runs: Sequence[Samples]) -> bool:
    """Whether request i of every run can stand next to request i of the others.

    Needs the same number of measured requests in every run; the caller vouches that the
    runs replay one schedule (the gate compares only runs of one spec, seed included).
    """
    sizes = {len(s.ok) for s in (*baseline_runs, *current_runs)}
    return len(sizes) == 1 and sizes.pop() > 0


def _run_value(kind: Kind, s: Samples, path: str, b_val: float) -> Optional[float]:
    v = metric_value(s, path)
    if v is None:
        return None
    if kind == "proportion":
        return v / b_val
    return math.log(v) if v > 0 else None


def _between(kind: Kind, path: str, base_runs: Sequence[Samples],
             cur_runs: Sequence[Samples], b_val: float, run_cv: Optional[float]) -> tuple[float, float, str]:
    """Run-to-run SD σ_b on the analysis scale, its degrees of freedom, and a note.

    σ_b² = (ν₀·cv₀² + ν·s²) / (ν₀ + ν): s² is the pooled spread of per-run values within
    the baseline and within the current group (ν degrees of freedom), cv₀ the default
    run-to-run CV worth ν₀ pseudo-runs. s² also holds within-run noise; it is not
    subtracted, because runs replay one schedule and i.i.d. theory overstates that part.
    """
    cv0 = default_run_cv(path) if run_cv is None else run_cv
    ss, dof = 0.0, 0
    for group in (base_runs, cur_runs):
        ys = [y for y in (_run_value(kind, s, path, b_val) for s in group) if y is not None]
        if len(ys) >= 2:
            ss += float(np.sum((np.asarray(ys) - np.mean(ys)) ** 2))
            dof += len(ys) - 1
    if dof == 0:
        return cv0, PRIOR_RUNS, (
            f"single baseline run: run-to-run spread unknown, assumed CV {cv0:.1%} "
            f"({PRIOR_RUNS:g} pseudo-runs)"
        )
    spread = ss / dof
    var = (PRIOR_RUNS * cv0**2 + dof * spread) / (PRIOR_RUNS + dof)
    note = (
        f"run-to-run CV {math.sqrt(spread):.1%} from {len(base_runs)} baseline + "
        f"{len(cur_runs)} current runs, shrunk to {math.sqrt(var):.1%} towards default {cv0:.1%}"
    )
    return math.sqrt(var), PRIOR_RUNS + dof, note


# --- verdicts --------------------------------------------------------------------------


def _result(defn: MetricDef, verdict: str, *, base: Optional[float] = None,
            cur: Optional[float] = None, change: Optional[float] = None,
            interval: Optional[tuple[float, float]] = None, method: str = "", note: str = "") -> MetricComparison:
    return MetricComparison(
        metric=defn.path, direction=defn.direction, baseline=base, current=cur, change=change,
        interval=interval, tolerance=defn.tolerance, verdict=verdict,  # type: ignore[arg-type]
        method=method, note=note,
    )


def decide(direction: str, change: float, interval: tuple[float, float], tolerance: float,
           significance: Literal["zero", "tolerance"] = "zero") -> str:
    """The verdict rule on a relative change and its interval (see docs/statistics.md)."""
    sign = -1.0 if direction == "higher" else 1.0  # sign * change > 0 means worse
    worse = sign * change > tolerance
    better = sign * change < -tolerance
    lo, hi = sorted((sign * interval[0], sign * interval[1]))
    bound = tolerance if significance == "tolerance" else 0.0
    if worse:
        return "regressed" if lo > bound else "inconclusive"
    if better and hi < -bound:
        return "improved"
    return "pass"


def compare_metric(
    defn: MetricDef,
    baseline_runs: list[Samples],
    current_runs: list[Samples],
    *,
    seed: int = 0,
    confidence: float = CONFIDENCE,
    run_cv: Optional[float] = None,
    significance: Literal["zero", "tolerance"] = "zero",
    paired: bool = False,
) -> MetricComparison:
    """Judge one metric: current runs (k ≥ 1) against a baseline history (newest last).

    ``paired``: every run replays one schedule (same spec and seed), so request i is
    compared with request i (:func:`pairable` must hold; otherwise the unpaired intervals).
    """
    if not current_runs:
        raise ValueError("compare_metric needs at least one current run")
    kind, pct = _kind(defn.path)
    base_s, cur_s = _pooled(baseline_runs, defn.path), _pooled(current_runs, defn.path)
    b_val = metric_value(base_s, defn.path) if base_s is not None else None
    c_val = metric_value(cur_s, defn.path) if cur_s is not None else None
    b_val = b_val if finite(b_val) else None
    c_val = c_val if finite(c_val) else None
    if b_val is None and c_val is None:
        return _result(defn, "pass", note="not measured in baseline nor current run")
    if b_val is None:
        return _result(defn, "new", cur=c_val, note="no baseline value for this metric")
    if c_val is None:
        worst = "regressed"
        return _result(defn, worst, base=b_val, note="current run has no value: no successful requests")
    if b_val <= 0:
        if c_val == b_val:
            return _result(defn, "pass", base=b_val, cur=c_val, change=0.0, note="baseline is 0")
        verdict = "improved" if (defn.direction == "higher") == (c_val > b_val) else "regressed"
        return _result(defn, verdict, base=b_val, cur=c_val,
                       note="baseline is 0: relative change undefined, judged by direction only")
    assert base_s is not None and cur_s is not None
    change = c_val / b_val - 1.0
    if c_val <= 0 and kind != "proportion":
        verdict = "regressed" if defn.direction == "higher" else "improved"
        return _result(defn, verdict, base=b_val, cur=c_val, change=change,
                       note="current value is 0: judged by direction only")
    sd_b, df_b, note = _between(kind, defn.path, baseline_runs, current_runs, b_val, run_cv)
    hb = stats.t_ppf(0.5 + confidence / 2.0, df_b) * sd_b * math.sqrt(
        1.0 / len(current_runs) + 1.0 / len(baseline_runs)
    )
    d = change if kind == "proportion" else math.log(c_val / b_val)
    pooled_c, pooled_d = c_val, d
    if kind in ("percentile", "mean") and max(len(baseline_runs), len(current_runs)) > 1:
        # A percentile of pooled runs is a mixture's tail, dominated by the slowest run;
        # the run-to-run term models the mean of per-run values, so centre on that.
        b_gm, c_gm = _geomean(baseline_runs, defn.path), _geomean(current_runs, defn.path)
        if b_gm is not None and c_gm is not None:
            b_val, c_val = b_gm, c_gm
            change, d = c_val / b_val - 1.0, math.log(c_val / b_val)
    halves = None
    if paired and pairable(baseline_runs, current_runs):
        halves = paired_half_widths(kind, pct, defn.path, baseline_runs, current_runs, d,
                                    b_val, confidence, seed)
    if halves is not None:
        a_lo, a_hi, method = halves[0], halves[1], "paired bootstrap"
    else:
        lo_w, hi_w, method = unpaired_interval(
            kind, pct, defn.path, defn.direction, cur_s, base_s, pooled_c, b_val, confidence, seed
        )
        a_lo, a_hi = pooled_d - lo_w, hi_w - pooled_d  # within-run half-widths
    lo = d - math.hypot(a_lo, hb) if not math.isnan(a_lo) else -math.inf
    hi = d + math.hypot(a_hi, hb) if not math.isnan(a_hi) else math.inf
    if kind != "proportion":
        lo, hi = math.expm1(lo), math.expm1(hi)
    lo, hi = max(lo, -_UNBOUNDED), min(hi, _UNBOUNDED)  # finite: results are JSON
    verdict = decide(defn.direction, change, (lo, hi), defn.tolerance, significance)
    return _result(
        defn, verdict, base=b_val, cur=c_val, change=change, interval=(lo, hi),
        method=f"{method} + run-to-run t(ν={df_b:g})", note=note,
    )


def compare(
    baseline_runs: list[Samples],
    current_runs: list[Samples],
    metrics: Iterable[MetricDef],
    *,
    seed: int = 0,
    **options: object,
) -> list[MetricComparison]:
    """Compare every metric; metrics measured on neither side (e.g. goodput without SLOs) are left out."""
    out = []
    for i, defn in enumerate(metrics):
        c = compare_metric(defn, baseline_runs, current_runs, seed=seed + i, **options)  # type: ignore[arg-type]
        if c.baseline is None and c.current is None:
            continue
        out.append(c)
    return out


def gate_fails(comparisons: Iterable[MetricComparison], strict: bool) -> bool:
    """A regression always fails the gate; an inconclusive result only in strict mode."""
    bad = {"regressed", "inconclusive"} if strict else {"regressed"}
    return any(c.verdict in bad for c in comparisons)

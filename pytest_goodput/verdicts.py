"""Regression verdicts: baseline runs vs current runs, per metric (pure).

A metric *regressed* only when its change is both practically significant (the point
estimate is worse than the tolerance) and statistically significant (the confidence
interval of the relative change lies entirely on the worse side of zero). The interval
combines within-run noise (requests) with run-to-run noise (machine state), the latter
estimated from the baseline history and shrunk towards a documented default. Runs of
one spec replay one schedule, so with ``paired=True`` request i of every run is compared
with request i of the others (a paired bootstrap over request indices).
``docs/statistics.md`` gives every formula and the measurements behind the defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Literal, Optional, Sequence

import numpy as np

from . import stats
from .outcome import MetricComparison
from .results import Samples

Kind = Literal["proportion", "rate", "percentile", "mean"]

#: Two-sided confidence of the interval of the relative change (one-sided α = 0.5 %).
CONFIDENCE = 0.99
#: Default run-to-run coefficient of variation per metric kind, used as a prior.
DEFAULT_RUN_CV: dict[str, float] = {"proportion": 0.015, "rate": 0.015, "percentile": 0.065, "mean": 0.05}
#: Per latency column, replacing the kind's prior for its percentiles and mean. TTFT's
#: spread is mostly queueing against the arrival schedule (present on a quiet machine,
#: growing slowly with machine noise); TPOT and E2E follow machine speed almost 1:1.
DEFAULT_RUN_CV_BY_LATENCY: dict[str, float] = {"ttft_ms": 0.035}
#: Weight of that prior, in pseudo-runs (degrees of freedom).
PRIOR_RUNS = 3.0
BOOTSTRAP_RESAMPLES = 2000
_UNBOUNDED = 1e9


@dataclass(frozen=True)
class MetricDef:
    """A gated metric: its result path, which way is good, and its relative tolerance."""

    path: str
    direction: Literal["higher", "lower"]
    tolerance: float


DEFAULT_METRICS: dict[str, MetricDef] = {
    d.path: d
    for d in (
        MetricDef("goodput.requests_per_s", "higher", 0.05),
        MetricDef("goodput.attainment", "higher", 0.02),
        MetricDef("throughput.output_tokens_per_s", "higher", 0.05),
        MetricDef("metrics.ttft_ms.p99", "lower", 0.10),
        MetricDef("metrics.tpot_ms.p99", "lower", 0.10),
        MetricDef("metrics.e2e_ms.p50", "lower", 0.05),
    )
}

_RATE_COLUMNS = {
    "goodput.requests_per_s",
    "goodput.tokens_per_s",
    "throughput.requests_per_s",
    "throughput.output_tokens_per_s",
    "throughput.total_tokens_per_s",
}
_LATENCIES = {"ttft_ms", "tpot_ms", "e2e_ms"}


def _kind(path: str) -> tuple[Kind, Optional[float]]:
    """Classify a metric path; for percentiles also return P. Raises on unknown paths."""
    if path == "goodput.attainment":
        return "proportion", None
    if path in _RATE_COLUMNS:
        return "rate", None
    parts = path.split(".")
    if len(parts) == 3 and parts[0] == "metrics" and parts[1] in _LATENCIES:
        stat = parts[2]
        if stat == "mean":
            return "mean", None
        if stat == "max":
            return "percentile", 100.0
        if stat.startswith("p"):
            try:
                p = float(stat[1:])
            except ValueError:
                p = -1.0
            if 0 < p <= 100:
                return "percentile", p
    raise ValueError(f"unknown metric path {path!r}")


def default_run_cv(path: str) -> float:
    """The prior run-to-run CV of a metric: by latency column if listed, else by kind."""
    kind, _ = _kind(path)
    parts = path.split(".")
    if kind in ("percentile", "mean") and parts[1] in DEFAULT_RUN_CV_BY_LATENCY:
        return DEFAULT_RUN_CV_BY_LATENCY[parts[1]]
    return DEFAULT_RUN_CV[kind]


def _finite(v: Optional[float]) -> bool:
    return v is not None and math.isfinite(v)


def _rate_column(s: Samples, path: str) -> Optional[np.ndarray]:
    """Per-request contributions x_i to a rate metric (rate = Σx / window)."""
    ok = np.asarray(s.ok, dtype=bool)
    if path.startswith("goodput."):
        if s.good is None:
            return None
        mask = np.asarray(s.good, dtype=bool) & ok
    else:
        mask = ok
    out = np.asarray(s.output_tokens, dtype=float)
    if path.endswith("requests_per_s"):
        x = np.ones(len(mask))
    elif path.endswith("total_tokens_per_s"):
        x = out + np.asarray([p or 0 for p in s.prompt_tokens], dtype=float)
    else:
        x = out
    return np.where(mask, x, 0.0)


def _latencies(s: Samples, path: str) -> np.ndarray:
    col = getattr(s, path.split(".")[1])
    vals = [v for v, ok in zip(col, s.ok) if ok and _finite(v)]
    return np.sort(np.asarray(vals, dtype=float))


def _window(s: Samples) -> Optional[float]:
    return s.window_s if _finite(s.window_s) else None


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
        x, w = _rate_column(samples, path), _window(samples)
        if x is None or w is None:
            return None
        return float(x.sum()) / w if w > 0 else 0.0
    xs = _latencies(samples, path)
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


def _log(x: float) -> float:
    if x == math.inf:
        return math.inf
    return math.log(x) if x > 0 else -math.inf


# --- within-run intervals of the contrast (analysis scale) -----------------------------


def _within(kind: Kind, pct: Optional[float], path: str, direction: str, cur: Samples,
            base: Samples, b_val: float, conf: float, seed: int) -> tuple[float, float, str]:
    """Interval of the contrast from request-level noise only.

    Scale: relative difference for proportions, log-ratio for everything else.
    """
    if kind == "proportion":
        kc, nc = _counts(cur)
        kb, nb = _counts(base)
        lo, hi = stats.newcombe_interval(kc, nc, kb, nb, conf)
        return lo / b_val, hi / b_val, "newcombe"
    if kind == "percentile":
        xc, xb = _latencies(cur, path), _latencies(base, path)
        assert pct is not None
        qc = stats.quantile_interval(xc, min(pct, 99.999), conf)
        qb = stats.quantile_interval(xb, min(pct, 99.999), conf)
        # Too few samples to bound a side: the bounds that only decide "improved"
        # (current upper, baseline lower) are truncated at the sample extreme so the
        # interval stays finite; the ones that decide "regressed" stay unbounded.
        if direction == "lower":
            qc, qb = (qc[0], min(qc[1], float(xc[-1]))), (max(qb[0], float(xb[0])), qb[1])
        else:
            qc, qb = (max(qc[0], float(xc[0])), qc[1]), (qb[0], min(qb[1], float(xb[-1])))
        d = _log(metric_value(cur, path) or 0.0) - _log(b_val)
        lc, uc, lb, ub = _log(qc[0]), _log(qc[1]), _log(qb[0]), _log(qb[1])
        yc, yb = d + _log(b_val), _log(b_val)
        lo = d - math.hypot(yc - lc, ub - yb)  # MOVER: Newcombe's rule on the log scale
        hi = d + math.hypot(uc - yc, yb - lb)
        return lo, hi, "order-statistic"
    if kind == "rate":
        xc, xb = _rate_column(cur, path), _rate_column(base, path)
        assert xc is not None and xb is not None
        wc, wb = cur.window_s, base.window_s

        def stat_c(a: np.ndarray) -> np.ndarray:
            return a.sum(axis=-1) / wc

        lo, hi = stats.bootstrap_ratio_interval(
            xc, xb, stat_c, confidence=conf, n_resamples=BOOTSTRAP_RESAMPLES, seed=seed
        )
        # stat_c divides both sides by wc; restore the baseline's own window.
        return _log(lo * wb / wc), _log(hi * wb / wc), "bootstrap"
    lo, hi = stats.bootstrap_ratio_interval(
        _latencies(cur, path), _latencies(base, path), lambda a: a.mean(axis=-1),
        confidence=conf, n_resamples=BOOTSTRAP_RESAMPLES, seed=seed,
    )
    return _log(lo), _log(hi), "bootstrap"


def pairable(baseline_runs: Sequence[Samples], current_runs: Sequence[Samples]) -> bool:
    """Whether request i of every run can stand next to request i of the others.

    Needs the same number of measured requests in every run; the caller vouches that the
    runs replay one schedule (the gate compares only runs of one spec, seed included).
    """
    sizes = {len(s.ok) for s in (*baseline_runs, *current_runs)}
    return len(sizes) == 1 and sizes.pop() > 0


def _paired_rows(kind: Kind, pct: Optional[float], path: str, s: Samples,
                 idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One run's (numerator, denominator) of the metric on every index resample."""
    ok = np.asarray(s.ok, dtype=bool)
    if kind == "proportion":
        good = np.asarray(s.good or [False] * len(ok), dtype=bool) & ok
        return good[idx].sum(axis=-1).astype(float), np.full(idx.shape[0], float(idx.shape[1]))
    if kind == "rate":
        x = _rate_column(s, path)
        assert x is not None
        return x[idx].sum(axis=-1), np.full(idx.shape[0], s.window_s)
    col = np.asarray([v if (o and _finite(v)) else math.nan
                      for v, o in zip(getattr(s, path.split(".")[1]), s.ok)], dtype=float)[idx]
    if kind == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nanmean(col, axis=-1), np.ones(idx.shape[0])
    assert pct is not None
    return stats.nearest_rank_rows(col, pct), np.ones(idx.shape[0])


def _paired_group(kind: Kind, pct: Optional[float], path: str, runs: Sequence[Samples],
                  idx: np.ndarray) -> np.ndarray:
    """The group's value per resample: pooled for sums and counts, geometric mean otherwise."""
    rows = [_paired_rows(kind, pct, path, s, idx) for s in runs]
    if kind in ("proportion", "rate"):
        return sum(r[0] for r in rows) / sum(r[1] for r in rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp(np.mean([np.log(r[0]) for r in rows], axis=0))


def _within_paired(kind: Kind, pct: Optional[float], path: str, base_runs: Sequence[Samples],
                   cur_runs: Sequence[Samples], d: float, b_val: float, conf: float,
                   seed: int) -> Optional[tuple[float, float]]:
    """Half-widths (below, above d) of the contrast from a paired bootstrap over request indices.

    One index resample is applied to every run, so what request i costs in the workload
    cancels between the sides; what is left is how differently the runs served it.
    None when a resample has no value (e.g. no successful request drawn).
    """
    parts = []
    for idx in stats.paired_index_chunks(len(base_runs[0].ok), BOOTSTRAP_RESAMPLES, seed):
        b = _paired_group(kind, pct, path, base_runs, idx)
        c = _paired_group(kind, pct, path, cur_runs, idx)
        with np.errstate(divide="ignore", invalid="ignore"):
            parts.append((c - b) / b_val if kind == "proportion" else np.log(c / b))
    reps = np.concatenate(parts)
    if not np.all(np.isfinite(reps)):
        return None
    alpha = 1.0 - conf
    lo, hi = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    return max(0.0, d - float(lo)), max(0.0, float(hi) - d)


def _counts(s: Samples) -> tuple[int, int]:
    good = s.good or []
    return sum(bool(g) and bool(o) for g, o in zip(good, s.ok)), len(s.ok)


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
    b_val = b_val if _finite(b_val) else None
    c_val = c_val if _finite(c_val) else None
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
    pooled_d = d
    if kind in ("percentile", "mean") and max(len(baseline_runs), len(current_runs)) > 1:
        # A percentile of pooled runs is a mixture's tail, dominated by the slowest run;
        # the run-to-run term models the mean of per-run values, so centre on that.
        b_gm, c_gm = _geomean(baseline_runs, defn.path), _geomean(current_runs, defn.path)
        if b_gm is not None and c_gm is not None:
            b_val, c_val = b_gm, c_gm
            change, d = c_val / b_val - 1.0, math.log(c_val / b_val)
    halves = None
    if paired and pairable(baseline_runs, current_runs):
        halves = _within_paired(kind, pct, defn.path, baseline_runs, current_runs, d,
                                b_val, confidence, seed)
    if halves is not None:
        a_lo, a_hi, method = halves[0], halves[1], "paired bootstrap"
    else:
        lo_w, hi_w, method = _within(
            kind, pct, defn.path, defn.direction, cur_s, base_s, b_val, confidence, seed
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

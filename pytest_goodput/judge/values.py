"""A gated metric's value, recomputed from the per-request samples a baseline keeps (pure).

The same definitions as ``measure.metrics`` (``docs/metrics.md``), with one rule of the
gate on top: a failed request counts as +∞ in a gated percentile (it delivered nothing in
time), so failures can never make a latency look better.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from pytest_goodput import stats
from pytest_goodput.schema import registry
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.stats.inputs import finite

#: Runs grouped by recorded session (oldest first): the unit of run-to-run noise.
Sessions = Sequence[Sequence[Samples]]


def as_sessions(runs: Sequence[Samples] | Sessions) -> list[list[Samples]]:
    """Sessions as given, or each run its own session when given a flat list of runs."""
    out: list[list[Samples]] = []
    for item in runs:
        out.append([item] if isinstance(item, Samples) else list(item))
    return [s for s in out if s]


def failures(s: Samples) -> tuple[int, int]:
    """(failed, issued) measured requests."""
    return len(s.ok) - sum(bool(o) for o in s.ok), len(s.ok)


def rate_column(s: Samples, path: str) -> Optional[np.ndarray]:
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


def latency_column(s: Samples, path: str, *, failures_as_inf: bool,
                   failure_value: float = math.inf) -> np.ndarray:
    """The latency column a ``metrics.<column>.<stat>`` path names, sorted.

    Successful requests with a value (a one-token answer has no TPOT) and, when
    ``failures_as_inf``, one ``failure_value`` (+∞ unless a stand-in is given) per failed
    request. Empty when the samples lack the column (TTFO and reasoning tokens in baselines
    recorded before they were kept).
    """
    col = getattr(s, path.split(".")[1])
    if col is None:
        return np.empty(0, dtype=float)
    vals = [v for v, ok in zip(col, s.ok) if ok and finite(v)]
    if failures_as_inf:
        vals += [failure_value] * failures(s)[0]
    return np.sort(np.asarray(vals, dtype=float))


def slowest_success(runs: Sequence[Samples], path: str) -> Optional[float]:
    """The slowest successful value of a latency column over ``runs`` (None without one).

    Where the statistics need a finite value for a failed request, it stands in for the
    failure: a request that failed delivered nothing at least until then, so it ranks at the
    top, tied with the slowest success — never below a success, never dropped.
    """
    top = [float(xs[-1]) for xs in (latency_column(r, path, failures_as_inf=False) for r in runs)
           if xs.size]
    return max(top) if top else None


def metric_value(samples: Samples, path: str, failure_value: float = math.inf) -> Optional[float]:
    """Recompute a metric from raw samples.

    Percentiles are nearest-rank with failures as +∞ (so the value is +∞ once failures
    reach the percentile), or as ``failure_value`` when the judge gives a stand-in; means
    are over successful requests; rates divide by the window
    (0.0 for an empty window); the error rate is failed / issued. None when the metric is
    undefined (no requests, no goodput column, no value).
    """
    info = registry.metric(path)
    if path == "error_rate":
        failed, issued = failures(samples)
        return failed / issued if issued else None
    if info.kind == "proportion":
        if samples.good is None or not samples.ok:
            return None
        return sum(bool(g) and bool(o) for g, o in zip(samples.good, samples.ok)) / len(samples.ok)
    if info.kind == "rate":
        x = rate_column(samples, path)
        if x is None or not finite(samples.window_s):
            return None
        return float(x.sum()) / samples.window_s if samples.window_s > 0 else 0.0
    xs = latency_column(samples, path, failures_as_inf=info.kind == "percentile",
                        failure_value=failure_value)
    if xs.size == 0:
        return None
    if info.kind == "mean":
        return math.fsum(xs.tolist()) / xs.size
    assert info.percentile is not None
    return float(xs[stats.nearest_rank(xs.size, info.percentile) - 1])


def pooled(runs: Sequence[Samples]) -> Optional[Samples]:
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
        ttfo_ms=_optional_column(runs, "ttfo_ms"),
        reasoning_tokens=_optional_column(runs, "reasoning_tokens"),
        ttft_later_ms=_optional_column(runs, "ttft_later_ms"),
        reasoning_tpot_ms=_optional_column(runs, "reasoning_tpot_ms"),
        answer_tpot_ms=_optional_column(runs, "answer_tpot_ms"),
    )


def _optional_column(runs: Sequence[Samples], name: str) -> Optional[list]:
    """A column only some baselines keep, pooled: None unless every run has it."""
    cols = [getattr(r, name) for r in runs]
    return None if any(c is None for c in cols) else [v for c in cols for v in c]


def _geomean(values: Sequence[Optional[float]]) -> Optional[float]:
    """Geometric mean; +∞ when any value is +∞; None unless every value is positive."""
    if not values or any(v is None or not v > 0 for v in values):
        return None
    if any(v == math.inf for v in values):
        return math.inf
    return math.exp(math.fsum(math.log(v) for v in values if v is not None) / len(values))


def group_value(runs: Sequence[Samples], path: str,
                failure_value: float = math.inf) -> Optional[float]:
    """One session's (or one group's) value: counts and rates pooled; percentiles and means
    as the geometric mean of the per-run values (a percentile of pooled runs is a mixture's
    tail, dominated by the slowest run). ``failure_value``: see :func:`metric_value`."""
    kind = registry.metric(path).kind
    if kind in ("proportion", "rate"):
        p = pooled(runs)
        return metric_value(p, path) if p is not None else None
    return _geomean([metric_value(r, path, failure_value) for r in runs])


def baseline_value(sessions: Sessions, path: str,
                   failure_value: float = math.inf) -> Optional[float]:
    """The baseline's centre: counts and rates pooled over every run; percentiles and means
    as the geometric mean of the session values. The gate passes a finite
    ``failure_value`` (:func:`slowest_success`), so one session whose failures reach the
    percentile weighs as its slowest rank instead of making the centre +∞."""
    kind = registry.metric(path).kind
    if kind in ("proportion", "rate"):
        return group_value([r for s in sessions for r in s], path)
    return _geomean([group_value(s, path, failure_value) for s in sessions])


#: Runs of one schedule that measured different numbers of requests (bounded by duration) are
#: paired on the requests they have in common when those are at least this share of the
#: longest run; fewer, and the unpaired intervals decide.
PREFIX_SHARE = 0.5


def common_prefix(baseline_runs: Sequence[Samples], current_runs: Sequence[Samples]
                  ) -> Optional[tuple[list[Samples], list[Samples]]]:
    """Every run cut to the first m requests all of them measured, or None (see PREFIX_SHARE).

    Runs of one spec replay one schedule, so request i is the same request in each; a run
    bounded by duration just measured more or fewer of them. A rate's window is cut in
    proportion (m/n of it), so the cut run estimates the same rate from its first m requests.
    """
    sizes = [len(s.ok) for s in (*baseline_runs, *current_runs)]
    if not sizes or min(sizes) == 0 or min(sizes) < PREFIX_SHARE * max(sizes):
        return None
    m = min(sizes)

    def cut(s: Samples) -> Samples:
        n = len(s.ok)
        return s.model_copy(update={
            "window_s": s.window_s * m / n, "ok": s.ok[:m],
            "good": s.good[:m] if s.good is not None else None, "ttft_ms": s.ttft_ms[:m],
            "tpot_ms": s.tpot_ms[:m], "e2e_ms": s.e2e_ms[:m], "output_tokens": s.output_tokens[:m],
            "prompt_tokens": s.prompt_tokens[:m],
            **{k: getattr(s, k)[:m] if getattr(s, k) is not None else None
               for k in ("ttfo_ms", "reasoning_tokens", "reasoning_tpot_ms", "answer_tpot_ms",
                         "ttft_later_ms")}})

    return [cut(s) for s in baseline_runs], [cut(s) for s in current_runs]


def pairable(baseline_runs: Sequence[Samples], current_runs: Sequence[Samples]) -> bool:
    """Whether request i of every run can stand next to request i of the others.

    Needs the same number of measured requests in every run; the caller vouches that the
    runs replay one schedule (the gate compares only runs of one spec, seed included).
    """
    sizes = {len(s.ok) for s in (*baseline_runs, *current_runs)}
    return len(sizes) == 1 and sizes.pop() > 0

"""Within-run intervals of the relative change between two groups of runs (pure).

Request-level noise only: Newcombe's interval for proportions, order-statistic bounds
for percentiles, and bootstrap intervals for rates and means, on pooled runs or, when
every run replays one schedule, paired over request indices. ``verdicts`` adds the
run-to-run term and decides. ``docs/statistics.md`` gives every formula.
"""

from __future__ import annotations

import math
from typing import Literal, Optional, Sequence

import numpy as np

from pytest_goodput import stats
from pytest_goodput.judge.values import failures, latency_column, rate_column
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.stats.inputs import finite

Kind = Literal["proportion", "rate", "percentile", "mean"]

BOOTSTRAP_RESAMPLES = 2000


def _log(x: float) -> float:
    if x == math.inf:
        return math.inf
    return math.log(x) if x > 0 else -math.inf


def _counts(s: Samples) -> tuple[int, int]:
    good = s.good or []
    return sum(bool(g) and bool(o) for g, o in zip(good, s.ok)), len(s.ok)


def unpaired_interval(kind: Kind, pct: Optional[float], path: str, direction: str, cur: Samples,
                      base: Samples, c_val: float, b_val: float, conf: float,
                      seed: int, fail: tuple[float, float] = (math.inf, math.inf)
                      ) -> tuple[float, float, str]:
    """Interval of the contrast from request-level noise only, runs pooled per side.

    Scale: relative difference for proportions, log-ratio for everything else. ``c_val``
    is the metric on the pooled current runs; ``b_val`` the baseline value the contrast
    is centred on. ``fail``: what a failed request counts as in a percentile (baseline,
    current): the gate's stand-ins rank failures at the top with a finite value, so a few
    failures do not leave a bound unbounded.
    """
    if path == "error_rate":
        lo, hi = stats.newcombe_interval(*failures(cur), *failures(base), conf)
        return lo, hi, "newcombe"
    if kind == "proportion":
        kc, nc = _counts(cur)
        kb, nb = _counts(base)
        lo, hi = stats.newcombe_interval(kc, nc, kb, nb, conf)
        return lo / b_val, hi / b_val, "newcombe"
    if kind == "percentile":
        xc = latency_column(cur, path, failures_as_inf=True, failure_value=fail[1])
        xb = latency_column(base, path, failures_as_inf=True, failure_value=fail[0])
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
        d = _log(c_val) - _log(b_val)
        lc, uc, lb, ub = _log(qc[0]), _log(qc[1]), _log(qb[0]), _log(qb[1])
        yc, yb = d + _log(b_val), _log(b_val)
        lo = d - math.hypot(yc - lc, ub - yb)  # MOVER: Newcombe's rule on the log scale
        hi = d + math.hypot(uc - yc, yb - lb)
        return lo, hi, "order-statistic"
    if kind == "rate":
        xc, xb = rate_column(cur, path), rate_column(base, path)
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
        latency_column(cur, path, failures_as_inf=False),
        latency_column(base, path, failures_as_inf=False), lambda a: a.mean(axis=-1),
        confidence=conf, n_resamples=BOOTSTRAP_RESAMPLES, seed=seed,
    )
    return _log(lo), _log(hi), "bootstrap"


def _paired_rows(kind: Kind, pct: Optional[float], path: str, s: Samples,
                 idx: np.ndarray, fail_value: float = math.inf) -> tuple[np.ndarray, np.ndarray]:
    """One run's (numerator, denominator) of the metric on every index resample."""
    ok = np.asarray(s.ok, dtype=bool)
    if path == "error_rate":
        return (~ok)[idx].sum(axis=-1).astype(float), np.full(idx.shape[0], float(idx.shape[1]))
    if kind == "proportion":
        good = np.asarray(s.good or [False] * len(ok), dtype=bool) & ok
        return good[idx].sum(axis=-1).astype(float), np.full(idx.shape[0], float(idx.shape[1]))
    if kind == "rate":
        x = rate_column(s, path)
        assert x is not None
        return x[idx].sum(axis=-1), np.full(idx.shape[0], s.window_s)
    # A failure is +∞ (or the gate's finite stand-in) in a percentile and absent from a
    # mean; a success without a value (no TPOT for a one-token answer) is absent from both.
    fail = fail_value if kind == "percentile" else math.nan
    col = np.asarray([(v if finite(v) else math.nan) if o else fail
                      for v, o in zip(getattr(s, path.split(".")[1]), s.ok)], dtype=float)[idx]
    if kind == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nanmean(col, axis=-1), np.ones(idx.shape[0])
    assert pct is not None
    return stats.nearest_rank_rows(col, pct), np.ones(idx.shape[0])


def _paired_group(kind: Kind, pct: Optional[float], path: str, runs: Sequence[Samples],
                  idx: np.ndarray, fail_value: float = math.inf) -> np.ndarray:
    """The group's value per resample: pooled for sums and counts, geometric mean otherwise."""
    rows = [_paired_rows(kind, pct, path, s, idx, fail_value) for s in runs]
    if kind in ("proportion", "rate"):
        return sum(r[0] for r in rows) / sum(r[1] for r in rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp(np.mean([np.log(r[0]) for r in rows], axis=0))


def paired_half_widths(kind: Kind, pct: Optional[float], path: str, base_runs: Sequence[Samples],
                       cur_runs: Sequence[Samples], d: float, b_val: float, conf: float,
                       seed: int, block: Optional[int] = None,
                       fail: tuple[float, float] = (math.inf, math.inf)
                       ) -> Optional[tuple[float, float]]:
    """Half-widths (below, above d) of the contrast from a paired bootstrap over request indices.

    One index resample is applied to every run, so what request i costs in the workload
    cancels between the sides; what is left is how differently the runs served it. Indices
    are drawn in blocks of consecutive requests (``stats.default_block``): neighbours in the
    schedule share the engine's batches and queue.
    None when a resample has no value (e.g. no successful request drawn). ``fail``: what a
    failed request counts as in a percentile (baseline, current), as in
    :func:`unpaired_interval`.
    """
    parts = []
    n = len(base_runs[0].ok)
    block = stats.default_block(n) if block is None else block
    for idx in stats.paired_index_chunks(n, BOOTSTRAP_RESAMPLES, seed, block=block):
        b = _paired_group(kind, pct, path, base_runs, idx, fail[0])
        c = _paired_group(kind, pct, path, cur_runs, idx, fail[1])
        with np.errstate(divide="ignore", invalid="ignore"):
            if path == "error_rate":
                parts.append(c - b)
            else:
                parts.append((c - b) / b_val if kind == "proportion" else np.log(c / b))
    reps = np.concatenate(parts)
    if not np.all(np.isfinite(reps)):
        return None
    alpha = 1.0 - conf
    lo, hi = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    return max(0.0, d - float(lo)), max(0.0, float(hi) - d)

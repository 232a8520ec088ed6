"""Noise of sweep points: how far a point's throughput could move by chance.

Used by :func:`pytest_goodput.measure.frontier.compare_frontiers` through its ``noise`` callback.
Pure: numbers in, half-widths out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Optional

from pytest_goodput.schema.outcomes.frontier import FrontierPoint, NoiseFn, Side
from pytest_goodput.schema.runs.results import RunResult, Samples
from pytest_goodput.stats import bootstrap_interval
from pytest_goodput.stats.inputs import finite


def throughput_interval(
    result: RunResult,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    gpus: int = 1,
) -> Optional[tuple[float, float]]:
    """Percentile-bootstrap interval of output tokens/s over the run's requests.

    Resamples measured requests (failures count as 0 tokens) over the fixed window. It sees
    request-to-request noise only; widen it with run-to-run spread on shared machines.
    None when the run has no measured requests or no window.
    """
    tokens = [r.output_tokens if r.ok else 0 for r in result.requests if not r.warmup]
    return tokens_interval(tokens, result.samples_window_s(), confidence, resamples, seed, gpus)


def tokens_interval(
    tokens: Sequence[float],
    window_s: float,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    gpus: int = 1,
) -> Optional[tuple[float, float]]:
    """:func:`throughput_interval` from per-request output tokens (0 for failures) and a window."""

    if not window_s > 0 or len(tokens) == 0:
        return None
    lo, hi = bootstrap_interval(tokens, lambda a: a.sum(axis=-1), confidence=confidence,
                                n_resamples=resamples, seed=seed)
    return lo / window_s / gpus, hi / window_s / gpus


def run_to_run_half_width(h_within: Optional[float], run_cv: float, z: float = 2.0) -> float:
    """Widen a bootstrap half-width by run-to-run noise: sqrt(h² + (z·cv)²).

    Requests of one run share the machine's state, so resampling them misses the spread
    between runs (the classic cause of false alarms on shared CI machines).
    """
    h = h_within if h_within is not None and math.isfinite(h_within) else 0.0
    return math.sqrt(h * h + (z * run_cv) ** 2)


def relative_half_width(interval: Optional[tuple[float, float]], value: Optional[float]) -> Optional[float]:
    """Half the interval's width relative to ``value`` (the form ``noise`` returns)."""
    if interval is None or not finite(value) or value == 0:
        return None
    return (interval[1] - interval[0]) / 2.0 / abs(value)  # type: ignore[arg-type]


def noise_by_load(
    baseline: Mapping[tuple[str, float], float], current: Mapping[tuple[str, float], float]
) -> NoiseFn:
    """A ``noise`` function that looks points up by ``(load_kind, load)`` on each side."""

    def noise(p: FrontierPoint, side: Side) -> Optional[float]:
        table = baseline if side == "baseline" else current
        return table.get((p.load_kind, p.load))

    return noise


#: Run-to-run coefficient of variation of a point's throughput assumed on a shared machine.
DEFAULT_POINT_RUN_CV = 0.03


def _half_width_of(tokens: Sequence[float], window_s: float, gpus: int, run_cv: float) -> float:
    value = sum(tokens) / window_s / gpus if window_s > 0 else None
    h = relative_half_width(tokens_interval(tokens, window_s, gpus=gpus), value)
    return run_to_run_half_width(h, run_cv)


def sweep_noise(
    loads: Sequence[float],
    load_kind: str,
    baseline_samples: Sequence[Samples],
    current_samples: Sequence[Samples],
    gpus: int = 1,
    run_cv: float = DEFAULT_POINT_RUN_CV,
) -> NoiseFn:
    """Noise of every sweep point on both sides: bootstrap over requests, widened by ``run_cv``.

    ``baseline_samples`` and ``current_samples`` are in the order of ``loads`` (the sweep).
    """
    base, cur = ({
        (load_kind, float(load)): _half_width_of(s.output_tokens, s.window_s, gpus, run_cv)
        for load, s in zip(loads, side)
    } for side in (baseline_samples, current_samples))
    return noise_by_load(base, cur)

"""Arrival schedules: seeded, precomputed offsets (seconds from t0) for open-loop scenarios.

Pure (numpy only, no I/O). A schedule is computed in full before the run so that the same
spec and seed always offer the same load, and so that the load generator sends at absolute
deadlines (``t0 + offset``) rather than by chained relative sleeps, which drift.

Offsets start at 0 (the first request is sent at t0) and never decrease. Gaps are
exponential for ``poisson`` (mean 1/rate, CV 1), gamma for ``gamma`` (shape = burstiness,
scale = 1/(rate*shape): mean 1/rate, CV 1/sqrt(shape)), and exactly 1/rate for ``constant``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: ``SeedSequence`` stream key for arrival gaps (workload lengths and text use other keys).
ARRIVAL_STREAM = 1
#: Upper bound on the requests one open-loop schedule may hold (a typo guard, e.g. rate=1e9).
MAX_SCHEDULED = 5_000_000


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng([ARRIVAL_STREAM, seed & 0xFFFFFFFF])


def gaps(arrival: str, rate: float, n: int, *, burstiness: float = 1.0, seed: int = 0) -> np.ndarray:
    """``n`` inter-arrival gaps in seconds for one arrival process (mean 1/rate)."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if arrival == "constant":
        return np.full(n, 1.0 / rate)
    rng = _rng(seed)
    if arrival == "poisson":
        return rng.exponential(1.0 / rate, size=n)
    if arrival == "gamma":
        if burstiness <= 0:
            raise ValueError(f"burstiness must be > 0, got {burstiness}")
        return rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    raise ValueError(f"unknown arrival process {arrival!r}; allowed: poisson, gamma, constant")


def offsets_from_gaps(g: np.ndarray) -> np.ndarray:
    """Offsets with the first request at 0: ``[0, g0, g0+g1, ...]`` (one more than ``g`` holds)."""
    out = np.zeros(len(g) + 1)
    np.cumsum(g, out=out[1:])
    return out


def arrival_offsets(spec: ScenarioSpec, n: int) -> np.ndarray:
    """Offsets (s from t0) of the first ``n`` requests of ``spec``'s schedule.

    Offline: all at 0. Server/interactive: the spec's arrival process at ``spec.rate``.
    The same spec and ``n`` always give the same array; a longer schedule extends a shorter one.
    """
    if n <= 0:
        return np.zeros(0)
    if spec.scenario == "offline" or spec.rate is None:
        return np.zeros(n)
    return offsets_from_gaps(
        gaps(spec.arrival, spec.rate, n - 1, burstiness=spec.burstiness, seed=spec.seed)
    )


def warmup_mask(offsets: np.ndarray, warmup_requests: int, warmup_s: float) -> np.ndarray:
    """Warm-up flags: the first ``warmup_requests`` requests and those scheduled before ``warmup_s``.

    Offsets never decrease, so warm-up requests always form a prefix of the schedule.
    """
    mask = np.arange(len(offsets)) < warmup_requests
    if warmup_s > 0:
        mask |= offsets < warmup_s
    return mask


@dataclass(frozen=True)
class Schedule:
    """The open-loop plan: send request ``i`` at ``t0 + offsets[i]``; ``warmup[i]`` excludes it."""

    offsets: np.ndarray
    warmup: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def measured(self) -> int:
        return int(len(self.warmup) - self.warmup.sum())

    @property
    def measured_start(self) -> Optional[float]:
        """Offset of the first measured request (the start of the measured window)."""
        idx = np.flatnonzero(~self.warmup)
        return float(self.offsets[idx[0]]) if len(idx) else None


def bounded(offsets: np.ndarray, warmup: np.ndarray, requests: Optional[int],
             duration_s: Optional[float]) -> tuple[Schedule, bool]:
    """Cut a schedule to the bounds; the flag says whether ``offsets`` was long enough to know."""
    n_warm = int(warmup.sum())  # a prefix
    measured = offsets[n_warm:]
    keep = len(measured)
    complete = False
    if requests is not None and keep >= requests:
        keep, complete = requests, True
    if duration_s is not None and len(measured):
        # Stop issuing once the measured window (from the first measured send) passes duration_s.
        within = int(np.searchsorted(measured - measured[0], duration_s + 1e-9, side="right"))
        if within < len(measured):
            complete = True
        keep = min(keep, within)
    end = n_warm + keep
    return Schedule(offsets[:end].copy(), warmup[:end].copy()), complete


def open_loop_schedule(spec: ScenarioSpec) -> Schedule:
    """The whole schedule of an open-loop run, cut to ``requests`` and/or ``duration_s``.

    Warm-up requests come first and are not counted in ``requests``; ``duration_s`` bounds
    the measured window only (warm-up time is extra).
    """
    if spec.rate is None:
        raise ValueError(f"scenario {spec.scenario!r} has no rate; an open-loop schedule needs one")
    if spec.requests is None and spec.duration_s is None:
        raise ValueError("an open-loop schedule needs requests= or duration_s=")
    horizon = spec.warmup_s + (spec.duration_s or 0.0)
    # First guess: enough for the horizon at the mean rate plus a generous random margin.
    n = spec.warmup_requests + 16
    if spec.requests is not None:
        n += spec.requests + math.ceil(spec.rate * spec.warmup_s)
    else:
        expect = spec.rate * horizon
        n += math.ceil(expect + 8 * math.sqrt(expect / min(spec.burstiness, 1.0)) + 8)
    while True:
        n = min(n, MAX_SCHEDULED)
        offsets = arrival_offsets(spec, n)
        mask = warmup_mask(offsets, spec.warmup_requests, spec.warmup_s)
        sched, complete = bounded(offsets, mask, spec.requests, spec.duration_s)
        if complete:
            return sched
        if n >= MAX_SCHEDULED:
            raise ValueError(
                f"schedule would exceed {MAX_SCHEDULED} requests "
                f"(rate={spec.rate}, duration_s={spec.duration_s}); lower the rate or duration"
            )
        n *= 2


def mean_rate(offsets: np.ndarray) -> float:
    """Achieved arrival rate of a schedule: (n - 1) gaps over the span."""
    if len(offsets) < 2 or offsets[-1] <= offsets[0]:
        return math.inf if len(offsets) >= 2 else 0.0
    return (len(offsets) - 1) / float(offsets[-1] - offsets[0])


def gap_cv(offsets: np.ndarray) -> float:
    """Coefficient of variation of the gaps (1 for Poisson, 1/sqrt(shape) for gamma, 0 constant)."""
    g = np.diff(offsets)
    if len(g) < 2 or g.mean() == 0:
        return 0.0
    return float(g.std() / g.mean())


#: ``SeedSequence`` stream key of a conversation's think times (the pauses between its turns).
THINK_STREAM = 23


def think_times(spec: ScenarioSpec, conversation: int) -> list[float]:
    """Seconds the user thinks after each turn of ``conversation`` but the last (seeded)."""
    if spec.think_time_s <= 0 or spec.turns < 2:
        return [0.0] * max(spec.turns - 1, 0)
    rng = np.random.default_rng([THINK_STREAM, spec.seed & 0xFFFFFFFF, conversation])
    return rng.exponential(spec.think_time_s, size=spec.turns - 1).tolist()

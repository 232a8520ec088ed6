"""Machine drift for the virtual-time simulator: a seeded speed schedule (pure).

A shared CI runner is not one speed. From one day to the next its level moves (other
tenants, a different host, thermal limits): a stored baseline carries the level of the day
it was recorded. Within a job the speed wanders over seconds to minutes. :class:`SpeedSchedule`
models both as a step-time multiplier of virtual time t (seconds since the job started):

    factor(t) = level · exp(x_k − s²/2),   k = ⌊t / dt⌋,   s² = log(1 + wander_cv²)
    x_0 ~ N(0, s²),   x_{k+1} = φ · x_k + √(1 − φ²) · s · ε_k,   φ = exp(−dt / tau)

an AR(1) (Ornstein–Uhlenbeck on a grid) in log speed: stationary, mean factor ``level``,
coefficient of variation ``wander_cv``, correlation time ``tau_s``. :func:`day_level` draws
the level of one day, lognormal with mean 1 and CV ``day_cv``. Both are deterministic per
seed, so two engines of one A/B job (one schedule, shared clock) meet the same machine.
``docs/simulator.md`` ("Machine drift").
"""

from __future__ import annotations

import math
import random

__all__ = ["SpeedSchedule", "day_level", "lognormal_sigma"]


def lognormal_sigma(cv: float) -> float:
    """σ of the log of a lognormal with coefficient of variation ``cv``."""
    if cv < 0 or not math.isfinite(cv):
        raise ValueError(f"a coefficient of variation must be finite and >= 0, not {cv!r}")
    return math.sqrt(math.log1p(cv * cv))


def day_level(seed: int, day: int, day_cv: float) -> float:
    """The machine's speed level on ``day`` (a step-time multiplier, mean 1, CV ``day_cv``)."""
    s = lognormal_sigma(day_cv)
    return math.exp(random.Random(f"day-level:{seed}:{day}").gauss(-s * s / 2.0, s)) if s else 1.0


class SpeedSchedule:
    """The step-time multiplier of the machine at virtual time t ≥ 0 (seconds into a job)."""

    def __init__(self, *, level: float = 1.0, wander_cv: float = 0.0, tau_s: float = 30.0,
                 dt_s: float = 1.0, seed: int = 0) -> None:
        if not (level > 0 and math.isfinite(level)):
            raise ValueError(f"level must be a positive number, not {level!r}")
        if not (tau_s > 0 and dt_s > 0):
            raise ValueError(f"tau_s ({tau_s!r}) and dt_s ({dt_s!r}) must be > 0")
        self.level, self.wander_cv, self.tau_s, self.dt_s = level, wander_cv, tau_s, dt_s
        self._s = lognormal_sigma(wander_cv)
        self._phi = math.exp(-dt_s / tau_s)
        self._rng = random.Random(f"wander:{seed}")
        self._x: list[float] = [self._rng.gauss(0.0, self._s)] if self._s else [0.0]

    def _cell(self, k: int) -> float:
        """x_k, extending the path as far as asked (always the same path for one seed)."""
        x, s, phi, rng = self._x, self._s, self._phi, self._rng
        if s:
            q = math.sqrt(1.0 - phi * phi) * s
            while len(x) <= k:
                x.append(phi * x[-1] + q * rng.gauss(0.0, 1.0))
        return x[min(k, len(x) - 1)]

    def __call__(self, t: float) -> float:
        if not t >= 0:
            raise ValueError(f"virtual time must be >= 0, not {t!r}")
        k = int(t // self.dt_s)
        return self.level * math.exp(self._cell(k) - self._s * self._s / 2.0)

    def shifted(self, t0: float) -> ShiftedSpeed:
        """The schedule seen by a run that starts at job time ``t0`` (its own clock from 0)."""
        return ShiftedSpeed(self, t0)


class ShiftedSpeed:
    """``schedule(t0 + t)``: a run's view of the job's machine."""

    def __init__(self, schedule: SpeedSchedule, t0: float) -> None:
        self.schedule, self.t0 = schedule, t0

    def __call__(self, t: float) -> float:
        return self.schedule(self.t0 + t)

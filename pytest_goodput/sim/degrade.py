"""Degradation over a run for the simulator: a step-time multiplier that ramps up (pure).

A leak, a KV cache that shrinks as fragments pile up, or a throttling CPU slows an engine
the longer it runs: the first part of a run is fast and the end is slow. The schedule is a
multiplier of wall time t since the engine's first step (its origin is the first time it is
asked): 1 before ``degrade_after_s``, rising linearly to ``degrade_slowdown`` over
``degrade_ramp_s`` seconds, then constant. ``docs/simulator.md`` ("Degradation over a run").
"""

from __future__ import annotations

from typing import Optional

from pytest_goodput.sim.profile import SimProfile


class DegradeSchedule:
    """``factor(now)``: 1, then a linear ramp to ``slowdown``, from the first ``now`` asked."""

    def __init__(self, slowdown: float, after_s: float, ramp_s: float) -> None:
        self.slowdown, self.after_s, self.ramp_s = slowdown, after_s, ramp_s
        self.origin: Optional[float] = None

    def __call__(self, now: float) -> float:
        if self.origin is None:
            self.origin = now
        t = now - self.origin - self.after_s
        if t < 0:
            return 1.0
        if self.ramp_s <= 0 or t >= self.ramp_s:
            return self.slowdown
        return 1.0 + (self.slowdown - 1.0) * t / self.ramp_s


def degrade_schedule(profile: SimProfile) -> Optional[DegradeSchedule]:
    """The profile's degradation, or None when it has none (``degrade_slowdown`` 1)."""
    if profile.degrade_slowdown == 1.0:
        return None
    return DegradeSchedule(profile.degrade_slowdown, profile.degrade_after_s, profile.degrade_ramp_s)

"""How far a remote worker's clocks are from the driver's, measured by round trips.

The driver stamps its wall and monotonic clocks, asks the worker for its own, and stamps
again. Of several round trips the one with the shortest round-trip time (RTT) is kept: the
worker's reading happened somewhere inside it, so taking the midpoint errs by at most
RTT/2 (Cristian's algorithm). Two numbers come out: the wall-clock offset (what NTP would
be judged by, reported) and the shift that maps the worker's monotonic timestamps onto the
driver's monotonic clock (applied). A worker on the driver's own host and boot shares its
CLOCK_MONOTONIC, so its shift is exactly zero and no correction is applied. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Sample:
    """One round trip: driver stamps before/after, the worker's stamps in between."""

    driver_wall_0: float
    driver_mono_0: float
    worker_wall: float
    worker_mono: float
    driver_wall_1: float
    driver_mono_1: float

    @property
    def rtt_s(self) -> float:
        return self.driver_mono_1 - self.driver_mono_0


@dataclass(frozen=True)
class ClockOffset:
    """A worker's clocks relative to the driver's (seconds)."""

    wall_offset_s: float  # worker wall clock minus driver wall clock
    shift_s: float  # add to a worker monotonic timestamp to get the driver's monotonic clock
    error_s: float  # bound on both: half the shortest round trip
    shared_clock: bool  # same host and boot: one CLOCK_MONOTONIC, shift exactly 0

    def describe(self) -> str:
        """The offset in words, for the run's notes."""
        text = (f"clock offset {self.wall_offset_s * 1e3:+.3f} ms ± {self.error_s * 1e3:.3f} ms "
                "(wall clock vs the driver's, half the shortest of the round trips)")
        if self.shared_clock:
            return text + "; same host: monotonic clock shared, timestamps uncorrected"
        return text + f"; timestamps mapped onto the driver's clock (shift {self.shift_s * 1e3:+.3f} ms)"


def estimate(samples: Sequence[Sample], shared_clock: bool) -> ClockOffset:
    """The offset from the round trip with the shortest RTT (ties: the earliest)."""
    if not samples:
        raise ValueError("no round trips to estimate a clock offset from")
    best = min(samples, key=lambda s: s.rtt_s)
    mid_wall = (best.driver_wall_0 + best.driver_wall_1) / 2
    mid_mono = (best.driver_mono_0 + best.driver_mono_1) / 2
    shift = 0.0 if shared_clock else mid_mono - best.worker_mono
    return ClockOffset(best.worker_wall - mid_wall, shift, best.rtt_s / 2, shared_clock)

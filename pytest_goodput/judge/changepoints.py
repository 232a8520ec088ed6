"""Change points, drift and creep in a metric's main-branch series (pure).

Change points follow Hunter / Apache Otava (Fleming et al., ICPE 2023): split the series
into candidate segments, then repeatedly drop the weakest candidate — the one whose two
neighbouring segments differ least significantly (two-sided Student t-test, pooled
variance) — until every remaining one has a p-value at most ``max_pvalue`` and a relative
change of at least ``min_magnitude``. Candidates come from ruptures' binary segmentation
(the optional ``history`` extra); the t-test is ours (``stats.student``). Every figure is
defined in ``docs/metrics.md`` ("History").
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Literal, Optional, Sequence

import numpy as np

from pytest_goodput.schema.runs.history import Trend, TrendPoint
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.stats.student import t_cdf

INSTALL_HINT = 'pip install "pytest-goodput[history]"'
#: Runs averaged at each end of a drift or creep window (a median, so one odd run is ignored).
END_RUNS = 3
#: Default creep window: the newest main-branch runs the creep gate looks back over.
DEFAULT_WINDOW = 20


class ChangePointsUnavailable(RuntimeError):
    """The change-point library (ruptures) is not installed; the message says how to get it."""


@dataclass(frozen=True)
class ChangepointSettings:
    """``max_pvalue``: the significance level a change point must reach; ``min_magnitude``:
    the smallest relative change reported; ``min_size``: runs needed on each side."""

    max_pvalue: float = 0.001
    min_magnitude: float = 0.01
    min_size: int = 3
    max_candidates: int = 12

    def __post_init__(self) -> None:
        if not 0 < self.max_pvalue < 1:
            raise ValueError(f"max p-value must be in (0, 1), got {self.max_pvalue}")
        if not 0 <= self.min_magnitude < 10 or math.isnan(self.min_magnitude):
            raise ValueError(f"minimum magnitude must be in [0, 10), got {self.min_magnitude}")
        if self.min_size < 2:
            raise ValueError(f"min_size must be at least 2, got {self.min_size}")


@dataclass(frozen=True)
class ChangePoint:
    """A change at ``index``: runs ``[.., index)`` have mean ``before``, ``[index, ..)`` ``after``
    (each up to the neighbouring change point); ``change`` = after / before − 1."""

    index: int
    before: float
    after: float
    change: float
    pvalue: float


def _candidates(values: Sequence[float], settings: ChangepointSettings) -> list[int]:
    """Candidate change indices by binary segmentation (ruptures, l2 cost): over-segmented on
    purpose, the significance test below decides which survive."""
    try:
        import ruptures
    except ImportError as err:
        raise ChangePointsUnavailable(f"change-point detection needs ruptures: {INSTALL_HINT}") from err
    n = len(values)
    k = min(settings.max_candidates, n // settings.min_size - 1)
    signal = np.asarray(values, dtype=float)
    while k > 0:
        try:
            ends = ruptures.Binseg(model="l2", min_size=settings.min_size, jump=1).fit(signal).predict(n_bkps=k)
        except ruptures.exceptions.BadSegmentationParameters:
            k -= 1
            continue
        return [int(e) for e in ends if 0 < e < n]
    return []


def segment_test(left: Sequence[float], right: Sequence[float]) -> tuple[float, float, float]:
    """(mean left, mean right, two-sided p-value of Student's t-test with pooled variance)."""
    m1, m2 = statistics.fmean(left), statistics.fmean(right)
    n1, n2 = len(left), len(right)
    df = n1 + n2 - 2
    if df < 1:
        return m1, m2, 1.0
    ss = sum((x - m1) ** 2 for x in left) + sum((x - m2) ** 2 for x in right)
    se = math.sqrt(ss / df * (1.0 / n1 + 1.0 / n2))
    if se == 0.0:
        return m1, m2, (1.0 if m1 == m2 else 0.0)
    t = abs(m2 - m1) / se
    return m1, m2, min(1.0, 2.0 * t_cdf(-t, df))  # the lower tail: no cancellation


def relative(before: float, after: float) -> float:
    """after / before − 1; ±inf when ``before`` is 0 and ``after`` is not (0 when both are)."""
    if before == 0:
        return 0.0 if after == 0 else math.copysign(math.inf, after)
    return after / before - 1.0


def _stats(values: Sequence[float], points: list[int], i: int) -> ChangePoint:
    lo = points[i - 1] if i > 0 else 0
    hi = points[i + 1] if i + 1 < len(points) else len(values)
    at = points[i]
    before, after, p = segment_test(values[lo:at], values[at:hi])
    return ChangePoint(index=at, before=before, after=after, change=relative(before, after), pvalue=p)


def detect(values: Sequence[float], settings: ChangepointSettings = ChangepointSettings()) -> list[ChangePoint]:
    """The series' change points, oldest first (none when it is shorter than two segments)."""
    values = [float(v) for v in values]
    if len(values) < 2 * settings.min_size:
        return []
    points = sorted(set(_candidates(values, settings)))
    while points:
        found = [_stats(values, points, i) for i in range(len(points))]
        weak = [(cp.pvalue, -abs(cp.change), i) for i, cp in enumerate(found)
                if cp.pvalue > settings.max_pvalue or abs(cp.change) < settings.min_magnitude]
        if not weak:
            return found
        del points[max(weak)[2]]
    return []


def worse_by(change: float, direction: Literal["higher", "lower"]) -> float:
    """How much worse a relative change is for a metric (positive: worse, negative: better)."""
    return -change if direction == "higher" else change


@dataclass(frozen=True)
class Drift:
    """The level moved from ``start`` (median of the reference run and the next ones) to
    ``end`` (median of the newest runs); ``change`` = end / start − 1."""

    reference: int
    start: float
    end: float
    change: float


def drift(values: Sequence[float], reference: int, *, k: int = END_RUNS) -> Optional[Drift]:
    """Drift since run ``reference`` (an index into ``values``); None when it is out of range."""
    if not 0 <= reference < len(values):
        return None
    start = float(statistics.median(values[reference:reference + k]))
    end = float(statistics.median(values[-k:]))
    return Drift(reference=reference, start=start, end=end, change=relative(start, end))


def is_step(values: Sequence[float], at: int, tolerance: float, *, k: int = END_RUNS) -> bool:
    """Whether the change at ``at`` is one sharp step rather than part of a creep.

    The median of the ``k`` runs after ``at`` differs from the median of the ``k`` before by
    more than the tolerance, while on each side (where ``2k`` runs exist) the next ``k`` runs
    out moved less than half that jump: the series is flat around it. A creep moves as much
    on either side as across the point, so it is never taken for a step.
    """
    def level(lo: int, hi: int) -> float:
        return float(statistics.median(values[max(lo, 0):hi]))

    jump = abs(relative(level(at - k, at), level(at, at + k)))
    if jump <= tolerance:
        return False
    sides = []
    if at - 2 * k >= 0:
        sides.append(relative(level(at - 2 * k, at - k), level(at - k, at)))
    if at + 2 * k <= len(values):
        sides.append(relative(level(at, at + k), level(at + k, at + 2 * k)))
    return all(abs(side) < jump / 2 for side in sides)


@dataclass(frozen=True)
class Creep:
    """The creep gate's reading of one metric (``docs/metrics.md``, "creep").

    ``window_start``: index into the main-branch values where the window starts (at the
    newest run the gate called regressed when it was recorded — a loss merged anyway, so
    accepted — if any); ``start``: median of its first runs; ``end``: median of the newest
    main runs and the current one; ``loss`` and ``own_loss``: how much worse ``end`` and
    ``current`` are than ``start`` (relative, positive = worse). ``step_at``: where an
    accepted regression restarted the window; ``unaccepted_step``: the newest step larger
    than the tolerance inside the window that the gate did not call regressed (counted in
    the loss, named in reports).
    """

    window_start: int
    start: float
    end: float
    current: float
    loss: float
    own_loss: float
    tolerance: float
    step_at: Optional[int] = None
    unaccepted_step: Optional[ChangePoint] = None

    @property
    def crept(self) -> bool:
        """The window lost more than the tolerance and the current run continues it."""
        return self.loss > self.tolerance and self.own_loss > self.tolerance


def creep(
    main: Sequence[float],
    current: float,
    *,
    direction: Literal["higher", "lower"],
    tolerance: float,
    window: int = DEFAULT_WINDOW,
    settings: ChangepointSettings = ChangepointSettings(),
    k: int = END_RUNS,
    accepted: Sequence[bool] = (),
) -> Optional[Creep]:
    """Whether ``current`` continues a creep over the newest ``window`` main-branch runs.

    ``accepted[i]``: the gate called this metric *regressed* when main run ``i`` was
    recorded, and it was merged anyway — the only thing that moves the level the loss is
    counted from: the window restarts at the newest such run. A step the gate called
    only inconclusive (or never judged) was accepted by nobody, so however sharp it is, it
    stays in the window and its loss adds to what follows. None when fewer than ``2k − 1``
    main runs remain in the window (too few to tell a creep from noise).
    """
    series = [float(v) for v in main]
    current = float(current)
    start_at = max(len(series) - window, 0)
    step_at: Optional[int] = None
    for i in range(start_at + 1, min(len(accepted), len(series))):
        if accepted[i]:
            step_at = start_at = i
    tail = series[start_at:]
    if len(tail) < 2 * k - 1:
        return None
    unaccepted = None
    for cp in detect(series, settings):
        if (cp.index > start_at and worse_by(cp.change, direction) > 0
                and is_step(series, cp.index, tolerance, k=k)):
            unaccepted = cp
    start = float(statistics.median(tail[:k]))
    end = float(statistics.median([*tail[len(tail) - (k - 1):], current]))
    return Creep(window_start=start_at, start=start, end=end, current=current,
                 loss=worse_by(relative(start, end), direction),
                 own_loss=worse_by(relative(start, current), direction), tolerance=tolerance,
                 step_at=step_at, unaccepted_step=unaccepted)


@dataclass(frozen=True)
class Series:
    """A metric's main-branch values of one identity, oldest first, with a label per run and
    whether the gate called the metric regressed when the run was recorded (``accepted``:
    merged anyway; empty for histories recorded without verdicts)."""

    labels: list[str]
    values: list[float]
    accepted: list[bool] = field(default_factory=list)


def trend(metric: str, series: Series, start: int, current: Optional[float], *,
          reason: Literal["crept", "regressed"], level: Optional[float] = None,
          tolerance: Optional[float] = None) -> Trend:
    """The runs from ``start`` on, then the current run (when there is one), for a chart."""
    points = [TrendPoint(label=lab, value=v)
              for lab, v in zip(series.labels[start:], series.values[start:])]
    if current is not None:
        points.append(TrendPoint(label="this run", value=float(current), current=True))
    return Trend(metric=metric, reason=reason, points=points, start=level, tolerance=tolerance)


def creep_gate(
    series: dict[str, Series],
    current: dict[str, Optional[float]],
    gated: Sequence[tuple[str, Literal["higher", "lower"], float]],
    *,
    window: int = DEFAULT_WINDOW,
    settings: ChangepointSettings = ChangepointSettings(),
    regressed: Sequence[str] = (),
) -> tuple[list[MetricComparison], list[Trend]]:
    """The creep gate over a test's gated metrics ``(path, direction, tolerance)``: a
    *regressed* comparison (method ``creep``) for each that crept, and trend charts for
    those and for the ``regressed`` metrics the baseline comparison already failed."""
    comparisons: list[MetricComparison] = []
    trends: list[Trend] = []
    for path, direction, tolerance in gated:
        s, value = series.get(path), current.get(path)
        if s is None or value is None or not math.isfinite(value):
            continue
        c = creep(s.values, value, direction=direction, tolerance=tolerance, window=window,
                  settings=settings, accepted=s.accepted)
        if c is not None and c.crept:
            n = len(s.values) - c.window_start
            step = c.unaccepted_step
            counted = (f"; the step of {step.change * 100:+.1f}% at {s.labels[step.index]} was "
                       "not called regressed, so it counts" if step is not None else "")
            comparisons.append(MetricComparison(
                metric=path, direction=direction, baseline=c.start, current=value,
                change=relative(c.start, value), tolerance=tolerance, verdict="regressed",
                method="creep",
                note=(f"creep: the last {n} main-branch runs and this run lost "
                      f"{c.loss * 100:.1f}% (median of the newest {END_RUNS} against the "
                      f"first {END_RUNS}; tolerance {tolerance * 100:g}%{counted})")))
            trends.append(trend(path, s, c.window_start, value, reason="crept", level=c.start,
                                tolerance=tolerance))
        elif path in regressed:
            trends.append(trend(path, s, max(len(s.values) - window, 0), value, reason="regressed",
                                tolerance=tolerance))
    return comparisons, trends

"""A mergeable quantile sketch with a relative-error bound (DDSketch), read as nearest rank.

For runs too large to ship every record, each load worker summarizes a metric into a
DDSketch (DataDog's ``ddsketch`` package): values go into logarithmic buckets of relative
width 2α, so a bucket's representative value is within α (relative) of every value in it.
Merging adds bucket counts, so the merge of two workers' sketches *is* the sketch of the
union. :meth:`QuantileSketch.percentile` asks for the bucket holding the nearest-rank
sample (``quantiles.nearest_rank``, the product's one percentile), so the value it returns
is within α of the exact nearest-rank percentile: |sketch − exact| ≤ α · exact for
non-negative values. Count, mean and max are tracked exactly next to it. ``ddsketch`` is an
optional dependency (the ``ray`` extra) and imported only when a sketch is made. Pure.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional

from pytest_goodput.stats.quantiles import nearest_rank

#: The relative accuracy α of every sketch the product makes: percentiles within 1 %.
RELATIVE_ACCURACY = 0.01


class SketchUnavailableError(RuntimeError):
    """Sketched percentiles were needed but the ``ddsketch`` package is not installed."""


def _ddsketch(alpha: float) -> Any:
    try:
        from ddsketch import DDSketch
    except ImportError:
        raise SketchUnavailableError(
            'sketched percentiles need ddsketch: pip install "pytest-goodput[ray]"') from None
    return DDSketch(relative_accuracy=alpha)


class QuantileSketch:
    """Finite values summarized with relative accuracy ``alpha``; exact count, sum, min, max."""

    def __init__(self, alpha: float = RELATIVE_ACCURACY) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"relative accuracy must be in (0, 1), got {alpha}")
        self.alpha = alpha
        self._dd = _ddsketch(alpha)
        self.count = 0
        self._sum: list[float] = []  # kept for math.fsum: the mean is exact, as for records
        self.min: Optional[float] = None
        self.max: Optional[float] = None

    def add(self, value: Optional[float]) -> None:
        """Add a value; ``None`` and non-finite values are skipped, as ``distribution`` does."""
        if value is None or not math.isfinite(value):
            return
        self._dd.add(value)
        self.count += 1
        self._sum.append(value)
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)
        if len(self._sum) >= 4096:
            self._sum = [math.fsum(self._sum)]

    def extend(self, values: Iterable[Optional[float]]) -> "QuantileSketch":
        for v in values:
            self.add(v)
        return self

    def merge(self, other: "QuantileSketch") -> "QuantileSketch":
        """Add ``other``'s values to this sketch (same α); bucket counts add, so nothing is lost."""
        if other.alpha != self.alpha:
            raise ValueError(f"cannot merge sketches of relative accuracy {self.alpha} and {other.alpha}")
        if other.count:
            self._dd.merge(other._dd)
            self.count += other.count
            self._sum = [math.fsum(self._sum + other._sum)]
            self.min = other.min if self.min is None else min(self.min, other.min)  # type: ignore[type-var]
            self.max = other.max if self.max is None else max(self.max, other.max)  # type: ignore[type-var]
        return self

    @property
    def mean(self) -> Optional[float]:
        return math.fsum(self._sum) / self.count if self.count else None

    def percentile(self, p: float) -> Optional[float]:
        """The nearest-rank ``p``-th percentile within α (relative); None when empty.

        The bucket holding the sample of 0-based rank r = ⌈p/100 · n⌉ − 1 is asked for at
        rank r + ½ (DDSketch returns the bucket whose running count exceeds the rank), and
        the answer is clamped to the exact [min, max].
        """
        if not 0 < p <= 100:
            raise ValueError(f"percentile must be in (0, 100], got {p}")
        return self.at_rank(nearest_rank(self.count, p) - 1) if self.count else None

    def at_rank(self, r: int) -> float:
        """The value of 0-based rank ``r`` (``0 <= r < count``) within α (relative)."""
        if not 0 <= r < self.count:
            raise ValueError(f"rank {r} is outside a sketch of {self.count} values")
        q = 1.0 if self.count == 1 else min(1.0, (r + 0.5) / (self.count - 1))
        v = float(self._dd.get_quantile_value(q))
        return min(max(v, self.min), self.max)  # type: ignore[type-var]


__all__ = ["RELATIVE_ACCURACY", "QuantileSketch", "SketchUnavailableError"]

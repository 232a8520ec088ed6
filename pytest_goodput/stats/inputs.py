"""What a statistic accepts: finite numbers, and confidence levels (checked once, turned into normal critical values)."""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Optional


def finite(value: Optional[float]) -> bool:
    """A real, finite number (not None, NaN or ±inf)."""
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def z_value(confidence: float) -> float:
    """Two-sided standard-normal critical value, e.g. 1.95996 for 0.95."""
    check_confidence(confidence)
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")

"""Which values are numbers a statistic can use."""

from __future__ import annotations

import math
from typing import Optional


def finite(value: Optional[float]) -> bool:
    """A real, finite number (not None, NaN or ±inf)."""
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)

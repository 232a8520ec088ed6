"""The warm-up detector: the first time slice in the run's steady state (pure).

``docs/metrics.md`` ("Steady state") is the contract. A slice is *steady* when each of its
output throughput, TTFT P50 and TPOT P50 lies within a band of the run's median of that
metric over its usable slices: the band is 10 % or three slice-to-slice SDs
(``measure/degradation.py``), whichever is wider, so a noisy run is not all warm-up. The
steady state begins at the first steady slice before the last usable one (the degradation
needs a later slice to compare with). Warm-up (a cold cache, compilation, a queue still
filling) shows as the slices before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median
from typing import Optional

from pytest_goodput.measure.degradation import METRICS, slice_noise, values
from pytest_goodput.schema.slices import Slice

#: The narrowest band around the run's median a steady slice lies within.
BAND = 0.10
#: Slice-to-slice SDs the band spans at least.
BAND_SDS = 3.0
_LABEL = {"output_tokens_per_s": "output throughput", "ttft_ms_p50": "TTFT P50",
          "tpot_ms_p50": "TPOT P50"}


def steady_start(slices: Sequence[Slice]) -> tuple[Optional[int], str]:
    """The index of the first steady slice (None: none before the last usable) and why."""
    bands: dict[str, tuple[float, float]] = {}  # field -> (median, band)
    per_slice: dict[str, dict[int, float]] = {}
    for field in METRICS.values():
        vs = values(slices, field)
        if len(vs) < 2:
            continue
        xs = [v for _, v in vs]
        sigma = slice_noise(xs) or 0.0
        bands[field] = (median(xs), max(BAND, BAND_SDS * sigma))
        per_slice[field] = dict(vs)
    usable = [i for i, s in enumerate(slices) if not s.too_few]
    if len(usable) < 2 or not bands:
        return None, f"fewer than 2 slices with at least the requests a slice needs ({len(usable)})"
    for i in usable[:-1]:
        off = [f for f, (mid, band) in bands.items()
               if i in per_slice[f] and abs(per_slice[f][i] / mid - 1.0) > band]
        if not off:
            names = ", ".join(f"{_LABEL[f]} ±{bands[f][1]:.0%}" for f in bands)
            where = "the first slice" if i == usable[0] and i == 0 else \
                f"slice {i + 1} of {len(slices)} (at {slices[i].start_s:g} s)"
            return i, f"steady from {where}: within the run's median ({names})"
    return None, "no slice before the last lies within its band around the run's medians: no steady state"

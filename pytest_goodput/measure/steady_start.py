"""The warm-up detector: the first time slice in the run's steady state (pure).

``docs/metrics.md`` ("Steady state") is the contract. A slice is *steady* when each of its
output throughput, TTFT P50 and TPOT P50 lies within a band of the next usable slice's: the
band is :data:`BAND` (10 %; 15 % for TTFT's median, which is queueing over a few dozen
requests) or three slice-to-slice SDs (``measure/degradation.py``), whichever is wider, so
a noisy run is not all warm-up. Warm-up (a cold cache, compilation, a queue still filling)
is a stretch of slices still changing from one to the next; the steady state begins at the
first slice that agrees with the one after it. Comparing neighbours, not each slice with the
whole run, keeps a run that degrades later from looking like one long warm-up. The slice
must come before the last usable one (the degradation needs a later slice to compare with).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from pytest_goodput.measure.degradation import METRICS, slice_noise, values
from pytest_goodput.schema.runs.slices import Slice

#: The narrowest band around the next slice's value a steady slice lies within, by field.
BAND: dict[str, float] = {"output_tokens_per_s": 0.10, "ttft_ms_p50": 0.15, "tpot_ms_p50": 0.10}
#: Slice-to-slice SDs the band spans at least.
BAND_SDS = 3.0
_LABEL = {"output_tokens_per_s": "output throughput", "ttft_ms_p50": "TTFT P50",
          "tpot_ms_p50": "TPOT P50"}


def steady_start(slices: Sequence[Slice]) -> tuple[Optional[int], str]:
    """The index of the first steady slice (None: none before the last usable) and why."""
    bands: dict[str, float] = {}
    per_slice: dict[str, dict[int, float]] = {}
    for field in METRICS.values():
        vs = values(slices, field)
        if len(vs) < 2:
            continue
        sigma = slice_noise([v for _, v in vs]) or 0.0
        bands[field] = max(BAND[field], BAND_SDS * sigma)
        per_slice[field] = dict(vs)
    usable = [i for i, s in enumerate(slices) if not s.too_few]
    if len(usable) < 2 or not bands:
        return None, f"fewer than 2 slices with at least the requests a slice needs ({len(usable)})"
    for i, after in zip(usable, usable[1:]):
        off = [f for f, band in bands.items()
               if i in per_slice[f] and after in per_slice[f]
               and abs(per_slice[f][i] / per_slice[f][after] - 1.0) > band]
        if not off:
            names = ", ".join(f"{_LABEL[f]} ±{band:.0%}" for f, band in bands.items())
            where = "the first slice" if i == 0 else f"slice {i + 1} of {len(slices)} (at {slices[i].start_s:g} s)"
            return i, f"steady from {where}: within the next slice's values ({names})"
    return None, "no slice agrees with the next one within its band: no steady state"

"""The judge's note when a reasoning model thinks longer or shorter than in its baseline (pure).

A reasoning model that thinks 30 % longer answers later and streams more tokens, so its
TTFO, E2E and throughput move with no change in the engine's speed. The gate still judges
those metrics as they are, but the outcome says that the workload changed, so a latency
"regression" is not read as the engine's alone (``docs/metrics.md``, "Reasoning").
"""

from __future__ import annotations

from typing import Optional, Sequence

from pytest_goodput.judge.values import Sessions, as_sessions, metric_value, pooled
from pytest_goodput.schema.registry import REASONING_MEAN
from pytest_goodput.schema.results import Samples

#: Mean reasoning tokens per request changing by more than this (relative) gets a note.
REASONING_CHANGE = 0.10


def mean_reasoning_tokens(runs: Sequence[Samples]) -> Optional[float]:
    """Mean reasoning tokens per completed request over every run; None when a run does not
    keep the column (recorded before it existed) or no request completed."""
    p = pooled(list(runs))
    return metric_value(p, REASONING_MEAN) if p is not None else None


def _tokens(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def reasoning_note(baseline: Sessions | Sequence[Samples], current: Sequence[Samples],
                   threshold: float = REASONING_CHANGE) -> Optional[str]:
    """The note for a change of more than ``threshold`` in mean reasoning tokens per request
    between every baseline run and the current runs; None when there is none to make."""
    b = mean_reasoning_tokens([r for s in as_sessions(baseline) for r in s])
    c = mean_reasoning_tokens(current)
    if b is None or c is None or (b == 0 and c == 0):
        return None
    tail = (f"(reasoning tokens per request {_tokens(b)} → {_tokens(c)}): a workload change, "
            "not only a latency change")
    if b == 0:
        return f"the model reasons now and did not in the baseline {tail}"
    change = c / b - 1.0
    if abs(round(change, 12)) <= threshold:  # 110 / 100 - 1 is 0.10000000000000009
        return None
    return f"the model thinks {abs(change) * 100:.0f} % {'longer' if change > 0 else 'shorter'} {tail}"


__all__ = ["REASONING_CHANGE", "mean_reasoning_tokens", "reasoning_note"]

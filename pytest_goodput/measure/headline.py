"""Headline numbers: the few metrics reports and baseline summaries show for a run or a session."""

from __future__ import annotations

from typing import Optional

from pytest_goodput.measure.degradation import session_degradation, to_summary
from pytest_goodput.schema.registry import (
    CHUNK_KEY_METRICS,
    IMAGE_KEY_METRICS,
    KEY_METRICS,
    REASONING_KEY_METRICS,
)
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Session


def lookup(result: RunResult, path: str) -> Optional[float]:
    """``lookup(result, "metrics.ttft_ms.p99")``: a number from the result, or None."""
    node: object = result
    for part in path.split("."):
        if node is None:
            return None
        node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
    return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def key_metrics(result: RunResult) -> dict[str, Optional[float]]:
    """The registry's key metrics of one run (those the run has); TTFO and the reasoning
    length too when the model reasoned."""
    paths = KEY_METRICS
    if (result.metrics.reasoning_tokens.mean or 0.0) > 0:
        paths += REASONING_KEY_METRICS
    if (result.metrics.images.mean or 0.0) > 0:  # and the images' numbers, when there were any
        paths += IMAGE_KEY_METRICS
    if (result.metrics.tokens_per_chunk.mean or 0.0) > 1:  # and several tokens per chunk
        paths += CHUNK_KEY_METRICS
    values = {p: lookup(result, p) for p in paths}
    return {p: v for p, v in values.items() if v is not None}


def session_metrics(m: Session) -> dict[str, Optional[float]]:
    """A fresh session's headline numbers: its last run's key metrics, a sweep's best
    throughput, a capacity."""
    if m.capacity is not None:
        return {"capacity.requests_per_s": m.capacity.requests_per_s}
    if m.sweep is not None:
        front = m.sweep.frontier
        best = max((p.throughput or 0.0 for p in front), default=None)
        out = {"frontier.max_output_tokens_per_s": best, "frontier.points": float(len(front))}
        sat = m.sweep.saturation
        if sat is not None:  # its step; its load only where it began (None would read as unknown)
            out["sweep.saturation_step"] = float(sat.step)
            if sat.began_at is not None:
                out["sweep.saturation_load"] = float(sat.began_at)
        return out
    # Time slices: the session's degradation within the run, which later sessions are held to.
    return {**key_metrics(m.result), **to_summary(session_degradation([r.slices for r in m.results]))}

"""Conversations and prefix caching, per request and per run (pure; ``docs/metrics.md``).

* ``cached_tokens``: the prompt tokens the engine says it served from its prefix cache,
  ``usage.prompt_tokens_details.cached_tokens`` (vLLM, SGLang, llama.cpp, OpenAI); None when
  the engine does not say, or says something that is not a count within the prompt.
* ``prefix_cache_hit_rate`` of a run: Σ cached / Σ prompt tokens over the completed measured
  requests that report both; None when none does.
* ``ttft_later_ms``: the TTFT of turns 2 and later of multi-turn conversations, the requests
  whose history a prefix cache can serve; ``ttft_ms_by_turn``: TTFT per turn number.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from pytest_goodput.schema.runs.results import RequestRecord


def cached_prompt_tokens(usage: Optional[dict[str, Any]], prompt_tokens: Optional[int]) -> Optional[int]:
    """``usage.prompt_tokens_details.cached_tokens`` if it is a count within the prompt, else None."""
    details = (usage or {}).get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    if prompt_tokens is not None and value > prompt_tokens:
        return None
    return value


def hit_rate(records: Sequence[RequestRecord]) -> tuple[Optional[int], Optional[float]]:
    """(Σ cached tokens, Σ cached / Σ prompt tokens) over completed records reporting both."""
    pairs = [(r.cached_tokens, r.prompt_tokens) for r in records
             if r.ok and r.cached_tokens is not None and r.prompt_tokens]
    if not pairs:
        return None, None
    cached = sum(c for c, _ in pairs)
    return cached, cached / sum(p for _, p in pairs)


def later_turn_ttft(r: RequestRecord) -> Optional[float]:
    """The record's TTFT when it is turn 2 or later of a conversation, else None."""
    return r.ttft_ms if r.turn is not None and r.turn >= 2 else None


def has_turns(records: Sequence[RequestRecord]) -> bool:
    return any(r.turn is not None for r in records)


def by_turn(records: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """Completed records' finite TTFTs grouped by turn number (keys are the numbers as text)."""
    out: dict[int, list[float]] = {}
    for r in records:
        if r.ok and r.turn is not None and r.ttft_ms is not None and math.isfinite(r.ttft_ms):
            out.setdefault(r.turn, []).append(r.ttft_ms)
    return {str(t): out[t] for t in sorted(out)}


__all__ = ["by_turn", "cached_prompt_tokens", "has_turns", "hit_rate", "later_turn_ttft"]

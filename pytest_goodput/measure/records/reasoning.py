"""Reasoning models: how a response's output tokens split into reasoning and answer (pure).

Reasoning models served by vLLM or SGLang stream their reasoning as
``delta.reasoning_content`` (or ``delta.reasoning``) before the answer in ``delta.content``.
The split, as ``docs/metrics.md`` ("Reasoning") defines it:

* ``usage.completion_tokens_details.reasoning_tokens`` when the engine reports it (a count
  of 0 while reasoning text streamed is a placeholder some servers always send: ignored);
* else a tokenizer over the reasoning text;
* else the output tokens shared in proportion to the content chunks that carried reasoning
  (streams) or to the reasoning text's characters (bodies): approximate, flagged ``chunks``.

The answer's tokens are always ``output_tokens - reasoning_tokens``, so the two add up to
the output count the rest of the record uses. The split's source is never more exact than
the output count it divides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

_RANK = {"usage": 0, "tokenizer": 1, "chunks": 2}


@dataclass(frozen=True, slots=True)
class Split:
    """Reasoning and answer tokens of one response, where the split came from, what was wrong."""

    reasoning: int
    answer: int
    source: Optional[str] = None  # None: the response had no reasoning
    problem: Optional[str] = None  # the usage detail is not believable: a malformed response


def _worst(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _details_count(usage: dict[str, Any], output_tokens: int,
                   exact_output: bool) -> tuple[Optional[int], Optional[str]]:
    """``usage.completion_tokens_details.reasoning_tokens`` if believable, else (None, why not).

    Absent or null: (None, None). Above the output count is unbelievable when that count is
    the engine's own ``completion_tokens``; against a lower-bound count it is capped instead.
    """
    details = usage.get("completion_tokens_details")
    if details is None:
        return None, None
    if not isinstance(details, dict):
        return None, f"usage.completion_tokens_details is not an object: {_short(details)}"
    value = details.get("reasoning_tokens")
    if value is None:
        return None, None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None, ("usage.completion_tokens_details.reasoning_tokens is not a count of "
                      f"tokens: {_short(value)}")
    if value > output_tokens:
        if exact_output:
            return None, (f"usage.completion_tokens_details.reasoning_tokens {value} is more than "
                          f"usage.completion_tokens {output_tokens}")
        value = output_tokens
    return value, None


def split_output(
    usage: Optional[dict[str, Any]],
    reasoning_texts: list[str],
    answer_texts: list[str],
    output_tokens: int,
    output_source: str,
    *,
    stream: bool,
    tokenizer: Optional[Callable[[str], int]] = None,
) -> Split:
    """Split ``output_tokens`` (counted from ``output_source``) into reasoning and answer.

    ``reasoning_texts`` and ``answer_texts`` hold each content chunk's reasoning and answer
    text (either may be empty); a non-streamed body is one chunk.
    """
    reasoned = any(reasoning_texts)
    value, problem = _details_count(usage or {}, output_tokens, output_source == "usage")
    if problem is not None:
        return Split(0, output_tokens, None, problem)
    if value is not None and (value > 0 or not reasoned):
        source = _worst("usage", output_source) if value > 0 else None
        return Split(value, output_tokens - value, source)
    if not reasoned or output_tokens <= 0:
        return Split(0, max(output_tokens, 0), None)
    if tokenizer is not None:
        r = min(tokenizer("".join(reasoning_texts)), output_tokens)
        return Split(r, output_tokens - r, _worst("tokenizer", output_source))
    if stream:
        mine = sum(1 for t in reasoning_texts if t)
        total = mine + sum(1 for t in answer_texts if t)
    else:
        mine = len("".join(reasoning_texts))
        total = mine + len("".join(answer_texts))
    # output x mine / total rounded half up (exact integers: hand-checkable)
    r = min(output_tokens, (2 * output_tokens * mine + total) // (2 * total))
    return Split(r, output_tokens - r, "chunks")


def phase_tpot_ms(times: list[float], texts: list[str], tokens: int) -> Optional[float]:
    """TPOT of one phase (reasoning or answer) of a stream, ms: (time of its last chunk -
    time of its first chunk) / (its tokens - 1), over the content chunks carrying that
    phase's text (a chunk carrying both phases counts in both). None below two tokens or
    when they all arrived at one instant, as for the whole output's TPOT."""
    mine = [t for t, text in zip(times, texts) if text]
    if tokens < 2 or len(mine) < 1 or mine[-1] == mine[0]:
        return None
    return (mine[-1] - mine[0]) * 1000.0 / (tokens - 1)


__all__ = ["Split", "phase_tpot_ms", "split_output"]

"""A response checked against itself, so an engine cannot look fast by what it claims (pure).

``docs/metrics.md`` ("Responses cross-checked") defines each rule:

* **how it ended**: an ``error`` object in any event fails the request (``engine_error``, its
  message kept, redacted); a ``finish_reason`` other than ``stop``, ``length``, ``tool_calls``
  or ``function_call`` fails it (``finish_reason``: ``abort``, ``cancelled``, ``error``,
  ``content_filter``… the engine cut the output); a stream that ended with no ``data: [DONE]``,
  no ``finish_reason`` and no ``usage`` object (which servers send only after the last token)
  was cut off (``truncated``);
* **the usage count**: ``usage.completion_tokens`` that is not a positive integer, or above
  ``max(USAGE_TOKEN_FACTOR x requested, chunks)``, is a broken response (``malformed_stream``);
  one that disagrees with what was streamed beyond what chunking explains — more tokens than
  the streamed text could hold, or fewer than the content chunks that carry visible text — is
  *not believed*: the request's tokens come from the stream (the tokenizer when given, else
  the chunks) and the run says so (``measure.records.checks_note``).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from pytest_goodput.measure.records.response import ParsedResponse

#: ``usage.completion_tokens`` above max(this x requested tokens, content chunks) is not believed.
USAGE_TOKEN_FACTOR = 4
#: Finish reasons of an output the engine completed: its own end, the length limit, or the
#: chat API's tool and function calls (a completed turn that hands over to a tool).
COMPLETED_FINISH = ("stop", "length", "tool_calls", "function_call")

Tokenizer = Callable[[str], int]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def ending_failure(parsed: ParsedResponse, stream: bool) -> Optional[tuple[str, str]]:
    """(failure kind, detail) when the response says it did not end as a completed output."""
    chunks = len(parsed.times)
    if parsed.error is not None:
        return "engine_error", parsed.error
    reason = parsed.finish_reason
    if reason is not None and reason not in COMPLETED_FINISH:
        return "finish_reason", (f"finish_reason {reason!r} after {chunks} content chunk(s): the "
                                 f"engine ended the output itself (completed: {', '.join(COMPLETED_FINISH)})")
    if stream and not parsed.done and reason is None and parsed.usage is None and parsed.problem is None:
        return "truncated", (f"the stream ended after {chunks} content chunk(s) with no data: "
                             "[DONE], no finish_reason and no usage")
    return None


def usage_problem(value: Any, requested: int, chunks: int) -> tuple[Optional[int], Optional[str]]:
    """``usage.completion_tokens`` as an integer, or (None, why the response is malformed)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        return None, f"usage.completion_tokens is not an integer: {_short(value)}"
    if value <= 0:
        return None, f"usage.completion_tokens is {value} but {chunks} content chunk(s) arrived"
    most = max(USAGE_TOKEN_FACTOR * requested, chunks)
    if value > most:
        return None, (
            f"usage.completion_tokens {value} is implausible: {requested} requested, {chunks} "
            f"content chunk(s) streamed (at most {most} accepted)"
        )
    return value, None


def _hidden_reasoning(parsed: ParsedResponse) -> int:
    """Reasoning tokens the engine counts but did not stream (no reasoning text arrived)."""
    if any(parsed.reasoning):
        return 0
    details = (parsed.usage or {}).get("completion_tokens_details")
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_disagreement(value: int, parsed: ParsedResponse, visible_chunks: int,
                       tokenizer: Optional[Tokenizer]) -> Optional[str]:
    """Why ``value`` (a plausible ``usage.completion_tokens``) disagrees with the stream, or None.

    At most: the streamed text's UTF-8 bytes (a token decodes to at least one byte), or with a
    tokenizer its count plus 1 + count // 20 (re-tokenizing decoded text may split differently),
    plus 1 either way (an end-of-sequence token counted, never streamed), plus reasoning tokens
    the usage reports when no reasoning text streamed. At least: the content chunks that carry
    visible text (each carries a token; a leading whitespace-only chunk may be a flush).
    """
    text = "".join(parsed.texts)
    hidden = _hidden_reasoning(parsed)
    if tokenizer is not None:
        counted = tokenizer(text)
        most, what = counted + 1 + counted // 20 + hidden, f"the tokenizer counts {counted} in the streamed text"
    else:
        size = len(text.encode("utf-8"))
        most, what = size + 1 + hidden, f"the streamed text is {size} bytes"
    if hidden:
        what += f", {hidden} reasoning token(s) not streamed"
    if value > most:
        return f"usage.completion_tokens {value} is more than the stream could hold ({what}: at most {most})"
    if value < visible_chunks:
        return f"usage.completion_tokens {value} is fewer than the {visible_chunks} content chunks with text"
    return None


__all__ = ["COMPLETED_FINISH", "USAGE_TOKEN_FACTOR", "ending_failure", "usage_disagreement", "usage_problem"]

"""Raw exchange -> :class:`RequestRecord`: every per-request number, computed after the run.

Pure: no I/O. Definitions follow ``docs/metrics.md``:

* an event's time is the time of the read that completed it;
* a *content chunk* carries non-empty ``choices[].text`` (completions) or
  ``delta.content`` / ``delta.reasoning_content`` / ``delta.reasoning`` (chat); role-only
  and empty chunks do not count, so TTFT is never a role-only first chunk;
* output tokens come from the last ``usage`` object, else a tokenizer over the text,
  else the number of content chunks (``token_count_source`` says which); a usage count
  that is not a positive integer, or above ``max(USAGE_TOKEN_FACTOR x requested, chunks)``,
  makes the stream malformed (it would also size the ITL list);
* TTFT and E2E count from ``sent_at``, or from ``scheduled_at`` for open-loop plans;
  TTFO (time to first output) counts from the same origin to the first *answer* chunk:
  reasoning text (``reasoning_content`` / ``reasoning``) is a content chunk for TTFT but
  not an answer; reasoning and answer tokens split the output count
  (:mod:`pytest_goodput.measure.records.reasoning`);
* TPOT = (t_last - t_first) / (N - 1) for N >= 2, undefined (``tokens_at_once``) when
  all N tokens arrived at one instant; reasoning and answer TPOT apply the same rule to each
  phase's chunks and tokens (:func:`pytest_goodput.measure.records.reasoning.phase_tpot_ms`);
* ITL holds one value per token after the first content chunk: each gap between
  content chunks is divided evenly over the tokens the later chunk carries (see
  :func:`itl_ms`). When the first chunk carries one token, ``mean(itl) == TPOT``.

A failed request keeps its timestamps, token counts and send lag for diagnosis, but its
``ttft_ms``/``tpot_ms``/``e2e_ms`` are ``None`` and ``itl_ms`` is empty, so no latency
statistic can mistake a broken request for a fast one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from pytest_goodput.measure.records.images import image_fields
from pytest_goodput.measure.records.prefix_cache import cached_prompt_tokens
from pytest_goodput.measure.records.reasoning import phase_tpot_ms, split_output
from pytest_goodput.measure.records.sse import SSELimitError, SSEParser
from pytest_goodput.measure.records.tokens import token_counter
from pytest_goodput.schema.runs.results import RequestRecord

if TYPE_CHECKING:
    from pytest_goodput.measure.records.exchange import RawExchange

Tokenizer = Callable[[str], int]
_EXCERPT = 200
_SPACES = re.compile(r"\s+")
#: ``usage.completion_tokens`` above max(this x requested tokens, content chunks) is not believed.
USAGE_TOKEN_FACTOR = 4


@dataclass(slots=True)
class ParsedResponse:
    """The content-bearing part of a response: what the metrics are computed from."""

    response_id: Optional[str] = None
    times: list[float] = field(default_factory=list)  # one per content chunk
    texts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)  # each chunk's reasoning text
    answers: list[str] = field(default_factory=list)  # each chunk's answer text
    usage: Optional[dict[str, Any]] = None
    problem: Optional[str] = None  # first reason the response is malformed


def _excerpt(text: str, limit: int = _EXCERPT) -> str:
    text = _SPACES.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _choice_parts(choice: Any) -> tuple[str, str]:
    """(reasoning text, answer text) of one choice of a chunk or body."""
    if not isinstance(choice, dict):
        return "", ""
    text = choice.get("text")
    if isinstance(text, str) and text:
        return "", text
    reasoning = answer = ""
    for key in ("delta", "message"):
        body = choice.get(key)
        if isinstance(body, dict):
            # vLLM sends the same reasoning text under both names while it renames the
            # field: take one of them, never both
            for name in ("reasoning_content", "reasoning"):
                value = body.get(name)
                if isinstance(value, str) and value:
                    reasoning += value
                    break
            value = body.get("content")
            if isinstance(value, str):
                answer += value
    return reasoning, answer


def _take_event(obj: Any, t: float, out: ParsedResponse) -> Optional[str]:
    """Fold one decoded JSON object into ``out``; return a problem description if malformed."""
    if not isinstance(obj, dict):
        return f"event is not a JSON object: {_excerpt(json.dumps(obj), 80)}"
    if out.response_id is None and isinstance(obj.get("id"), str):
        out.response_id = obj["id"]
    usage = obj.get("usage")
    if isinstance(usage, dict):
        out.usage = usage
    choices = obj.get("choices")
    if not isinstance(choices, list):
        if "error" in obj:
            err = obj["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            return f"error in response: {_excerpt(str(msg))}"
        if isinstance(usage, dict):
            return None  # a usage-only chunk
        return f"not an OpenAI completion object: {_excerpt(json.dumps(obj), 80)}"
    parts = [_choice_parts(c) for c in choices]
    reasoning = "".join(r for r, _ in parts)
    answer = "".join(a for _, a in parts)
    if reasoning or answer:
        out.times.append(t)
        out.texts.append(reasoning + answer)
        out.reasoning.append(reasoning)
        out.answers.append(answer)
    return None


def parse_stream(reads: list[tuple[float, bytes]]) -> ParsedResponse:
    """Parse an SSE body; stops at the first malformed event."""
    out = ParsedResponse()
    parser = SSEParser()
    events = 0
    last_t = 0.0
    try:
        for t, data in reads:
            last_t = t
            for payload in parser.feed(data):
                events += 1
                if _stream_payload(payload, t, out):
                    return out
        for payload in parser.finish():
            events += 1
            if _stream_payload(payload, last_t, out):
                return out
    except SSELimitError as exc:
        out.problem = str(exc)
        return out
    if events == 0:
        body = b"".join(d for _, d in reads)
        shown = _excerpt(body[:400].decode("utf-8", "replace"))
        out.problem = f"expected an SSE stream, got: {shown!r}" if body else "empty response body"
    return out


def _stream_payload(payload: str, t: float, out: ParsedResponse) -> bool:
    """Handle one event payload; True when the stream turned out malformed."""
    stripped = payload.strip()
    if stripped == "[DONE]":
        return False
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        out.problem = f"non-JSON event: {_excerpt(stripped, 80)!r}"
        return True
    out.problem = _take_event(obj, t, out)
    return out.problem is not None


def parse_body(reads: list[tuple[float, bytes]], t: float) -> ParsedResponse:
    """Parse a non-streamed JSON response; its content counts as one chunk at time ``t``."""
    out = ParsedResponse()
    body = b"".join(d for _, d in reads)
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        shown = _excerpt(body[:400].decode("utf-8", "replace"))
        out.problem = f"response is not JSON: {shown!r}" if body else "empty response body"
        return out
    out.problem = _take_event(obj, t, out)
    return out


def http_error_detail(status: int, reads: list[tuple[float, bytes]]) -> str:
    """``HTTP <status>: <message>`` from an error body (OpenAI ``error.message`` if present)."""
    body = b"".join(d for _, d in reads)[:4096].decode("utf-8", "replace")
    msg = body
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            found = err.get("message") or err.get("detail")
            msg = str(found) if found else json.dumps(err)
        else:
            msg = str(err)
    return f"HTTP {status}: {_excerpt(msg)}" if msg.strip() else f"HTTP {status}"


def itl_ms(
    times: list[float], texts: list[str], output_tokens: int, tokenizer: Tokenizer | None = None
) -> list[float]:
    """Inter-token latencies (ms), one per token that arrived after the first content chunk.

    The gap before chunk j is split evenly over the k_j tokens chunk j carries:
    k_j = 1 when there are as many tokens as chunks; else the tokenizer's count of the
    chunk's text; else the N - 1 tokens after the first are spread over the C - 1 later
    chunks with integer counts k_j = floor(j(N-1)/(C-1)) - floor((j-1)(N-1)/(C-1)),
    which differ by at most one and sum exactly to N - 1. A chunk credited with zero tokens
    passes its gap on to the next chunk, so the values always sum to t_last - t_first in
    the first two cases (mean == TPOT when the first chunk carries one token).
    """
    chunks = len(times)
    if chunks < 2 or output_tokens < 2:
        return []
    gaps = [(times[j] - times[j - 1]) * 1000.0 for j in range(1, chunks)]
    if output_tokens == chunks:
        return gaps
    if tokenizer is not None:
        counts = [tokenizer(text) for text in texts[1:]]
    else:
        total, span = output_tokens - 1, chunks - 1
        counts = [(j * total) // span - ((j - 1) * total) // span for j in range(1, chunks)]
    out: list[float] = []
    carry = 0.0
    for gap, k in zip(gaps, counts):
        gap += carry
        if k <= 0:
            carry = gap
            continue
        carry = 0.0
        out.extend([gap / k] * k)
    return out


def _usage_count(value: Any, requested: int, chunks: int) -> tuple[Optional[int], Optional[str]]:
    """``usage.completion_tokens`` if it is believable, else (None, why not)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        return None, f"usage.completion_tokens is not an integer: {_excerpt(repr(value), 40)}"
    if value <= 0:
        return None, f"usage.completion_tokens is {value} but {chunks} content chunk(s) arrived"
    most = max(USAGE_TOKEN_FACTOR * requested, chunks)
    if value > most:
        return None, (
            f"usage.completion_tokens {value} is implausible: {requested} requested, {chunks} "
            f"content chunk(s) streamed (at most {most} accepted)"
        )
    return value, None


def _count_tokens(
    parsed: ParsedResponse, stream: bool, tokenizer: Tokenizer | None, requested: int
) -> tuple[int, str, bool, Optional[str]]:
    """(output tokens, source, exact_enough_for_short_output_check, problem with usage)."""
    usage = parsed.usage or {}
    problem = None
    if usage.get("completion_tokens") is not None and parsed.times:
        n, problem = _usage_count(usage["completion_tokens"], requested, len(parsed.times))
        if n is not None:
            return n, "usage", True, None
    if tokenizer is not None:
        return tokenizer("".join(parsed.texts)), "tokenizer", True, problem
    if stream:
        # A chunk may carry several tokens (stream intervals, speculative decoding): the
        # count is a lower bound, so it cannot prove an output was short.
        return len(parsed.times), "chunks", False, problem
    # one JSON body without usage: ~4 characters per token, too rough to fail a request on
    return max(1, round(len("".join(parsed.texts)) / 4)), "chunks", False, problem


def _ms(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else (a - b) * 1000.0


def to_record(
    ex: "RawExchange",
    *,
    stream: bool,
    api: str,
    tokenizer: Any = None,
    min_output_tokens: int | None = None,
    from_schedule: bool | None = None,
) -> RequestRecord:
    """Turn one raw exchange into a record; failures are recorded, never dropped.

    ``from_schedule``: TTFT and E2E count from the plan's ``scheduled_at`` instead of
    ``sent_at`` (open loop; the default is the plan's own ``open_loop`` flag). ``api`` is
    accepted for symmetry with the client: both completion and chat chunk shapes are
    recognised whichever endpoint was called.
    """
    del api
    tokenizer = token_counter(tokenizer)  # a counting function, or an object with encode()
    plan = ex.plan
    if from_schedule is None:
        from_schedule = plan.open_loop
    rec: dict[str, Any] = dict(
        index=plan.index,
        warmup=plan.warmup,
        scheduled_at=plan.scheduled_at,
        sent_at=ex.sent_at,
        end_at=ex.end_at,
        http_status=ex.status,
        requested_output_tokens=plan.max_tokens,
        prompt_tokens=plan.prompt_tokens,
        send_lag_ms=_ms(ex.sent_at, plan.scheduled_at),
        latency_from="scheduled_at" if from_schedule else "sent_at",
        retries=ex.retries,
        conversation=plan.conversation,
        turn=plan.turn,
    )
    status = ex.status
    if status is not None and status >= 400 and ex.error_kind is None:
        return RequestRecord(
            ok=False, error_kind="http_status", error_detail=http_error_detail(status, ex.reads), **rec
        )
    if stream:
        parsed = parse_stream(ex.reads)
    else:
        t_body = ex.end_at if ex.end_at is not None else (ex.reads[-1][0] if ex.reads else 0.0)
        parsed = parse_body(ex.reads, t_body)
    rec["response_id"] = parsed.response_id
    n, source, exact, usage_problem = _count_tokens(parsed, stream, tokenizer, plan.max_tokens)
    split = split_output(parsed.usage, parsed.reasoning, parsed.answers, n, source,
                         stream=stream, tokenizer=tokenizer)
    first_answer = next((t for t, a in zip(parsed.times, parsed.answers) if a), None)
    if parsed.times:
        rec.update(
            output_tokens=n,
            token_count_source=source,
            content_chunks=len(parsed.times),
            first_token_at=parsed.times[0],
            last_token_at=parsed.times[-1],
            reasoning_tokens=split.reasoning,
            answer_tokens=split.answer,
            reasoning_token_source=split.source,
            first_answer_at=first_answer,
        )
    prompt = (parsed.usage or {}).get("prompt_tokens")
    reported = isinstance(prompt, int) and not isinstance(prompt, bool) and prompt >= 0
    if reported:
        rec["prompt_tokens"] = prompt
    rec["cached_tokens"] = cached_prompt_tokens(parsed.usage, rec["prompt_tokens"])
    rec.update(image_fields(plan, ex.request_bytes, prompt if reported else None))

    kind, detail = ex.error_kind, ex.error_detail
    if kind is None and status is None:
        kind, detail = "transport", "no HTTP response"
    if kind is None and parsed.problem is not None:
        kind, detail = "malformed_stream", parsed.problem
    if kind is None and not parsed.times:
        kind, detail = "malformed_stream", "response carried no generated content"
    if kind is None and usage_problem is not None:
        kind, detail = "malformed_stream", usage_problem
    if kind is None and split.problem is not None:
        kind, detail = "malformed_stream", split.problem
    if kind is None and min_output_tokens is not None and exact and n < min_output_tokens:
        kind, detail = "short_output", f"{n} output tokens ({source}), {min_output_tokens} required"
    if kind is not None:
        return RequestRecord(ok=False, error_kind=kind, error_detail=detail, **rec)

    first, last = parsed.times[0], parsed.times[-1]
    if not stream:
        first = last = rec["first_token_at"] = rec["last_token_at"] = t_body
        if first_answer is not None:
            first_answer = rec["first_answer_at"] = t_body
    # n >= 2 tokens that all arrived at one instant (one chunk, one read, or a whole body):
    # no time passed between them, so TPOT and ITL are undefined rather than zero
    at_once = n >= 2 and last == first
    origin = plan.scheduled_at if from_schedule else ex.sent_at
    rec.update(
        ttft_ms=_ms(first, origin),
        ttfo_ms=_ms(first_answer, origin),  # None: the reasoning used up the output, no answer
        e2e_ms=_ms(ex.end_at, origin),
        ttft_sent_ms=_ms(first, ex.sent_at),
        e2e_sent_ms=_ms(ex.end_at, ex.sent_at),
        tpot_ms=(last - first) * 1000.0 / (n - 1) if stream and n >= 2 and not at_once else None,
        itl_ms=itl_ms(parsed.times, parsed.texts, n, tokenizer) if stream and not at_once else [],
        tokens_at_once=at_once,
        tokens_per_chunk=n / len(parsed.times) if stream and source != "chunks" else None,
    )
    if stream and split.source is not None:
        rec.update(
            reasoning_tpot_ms=phase_tpot_ms(parsed.times, parsed.reasoning, split.reasoning),
            answer_tpot_ms=phase_tpot_ms(parsed.times, parsed.answers, split.answer),
        )
    elif stream:
        rec["answer_tpot_ms"] = rec["tpot_ms"]  # no reasoning: the whole output is the answer
    return RequestRecord(ok=True, **rec)


__all__ = [
    "USAGE_TOKEN_FACTOR",
    "ParsedResponse",
    "http_error_detail",
    "itl_ms",
    "parse_body",
    "parse_stream",
    "to_record",
]

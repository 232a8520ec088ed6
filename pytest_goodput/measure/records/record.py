"""Raw exchange -> :class:`RequestRecord`: every per-request number, computed after the run.

Pure: no I/O. Definitions follow ``docs/metrics.md``:

* an event's time is the time of the read that completed it; a *content chunk* carries
  generated text (:mod:`pytest_goodput.measure.records.response`);
* the response is cross-checked against itself first (:mod:`~pytest_goodput.measure.records.crosscheck`):
  an error event, a finish reason other than a completed output's, or a stream cut off
  before ``[DONE]`` or a finish reason fails the request; a usage count the stream cannot
  explain is not believed;
* output tokens come from the last believed ``usage`` object, else a tokenizer over the
  text, else the number of content chunks (``token_count_source`` says which);
* the *first output chunk* is the first content chunk whose text is not whitespace only:
  a leading whitespace-only chunk (a flushed ``" "`` or ``"\n"``) neither starts TTFT nor
  TTFO, and the tokens it carried (the tokenizer's count; else one each, none when the usage
  shows they were not counted) are left out of TPOT and ITL;
* TTFT and E2E count from ``sent_at``, or from ``scheduled_at`` for open-loop plans;
  TTFO (time to first output) counts from the same origin to the first *answer* chunk with
  visible text: reasoning text is a content chunk for TTFT but not an answer; reasoning and
  answer tokens split the output count (:mod:`pytest_goodput.measure.records.reasoning`);
* TPOT = (t_last - t_first) / (N' - 1) for N' >= 2, t_first the first output chunk's time and
  N' the output tokens less the leading whitespace chunks' tokens, undefined
  (``tokens_at_once``) when all N' tokens arrived at one instant; reasoning and answer TPOT
  apply the same rule to each phase's chunks and tokens;
* ITL holds one value per token after the first output chunk: each gap between content
  chunks is divided evenly over the tokens the later chunk carries (see :func:`itl_ms`).
  When the first output chunk carries one token, ``mean(itl) == TPOT``.

A failed request keeps its timestamps, token counts and send lag for diagnosis, but its
``ttft_ms``/``tpot_ms``/``e2e_ms`` are ``None`` and ``itl_ms`` is empty, so no latency
statistic can mistake a broken request for a fast one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from pytest_goodput.measure.records.crosscheck import (
    USAGE_TOKEN_FACTOR,
    ending_failure,
    usage_disagreement,
    usage_problem,
)
from pytest_goodput.measure.records.images import image_fields
from pytest_goodput.measure.records.prefix_cache import cached_prompt_tokens
from pytest_goodput.measure.records.reasoning import phase_tpot_ms, split_output
from pytest_goodput.measure.records.response import (
    ParsedResponse,
    http_error_detail,
    parse_body,
    parse_stream,
)
from pytest_goodput.measure.records.tokens import token_counter
from pytest_goodput.measure.outputs.agreement import output_print
from pytest_goodput.schema.runs.engine_clock import EngineTiming
from pytest_goodput.schema.runs.results import RequestRecord

if TYPE_CHECKING:
    from pytest_goodput.measure.records.exchange import RawExchange

Tokenizer = Callable[[str], int]


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


def _count_tokens(
    parsed: ParsedResponse, stream: bool, tokenizer: Tokenizer | None, requested: int,
    visible: int, trust_usage: bool,
) -> tuple[int, str, bool, Optional[str], Optional[str]]:
    """(output tokens, source, exact enough for the short-output check, why the usage makes the
    response malformed, why the usage was not believed)."""
    usage = parsed.usage or {}
    problem = disagrees = None
    if usage.get("completion_tokens") is not None and parsed.times:
        n, problem = usage_problem(usage["completion_tokens"], requested, len(parsed.times))
        if n is not None:
            disagrees = usage_disagreement(n, parsed, visible, tokenizer)
            if disagrees is None and trust_usage:
                return n, "usage", True, None, None
    if tokenizer is not None:
        return tokenizer("".join(parsed.texts)), "tokenizer", True, problem, disagrees
    if stream:
        # A chunk may carry several tokens (stream intervals, speculative decoding): the
        # count is a lower bound, so it cannot prove an output was short.
        return len(parsed.times), "chunks", False, problem, disagrees
    # one JSON body without usage: ~4 characters per token, too rough to fail a request on
    return max(1, round(len("".join(parsed.texts)) / 4)), "chunks", False, problem, disagrees


def _leading_blank(texts: list[str]) -> int:
    """How many content chunks before the first one with visible (not whitespace-only) text."""
    return next((i for i, t in enumerate(texts) if t.strip()), 0)


def _blank_tokens(parsed: ParsedResponse, lead: int, n: int, source: str,
                  tokenizer: Tokenizer | None) -> list[int]:
    """Tokens each leading whitespace-only chunk carried: the tokenizer's count; else one
    each, except those the usage count shows were not counted (n below one per chunk)."""
    if tokenizer is not None:
        return [tokenizer(t) for t in parsed.texts[:lead]]
    counted = lead if source != "usage" else max(0, min(lead, n - (len(parsed.times) - lead)))
    return [1] * counted + [0] * (lead - counted)


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
    trust_usage: bool = True,
    fingerprint: bool = False,
) -> RequestRecord:
    """Turn one raw exchange into a record; failures are recorded, never dropped.

    ``from_schedule``: TTFT and E2E count from the plan's ``scheduled_at`` instead of
    ``sent_at`` (open loop; the default is the plan's own ``open_loop`` flag). ``api`` is
    accepted for symmetry with the client: both completion and chat chunk shapes are
    recognised whichever endpoint was called. ``trust_usage=False``: tokens come from the
    stream even where the usage agrees (the run's usage disagreed elsewhere: ``records_of``).
    ``fingerprint``: keep the output's fingerprint (the output guard, ``measure/outputs``).
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
        worker=plan.worker,
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
    lead = _leading_blank(parsed.texts) if stream else 0
    n, source, exact, bad_usage, disagrees = _count_tokens(
        parsed, stream, tokenizer, plan.max_tokens, len(parsed.times) - lead, trust_usage)
    split = split_output(parsed.usage, parsed.reasoning, parsed.answers, n, source,
                         stream=stream, tokenizer=tokenizer)
    first_answer = next((t for t, a in zip(parsed.times, parsed.answers) if a.strip()),
                        next((t for t, a in zip(parsed.times, parsed.answers) if a), None))
    if parsed.times:
        rec.update(
            output_tokens=n,
            token_count_source=source,
            content_chunks=len(parsed.times),
            first_token_at=parsed.times[lead],
            last_token_at=parsed.times[-1],
            reasoning_tokens=split.reasoning,
            answer_tokens=split.answer,
            reasoning_token_source=split.source,
            first_answer_at=first_answer,
            usage_disagreement=disagrees,
            leading_blank_chunks=lead,
            output_print=output_print("".join(parsed.texts)) if fingerprint else None,
        )
    prompt = (parsed.usage or {}).get("prompt_tokens")
    reported = isinstance(prompt, int) and not isinstance(prompt, bool) and prompt >= 0
    if reported:
        rec["prompt_tokens"] = prompt
    rec["cached_tokens"] = cached_prompt_tokens(parsed.usage, rec["prompt_tokens"])
    rec["engine"] = EngineTiming.from_metrics(parsed.engine_metrics)
    rec.update(image_fields(plan.images, plan.prompt_tokens, ex.request_bytes, prompt if reported else None))

    kind, detail = ex.error_kind, ex.error_detail
    if kind is None and status is None:
        kind, detail = "transport", "no HTTP response"
    if kind is None:
        kind, detail = ending_failure(parsed, stream) or (None, None)
    if kind is None and parsed.problem is not None:
        kind, detail = "malformed_stream", parsed.problem
    if kind is None and not parsed.times:
        kind, detail = "malformed_stream", "response carried no generated content"
    if kind is None and bad_usage is not None:
        kind, detail = "malformed_stream", bad_usage
    if kind is None and split.problem is not None:
        kind, detail = "malformed_stream", split.problem
    if kind is None and min_output_tokens is not None and exact and n < min_output_tokens:
        kind, detail = "short_output", f"{n} output tokens ({source}), {min_output_tokens} required"
    if kind is not None:
        return RequestRecord(ok=False, error_kind=kind, error_detail=detail, **rec)

    first, last = parsed.times[lead], parsed.times[-1]
    if not stream:
        first = last = rec["first_token_at"] = rec["last_token_at"] = t_body
        if first_answer is not None:
            first_answer = rec["first_answer_at"] = t_body
    blank = _blank_tokens(parsed, lead, n, source, tokenizer)
    visible_n = n - sum(blank)  # the tokens from the first output chunk on
    # n >= 2 tokens that all arrived at one instant (one chunk, one read, or a whole body):
    # no time passed between them, so TPOT and ITL are undefined rather than zero
    at_once = visible_n >= 2 and last == first
    times, texts = parsed.times[lead:], parsed.texts[lead:]
    origin = plan.scheduled_at if from_schedule else ex.sent_at
    rec.update(
        ttft_ms=_ms(first, origin),
        ttfo_ms=_ms(first_answer, origin),  # None: the reasoning used up the output, no answer
        e2e_ms=_ms(ex.end_at, origin),
        ttft_sent_ms=_ms(first, ex.sent_at),
        e2e_sent_ms=_ms(ex.end_at, ex.sent_at),
        tpot_ms=((last - first) * 1000.0 / (visible_n - 1)
                 if stream and visible_n >= 2 and not at_once else None),
        itl_ms=itl_ms(times, texts, visible_n, tokenizer) if stream and not at_once else [],
        tokens_at_once=at_once,
        tokens_per_chunk=n / len(parsed.times) if stream and source != "chunks" else None,
    )
    if stream and split.source is not None:
        r_blank = sum(k for k, text in zip(blank, parsed.reasoning) if text)
        rec.update(
            reasoning_tpot_ms=phase_tpot_ms(times, parsed.reasoning[lead:], split.reasoning - r_blank),
            answer_tpot_ms=phase_tpot_ms(times, parsed.answers[lead:],
                                         split.answer - (sum(blank) - r_blank)),
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

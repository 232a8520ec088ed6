"""to_record: per-request numbers against hand-computed values, and every failure kind."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.records.record import itl_ms, to_record
from pytest_goodput.measure.run_records import records_of, response_notes
from pytest_goodput.schema.scenario.spec import build_spec

T0 = 100.0  # sent_at; all other times are T0 + milliseconds / 1000


def at(ms: float) -> float:
    return T0 + ms / 1000.0


def ev(obj: Any) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def cmpl(text: str, rid: str = "cmpl-1", **extra: Any) -> dict:
    return {"id": rid, "object": "text_completion", "choices": [{"index": 0, "text": text}], **extra}


def chat(delta: dict, **extra: Any) -> dict:
    return {"id": "chat-1", "choices": [{"index": 0, "delta": delta}], **extra}


def usage(n: int, prompt: int = 11) -> dict:
    return {"id": "cmpl-1", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": n}}


def exchange(reads: list[tuple[float, bytes]], *, status: int | None = 200, end: float | None = None,
             max_tokens: int = 16, error_kind: str | None = None, error_detail: str | None = None,
             scheduled_ms: float = -2.0) -> RawExchange:
    plan = RequestPlan(index=3, prompt="p", prompt_tokens=9, max_tokens=max_tokens,
                       scheduled_at=at(scheduled_ms), warmup=True)
    if end is None:
        end = reads[-1][0] + 0.001 if reads else at(1)
    return RawExchange(plan, T0, end, status, reads, error_kind, error_detail)


def stream(*events: tuple[float, Any], done: bool = True) -> list[tuple[float, bytes]]:
    """One read per event at the given millisecond offsets; ``data: [DONE]`` in the last read."""
    reads = [(at(ms), ev(obj)) for ms, obj in events]
    if done and reads and events[-1][1] != "[DONE]":
        reads[-1] = (reads[-1][0], reads[-1][1] + ev("[DONE]"))
    return reads


def test_three_tokens_one_per_chunk_with_usage() -> None:
    reads = stream((100, cmpl("a")), (120, cmpl("b")), (150, cmpl("c")), (151, usage(3)), (152, "[DONE]"))
    r = to_record(exchange(reads, end=at(160)), stream=True, api="completions")
    assert r.ok and r.error_kind is None
    assert (r.index, r.warmup, r.response_id, r.http_status) == (3, True, "cmpl-1", 200)
    assert (r.output_tokens, r.token_count_source, r.content_chunks) == (3, "usage", 3)
    assert r.prompt_tokens == 11 and r.requested_output_tokens == 16
    assert r.ttft_ms == pytest.approx(100.0)
    assert r.tpot_ms == pytest.approx(25.0)  # (150 - 100) / (3 - 1)
    assert r.itl_ms == pytest.approx([20.0, 30.0])
    assert r.e2e_ms == pytest.approx(160.0)
    assert r.send_lag_ms == pytest.approx(2.0)
    assert (r.first_token_at, r.last_token_at) == (at(100), at(150))


def test_one_token_has_no_tpot() -> None:
    r = to_record(exchange(stream((40, cmpl("a")), (41, usage(1)))), stream=True, api="completions")
    assert r.ok and r.output_tokens == 1
    assert r.ttft_ms == pytest.approx(40.0)
    assert r.tpot_ms is None and r.itl_ms == []


def test_two_tokens_tpot_is_the_gap() -> None:
    r = to_record(exchange(stream((40, cmpl("a")), (57, cmpl("b")), (58, usage(2)))), stream=True, api="completions")
    assert r.tpot_ms == pytest.approx(17.0) and r.itl_ms == pytest.approx([17.0])


def test_role_only_first_chunk_does_not_count_and_reasoning_does() -> None:
    reads = stream(
        (1, chat({"role": "assistant", "content": ""})),
        (2, chat({"content": None})),
        (30, chat({"reasoning_content": "think"})),
        (45, chat({"content": "x"})),
        (46, chat({}, usage={"prompt_tokens": 4, "completion_tokens": 2})),
    )
    r = to_record(exchange(reads), stream=True, api="chat")
    assert r.ok and r.response_id == "chat-1"
    assert r.ttft_ms == pytest.approx(30.0)
    assert r.content_chunks == 2 and r.output_tokens == 2 and r.prompt_tokens == 4
    assert r.tpot_ms == pytest.approx(15.0)


def test_usage_in_the_finish_chunk_llamacpp_style() -> None:
    last = chat({"content": " b c d e"}, usage={"prompt_tokens": 3, "completion_tokens": 5})
    r = to_record(exchange(stream((10, chat({"content": "a"})), (30, last))), stream=True, api="chat")
    assert (r.output_tokens, r.token_count_source, r.content_chunks) == (5, "usage", 2)
    # 4 tokens after the first chunk all arrived with the second: a 20 ms gap split 4 ways
    assert r.tpot_ms == pytest.approx(5.0) and r.itl_ms == pytest.approx([5.0] * 4)


def test_itl_even_spread_over_multi_token_chunks() -> None:
    reads = stream((100, cmpl("a b c")), (130, cmpl("d e f")), (190, cmpl("g")), (191, usage(7)))
    r = to_record(exchange(reads), stream=True, api="completions")
    # N-1 = 6 tokens over 2 later chunks -> 3 each: 30/3, 60/3
    assert r.itl_ms == pytest.approx([10.0] * 3 + [20.0] * 3)
    assert r.tpot_ms == pytest.approx(15.0) == pytest.approx(sum(r.itl_ms) / len(r.itl_ms))


def test_itl_uneven_spread_uses_integer_cumulative_counts() -> None:
    times = [at(0), at(30), at(90)]
    # N=6: 5 tokens over 2 chunks -> floor(5/2)=2 then 3
    assert itl_ms(times, ["", "", ""], 6) == pytest.approx([15.0, 15.0, 20.0, 20.0, 20.0])


def test_itl_fewer_tokens_than_chunks_carries_gaps_forward() -> None:
    times = [at(0), at(10), at(30), at(60)]
    # N=3: 2 tokens over 3 chunks -> counts 0, 1, 1; the 10 ms gap joins the next one
    out = itl_ms(times, [""] * 4, 3)
    assert out == pytest.approx([30.0, 30.0])
    assert sum(out) / len(out) == pytest.approx(60.0 / 2)  # == TPOT


def test_tokenizer_counts_text_and_divides_each_chunk() -> None:
    words = lambda s: len(s.split())  # noqa: E731
    reads = stream((0, cmpl(" a b")), (40, cmpl(" c")), (100, cmpl(" d e f")))
    r = to_record(exchange(reads), stream=True, api="completions", tokenizer=words)
    assert (r.output_tokens, r.token_count_source) == (6, "tokenizer")
    assert r.itl_ms == pytest.approx([40.0, 20.0, 20.0, 20.0])  # first chunk's 2nd token has no gap
    assert r.tpot_ms == pytest.approx(20.0)


def test_no_usage_no_tokenizer_counts_chunks() -> None:
    reads = stream((5, cmpl("a")), (15, cmpl("b")), (35, cmpl("c")))
    r = to_record(exchange(reads), stream=True, api="completions")
    assert r.ok and (r.output_tokens, r.token_count_source) == (3, "chunks")
    assert r.prompt_tokens == 9  # from the plan
    assert r.itl_ms == pytest.approx([10.0, 20.0])


def test_event_split_across_reads_takes_the_time_of_the_completing_read() -> None:
    first = ev(cmpl("a"))
    raw = first + ev(cmpl("b"))
    cut = len(first) + 5  # the second read completes event 1 and starts event 2
    reads = [(at(10), raw[:7]), (at(25), raw[7:cut]), (at(60), raw[cut:])]
    r = to_record(exchange(reads), stream=True, api="completions")
    assert r.first_token_at == at(25) and r.last_token_at == at(60)


def test_missing_done_is_fine_after_a_finish_reason_or_usage() -> None:
    last = {"id": "cmpl-1", "choices": [{"index": 0, "text": "b", "finish_reason": "length"}]}
    r = to_record(exchange(stream((10, cmpl("a")), (20, last), done=False)), stream=True, api="completions")
    assert r.ok and r.output_tokens == 2
    r = to_record(exchange(stream((10, cmpl("a")), (20, cmpl("b")), (21, usage(2)), done=False)),
                  stream=True, api="completions")
    assert r.ok and r.output_tokens == 2


def test_non_streamed_ttft_equals_e2e() -> None:
    body = {"id": "cmpl-9", "choices": [{"index": 0, "text": "hello world"}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 12}}
    raw = json.dumps(body).encode()
    r = to_record(exchange([(at(200), raw[:10]), (at(210), raw[10:])], end=at(211)), stream=False, api="completions")
    assert r.ok and r.response_id == "cmpl-9"
    assert r.ttft_ms == pytest.approx(211.0) == pytest.approx(r.e2e_ms)
    assert r.tpot_ms is None and r.itl_ms == []
    assert (r.output_tokens, r.token_count_source, r.prompt_tokens) == (12, "usage", 2)


def test_non_streamed_chat_without_usage_approximates_and_skips_short_check() -> None:
    raw = json.dumps({"id": "x", "choices": [{"message": {"role": "assistant", "content": "12345678"}}]}).encode()
    r = to_record(exchange([(at(50), raw)]), stream=False, api="chat", min_output_tokens=100)
    assert r.ok and (r.output_tokens, r.token_count_source) == (2, "chunks")


# --- failures -------------------------------------------------------------------------


def _failed(r: Any, kind: str) -> None:
    assert not r.ok and r.error_kind == kind
    assert r.ttft_ms is None and r.tpot_ms is None and r.e2e_ms is None and r.itl_ms == []
    assert r.send_lag_ms == pytest.approx(2.0)  # still meaningful


def test_http_status_with_openai_error_body() -> None:
    body = json.dumps({"error": {"message": "The model is   overloaded", "code": 503}}).encode()
    r = to_record(exchange([(at(5), body)], status=503), stream=True, api="completions")
    _failed(r, "http_status")
    assert r.http_status == 503 and r.error_detail == "HTTP 503: The model is overloaded"


def test_http_status_with_plain_text_body_is_truncated() -> None:
    r = to_record(exchange([(at(5), b"x" * 5000)], status=429), stream=True, api="completions")
    _failed(r, "http_status")
    assert r.error_detail.startswith("HTTP 429: xxx") and len(r.error_detail) <= 210


def test_timeout_keeps_partial_progress_but_no_latencies() -> None:
    reads = stream((30, cmpl("a")), (40, cmpl("b")))
    r = to_record(exchange(reads, end=at(500), error_kind="timeout", error_detail="no complete response"),
                  stream=True, api="completions")
    _failed(r, "timeout")
    assert r.error_detail == "no complete response"
    assert r.first_token_at == at(30) and r.output_tokens == 2 and r.end_at == at(500)


def test_transport_error_before_any_byte() -> None:
    ex = exchange([], status=None, error_kind="transport", error_detail="refused")
    ex.sent_at = None
    r = to_record(ex, stream=True, api="completions")
    assert not r.ok and r.error_kind == "transport" and r.send_lag_ms is None and r.output_tokens == 0


@pytest.mark.parametrize(
    ("reads", "needle"),
    [
        ([(at(5), b"<html>502 Bad Gateway</html>")], "expected an SSE stream"),
        (stream((5, cmpl("a")), (6, "not json")), "non-JSON event"),
        (stream((5, {"hello": "world"})), "not an OpenAI completion object"),
        (stream((5, chat({"role": "assistant", "content": ""})), (6, usage(0)), (7, "[DONE]")), "no generated content"),
        ([], "empty response body"),
        (stream((5, [1, 2])), "not a JSON object"),
    ],
    ids=["html", "non-json", "foreign-json", "no-content", "empty", "json-array"],
)
def test_malformed_streams(reads: list, needle: str) -> None:
    r = to_record(exchange(reads), stream=True, api="chat")
    _failed(r, "malformed_stream")
    assert needle in r.error_detail


def test_malformed_non_streamed_body() -> None:
    r = to_record(exchange([(at(5), b"data: {}\n\n")]), stream=False, api="completions")
    _failed(r, "malformed_stream")
    assert "not JSON" in r.error_detail


def test_short_output() -> None:
    reads = stream((10, cmpl("a")), (20, cmpl("b")), (21, usage(2)))
    r = to_record(exchange(reads), stream=True, api="completions", min_output_tokens=16)
    _failed(r, "short_output")
    assert r.output_tokens == 2 and r.error_detail == "2 output tokens (usage), 16 required"
    ok = to_record(exchange(reads), stream=True, api="completions", min_output_tokens=2)
    assert ok.ok


def test_chunk_count_is_a_lower_bound_and_never_proves_short_output() -> None:
    # no usage, no tokenizer: 2 content chunks that may carry several tokens each
    reads = stream((10, cmpl("a b c d")), (20, cmpl("e f g h")))
    r = to_record(exchange(reads), stream=True, api="completions", min_output_tokens=8)
    assert r.ok and r.output_tokens == 2 and r.token_count_source == "chunks"


def test_a_tokenizer_with_encode_counts_as_the_python_api_documents() -> None:
    """``run_scenario(tokenizer=...)`` takes a Hugging Face tokenizer (callable, but returning an
    encoding) or any object with ``encode``: records count with it as with a counting function."""

    class Words:
        def __call__(self, text: str) -> dict:  # as a Hugging Face tokenizer: not a count
            return {"input_ids": text.split()}

        def encode(self, text: str, add_special_tokens: bool = True) -> list[str]:
            return (["<s>"] if add_special_tokens else []) + text.split()

    class Plain:  # an encode() without add_special_tokens
        def encode(self, text: str) -> list[str]:
            return text.split()

    reads = stream((0, cmpl(" a b")), (40, cmpl(" c")), (100, cmpl(" d e f")))
    for tokenizer in (Words(), Plain()):
        r = to_record(exchange(reads), stream=True, api="completions", tokenizer=tokenizer)
        assert (r.output_tokens, r.token_count_source) == (6, "tokenizer")
        assert r.itl_ms == pytest.approx([40.0, 20.0, 20.0, 20.0])


# --- responses cross-checked (docs/metrics.md, "Responses cross-checked") -----------------

def finish(text: str, reason: str) -> dict:
    return {"id": "cmpl-1", "choices": [{"index": 0, "text": text, "finish_reason": reason}]}


def test_usage_above_what_the_text_could_hold_is_not_believed() -> None:
    # "a", "b", "c": 3 bytes, so at most 3 + 1 (an end-of-sequence token) = 4 tokens
    reads = stream((10, cmpl("a")), (20, cmpl("b")), (30, cmpl("c")), (31, usage(5)))
    r = to_record(exchange(reads), stream=True, api="completions")
    assert r.ok and (r.output_tokens, r.token_count_source) == (3, "chunks")
    assert r.usage_disagreement == ("usage.completion_tokens 5 is more than the stream could hold "
                                    "(the streamed text is 3 bytes: at most 4)")
    assert r.tpot_ms == pytest.approx(10.0)  # (30 - 10) / (3 - 1), not 20 / 4
    assert to_record(exchange(stream((10, cmpl("a")), (20, cmpl("b")), (30, cmpl("c")), (31, usage(4)))),
                     stream=True, api="completions").token_count_source == "usage"


def test_usage_below_the_content_chunks_is_not_believed() -> None:
    reads = stream((10, cmpl("a")), (20, cmpl("b")), (30, cmpl("c")), (31, usage(2)))
    r = to_record(exchange(reads), stream=True, api="completions")
    assert r.ok and (r.output_tokens, r.token_count_source) == (3, "chunks")
    assert r.usage_disagreement == "usage.completion_tokens 2 is fewer than the 3 content chunks with text"


def test_with_a_tokenizer_the_usage_must_match_its_count_within_five_percent() -> None:
    words = lambda s: len(s.split())  # noqa: E731
    reads = stream((0, cmpl(" a b")), (40, cmpl(" c")), (100, cmpl(" d e f")), (101, usage(8)))
    # 6 words: at most 6 + 1 + 6 // 20 = 7
    r = to_record(exchange(reads), stream=True, api="completions", tokenizer=words)
    assert (r.output_tokens, r.token_count_source) == (6, "tokenizer")
    assert "the tokenizer counts 6 in the streamed text: at most 7" in r.usage_disagreement
    reads[-1] = (at(101), ev(usage(7)) + ev("[DONE]"))
    r = to_record(exchange(reads), stream=True, api="completions", tokenizer=words)
    assert (r.output_tokens, r.token_count_source, r.usage_disagreement) == (7, "usage", None)


@pytest.mark.parametrize("reason", ["abort", "cancelled", "error", "content_filter"])
def test_a_finish_reason_other_than_a_completed_output_fails_the_request(reason: str) -> None:
    reads = stream((10, cmpl("a")), (20, finish("b", reason)), (21, usage(32)))
    r = to_record(exchange(reads), stream=True, api="completions")
    _failed(r, "finish_reason")
    assert r.error_detail.startswith(f"finish_reason '{reason}' after 2 content chunk(s)")


@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls", "function_call"])
def test_completed_finish_reasons_are_ok(reason: str) -> None:
    r = to_record(exchange(stream((10, cmpl("a")), (20, finish("b", reason)))), stream=True, api="completions")
    assert r.ok and r.output_tokens == 2


def test_a_stream_ending_without_done_finish_reason_or_usage_is_truncated() -> None:
    reads = stream((10, cmpl("a")), (20, cmpl("b")), done=False)
    r = to_record(exchange(reads), stream=True, api="completions")
    _failed(r, "truncated")
    assert r.error_detail == ("the stream ended after 2 content chunk(s) with no data: [DONE], "
                              "no finish_reason and no usage")
    assert r.output_tokens == 2 and r.tpot_ms is None


def test_an_error_event_after_content_fails_the_request_with_its_message_redacted() -> None:
    err = {"id": "cmpl-1", "choices": [], "error": {"message": "overloaded (Authorization: Bearer sk-123)"}}
    reads = stream((10, cmpl("a")), (20, cmpl("b")), (21, err))
    r = to_record(exchange(reads), stream=True, api="completions")
    _failed(r, "engine_error")
    assert r.error_detail.startswith("error in response: overloaded (Authorization: ")
    assert "sk-123" not in r.error_detail and "***" in r.error_detail
    only = to_record(exchange(stream((6, {"error": {"message": "engine died"}}))), stream=True, api="chat")
    _failed(only, "engine_error")
    assert "engine died" in only.error_detail


# --- the first output chunk (docs/metrics.md, "The first output chunk") --------------------

def test_a_whitespace_flush_does_not_start_ttft_and_the_usage_shows_it_was_no_token() -> None:
    # " " flushed at 5 ms, the real tokens at 105, 115, 125; usage 3: the flush was not counted
    reads = stream((5, cmpl(" ")), (105, cmpl("a")), (115, cmpl("b")), (125, cmpl("c")), (126, usage(3)))
    r = to_record(exchange(reads), stream=True, api="completions")
    assert r.ok and r.leading_blank_chunks == 1 and r.content_chunks == 4
    assert (r.output_tokens, r.token_count_source, r.usage_disagreement) == (3, "usage", None)
    assert r.ttft_ms == pytest.approx(105.0) and r.first_token_at == at(105)
    assert r.tpot_ms == pytest.approx(10.0)  # (125 - 105) / (3 - 1)
    assert r.itl_ms == pytest.approx([10.0, 10.0])


def test_a_model_whose_first_token_is_a_newline_counts_it_but_not_in_tpot() -> None:
    # "\n" at 40 ms is a token (usage 3 for 3 chunks): TTFT counts from "a" at 50; TPOT over
    # the 2 tokens from there: (60 - 50) / (2 - 1)
    reads = stream((40, cmpl("\n")), (50, cmpl("a")), (60, cmpl("b")), (61, usage(3)))
    r = to_record(exchange(reads), stream=True, api="completions")
    assert r.ok and r.output_tokens == 3 and r.leading_blank_chunks == 1
    assert r.ttft_ms == pytest.approx(50.0) and r.tpot_ms == pytest.approx(10.0)
    assert r.itl_ms == pytest.approx([10.0])
    # with a tokenizer, its count of the newline chunk says the same
    chars = lambda s: len(s)  # noqa: E731
    t = to_record(exchange(stream((40, cmpl("\n")), (50, cmpl("a")), (60, cmpl("b")))), stream=True,
                  api="completions", tokenizer=chars)
    assert (t.output_tokens, t.ttft_ms, t.tpot_ms) == (3, pytest.approx(50.0), pytest.approx(10.0))


def test_a_whitespace_reasoning_chunk_starts_neither_ttft_nor_ttfo() -> None:
    reads = stream((5, chat({"reasoning_content": " "})), (100, chat({"reasoning_content": "hm"})),
                   (110, chat({"content": " "})), (150, chat({"content": "Yes"})), (151, usage(4)))
    r = to_record(exchange(reads), stream=True, api="chat")
    assert r.ok and r.ttft_ms == pytest.approx(100.0) and r.ttfo_ms == pytest.approx(150.0)


def test_one_disagreeing_usage_puts_the_whole_run_on_the_stream_count_and_in_its_notes() -> None:
    honest = stream((10, cmpl("a")), (20, cmpl("b")), (30, cmpl("c")), (31, usage(3)))
    lying = stream((10, cmpl("a")), (20, cmpl("b")), (30, cmpl("c")), (31, usage(12)))
    exs = [exchange(honest), exchange(lying)]
    for ex in exs:
        ex.plan.warmup = False
    spec = build_spec({"scenario": "concurrency", "concurrency": 1, "requests": 2})
    records = records_of(exs, spec, None)
    assert [(r.output_tokens, r.token_count_source) for r in records] == [(3, "chunks")] * 2
    assert [r.usage_disagreement is None for r in records] == [True, False]
    (note,) = response_notes(records)
    assert note.startswith("usage disagreed with the stream on 1 of 2 measured requests "
                           "(usage.completion_tokens 12 is more than the stream could hold")
    assert note.endswith("every request's output tokens are counted from the stream (content chunks), "
                         "not from usage")


def test_a_non_streamed_body_is_held_to_what_its_text_could_hold_too() -> None:
    body = {"id": "cmpl-9", "choices": [{"index": 0, "text": "hi", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 16}}
    r = to_record(exchange([(at(200), json.dumps(body).encode())], end=at(201)), stream=False, api="completions")
    # "hi": 2 bytes, at most 3 tokens; the fallback is ~4 characters per token
    assert r.ok and (r.output_tokens, r.token_count_source) == (1, "chunks")
    assert "usage.completion_tokens 16 is more than the stream could hold" in r.usage_disagreement

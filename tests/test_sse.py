"""SSEParser: every framing an OpenAI-compatible server may produce, split anywhere."""

from __future__ import annotations

import json

import pytest

from pytest_goodput.measure.records.sse import SSEParser, parse_all

ROLE = {"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
THINK = {"id": "c1", "choices": [{"index": 0, "delta": {"reasoning_content": "hmm é"}}]}
MULTI = {"id": "c1", "choices": [{"index": 0, "delta": {"content": " a b c"}}]}
USAGE = {"id": "c1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}}


def _stream(nl: str) -> bytes:
    """A realistic chat stream with comments, an id/event field and a multi-line event."""
    parts = [
        f": keep-alive{nl}",
        f"data: {json.dumps(ROLE)}{nl}{nl}",
        f"event: message{nl}id: 7{nl}data: {json.dumps(THINK, ensure_ascii=False)}{nl}{nl}",
        f":{nl}data: {json.dumps(MULTI)}{nl}{nl}",
        f"data: line one{nl}data:line two{nl}{nl}",
        f"retry: 100{nl}data: {json.dumps(USAGE)}{nl}{nl}",
        f"data: [DONE]{nl}{nl}",
    ]
    return "".join(parts).encode("utf-8")


EXPECTED = [
    json.dumps(ROLE),
    json.dumps(THINK, ensure_ascii=False),
    json.dumps(MULTI),
    "line one\nline two",
    json.dumps(USAGE),
    "[DONE]",
]


@pytest.mark.parametrize("nl", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_whole_stream(nl: str) -> None:
    assert parse_all([_stream(nl)]) == EXPECTED


@pytest.mark.parametrize("nl", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_split_at_every_byte_boundary(nl: str) -> None:
    data = _stream(nl)
    for cut in range(len(data) + 1):
        assert parse_all([data[:cut], data[cut:]]) == EXPECTED, f"cut at {cut}"


@pytest.mark.parametrize("nl", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_byte_by_byte(nl: str) -> None:
    data = _stream(nl)
    assert parse_all([data[i : i + 1] for i in range(len(data))]) == EXPECTED


def test_events_returned_by_the_read_that_completes_them() -> None:
    p = SSEParser()
    assert p.feed(b'data: {"a"') == []
    assert p.feed(b": 1}\n") == []
    assert p.feed(b"\ndata: x\n\ndata: y") == ['{"a": 1}', "x"]
    assert p.feed(b"\n\n") == ["y"]


def test_cr_then_lf_in_next_read_is_one_line_ending() -> None:
    p = SSEParser()
    assert p.feed(b"data: x\r") == []
    assert p.feed(b"\n\r") == ["x"]
    assert p.feed(b"\ndata: y\r\n\r\n") == ["y"]


def test_empty_read_between_cr_and_lf() -> None:
    assert parse_all([b"data: x\r", b"", b"\ndata: y\r", b"\n\r\n"]) == ["x\ny"]


def test_fields_event_and_id() -> None:
    p = SSEParser()
    assert p.feed(b"event: delta\nid: 42\ndata: d\n") == []
    assert p.event == "delta"
    assert p.feed(b"\n") == ["d"]
    assert p.event is None  # reset on dispatch
    assert p.last_event_id == "42"


def test_comments_only_produce_nothing() -> None:
    assert parse_all([b": ping\n\n: ping\n\n"]) == []


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert parse_all([b"\n\n\nevent: x\n\n"]) == []


def test_data_field_without_colon_is_an_empty_payload() -> None:
    assert parse_all([b"data\n\n"]) == [""]


def test_only_one_leading_space_is_stripped() -> None:
    assert parse_all([b"data:  two spaces\n\n"]) == [" two spaces"]


def test_missing_done_and_missing_final_blank_line() -> None:
    p = SSEParser()
    assert p.feed(b"data: a\n\ndata: b\n") == ["a"]
    assert p.finish() == ["b"]
    p = SSEParser()
    assert p.feed(b"data: a\n\ndata: b") == ["a"]
    assert p.finish() == ["b"]  # incomplete last line still counts at end of stream
    assert p.finish() == []


def test_utf8_character_split_across_reads() -> None:
    data = "data: é€\n\n".encode()
    for cut in range(len(data) + 1):
        assert parse_all([data[:cut], data[cut:]]) == ["é€"]


def test_byte_order_mark_is_dropped_even_when_split() -> None:
    data = b"\xef\xbb\xbfdata: x\n\n"
    for cut in range(len(data) + 1):
        assert parse_all([data[:cut], data[cut:]]) == ["x"]
    assert parse_all([b"da", b"ta: x\n\n"]) == ["x"]  # short first read that is no BOM


def test_empty_feeds_are_harmless() -> None:
    assert parse_all([b"", b"data: x\n", b"", b"\n", b""]) == ["x"]


def test_a_line_over_the_limit_raises_even_when_fed_byte_by_byte():
    from pytest_goodput.measure.records.sse import SSELimitError

    p = SSEParser(max_line_bytes=100)
    line = b"data: " + b"x" * 94  # exactly 100 bytes: allowed
    for i in range(len(line)):
        assert p.feed(line[i : i + 1]) == []
    assert p.feed(b"\n\n") == ["x" * 94]
    p = SSEParser(max_line_bytes=100)
    with pytest.raises(SSELimitError, match="longer than 100 bytes"):
        for b in b"data: " + b"x" * 95:
            p.feed(bytes([b]))


def test_an_event_over_the_limit_raises():
    from pytest_goodput.measure.records.sse import SSELimitError

    p = SSEParser(max_line_bytes=100)
    with pytest.raises(SSELimitError, match="event"):
        p.feed(b"data: " + b"x" * 60 + b"\n" + b"data: " + b"y" * 60 + b"\n")

"""One request as planned and as the wire showed it: the raw material of a record (pure data)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_goodput.measure.records.images import ImagePart


@dataclass(slots=True)
class RequestPlan:
    """One request the load schedule wants sent."""

    index: int
    prompt: str  # completions: the prompt; chat: the user message content
    prompt_tokens: int | None  # known or approximate prompt length in tokens
    max_tokens: int  # requested output length
    scheduled_at: float  # absolute perf_counter() deadline the schedule meant to send at
    warmup: bool = False
    # set by the open-loop driver: the schedule, not the client, decides when a request is
    # due, so its TTFT and E2E count from ``scheduled_at`` (docs/metrics.md)
    open_loop: bool = False
    # multi-turn conversations (load/sending/conversation.py): the chat history sent instead of one
    # user message, and where the request sits (conversation number, turn from 1)
    messages: list[dict[str, str]] | None = None
    conversation: int | None = None
    turn: int | None = None
    # the client process that sent it, set by the coordinator when a run has several (workers=N)
    worker: int | None = None
    # chat: image_url parts sent after the text (docs/workloads.md, "Images")
    images: tuple[ImagePart, ...] = ()
    # the JSON request body when built ahead of the send (load/sending/bodies.py); the client drops
    # it from the plan as it sends, so no body outlives its request
    body: bytes | None = None


@dataclass(slots=True)
class Wire:
    """A response's bytes as its TCP connection delivered them, kept for packet capture.

    ``docs/capture.md``: the four addresses name the connection in the capture, ``base`` is
    how many bytes the connection had delivered before this response, ``chunks`` the raw
    bytes (status line, headers, chunked framing) in arrival order.
    """

    local: tuple[str, int]
    remote: tuple[str, int]
    base: int
    chunks: list[bytes] = field(default_factory=list)
    # perf_counter when the connection was set up for this request, before any of its bytes
    # were written: its departure is the connection's first new segment after it
    armed_at: float = 0.0


@dataclass(slots=True)
class RawExchange:
    """What the wire showed for one request, unparsed. Turned into a record by ``to_record``."""

    plan: RequestPlan
    sent_at: float | None  # perf_counter right before the request bytes are written
    end_at: float | None  # perf_counter at end of stream / body / failure
    status: int | None
    reads: list[tuple[float, bytes]] = field(default_factory=list)  # (perf_counter, bytes)
    # "timeout" | "transport" | "malformed_stream" (body over its byte limit); the rest is
    # decided in record.py
    error_kind: str | None = None
    error_detail: str | None = None
    retries: int = 0  # resends on a fresh connection after a write that never completed
    request_bytes: int | None = None  # size of the JSON request body sent
    wire: Wire | None = None  # the raw response, when packet capture is on

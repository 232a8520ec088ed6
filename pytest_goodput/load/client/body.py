"""Request bodies: JSON built in slices around the prompt, and written at the request's deadline.

A body is ``head + JSON string contents of the prompt + tail``. ``head`` and ``tail`` come from
encoding the body once with a placeholder for the prompt (:data:`PROMPT_SLOT`), so the prompt,
which may be 100k tokens, is escaped in slices (:func:`json_chars`) that the open loop's body
window (``load/sending/bodies.py``) spreads over the loop's idle moments; escaping is per character,
so the slices joined are byte for byte what one ``json.dumps`` gives.

:class:`ScheduledBody` is the payload aiohttp writes: it waits for the request's deadline
before its first byte, so the open loop may start a request (pooled connection, headers)
ahead of its deadline and the bytes still leave on time; where aiohttp writes the headers
before the body (before 3.12) that is not done (:data:`HEADERS_WAIT_FOR_BODY`). A large body
is written in :data:`WRITE_PIECE` slices, each after the transport drained the one before, so
one request's 600 kB never fill the loop's buffers ahead of the next request's write.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Optional

from aiohttp import http_writer
from aiohttp.payload import BytesPayload

from pytest_goodput.load.client.event_loop import SPIN_S, sleep_until
from pytest_goodput.measure.records.exchange import RequestPlan
from pytest_goodput.measure.records.images import image_parts_json

#: Stands for the prompt while a body's frame is encoded (no prompt holds a NUL).
PROMPT_SLOT = "\x00goodput:prompt\x00"
PROMPT_SLOT_JSON = json.dumps(PROMPT_SLOT)[1:-1].encode()
#: Stands for a request's image parts while its body is encoded: ``json.dumps`` of a
#: ~300 KB body of base64 took 2.5 ms, at the send deadline; splicing the parts in as
#: bytes takes a copy (data URLs hold no character JSON must escape: measure/records/images.py).
IMAGES_SLOT = "__goodput_images__"
IMAGES_SLOT_JSON = b'"__goodput_images__"'
#: Characters of a prompt escaped at once by :func:`json_chars` (a few tens of microseconds).
SLICE_CHARS = 16384
#: Bytes of a body handed to the transport at once.
WRITE_PIECE = 256 * 1024
#: aiohttp keeps the request line and headers until the first body write (3.12 and later).
HEADERS_WAIT_FOR_BODY = hasattr(http_writer.StreamWriter, "send_headers")


def encode_body(plan: RequestPlan, prompt: str, *, model: str, chat: bool, stream: bool, ignore_eos: bool,
                extra: dict[str, Any]) -> bytes:
    """The JSON body of ``plan`` (``/completions``, or ``/chat/completions`` when ``chat``) with
    ``prompt`` as its prompt or user message."""
    body: dict[str, Any] = {"model": model}
    if not chat:
        body["prompt"] = prompt
        body["max_tokens"] = plan.max_tokens
    else:
        content: Any = prompt
        if plan.images:  # a vision-language request: the text, then the images' parts
            content = [{"type": "text", "text": prompt}, IMAGES_SLOT]
        body["messages"] = plan.messages or [{"role": "user", "content": content}]
        body["max_tokens"] = plan.max_tokens
        body["max_completion_tokens"] = plan.max_tokens
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = plan.max_tokens
    body.update(extra)
    data = json.dumps(body, separators=(",", ":")).encode()
    if plan.images:
        data = data.replace(IMAGES_SLOT_JSON, image_parts_json(plan.images), 1)
    return data


def json_chars(pieces: Iterable[str]) -> Iterator[bytes]:
    """The JSON string contents (no quotes; non-ASCII escaped, as ``json.dumps`` does) of the
    text made of ``pieces``, one slice of at most :data:`SLICE_CHARS` characters at a time."""
    for piece in pieces:
        for at in range(0, len(piece), SLICE_CHARS):
            yield json.dumps(piece[at:at + SLICE_CHARS])[1:-1].encode("ascii")


def split_frame(data: bytes) -> Optional[tuple[bytes, bytes]]:
    """A body encoded with :data:`PROMPT_SLOT` as its prompt, split around it (None: no slot)."""
    head, slot, tail = data.partition(PROMPT_SLOT_JSON)
    return (head, tail) if slot else None


class ScheduledBody(BytesPayload):  # type: ignore[misc]
    """A request body whose first byte is written no earlier than ``due`` (``perf_counter``)."""

    def __init__(self, value: bytes, due: float, spin_s: float = SPIN_S) -> None:
        super().__init__(value, content_type="application/json")
        self.due, self.spin_s = due, spin_s

    async def write(self, writer: Any) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer: Any, content_length: Optional[int]) -> None:
        await sleep_until(self.due, self.spin_s)
        view = memoryview(self._value)
        if content_length is not None:
            view = view[:content_length]
        if not view:
            await writer.write(b"")
        for at in range(0, len(view), WRITE_PIECE):
            await writer.write(view[at:at + WRITE_PIECE])


__all__ = ["HEADERS_WAIT_FOR_BODY", "PROMPT_SLOT", "ScheduledBody", "encode_body", "json_chars", "split_frame"]

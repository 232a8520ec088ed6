"""Request bodies: JSON built in slices around the prompt.

A body is ``head + JSON string contents of the prompt + tail``. ``head`` and ``tail`` come from
encoding the body once with a placeholder for the prompt (:data:`PROMPT_SLOT`), so the prompt,
which may be 100k tokens, is escaped in slices (:func:`json_chars`) that the open loop's body
window (``load/sending/bodies.py``) spreads over the loop's idle moments; escaping is per character,
so the slices joined are byte for byte what one ``json.dumps`` gives.

How a body is written (at its deadline, a large one in pieces as the transport drains) is
the connection's business (``load/client/connection.py``).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Optional

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


__all__ = ["PROMPT_SLOT", "encode_body", "json_chars", "split_frame"]

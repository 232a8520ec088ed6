"""A response's body, streamed or not, as what the metrics and the cross-checks read (pure).

``parse_stream`` folds an SSE body's events, ``parse_body`` one JSON body, into a
:class:`ParsedResponse`: each content chunk's time and text (reasoning and answer apart), the
last ``usage``, and what says how the response ended: ``[DONE]``, the last ``finish_reason``,
an ``error`` object in any event (``docs/metrics.md``, "Responses cross-checked"). A content
chunk carries non-empty ``choices[].text`` (completions) or ``delta.content`` /
``delta.reasoning_content`` / ``delta.reasoning`` (chat); role-only and empty chunks do not
count. Parsing stops at the first malformed event.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from pytest_goodput.measure.records.sse import SSELimitError, SSEParser
from pytest_goodput.schema.redaction import redact

_EXCERPT = 200
_SPACES = re.compile(r"\s+")


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
    done: bool = False  # the stream's ``data: [DONE]`` arrived
    finish_reason: Optional[str] = None  # the last non-null ``choices[].finish_reason``
    error: Optional[str] = None  # an ``error`` object's message (redacted), from any event
    engine_metrics: Optional[dict[str, Any]] = None  # vLLM's per-request ``metrics`` object


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
    if isinstance(obj.get("metrics"), dict):
        out.engine_metrics = obj["metrics"]
    err = obj.get("error")
    if err is not None and out.error is None:
        msg = err.get("message", err) if isinstance(err, dict) else err
        out.error = f"error in response: {_excerpt(redact(str(msg)))}"
    choices = obj.get("choices")
    if not isinstance(choices, list):
        if err is not None or isinstance(usage, dict):
            return None  # an error event (the record fails it) or a usage-only chunk
        return f"not an OpenAI completion object: {_excerpt(json.dumps(obj), 80)}"
    for choice in choices:
        reason = choice.get("finish_reason") if isinstance(choice, dict) else None
        if isinstance(reason, str) and reason:
            out.finish_reason = reason
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
        out.done = True
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


__all__ = ["ParsedResponse", "http_error_detail", "parse_body", "parse_stream"]

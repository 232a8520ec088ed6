"""The OpenAI wire format of the simulator: what a request body asks for, what goes back.

Kept apart from the server so the protocol (field names, defaults, chunk layout, error
shapes) can be read and checked in one place, without the event loop around it. Pure: no
I/O, no web framework; the server turns these bytes and dicts into HTTP responses.

Stream chunks are pre-encoded once per request (:class:`ChunkEncoder`), so emitting a token
is one byte concatenation. The tokenizer is "one whitespace-separated word = one token", so
usage numbers are exact.
"""

from __future__ import annotations

import json
import time
from typing import Any, Optional

#: Ends every stream, as OpenAI servers do.
DONE = b"data: [DONE]\n\n"
#: Response headers of a stream (ASGI form).
SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
               (b"cache-control", b"no-cache")]
_ERROR_TYPES = {400: "BadRequestError", 429: "RateLimitError", 503: "ServiceUnavailableError"}


def default_max_tokens(chat: bool) -> int:
    """The ``max_tokens`` a request gets when it names none (OpenAI's legacy defaults)."""
    return 256 if chat else 16


def parse_request(raw: bytes, chat: bool) -> tuple[dict[str, Any], str, int]:
    """The body, its prompt text and prompt token count; ``ValueError`` means a 400."""
    body = json.loads(raw)
    if not isinstance(body, dict):
        raise ValueError("request body must be a JSON object")
    prompt, n_prompt = prompt_of(body, chat)
    return body, prompt, n_prompt


def prompt_of(body: dict[str, Any], chat: bool) -> tuple[str, int]:
    """The prompt text and its token count (words; token-id lists count their ids)."""
    if chat:
        parts: list[str] = []
        for msg in body.get("messages") or []:
            content = msg.get("content") if isinstance(msg, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(c.get("text", "") for c in content if isinstance(c, dict))
        text = " ".join(parts)
        return text, len(text.split())
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        if prompt and all(isinstance(t, int) for t in prompt):
            return " ".join(map(str, prompt)), len(prompt)
        if len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        else:
            raise ValueError("prompt must be one string or one list of token ids")
    if not isinstance(prompt, str):
        raise ValueError("prompt must be a string")
    return prompt, len(prompt.split())


def token_limits(body: dict[str, Any], default_max: int) -> tuple[Any, int]:
    """``(max_tokens, min_tokens)`` as asked; ``max_tokens`` is not validated here because
    the engine checks it only after fault injection has had its say."""
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or default_max
    return max_tokens, int(body.get("min_tokens") or 0)


def limits_error(prompt_tokens: int, max_tokens: Any, kv_tokens: int) -> Optional[str]:
    """Why the request can never be served (a 400), or None; ``kv_tokens`` is the cache size."""
    if prompt_tokens < 1:
        return "prompt is empty"
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens must be a positive integer"
    if prompt_tokens + max_tokens > kv_tokens:
        return (f"prompt ({prompt_tokens} tokens) + max_tokens ({max_tokens}) exceeds "
                f"the KV cache ({kv_tokens} tokens)")
    return None


#: How ``reasoning_effort`` scales the profile's reasoning tokens (medium: as configured).
EFFORT_SCALE = {"low": 0.5, "medium": 1.0, "high": 2.0}


def reasoning_length(body: dict[str, Any], configured: int) -> tuple[int, Optional[str]]:
    """(reasoning tokens of a chat request, why the request is refused): ``configured``
    scaled by ``reasoning_effort``, then capped at ``thinking_token_budget``."""
    effort, budget = body.get("reasoning_effort"), body.get("thinking_token_budget")
    if effort is not None and effort not in EFFORT_SCALE:
        return 0, f"reasoning_effort must be one of {', '.join(EFFORT_SCALE)}, got {effort!r}"
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 0):
        return 0, f"thinking_token_budget must be a non-negative integer, got {budget!r}"
    n = round(configured * EFFORT_SCALE[effort or "medium"])
    return (n if budget is None else min(n, budget)), None


def finish_reason(out_len: int, max_tokens: int) -> str:
    """``"length"`` when the output hit ``max_tokens``, else ``"stop"`` (an end-of-sequence)."""
    return "length" if out_len >= max_tokens else "stop"


def _response_id(rid: str, chat: bool) -> str:
    return f"{'chatcmpl' if chat else 'cmpl'}-{rid}"


def _usage(prompt_tokens: int, completion_tokens: int, reasoning_tokens: int = 0,
           cached_tokens: Optional[int] = None) -> dict[str, Any]:
    """OpenAI usage; ``completion_tokens`` includes the reasoning tokens, which
    ``completion_tokens_details`` names when there are any. ``cached_tokens`` (prompt tokens
    served from the prefix cache) goes in ``prompt_tokens_details``, as vLLM reports it."""
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


#: Delta field names a reasoning chunk carries its text under, by ``reasoning_field``.
REASONING_FIELDS = {"reasoning_content": ("reasoning_content",), "reasoning": ("reasoning",),
                    "both": ("reasoning_content", "reasoning")}


class ChunkEncoder:
    """Byte pieces of one request's stream: a token chunk is ``pre + word + post``
    (``last_post`` on the final token, which carries the finish reason)."""

    __slots__ = ("head", "pre", "post", "last_post", "role", "reasoning_parts")

    def __init__(self, rid: str, chat: bool, model_name: str, reason: str,
                 reasoning_field: str = "reasoning_content") -> None:
        obj = "chat.completion.chunk" if chat else "text_completion"
        head = (f'data: {{"id":"{_response_id(rid, chat)}","object":"{obj}",'
                f'"created":{int(time.time())},"model":{json.dumps(model_name)},"choices":')
        self.head = head.encode()
        self.pre = (head + ('[{"index":0,"delta":{"content":"' if chat else '[{"index":0,"text":"')).encode()
        self.post = b'"},"logprobs":null,"finish_reason":null}]}\n\n' if chat else \
            b'","logprobs":null,"finish_reason":null}]}\n\n'
        self.last_post = self.post.replace(b"null}]", f'"{reason}"}}]'.encode())
        #: The chat stream's opening chunk (assistant role, empty content); none for completions.
        self.role = self.head + (b'[{"index":0,"delta":{"role":"assistant","content":""},'
                                 b'"logprobs":null,"finish_reason":null}]}\n\n') if chat else b""
        #: A reasoning chunk is ``parts[0] + word + parts[1] + word ... + post``: the word
        #: once per field name (vLLM sends both names with the same text).
        names = REASONING_FIELDS[reasoning_field]
        self.reasoning_parts = [(head + '[{"index":0,"delta":{"' + names[0] + '":"').encode()]
        self.reasoning_parts += [f'","{n}":"'.encode() for n in names[1:]]

    def reasoning_chunk(self, word: bytes, last: bool = False) -> bytes:
        """One reasoning token's chunk (``delta.reasoning_content`` and/or ``delta.reasoning``)."""
        return b"".join(part + word for part in self.reasoning_parts) + (
            self.last_post if last else self.post)

    def chunks(self, words: list[bytes], offset: int, start: int, ready: int, total: int,
               reasoning: int, groups: dict[int, int]) -> list[bytes]:
        """Chunks of tokens ``[start, ready)`` of ``total`` (token ``t`` is
        ``words[(offset + t) % len(words)]``; the first ``reasoning`` are reasoning): one per
        token, except that ``groups`` (first token -> end) puts a step's several tokens
        (speculative decoding) in one chunk. A group cut by ``ready`` or the end of the
        reasoning leaves its rest in ``groups``."""
        out, i, n = [], start, len(words)
        if not groups:  # one token per chunk: the common case, kept lean
            for t in range(start, ready):
                word, last = words[(offset + t) % n], t == total - 1
                out.append(self.reasoning_chunk(word, last) if t < reasoning else
                           self.pre + word + (self.last_post if last else self.post))
            return out
        while i < ready:
            stop = groups.pop(i, i + 1)
            j = min(stop, ready, reasoning if i < reasoning else stop)
            if j < stop:
                groups[j] = stop
            text = b"".join(words[(offset + t) % n] for t in range(i, j))
            if i < reasoning:  # the reasoning phase comes first
                out.append(self.reasoning_chunk(text, j == total))
            else:
                out.append(self.pre + text + (self.last_post if j == total else self.post))
            i = j
        return out

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int, reasoning_tokens: int = 0,
                    cached_tokens: Optional[int] = None, metrics: Optional[dict[str, Any]] = None) -> bytes:
        """The final ``choices: []`` chunk that ``stream_options.include_usage`` asks for (with
        vLLM's per-request ``metrics`` when given, as vLLM sends them)."""
        u = json.dumps(_usage(prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens),
                       separators=(",", ":")).encode()
        m = b',"metrics":' + json.dumps(metrics, separators=(",", ":")).encode() if metrics else b""
        return self.head + b"[],\"usage\":" + u + m + b"}\n\n"


def completion_body(rid: str, chat: bool, model_name: str, text: str, prompt_tokens: int,
                    completion_tokens: int, reason: str, reasoning: str = "",
                    reasoning_tokens: int = 0, reasoning_field: str = "reasoning_content",
                    cached_tokens: Optional[int] = None,
                    metrics: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The whole non-streamed response of either endpoint (chat: reasoning text, if any, in
    ``message.reasoning_content``; ``completion_tokens`` counts it; vLLM's ``metrics`` if given)."""
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": reason}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
        if reasoning:
            choice["message"].update({n: reasoning for n in REASONING_FIELDS[reasoning_field]})
    else:
        choice["text"] = text
    return {
        "id": _response_id(rid, chat),
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()), "model": model_name, "choices": [choice],
        "usage": _usage(prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens),
        **({"metrics": metrics} if metrics else {}),
    }


def error_body(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-style error object; ``type`` names the client exception the status maps to."""
    return {"error": {"message": message, "type": _ERROR_TYPES.get(status, "InternalServerError"),
                      "code": status}}


def models_body(model_name: str) -> dict[str, Any]:
    """``GET /v1/models``: the one served model."""
    return {"object": "list", "data": [
        {"id": model_name, "object": "model", "created": 0, "owned_by": "goodput-sim"}]}

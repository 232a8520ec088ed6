"""OpenAI-compatible streaming client: the measurement hot path.

Per read of a streamed response the client only keeps ``(time, bytes)``; every bit of
parsing happens later in :mod:`pytest_goodput.measure.records.record`. Streams go through aiohttp (on
uvloop when available): measured on a 2-core machine at 64 concurrent streams, httpx
added 19.5 ms P50 / 50 ms P99 receive lag and saturated a core, aiohttp on uvloop
0.16 / 1.35 ms (see ``docs/decisions.md``). Control-plane calls (model list,
reachability) use httpx, where latency does not matter.

Two stamps decide accuracy:

* ``sent_at`` comes from an aiohttp trace hook fired immediately before the request
  bytes are written, i.e. after any wait for a pooled connection and after the connect
  of a new one: that wait is client-side delay and shows up as send lag, not latency;
* a read's time is taken by the connection's protocol in ``data_received`` — when the
  loop hands over the bytes — not when the reading task next gets its turn.

A server cannot make the client unbounded: a response may hold at most
``response_byte_limit(max_tokens)`` bytes (each read also counts ``READ_OVERHEAD``), beyond
which reading stops and the request is a ``malformed_stream``; an error body is cut at
``ERROR_BODY_LIMIT``. A request is resent (once, on a fresh connection, counted in
``retries``) only when it provably never reached the server (``_unsent``); a request the
server read and then dropped is a ``transport`` failure. A server seen closing a connection
after a complete response (llama.cpp's does after every stream) gets a new connection per
request from then on (``reuses_connections``, learned before the first reuse by
``_learn_keep_alive``): a request written to a kept-alive connection as its close is on the
way cannot be told from one the server read and dropped.
"""

from __future__ import annotations

import asyncio
import json
import os
from time import perf_counter
from typing import Any, TypeVar

import aiohttp
import httpx


from pytest_goodput.load.client.body import (
    HEADERS_WAIT_FOR_BODY,
    PROMPT_SLOT,
    ScheduledBody,
    encode_body,
    json_chars,
    split_frame,
)
from pytest_goodput.load.client.connection import install_protocol, stamp_sent
from pytest_goodput.load.client.event_loop import SPIN_S
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.schema.endpoint import normalize_base_url
from pytest_goodput.schema.redaction import redact, register

_T = TypeVar("_T")

APIS = ("completions", "chat")
#: Connect timeout cap: an unreachable host fails fast even when the request timeout is long.
CONNECT_TIMEOUT_S = 10.0
#: Bytes of an error response (HTTP status >= 400) kept for the record's excerpt.
ERROR_BODY_LIMIT = 64 * 1024
#: A response may hold max(MIN_RESPONSE_BYTES, RESPONSE_BYTES_PER_TOKEN x max_tokens) bytes...
MIN_RESPONSE_BYTES = 1 << 20
RESPONSE_BYTES_PER_TOKEN = 8 * 1024
#: ...where each read also counts this much, for its time stamp and bookkeeping.
READ_OVERHEAD = 128
#: Resends, on a fresh connection, of a request whose write failed (never read by the server).
UNSENT_RETRIES = 1
#: Longest wait after a response for the server's close, until its keep-alive is known.
CLOSE_WATCH_S = 0.05
#: aiohttp's words for a write that failed (3.9-3.14): the request never fully left the client.
_WRITE_FAILED = ("Can not write request body", "Cannot write to closing transport",
                 "Failed to send bytes into the underlying connection")


def response_byte_limit(max_tokens: int) -> int:
    """Bytes (plus ``READ_OVERHEAD`` per read) a response to ``max_tokens`` tokens may hold."""
    return max(MIN_RESPONSE_BYTES, RESPONSE_BYTES_PER_TOKEN * max_tokens)


def _auth_headers(api_key_env: str | None) -> tuple[dict[str, str], bytes | None]:
    if not api_key_env:
        return {}, None
    key = os.environ.get(api_key_env)
    if not key:
        raise ValueError(f"environment variable {api_key_env} (API key) is not set or empty")
    register(key)  # so that every output redacts it, whatever echoes it
    return {"Authorization": f"Bearer {key}"}, key.encode()


def _describe(exc: BaseException) -> str:
    msg = str(exc) or repr(exc)
    return f"{type(exc).__name__}: {msg}"[:300]


class OpenAIClient:
    """Sends planned requests to ``/v1/completions`` or ``/v1/chat/completions``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api: str = "completions",
        stream: bool = True,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        max_connections: int = 256,
        ignore_eos: bool = True,
        extra_body: dict | None = None,
        keep_wire: bool = False,
    ) -> None:
        if api not in APIS:
            raise ValueError(f"api must be one of {APIS}, got {api!r}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.base_url = normalize_base_url(base_url)
        self.model = model
        self.api = api
        self.stream = stream
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.ignore_eos = ignore_eos
        self.extra_body = dict(extra_body or {})
        self.keep_wire = keep_wire  # raw responses for packet capture (docs/capture.md)
        self._url = self.base_url + ("/completions" if api == "completions" else "/chat/completions")
        auth, self._secret = _auth_headers(api_key_env)
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
            **auth,
        }
        self._session: Any = None
        self._fresh: Any = None  # never reuses a connection: for resends
        self._keep_alive: bool | None = None  # does the server keep connections after a response?
        self._close_seen: Any = None  # asyncio.Event, made on the client's loop
        self._errors: tuple[type[BaseException], ...] = ()
        self._connect_timeout_error: type[BaseException] = TimeoutError
        self._frames: dict[int, tuple[bytes, bytes] | None] = {}  # body frames by max_tokens

    def __repr__(self) -> str:  # never shows the API key
        return redact(f"OpenAIClient({self.base_url!r}, model={self.model!r}, api={self.api!r})")

    @property
    def reuses_connections(self) -> bool:
        """False once the server was seen closing a connection after a complete response."""
        return self._keep_alive is not False

    def _server_closes(self) -> None:
        self._keep_alive = False
        self._close_seen.set()

    async def _learn_keep_alive(self) -> None:
        """Before the first reuse, see whether the server closes a connection after a response.

        llama.cpp's server ends the connection after every stream though it announces
        keep-alive; a request written as that close is under way is lost. So until a
        response was followed by ``CLOSE_WATCH_S`` without a close (connections are kept) or
        a connection was closed after its response (a new one per request from then on),
        the sender of a response waits that long before its next."""
        if self._keep_alive is not None:
            return
        try:
            await asyncio.wait_for(self._close_seen.wait(), CLOSE_WATCH_S)
        except asyncio.TimeoutError:
            if self._keep_alive is None:
                self._keep_alive = True

    def _new_session(self, *, force_close: bool) -> Any:
        trace = aiohttp.TraceConfig()
        trace.on_request_chunk_sent.append(stamp_sent)
        # A response with "Connection: close" is never reused (aiohttp's parser marks it).
        connector = aiohttp.TCPConnector(
            limit=self.max_connections, limit_per_host=0, ttl_dns_cache=300, force_close=force_close
        )
        install_protocol(connector, asyncio.get_running_loop(), self._server_closes, self.keep_wire)
        timeout = aiohttp.ClientTimeout(
            total=self.timeout_s, sock_connect=min(self.timeout_s, CONNECT_TIMEOUT_S)
        )
        return aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            trace_configs=[trace],
            cookie_jar=aiohttp.DummyCookieJar(),
            # no Accept-Encoding: a compressing server would batch the stream
            skip_auto_headers=("Accept-Encoding",),
            raise_for_status=False,
        )

    async def __aenter__(self) -> "OpenAIClient":
        self._close_seen = asyncio.Event()
        self._session = self._new_session(force_close=False)
        self._fresh = self._new_session(force_close=True)
        self._errors = (aiohttp.ClientError, OSError)
        # aiohttp < 3.10 has no ConnectionTimeoutError; there ServerTimeoutError means a
        # sock_connect/sock_read timeout, and only sock_connect is set here
        self._connect_timeout_error = getattr(aiohttp, "ConnectionTimeoutError", aiohttp.ServerTimeoutError)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()
        self._session = self._fresh = None

    #: ``send`` writes no byte before ``plan.scheduled_at``, so a loop may start a request
    #: early (``loops.open_loop``); only where aiohttp holds the headers until the body.
    writes_on_schedule = HEADERS_WAIT_FOR_BODY

    def _body(self, plan: RequestPlan, prompt: str) -> bytes:
        return encode_body(plan, prompt, model=self.model, chat=self.api == "chat", stream=self.stream,
                           ignore_eos=self.ignore_eos, extra=self.extra_body)

    def build_body(self, plan: RequestPlan) -> bytes:
        """The JSON request body for ``plan`` (serialized before ``sent_at`` is stamped)."""
        frame = self.body_frame(plan)
        if frame is None:
            return self._body(plan, plan.prompt)
        return b"".join((frame[0], *json_chars((plan.prompt,)), frame[1]))

    def body_frame(self, plan: RequestPlan) -> tuple[bytes, bytes] | None:
        """``plan``'s body before and after its prompt's JSON string contents (``body.py``);
        None when the prompt is not one string of it (a conversation's history).

        Without images a frame depends on ``max_tokens`` alone: it is encoded once per value."""
        if plan.messages:
            return None
        if plan.images:
            return split_frame(self._body(plan, PROMPT_SLOT))
        frame = self._frames.get(plan.max_tokens)
        if frame is None:
            frame = self._frames[plan.max_tokens] = split_frame(self._body(plan, PROMPT_SLOT))
        return frame

    async def send(self, plan: RequestPlan, spin_s: float = SPIN_S) -> RawExchange:
        """Send one request and return its raw exchange. Never raises for a failed request.

        The body is ``plan.body`` when built ahead (``load/sending/bodies.py``; dropped from the plan
        here), else built now. No byte is written before ``plan.scheduled_at`` (where
        ``writes_on_schedule``), the last ``spin_s`` of the wait spent spinning.
        Cancellation by the caller is not a failed request: ``CancelledError`` propagates.
        """
        if self._session is None:
            raise RuntimeError("OpenAIClient must be used as 'async with OpenAIClient(...)'")
        session = self._session if self.reuses_connections else self._fresh
        data = plan.body if plan.body is not None else self.build_body(plan)
        plan.body = None
        ex = RawExchange(plan, None, None, None, [], None, None, request_bytes=len(data))
        while True:
            payload = ScheduledBody(data, plan.scheduled_at, spin_s) if self.writes_on_schedule else data
            try:
                await self._exchange(session, payload, ex)
            except asyncio.CancelledError:
                raise
            except self._connect_timeout_error as exc:
                self._fail(ex, "transport", f"connect timeout to {self._url}: {_describe(exc)}")
            except asyncio.TimeoutError:
                self._fail(ex, "timeout", f"no complete response within {self.timeout_s:g} s")
            except self._errors as exc:
                if ex.retries < UNSENT_RETRIES and self._unsent(exc, ex):
                    # The server had closed a kept-alive connection before the request was
                    # written, so it cannot have read it. Send it again on a new connection;
                    # the send time is stamped anew (the failed attempt shows as send lag)
                    # and the retry is counted.
                    ex.sent_at = None
                    ex.retries += 1
                    session = self._fresh
                    self._server_closes()
                    continue
                self._fail(ex, "transport", f"{self._url}: {_describe(exc)}")
            return ex

    async def _exchange(self, session: Any, data: Any, ex: RawExchange) -> None:
        append = ex.reads.append
        clock = perf_counter
        limit = budget = response_byte_limit(ex.plan.max_tokens)
        async with session.post(
            self._url, data=data, headers=self._headers, trace_request_ctx=ex
        ) as resp:
            ex.status = resp.status
            proto = getattr(resp.connection, "protocol", None)
            if resp.status >= 400:
                await self._read_error_body(resp, ex)
                ex.end_at = clock()
                return
            stamped = hasattr(proto, "read_at")
            ex.wire = getattr(proto, "wire", None)
            async for chunk in resp.content.iter_any():
                # the hot path: the time the loop received the bytes, and the bytes
                append((proto.read_at if stamped else clock(), chunk))
                budget -= len(chunk) + READ_OVERHEAD
                if budget < 0:  # leaving the block unread closes the connection
                    return self._fail(ex, "malformed_stream", f"response over {limit} bytes "
                                      f"for {ex.plan.max_tokens} requested tokens: reading stopped")
            ex.end_at = proto.read_at if stamped and ex.reads else clock()
        await self._learn_keep_alive()

    @staticmethod
    def _unsent(exc: BaseException, ex: RawExchange) -> bool:
        """The request provably never reached the server, so it may be sent again.

        Either no byte of its body was handed to the connection (the write hook that stamps
        ``sent_at`` never fired: the connection was found closed first), or aiohttp reports
        that the write itself failed. Never after a status or a read, and not after a
        failed connect (a fresh one would fail alike). A server that read the request and
        then closed the connection (``ServerDisconnectedError`` after the write, a reset
        while reading) is not covered: that request reached it, and its loss is a failure.
        """
        if ex.status is not None or ex.reads or isinstance(exc, aiohttp.ClientConnectorError):
            return False
        if ex.sent_at is None:
            return True
        seen = 0
        while exc is not None and seen < 8:
            if isinstance(exc, (aiohttp.ClientError, OSError)) and any(w in str(exc) for w in _WRITE_FAILED):
                return True
            exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
            seen += 1
        return False

    async def open_connections(self, n: int) -> int:
        """Open up to ``n`` keep-alive connections ahead of a run; return how many succeeded.

        A connect inside a timed send costs several loop turns (measured: send lag P99
        1.2 ms with a warm pool vs 7.9 ms cold, Poisson 100 req/s). Uses ``GET /models``,
        so no tokens are generated.
        """
        session = self._session
        if session is None:
            raise RuntimeError("OpenAIClient must be used as 'async with OpenAIClient(...)'")
        n = min(n, self.max_connections)
        headers = {k: v for k, v in self._headers.items() if k == "Authorization"}

        async def one() -> bool:
            try:
                async with session.get(self.base_url + "/models", headers=headers) as resp:
                    await resp.read()
                    return resp.status < 400
            except (*self._errors, asyncio.TimeoutError):
                return False

        return sum(await asyncio.gather(*(one() for _ in range(n))))

    async def _read_error_body(self, resp: Any, ex: RawExchange) -> None:
        size = 0
        async for chunk in resp.content.iter_any():
            if self._secret:
                chunk = chunk.replace(self._secret, b"***")
            ex.reads.append((perf_counter(), chunk))
            size += len(chunk)
            if size >= ERROR_BODY_LIMIT:
                break

    def _fail(self, ex: RawExchange, kind: str, detail: str) -> None:
        ex.end_at = perf_counter()
        ex.error_kind = kind
        ex.error_detail = redact(detail)

    async def list_models(self) -> list[str]:
        """Model ids served at ``GET /v1/models`` (control plane)."""
        url = self.base_url + "/models"
        headers = {k: v for k, v in self._headers.items() if k == "Authorization"}
        try:
            async with httpx.AsyncClient(timeout=min(self.timeout_s, 30.0)) as hc:
                resp = await hc.get(url, headers=headers)
        except httpx.HTTPError as exc:
            raise ConnectionError(redact(f"cannot reach {url}: {_describe(exc)}")) from None
        if resp.status_code >= 400:
            raise RuntimeError(redact(f"GET {url} returned HTTP {resp.status_code}: {resp.text[:200]}"))
        try:
            return [str(m["id"]) for m in resp.json()["data"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise RuntimeError(f"GET {url} did not return an OpenAI model list: {exc!r}") from None


async def check_reachable(base_url: str, timeout_s: float = 5.0) -> None:
    """Raise ``ConnectionError("cannot reach <url>: <reason>")`` unless the server answers HTTP.

    Any HTTP status counts as reachable (a 401 or 404 still proves a server is listening).
    """
    url = normalize_base_url(base_url) + "/models"
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as hc:
            await hc.get(url)
    except httpx.TimeoutException:
        raise ConnectionError(redact(f"cannot reach {url}: no answer within {timeout_s:g} s")) from None
    except httpx.HTTPError as exc:
        raise ConnectionError(redact(f"cannot reach {url}: {_describe(exc)}")) from None


__all__ = ["OpenAIClient", "RawExchange", "RequestPlan", "check_reachable", "normalize_base_url",
           "response_byte_limit"]

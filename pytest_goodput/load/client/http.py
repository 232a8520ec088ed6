"""OpenAI-compatible streaming client: the measurement hot path.

Requests are written and responses parsed on asyncio protocols (uvloop when available) with
httptools' C parser (``connection.py``), over a keep-alive pool (``pool.py``). Per read of a
response the connection only keeps ``(time, bytes)`` of the de-chunked body on the exchange,
and the sender is woken once per response, when it ends or fails; every bit of parsing
happens later in :mod:`pytest_goodput.measure.records.record`. Measured on a 2-core machine
this costs a third of the CPU per request that aiohttp's per-request objects and per-read
task wake-ups did (``docs/decisions.md``, ``docs/performance.md``). Control-plane calls (model list,
reachability) use httpx, where latency does not matter.

Two stamps decide accuracy:

* ``sent_at`` is taken immediately before the request bytes are handed to the transport,
  i.e. after any wait for a pooled connection, after the connect of a new one and after the
  wait for ``plan.scheduled_at``: those waits are client-side delay and show up as send lag,
  not latency;
* a read's time is taken by the connection's protocol in ``data_received`` — when the
  loop hands the bytes over — and the read's body bytes are kept with it right there, not
  when a reading task next gets its turn.

A server cannot make the client unbounded: a response may hold at most
``response_byte_limit(max_tokens)`` bytes (each read also counts ``READ_OVERHEAD``), beyond
which reading stops and the request is a ``malformed_stream``; an error body is cut at
``ERROR_BODY_LIMIT``. A request is resent (once, on a fresh connection, counted in
``retries``) only when it provably never reached the server (``_unsent``); a request the
server read and then dropped is a ``transport`` failure. A server seen closing a connection
after a complete response (llama.cpp's does after every stream) gets a new connection per
request from then on (``reuses_connections``, learned before the first reuse:
``keepalive.py``): a request written to a kept-alive connection as its close is on the
way cannot be told from one the server read and dropped.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
from time import perf_counter
from typing import Optional

import httpx

from pytest_goodput.load.client.body import PROMPT_SLOT, encode_body, json_chars, split_frame
from pytest_goodput.load.client.connection import (
    ERROR_BODY_LIMIT,
    READ_OVERHEAD,
    Connection,
    RequestNotWritten,
    ResponseTooLarge,
)
from pytest_goodput.load.client.event_loop import SPIN_S, sleep_until
from pytest_goodput.load.client.headers import auth_headers, request_head
from pytest_goodput.load.client.keepalive import KeepAlive, get_on
from pytest_goodput.load.client.connection_pool import ConnectTimeout, Pool
from pytest_goodput.load.client.turns import WriteTurns
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.schema.addresses import normalize_base_url
from pytest_goodput.schema.redaction import redact

APIS = ("completions", "chat")
#: Connect timeout cap: an unreachable host fails fast even when the request timeout is long.
CONNECT_TIMEOUT_S = 10.0
#: A response may hold max(MIN_RESPONSE_BYTES, RESPONSE_BYTES_PER_TOKEN x max_tokens) bytes
#: (each read also counts ``READ_OVERHEAD``).
MIN_RESPONSE_BYTES = 1 << 20
RESPONSE_BYTES_PER_TOKEN = 8 * 1024
#: Resends, on a fresh connection, of a request whose write failed (never read by the server).
UNSENT_RETRIES = 1


def response_byte_limit(max_tokens: int) -> int:
    """Bytes (plus ``READ_OVERHEAD`` per read) a response to ``max_tokens`` tokens may hold."""
    return max(MIN_RESPONSE_BYTES, RESPONSE_BYTES_PER_TOKEN * max_tokens)


def _describe(exc: BaseException) -> str:
    msg = str(exc) or repr(exc)
    return f"{type(exc).__name__}: {msg}"[:300]


class OpenAIClient:
    """Sends planned requests to ``/v1/completions`` or ``/v1/chat/completions``."""

    #: ``send`` writes no byte before ``plan.scheduled_at``, so a loop may start a request
    #: early (``loops.open_loop``): its connection is ready at the deadline.
    writes_on_schedule = True

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
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
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
        self._split = urllib.parse.urlsplit(self.base_url)
        auth, self._secret = auth_headers(api_key_env, self._split)
        self._auth = auth
        # no Accept-Encoding: a compressing server would batch the stream
        self._post_head = request_head("POST", self._split, urllib.parse.urlsplit(self._url).path, {
            "Content-Type": "application/json", "Accept": "text/event-stream" if stream else "application/json",
            **auth})
        self._pool: Optional[Pool] = None
        self._keep_alive: Optional[KeepAlive] = None  # does the server keep connections after a response?
        self._turns = WriteTurns()
        self._frames: dict[int, tuple[bytes, bytes] | None] = {}  # body frames by max_tokens

    def __repr__(self) -> str:  # never shows the API key
        return redact(f"OpenAIClient({self.base_url!r}, model={self.model!r}, api={self.api!r})")

    @property
    def reuses_connections(self) -> bool:
        """False once the server was seen closing a connection after a complete response."""
        return self._keep_alive is None or self._keep_alive.reuses

    def _server_closes(self) -> None:
        if self._keep_alive is not None:
            self._keep_alive.server_closes()

    async def __aenter__(self) -> "OpenAIClient":
        split = self._split
        context = ssl.create_default_context() if split.scheme == "https" else None
        secret = self._secret

        def connection() -> Connection:
            return Connection(self._server_closes, pool.lost, self.keep_wire, secret)

        pool = Pool(split.hostname or "", split.port or (443 if context else 80), limit=self.max_connections,
                    factory=connection, connect_timeout_s=min(self.timeout_s, CONNECT_TIMEOUT_S), ssl=context)
        self._pool = pool
        models = urllib.parse.urlsplit(self.base_url + "/models").path
        self._get_models = request_head("GET", self._split, models, self._auth) + b"0\r\n\r\n"
        self._keep_alive = KeepAlive(pool, self._get_models)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._keep_alive is not None:
            await self._keep_alive.close()
        if self._pool is not None:
            self._pool.close_all()
        self._pool = self._keep_alive = None

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
        here), else built now. No byte is written before ``plan.scheduled_at``, the last
        ``spin_s`` of the wait spent spinning. Cancellation by the caller is not a failed
        request: ``CancelledError`` propagates.
        """
        if self._pool is None:
            raise RuntimeError("OpenAIClient must be used as 'async with OpenAIClient(...)'")
        data = plan.body if plan.body is not None else self.build_body(plan)
        plan.body = None
        ex = RawExchange(plan, None, None, None, [], None, None, request_bytes=len(data))
        head = b"%s%d\r\n\r\n" % (self._post_head, len(data))
        fresh = not self.reuses_connections
        while True:
            try:
                if await self._exchange(head, data, ex, fresh, spin_s) and self._keep_alive is not None:
                    await self._keep_alive.wait()
            except asyncio.CancelledError:
                raise
            except ConnectTimeout as exc:
                self._fail(ex, "transport", f"connect timeout to {self._url}: {_describe(exc)}")
            except asyncio.TimeoutError:
                self._fail(ex, "timeout", f"no complete response within {self.timeout_s:g} s")
            except ResponseTooLarge as exc:
                self._fail(ex, "malformed_stream", str(exc))
            except OSError as exc:  # ConnectionError and every failed connect
                if ex.retries < UNSENT_RETRIES and self._unsent(exc, ex):
                    # The server had closed a kept-alive connection before the request was
                    # written, so it cannot have read it. Send it again on a new connection;
                    # the send time is stamped anew (the failed attempt shows as send lag)
                    # and the retry is counted.
                    ex.sent_at = None
                    ex.retries += 1
                    fresh = True
                    self._server_closes()
                    continue
                self._fail(ex, "transport", f"{self._url}: {_describe(exc)}")
            return ex

    async def _exchange(self, head: bytes, data: bytes, ex: RawExchange, fresh: bool, spin_s: float) -> bool:
        """One attempt: a connection from the pool, the write at the deadline, the response.
        True when a response under 400 came back whole."""
        pool = self._pool
        assert pool is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        conn = None if fresh else pool.take_idle()
        if conn is None:
            conn = await pool.acquire(fresh, deadline)
        complete = probed = False
        try:
            if ex.plan.scheduled_at > perf_counter():
                await sleep_until(ex.plan.scheduled_at, spin_s)
            turn = self._turns.admit()
            if turn is not None:  # a burst: this request is written in a later loop turn
                await turn
            waiter = conn.arm(ex, response_byte_limit(ex.plan.max_tokens))
            timer = loop.call_at(deadline, conn.expire)
            try:
                rest = conn.write(head, data)
                if rest is not None:
                    await rest
                await waiter
            finally:
                timer.cancel()
            complete = True
        finally:
            if complete and ex.status is not None and ex.status < 400 and self._keep_alive is not None:
                if conn.peer_eof:
                    self._server_closes()  # the server ended the connection right after a response
                elif conn.keep and not fresh:
                    probed = self._keep_alive.probe(conn)
            if not complete:
                conn.disarm()
            if not probed:  # a resend's connection is not pooled
                pool.release(conn, complete and conn.keep and self.reuses_connections and not fresh)
        return ex.status is not None and ex.status < 400

    @staticmethod
    def _unsent(exc: BaseException, ex: RawExchange) -> bool:
        """The request provably never reached the server, so it may be sent again.

        Only when no byte of it was handed to the connection: the connection was found
        ended by the server first (``RequestNotWritten``). Never after a status or a read,
        and not after a failed connect (a fresh one would fail alike). A server that read
        the request and then closed the connection (a disconnect after the write, a reset
        while reading) is not covered: that request reached it, and its loss is a failure.
        """
        if ex.status is not None or ex.reads:
            return False
        return isinstance(exc, RequestNotWritten)

    async def open_connections(self, n: int) -> int:
        """Open up to ``n`` keep-alive connections ahead of a run; return how many succeeded.

        A connect inside a timed send costs several loop turns (measured: send lag P99
        1.2 ms with a warm pool vs 7.9 ms cold, Poisson 100 req/s). Uses ``GET /models``,
        so no tokens are generated.
        """
        pool = self._pool
        if pool is None:
            raise RuntimeError("OpenAIClient must be used as 'async with OpenAIClient(...)'")
        n = min(n, self.max_connections)
        loop = asyncio.get_running_loop()

        async def one() -> bool:
            try:
                conn = await pool.acquire(True, loop.time() + self.timeout_s)
            except (OSError, asyncio.TimeoutError):
                return False
            ex, _ = await get_on(conn, self._get_models, self.timeout_s)
            ok = ex.status is not None and ex.status < 400
            pool.release(conn, ok and conn.keep)
            return ok

        return sum(await asyncio.gather(*(one() for _ in range(n))))

    def _fail(self, ex: RawExchange, kind: str, detail: str) -> None:
        ex.end_at = perf_counter()
        ex.error_kind = kind
        ex.error_detail = redact(detail)

    async def list_models(self) -> list[str]:
        """Model ids served at ``GET /v1/models`` (control plane)."""
        url = self.base_url + "/models"
        headers = dict(self._auth)
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


__all__ = ["ERROR_BODY_LIMIT", "READ_OVERHEAD", "OpenAIClient", "RawExchange", "RequestPlan", "check_reachable",
           "normalize_base_url", "response_byte_limit"]

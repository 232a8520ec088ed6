"""Responses retimed to the packets that carried them (pure, no I/O).

With a packet capture (``docs/capture.md``), every byte a response's TCP stream delivered
has an exact arrival time (``measure/records/packets.py``). The client kept, per response, the
connection's four addresses, how many bytes the connection had delivered before it, and
the raw bytes (status line, headers, chunked framing). Here:

* ``body_map`` finds where each body byte sits in the raw bytes (headers skipped, chunk
  sizes and CRLFs of ``Transfer-Encoding: chunked`` stepped over, ``Content-Length`` or the
  connection's end otherwise);
* ``retime`` rewrites the response's reads so that each piece carries the arrival time of
  its packet: an SSE event is then stamped with the packet that carried its last byte.
  Bytes no packet accounts for keep their read-time stamp and their events count as
  unmapped;
* ``ClockMap`` puts kernel packet stamps (CLOCK_REALTIME) on the client's monotonic clock
  from two measured offsets, before and after the run, interpolated.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Callable, Optional

from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.measure.metrics import distribution
from pytest_goodput.measure.records.packets import ConnKey, Departures, Stream, address, stream_at
from pytest_goodput.measure.records.sse import SSEParser
from pytest_goodput.schema.runs.results import ReceiveTimestamps

#: (body offset, raw offset, length) of one stretch of body bytes
Piece = tuple[int, int, int]


class FramingError(ValueError):
    """The raw bytes are not one HTTP/1.1 response this module can follow."""


def _headers(raw: bytes, off: int) -> tuple[int, int, dict[str, str]]:
    end = raw.find(b"\r\n\r\n", off)
    if end < 0:
        raise FramingError("response headers incomplete")
    lines = raw[off:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise FramingError(f"not an HTTP status line: {lines[0][:60]!r}")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip().lower()
    return int(parts[1]), end + 4, fields


def body_map(raw: bytes) -> list[Piece]:
    """Where the body of the HTTP/1.1 response at the start of ``raw`` lies in ``raw``.

    Interim (1xx) responses are skipped. A body cut off by the end of ``raw`` maps as far
    as it goes. Raises :class:`FramingError` when the bytes are not a response.
    """
    off = 0
    while True:
        status, off, fields = _headers(raw, off)
        if not 100 <= status < 200:
            break
    pieces: list[Piece] = []
    if "chunked" in fields.get("transfer-encoding", ""):
        body = 0
        while True:
            eol = raw.find(b"\r\n", off)
            if eol < 0:
                return pieces
            try:
                size = int(raw[off:eol].split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise FramingError(f"bad chunk size line at byte {off}") from None
            if size == 0:
                return pieces
            start = eol + 2
            n = min(size, len(raw) - start)
            if n > 0:
                pieces.append((body, start, n))
                body += n
            if n < size:
                return pieces
            off = start + size + 2
    length = fields.get("content-length")
    n = len(raw) - off if length is None or not length.isdigit() else min(int(length), len(raw) - off)
    return [(0, off, n)] if n > 0 else []


@dataclass(frozen=True)
class ClockMap:
    """Maps CLOCK_REALTIME nanoseconds onto the client's monotonic seconds.

    ``offset0_ns`` and ``offset1_ns`` (realtime minus monotonic) were measured at the
    monotonic instants ``at0_ns`` and ``at1_ns``; between them the offset is interpolated.
    ``error_ns`` bounds the mapping: the larger half-bracket of the two measurements plus
    how far the offset moved between them (a step in the wall clock anywhere in the run).
    """

    at0_ns: int
    offset0_ns: int
    at1_ns: int
    offset1_ns: int
    bracket_ns: int = 0  # the larger of the two measurements' bracket widths

    @property
    def error_ns(self) -> int:
        return self.bracket_ns // 2 + abs(self.offset1_ns - self.offset0_ns)

    def to_mono(self, t_ns: int) -> float:
        """Monotonic seconds (``time.perf_counter``'s clock) of a realtime stamp."""
        mono = t_ns - self.offset0_ns
        span = self.at1_ns - self.at0_ns
        if span > 0:
            frac = min(1.0, max(0.0, (mono - self.at0_ns) / span))
            mono = t_ns - round(self.offset0_ns + frac * (self.offset1_ns - self.offset0_ns))
        return mono / 1e9

    def to_real(self, mono_s: float) -> int:
        """The realtime nanoseconds of a monotonic instant (for matching connections)."""
        return round(mono_s * 1e9) + self.offset0_ns


@dataclass
class Retimed:
    """One response after retiming: how many of its events a packet accounted for."""

    events: int = 0
    mapped: int = 0
    lags_ms: list[float] = field(default_factory=list)  # read time - packet time, per mapped event
    end_lag_ms: Optional[float] = None  # read-time end - the last byte's packet time
    end_mapped: bool = False  # a packet carried the response's last byte

    @property
    def complete(self) -> bool:
        """Every event mapped (a response without events: its end)."""
        return self.mapped == self.events if self.events else self.end_mapped


def _event_times(reads: list[tuple[float, bytes]]) -> list[float]:
    parser, times = SSEParser(), []
    for t, data in reads:
        times += [t] * len(parser.feed(data))
    return times


def _split(reads: list[tuple[float, bytes]], cuts: list[tuple[int, Optional[float]]]) -> list[tuple[float, bytes, bool]]:
    """``reads`` cut at body offsets; each piece stamped with its packet's time, else its read's.

    ``cuts`` are ``(end offset, packet time or None)`` in body offsets, increasing.
    """
    out: list[tuple[float, bytes, bool]] = []
    pos, k = 0, 0
    for t_read, data in reads:
        i, n = 0, len(data)
        while i < n:
            while k < len(cuts) and cuts[k][0] <= pos:
                k += 1
            end, t_pkt = cuts[k] if k < len(cuts) else (pos + n - i, None)
            take = min(n - i, end - pos)
            mapped = t_pkt is not None
            piece = data[i:i + take]
            t = t_pkt if mapped else t_read
            if out and out[-1][0] == t and out[-1][2] == mapped:
                out[-1] = (t, out[-1][1] + piece, mapped)
            else:
                out.append((t, piece, mapped))  # type: ignore[arg-type]
            i += take
            pos += take
    return out


def retime(ex: RawExchange, time_of: Callable[[int], Optional[float]],
           next_change: Callable[[int], int]) -> Retimed:
    """Restamp ``ex.reads`` (and ``ex.end_at``) with packet times; return what was mapped.

    ``time_of(offset)`` is when byte ``offset`` of the connection's stream was readable
    (client monotonic seconds) or None; ``next_change(offset)`` the first offset after it
    whose time differs. A stream whose raw bytes do not frame, or whose body differs from
    what the client read, is left as it was (all its events unmapped).
    """
    wire = ex.wire
    before = _event_times(ex.reads)
    result = Retimed(events=len(before))
    if wire is None or not ex.reads:
        return result
    raw = b"".join(wire.chunks)
    try:
        pieces = body_map(raw)
    except FramingError:
        return result
    body = b"".join(d for _, d in ex.reads)
    if b"".join(raw[r:r + n] for _, r, n in pieces)[:len(body)] != body:
        return result
    cuts: list[tuple[int, Optional[float]]] = []
    for b_off, r_off, n in pieces:
        done = 0
        while done < n:
            stream_off = wire.base + r_off + done
            stop = min(n, next_change(stream_off) - wire.base - r_off)
            cuts.append((b_off + stop, time_of(stream_off)))
            done = stop
    split = _split(ex.reads, cuts)
    # a byte unmapped before a mapped one is late: never let a stamp go back in time
    last, reads, flags = float("-inf"), [], []
    for t, data, mapped in split:
        last = max(last, t)
        reads.append((last, data))
        flags.append(mapped)
    after = _event_times(reads)
    parser = SSEParser()
    mapped_events: list[bool] = []
    for (_, data), mapped in zip(reads, flags):
        mapped_events += [mapped] * len(parser.feed(data))
    result.mapped = sum(mapped_events)
    result.lags_ms = [(b - a) * 1e3 for b, a, m in zip(before, after, mapped_events) if m]
    end = time_of(wire.base + len(raw) - 1)
    result.end_mapped = end is not None
    if end is not None and ex.end_at is not None and ex.error_kind is None:
        result.end_lag_ms = (ex.end_at - end) * 1e3
        ex.end_at = max(end, last)
    ex.reads = reads
    return result


def _clocked(stream: Stream, clock: ClockMap) -> tuple[Callable[[int], Optional[float]], Callable[[int], int]]:
    def time_of(offset: int) -> Optional[float]:
        t = stream.time_of(offset)
        return None if t is None else clock.to_mono(t)

    def next_change(offset: int) -> int:
        i = bisect_right(stream.ends, offset)
        return stream.ends[i] if i < len(stream.ends) else offset + (1 << 62)

    return time_of, next_change


def _no_packets(_offset: int) -> Optional[float]:
    return None


def _never(offset: int) -> int:
    return offset + (1 << 62)


def retime_all(exchanges: list[RawExchange], conns: dict[ConnKey, list[Stream]], clock: ClockMap,
               *, packets: int = 0, dropped: int = 0) -> ReceiveTimestamps:
    """Retime every response with a body to its packets; count what was and was not mapped.

    A response is matched to the connection on its four addresses that was open when its
    first byte was read (a reused client port is a new connection, begun later).
    """
    responses = mapped_responses = events = mapped = 0
    lags: list[float] = []
    end_lags: list[float] = []
    for ex in exchanges:
        if not ex.reads or ex.status is None or ex.status >= 400:
            continue
        responses += 1
        stream = None
        if ex.wire is not None:
            w = ex.wire
            key = (address(w.local[0]), w.local[1], address(w.remote[0]), w.remote[1])
            stream = stream_at(conns.get(key, []), clock.to_real(ex.reads[0][0]))
        time_of, next_change = _clocked(stream, clock) if stream is not None else (_no_packets, _never)
        one = retime(ex, time_of, next_change)
        events += one.events
        mapped += one.mapped
        mapped_responses += stream is not None and one.complete
        lags += one.lags_ms
        if one.end_lag_ms is not None:
            end_lags.append(one.end_lag_ms)
    return ReceiveTimestamps(
        source="capture", responses=responses, responses_mapped=mapped_responses, events=events,
        events_mapped=mapped, packets=packets, packets_dropped=dropped,
        clock_error_ms=clock.error_ns / 1e6, receive_lag_ms=distribution(lags),
        end_lag_ms=distribution(end_lags),
    )


def depart_all(exchanges: list[RawExchange], conns: dict[ConnKey, list[Departures]],
               clock: ClockMap) -> tuple[int, list[float]]:
    """Set each request's ``sent_at`` to its captured departure; return how many were found
    and, per request, departure - the client's stamp (ms).

    A request's departure is the first segment of new bytes its connection sent after it was
    armed (``Wire.armed_at``, before any of its bytes were written; HTTP/1.1 without
    pipelining: the previous request's bytes had all left before its response came). The
    client's stamp is taken just before its write; the kernel may send it later (the process
    descheduled between the two, a full send buffer). A request without a captured departure
    keeps its stamp."""
    found, lags = 0, []
    for ex in exchanges:
        w = ex.wire
        if w is None or ex.sent_at is None:
            continue
        key = (address(w.local[0]), w.local[1], address(w.remote[0]), w.remote[1])
        armed = clock.to_real(w.armed_at)
        conn = None
        for one in conns.get(key, []):
            if one.syn_ns <= armed:
                conn = one
        t = conn.first_after(armed) if conn is not None else None
        if t is None:
            continue
        departed = clock.to_mono(t)
        lags.append((departed - ex.sent_at) * 1e3)
        ex.sent_at = departed
        found += 1
    return found, lags


def think_time_note(stamps: ReceiveTimestamps) -> Optional[str]:
    """A closed loop's think-time inflation in words: the client noticing a response's end late."""
    lag = stamps.end_lag_ms
    if stamps.source != "capture" or lag.p50 is None or lag.p99 is None:
        return None
    return (f"closed loop: the client noticed a response's end {lag.p50:.2f} ms (P50) / "
            f"{lag.p99:.2f} ms (P99) after its last packet arrived; each user's next request "
            "went out that much later (think time the scenario did not ask for)")

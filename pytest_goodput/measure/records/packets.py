"""Captured packets of the engine's port as TCP stream arrival times (pure, no I/O).

A packet capture (``load/selfcheck/capture.py``) records, for every server-to-client TCP segment, the
kernel's arrival stamp and the segment's headers. This module turns those into, per
connection, *when each byte of the server's stream became readable in order*: the time a
reader that was never late would have seen it. A late reader's own stamps coalesce all the
segments queued behind it; these do not.

* headers: Ethernet (with 802.1Q tags), IPv4 (no fragments), IPv6 (TCP directly after the
  fixed header), TCP; the payload length comes from the IP length fields, so a capture that
  keeps only the headers (a short snap length) still knows each segment's size;
* sequence numbers: the SYN-ACK gives the server's initial sequence number, stream offset 0
  is the byte after it; numbers wrap modulo 2**32 and are unwrapped against the in-order
  frontier, so streams longer than 4 GiB keep counting;
* retransmits and reordering: a byte is readable when it and every byte before it have
  arrived (TCP delivers in order), so a duplicate changes nothing and a segment after a hole
  waits for the hole to be filled;
* a new SYN-ACK with another initial sequence number on the same four addresses is a new
  connection (a reused client port): both are kept, in time order.
"""

from __future__ import annotations

import ipaddress
import struct
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional

SEQ_MOD = 1 << 32
FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
ETH_P_IP, ETH_P_IPV6, ETH_P_8021Q, ETH_P_8021AD = 0x0800, 0x86DD, 0x8100, 0x88A8
#: One capture record: arrival (ns, CLOCK_REALTIME), link-layer protocol, captured bytes.
RECORD = struct.Struct("<qHH")

#: (client address, client port, server address, server port)
ConnKey = tuple[str, int, str, int]


@dataclass(frozen=True, slots=True)
class Segment:
    """One TCP segment's headers and arrival time."""

    t_ns: int
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    flags: int
    payload: int  # TCP payload bytes, from the IP length fields


def address(raw: bytes | str) -> str:
    """An address in one spelling: IPv4-mapped IPv6 as IPv4, IPv6 compressed."""
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _tcp(data: bytes, off: int, end: int, t_ns: int, src: str, dst: str) -> Optional[Segment]:
    if len(data) < off + 20:
        return None
    sport, dport, seq = struct.unpack_from("!HHI", data, off)
    header = (data[off + 12] >> 4) * 4
    flags = data[off + 13]
    payload = end - off - header
    if header < 20 or payload < 0:
        return None
    return Segment(t_ns, src, sport, dst, dport, seq, flags, payload)


def parse_ip(data: bytes, t_ns: int) -> Optional[Segment]:
    """The TCP segment in an IPv4 or IPv6 packet, or None for anything else (or a fragment)."""
    if not data:
        return None
    version = data[0] >> 4
    if version == 4 and len(data) >= 20:
        ihl = (data[0] & 0x0F) * 4
        total, frag, proto = struct.unpack_from("!H2xHxB", data, 2)
        if proto != 6 or frag & 0x1FFF or frag & 0x2000 or ihl < 20:
            return None
        return _tcp(data, ihl, total, t_ns, address(data[12:16]), address(data[16:20]))
    if version == 6 and len(data) >= 40:
        plen, nxt = struct.unpack_from("!HB", data, 4)
        if nxt != 6:
            return None
        return _tcp(data, 40, 40 + plen, t_ns, address(data[8:24]), address(data[24:40]))
    return None


def parse_ethernet(frame: bytes, t_ns: int) -> Optional[Segment]:
    """The TCP segment in an Ethernet frame (802.1Q/802.1ad tags skipped), or None."""
    off = 12
    while len(frame) >= off + 2:
        (ethertype,) = struct.unpack_from("!H", frame, off)
        if ethertype in (ETH_P_8021Q, ETH_P_8021AD):
            off += 4
            continue
        if ethertype in (ETH_P_IP, ETH_P_IPV6):
            return parse_ip(frame[off + 2:], t_ns)
        return None
    return None


def read_records(blob: bytes) -> Iterator[tuple[int, int, bytes]]:
    """``(t_ns, link protocol, network-layer bytes)`` of a capture file; a cut-off tail is dropped."""
    off, size = 0, RECORD.size
    while off + size <= len(blob):
        t_ns, proto, n = RECORD.unpack_from(blob, off)
        off += size
        if off + n > len(blob):
            return
        yield t_ns, proto, blob[off:off + n]
        off += n


def segments(blob: bytes) -> list[Segment]:
    """Every TCP segment of a capture file (records hold network-layer packets)."""
    out = []
    for t_ns, _proto, data in read_records(blob):
        seg = parse_ip(data, t_ns)
        if seg is not None:
            out.append(seg)
    return out


@dataclass
class Stream:
    """One connection's server-to-client bytes: ``ends[i]`` bytes were readable at ``times[i]``.

    ``times`` (ns, the capture's clock) never decrease; offset 0 is the first byte after the
    SYN-ACK.
    """

    isn: int
    syn_ns: int
    ends: list[int] = field(default_factory=list)
    times: list[int] = field(default_factory=list)
    _pending: list[tuple[int, int, int]] = field(default_factory=list)  # out-of-order (start, end, t)

    @property
    def frontier(self) -> int:
        return self.ends[-1] if self.ends else 0

    def add(self, seq: int, payload: int, t_ns: int) -> None:
        """A data segment arrived at ``t_ns``."""
        f = self.frontier
        rel = (seq - self.isn - 1) % SEQ_MOD
        delta = (rel - f) % SEQ_MOD
        if delta >= SEQ_MOD // 2:
            delta -= SEQ_MOD
        start = f + delta
        end = start + payload
        if end <= f:
            return  # a retransmit of bytes already readable
        if start > f:
            self._pending.append((start, end, t_ns))
            return
        self._advance(end, t_ns)

    def _advance(self, end: int, t_ns: int) -> None:
        t = max(t_ns, self.times[-1]) if self.times else t_ns
        self.ends.append(end)
        self.times.append(t)
        while self._pending:  # segments that waited for this one
            self._pending.sort()
            start, p_end, p_t = self._pending[0]
            if start > self.ends[-1]:
                return
            self._pending.pop(0)
            if p_end > self.ends[-1]:
                self.ends.append(p_end)
                self.times.append(max(p_t, self.times[-1]))

    def time_of(self, offset: int) -> Optional[int]:
        """When byte ``offset`` of the stream was readable (ns), or None if never captured."""
        i = bisect_right(self.ends, offset)
        return self.times[i] if i < len(self.ends) else None


def streams(segs: Iterable[Segment], server_port: int) -> dict[ConnKey, list[Stream]]:
    """The server's streams to each client connection, oldest first per four addresses.

    Segments of a connection whose SYN-ACK was not captured are left out: without the
    initial sequence number their stream offsets are unknown.
    """
    out: dict[ConnKey, list[Stream]] = {}
    for seg in sorted(segs, key=lambda s: s.t_ns):
        if seg.sport != server_port:
            continue
        key = (seg.dst, seg.dport, seg.src, seg.sport)
        conns = out.get(key)
        if seg.flags & SYN:
            if not (seg.flags & ACK):
                continue
            if conns and conns[-1].isn == seg.seq:
                continue  # a retransmitted SYN-ACK
            out.setdefault(key, []).append(Stream(seg.seq, seg.t_ns))
            continue
        if conns and seg.payload > 0:
            conns[-1].add(seg.seq, seg.payload, seg.t_ns)
    return out


def stream_at(conns: list[Stream], t_ns: int) -> Optional[Stream]:
    """The connection on those four addresses that was open at ``t_ns``: the last one begun by then."""
    found = None
    for s in conns:
        if s.syn_ns <= t_ns:
            found = s
    return found


@dataclass
class Departures:
    """One connection's client-to-server data segments as they left: ``times[i]`` (ns) the
    departure of bytes ``starts[i]`` to ``ends[i]`` (offset 0: the byte after the client's
    SYN). A request's departure is its connection's first segment of new data (not a
    retransmit) that left once the request was armed (``first_after``)."""

    isn: int
    syn_ns: int
    times: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    reach: list[int] = field(default_factory=list)  # the highest end sent by each segment

    def add(self, seq: int, payload: int, t_ns: int) -> None:
        start = (seq - self.isn - 1) % SEQ_MOD
        if self.reach:  # unwrap against the highest byte sent so far
            top = self.reach[-1]
            delta = (start - top) % SEQ_MOD
            start = top + (delta - SEQ_MOD if delta >= SEQ_MOD // 2 else delta)
        self.times.append(t_ns)
        self.starts.append(start)
        self.ends.append(start + payload)
        self.reach.append(max(start + payload, self.reach[-1] if self.reach else 0))

    def first_after(self, t_ns: int) -> Optional[int]:
        """When the first new bytes at or after ``t_ns`` left (ns), or None if none did."""
        i = bisect_right(self.times, t_ns - 1)
        sent = self.reach[i - 1] if i else 0
        for k in range(i, len(self.times)):
            if self.ends[k] > sent:
                return self.times[k]
        return None


def departures(segs: Iterable[Segment], server_port: int) -> dict[ConnKey, list[Departures]]:
    """The client's data segments to ``server_port``, per connection (its SYN begins one),
    oldest first per four addresses; a connection whose SYN was not captured is left out."""
    out: dict[ConnKey, list[Departures]] = {}
    for seg in sorted(segs, key=lambda s: s.t_ns):
        if seg.dport != server_port:
            continue
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        conns = out.get(key)
        if seg.flags & SYN:
            if seg.flags & ACK or (conns and conns[-1].isn == seg.seq):
                continue  # not the client's, or a retransmitted SYN
            out.setdefault(key, []).append(Departures(seg.seq, seg.t_ns))
            continue
        if conns and seg.payload > 0:
            conns[-1].add(seg.seq, seg.payload, seg.t_ns)
    return out

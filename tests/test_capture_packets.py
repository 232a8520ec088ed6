"""Packet capture, the pure parts: hand-built packets to stream times, SSE byte offsets to events.

Every expected number is computed by hand in the comments (docs/metrics.md, "Receive
timestamps").
"""

from __future__ import annotations

import socket
import struct

import pytest

from pytest_goodput.load.client.capture_process import bpf_program
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan, Wire
from pytest_goodput.measure.records.packets import (
    ACK, RECORD, SYN, parse_ethernet, parse_ip, segments, stream_at, streams,
)
from pytest_goodput.measure.records.retime import ClockMap, FramingError, body_map, retime, retime_all

CLIENT, SERVER = ("127.0.0.1", 40000), ("127.0.0.1", 8000)


def tcp(sport: int, dport: int, seq: int, flags: int, payload: bytes) -> bytes:
    # source port, destination port, seq, ack, data offset 5 words, flags, window, checksum, urgent
    return struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, flags, 65535, 0, 0) + payload


def ipv4(src: str, dst: str, segment: bytes) -> bytes:
    # version 4 / IHL 5, TOS, total length, id, flags DF, TTL, protocol 6, checksum, addresses
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(segment), 0, 0x4000, 64, 6, 0,
                       socket.inet_aton(src), socket.inet_aton(dst)) + segment


def ipv6(src: str, dst: str, segment: bytes) -> bytes:
    return (struct.pack("!IHBB", 6 << 28, len(segment), 6, 64) + socket.inet_pton(socket.AF_INET6, src)
            + socket.inet_pton(socket.AF_INET6, dst) + segment)


def test_ipv4_tcp_headers_and_the_payload_length_of_a_packet_cut_to_its_headers() -> None:
    pkt = ipv4("10.0.0.2", "10.0.0.1", tcp(8000, 40000, 123456, ACK | 0x08, b"x" * 100))
    seg = parse_ip(pkt[:40], 7)  # snap length 40: headers only, the size from the IP header
    assert seg is not None
    assert (seg.src, seg.sport, seg.dst, seg.dport) == ("10.0.0.2", 8000, "10.0.0.1", 40000)
    assert (seg.seq, seg.flags, seg.payload, seg.t_ns) == (123456, 0x18, 100, 7)


def test_ipv6_and_ethernet_with_a_vlan_tag() -> None:
    seg = parse_ip(ipv6("::1", "::1", tcp(8000, 40000, 5, ACK, b"abc")), 1)
    assert seg is not None and (seg.src, seg.payload) == ("::1", 3)
    frame = b"\x00" * 12 + b"\x81\x00\x00\x05" + b"\x08\x00" + ipv4("1.2.3.4", "5.6.7.8", tcp(1, 2, 3, ACK, b"zz"))
    seg = parse_ethernet(frame, 2)
    assert seg is not None and (seg.src, seg.sport, seg.payload) == ("1.2.3.4", 1, 2)
    assert parse_ethernet(b"\x00" * 12 + b"\x08\x06" + b"\x00" * 28, 0) is None  # ARP
    udp = bytearray(ipv4("1.2.3.4", "5.6.7.8", b"\x00" * 8))
    udp[9] = 17
    assert parse_ip(bytes(udp), 0) is None


def test_sequence_wraparound_reordering_and_retransmits() -> None:
    isn = 2**32 - 3  # offset 0 is seq 2**32 - 2; offset 5 is seq (2**32 - 2 + 5) mod 2**32 = 3
    segs = [parse_ip(ipv4(*a), t) for a, t in [
        (("127.0.0.1", "127.0.0.1", tcp(8000, 40000, isn, SYN | ACK, b"")), 50),
        (("127.0.0.1", "127.0.0.1", tcp(8000, 40000, 2**32 - 2, ACK, b"01234")), 100),  # offsets 0-4
        (("127.0.0.1", "127.0.0.1", tcp(8000, 40000, 8, ACK, b"abcde")), 300),  # offsets 10-14, early
        (("127.0.0.1", "127.0.0.1", tcp(8000, 40000, 3, ACK, b"56789")), 400),  # offsets 5-9: fills the hole
        (("127.0.0.1", "127.0.0.1", tcp(8000, 40000, 2**32 - 2, ACK, b"01234")), 500),  # retransmit
        (("127.0.0.1", "127.0.0.1", tcp(40000, 8000, 77, ACK, b"request")), 60),  # client to server
    ]]
    conns = streams([s for s in segs if s is not None], 8000)
    (stream,) = conns[("127.0.0.1", 40000, "127.0.0.1", 8000)]
    # bytes 10-14 arrived at 300 but were readable only when 5-9 came, at 400
    assert (stream.ends, stream.times) == ([5, 10, 15], [100, 400, 400])
    assert [stream.time_of(b) for b in (0, 4, 5, 12, 14, 15)] == [100, 100, 400, 400, 400, None]


def test_a_reused_client_port_is_a_new_connection() -> None:
    key = ("127.0.0.1", 40000, "127.0.0.1", 8000)
    segs = [parse_ip(ipv4("127.0.0.1", "127.0.0.1", tcp(8000, 40000, seq, fl, data)), t) for seq, fl, data, t in [
        (10, SYN | ACK, b"", 1), (11, ACK, b"aaaa", 2), (900, SYN | ACK, b"", 10), (901, ACK, b"bb", 11)]]
    conns = streams([s for s in segs if s is not None], 8000)[key]
    assert [(c.isn, c.ends) for c in conns] == [(10, [4]), (900, [2])]
    assert stream_at(conns, 5) is conns[0] and stream_at(conns, 12) is conns[1]
    assert stream_at(conns, 0) is None


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EV1, EV2 = b"data: 1\n\n", b"data: 2\n\n"  # 9 bytes each
RAW = HEAD + b"9\r\n" + EV1 + b"\r\n" + b"9\r\n" + EV2 + b"\r\n" + b"0\r\n\r\n"


def test_body_offsets_step_over_headers_and_chunk_framing() -> None:
    # status line 17 + content-type 33 + transfer-encoding 28 + blank line 2 = 80 header bytes;
    # "9\r\n" (3) puts event 1 at 83-91, its "\r\n" and "9\r\n" (5) put event 2 at 97-105
    assert len(HEAD) == 80 and len(RAW) == 113
    assert body_map(RAW) == [(0, 83, 9), (9, 97, 9)]
    assert body_map(RAW[:100]) == [(0, 83, 9), (9, 97, 3)]  # a body cut off maps as far as it goes
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody"
    assert body_map(plain) == [(0, 38, 4)]
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + plain  # 25 bytes skipped
    assert body_map(interim) == [(0, 63, 4)]
    with pytest.raises(FramingError):
        body_map(b"garbage\r\n\r\n")


def exchange(reads: list[tuple[float, bytes]], base: int = 200) -> RawExchange:
    plan = RequestPlan(0, "x", 1, 2, 0.0)
    return RawExchange(plan, 0.9, reads[-1][0], 200, list(reads), wire=Wire(CLIENT, SERVER, base, [RAW]))


def packets(drop_second: bool = False) -> bytes:
    """The connection's SYN-ACK (ISN 1000: offset 0 is seq 1001), an earlier 200-byte
    response, then this response in two packets: raw 0-95 at 1.000 s, raw 96-112 at 1.010 s."""
    rows = [(1000, SYN | ACK, b"", 100_000_000), (1001, ACK, b"p" * 200, 500_000_000),
            (1201, ACK, RAW[:96], 1_000_000_000), (1297, ACK, RAW[96:], 1_010_000_000)]
    if drop_second:
        rows.pop()
    blob = b""
    for seq, flags, data, t in rows:
        pkt = ipv4(SERVER[0], CLIENT[0], tcp(SERVER[1], CLIENT[1], seq, flags, data))[:60]
        blob += RECORD.pack(t, 0x0800, len(pkt)) + pkt
    return blob


SAME_CLOCK = ClockMap(0, 0, 0, 0)  # realtime == monotonic in these cases


def test_coalesced_events_get_their_own_packets_times() -> None:
    # both events read at once at 1.050 s; event 1 ends at raw 91 (packet 1, 1.000 s), event 2
    # at raw 105 (packet 2, 1.010 s): receive lags 50 and 40 ms; the end (raw 112) 1.010 s
    ex = exchange([(1.050, EV1 + EV2)])
    conns = streams(segments(packets()), SERVER[1])
    stamps = retime_all([ex], conns, SAME_CLOCK, packets=4)
    assert [t for t, _ in ex.reads] == [1.0, 1.01]
    assert b"".join(d for _, d in ex.reads) == EV1 + EV2
    assert ex.end_at == 1.01
    assert (stamps.source, stamps.responses, stamps.responses_mapped) == ("capture", 1, 1)
    assert (stamps.events, stamps.events_mapped, stamps.mapped_fraction, stamps.exact) == (2, 2, 1.0, True)
    assert stamps.receive_lag_ms.count == 2
    assert stamps.receive_lag_ms.p50 == pytest.approx(40.0) and stamps.receive_lag_ms.max == pytest.approx(50.0)
    assert stamps.end_lag_ms.p50 == pytest.approx(40.0)


def test_an_event_no_packet_carried_keeps_its_read_time_and_is_counted() -> None:
    ex = exchange([(1.050, EV1 + EV2)])
    stamps = retime_all([ex], streams(segments(packets(drop_second=True)), SERVER[1]), SAME_CLOCK)
    assert [t for t, _ in ex.reads] == [1.0, 1.05]
    assert (stamps.events, stamps.events_mapped, stamps.responses_mapped, stamps.exact) == (2, 1, 0, False)
    no_wire = exchange([(1.050, EV1 + EV2)])
    no_wire.wire = None
    stamps = retime_all([no_wire], {}, SAME_CLOCK)
    assert (stamps.events, stamps.events_mapped, no_wire.reads) == (2, 0, [(1.050, EV1 + EV2)])


def test_a_body_that_differs_from_the_wire_is_left_alone() -> None:
    ex = exchange([(1.050, EV1 + b"data: 3\n\n")])
    one = retime(ex, lambda off: 1.0, lambda off: off + 10**9)
    assert (one.events, one.mapped, ex.reads[0][0]) == (2, 0, 1.050)


def test_clock_map_interpolates_the_measured_offsets() -> None:
    # offsets 5.000000 s and 5.000002 s measured at monotonic 1 s and 3 s; a realtime stamp
    # of 7 s is monotonic ~2 s, half-way: offset 5.000001 s, so 1.999999 s
    clock = ClockMap(1_000_000_000, 5_000_000_000, 3_000_000_000, 5_000_002_000, bracket_ns=300)
    assert clock.to_mono(7_000_000_000) == pytest.approx(1.999999, abs=1e-12)
    assert clock.error_ns == 150 + 2000


def test_the_filter_program_keeps_only_the_engine_port() -> None:
    prog = bpf_program(8000)
    assert prog[-3] == (0x15, 0, 1, 8000) and prog[-2][0] == prog[-1][0] == 0x06
    for k, (code, jt, jf, _) in enumerate(prog):  # every jump lands inside the program
        if code & 0x07 == 0x05:
            assert k + 1 + max(jt, jf) < len(prog)


def test_the_summary_line_says_which_stamps_and_how_many_were_mapped() -> None:
    from pytest_goodput.report.text.run_result import receive_line
    from pytest_goodput.schema.runs.results import Distribution, ReceiveTimestamps

    assert receive_line(ReceiveTimestamps(source="read", reason="capture off")) == "read time (capture off)"
    ts = ReceiveTimestamps(source="capture", responses=2, responses_mapped=1, events=4, events_mapped=3,
                           packets=9, clock_error_ms=0.0001,
                           receive_lag_ms=Distribution(count=3, p50=40.0, p99=50.0))
    assert receive_line(ts) == ("packet capture: 3 / 4 events mapped (75.0%), 1 / 2 responses; receive "
                                "lag p50 40.00 / p99 50.00 ms; 0 packets dropped; clock error <= 0.0001 ms")


def test_a_tests_receive_note_sums_the_runs_hand_computed():
    from pytest_goodput.report.text.run_result import receive_note
    from pytest_goodput.schema.runs.results import ReceiveTimestamps

    class Spec:
        def __init__(self, capture):
            self.capture = capture

    class Run:  # only the fields the note reads
        def __init__(self, ts, capture="auto"):
            self.receive_timestamps, self.spec = ts, Spec(capture)

    full = ReceiveTimestamps(source="capture", responses=4, responses_mapped=4, events=40, events_mapped=40)
    part = ReceiveTimestamps(source="capture", responses=4, responses_mapped=3, events=40, events_mapped=35)
    fallback = ReceiveTimestamps(source="read", reason="no CAP_NET_RAW")
    assert receive_note([Run(full), Run(part), Run(None)]) == (
        "receive times: packet capture in 2 of 2 runs, 75 / 80 events mapped; 1 run(s) fully mapped, "
        "where event-loop lag is not held against the run (docs/capture.md)")
    assert receive_note([Run(fallback)]) == "receive times: read time (no CAP_NET_RAW)"
    assert receive_note([Run(None)]) is None
    off = ReceiveTimestamps(source="read", reason="capture off")
    assert receive_note([Run(off, capture="off")]) is None  # not asked for: no note

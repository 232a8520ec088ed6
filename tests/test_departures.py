"""Requests' departures from the capture: hand-built segments to each request's ``sent_at``.

Every expected number is computed by hand in the comments (docs/metrics.md, "Departures").
"""

from __future__ import annotations

from pytest_goodput.load.client.capture_process import bpf_program, departures_program
from pytest_goodput.load.selfcheck.departures import judge_departures
from pytest_goodput.load.selfcheck.health import judge
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan, Wire
from pytest_goodput.measure.metrics import distribution
from pytest_goodput.measure.records.packets import ACK, SYN, Segment, departures
from pytest_goodput.measure.records.retime import ClockMap, depart_all
from pytest_goodput.schema.runs.results import ReceiveTimestamps

CLIENT, SERVER = ("127.0.0.1", 40000), ("127.0.0.1", 8000)
MS = 1_000_000  # ns


def out(t_ms: float, seq: int, flags: int, payload: int, sport: int = 40000) -> Segment:
    return Segment(round(t_ms * MS), "127.0.0.1", sport, "127.0.0.1", 8000, seq, flags, payload)


# a connection: SYN (ISN 1000) at 0 ms; request 1's 200 bytes at 10 ms, sent again at 50 ms
# (a retransmit), request 2's 300 bytes at 100 ms, in two segments (100 ms and 100.5 ms)
SEGMENTS = [out(0, 1000, SYN, 0), out(10, 1001, ACK, 200), out(50, 1001, ACK, 200),
            out(100, 1201, ACK, 100), out(100.5, 1301, ACK, 200),
            Segment(5 * MS, "127.0.0.1", 8000, "127.0.0.1", 40000, 7, SYN | ACK, 0)]  # the server's


def test_a_departure_is_the_first_new_segment_after_the_request_was_armed():
    conn = departures(SEGMENTS, 8000)[("127.0.0.1", 40000, "127.0.0.1", 8000)]
    assert len(conn) == 1 and conn[0].starts == [0, 0, 200, 300]
    assert conn[0].first_after(5 * MS) == 10 * MS  # request 1
    # armed at 20 ms: the 50 ms segment carries bytes 0..200 again (sent by 10 ms), so the
    # request's first new bytes left at 100 ms
    assert conn[0].first_after(20 * MS) == 100 * MS
    assert conn[0].first_after(101 * MS) is None


def test_a_reused_client_port_is_a_new_connection_and_sequence_numbers_wrap():
    isn = (1 << 32) - 50  # 49 bytes before the wrap
    segs = [out(0, 5, SYN, 0), out(1, 6, ACK, 10), out(200, isn, SYN, 0),
            out(210, isn + 1, ACK, 49), out(220, 0, ACK, 10)]
    conns = departures(segs, 8000)[("127.0.0.1", 40000, "127.0.0.1", 8000)]
    assert [c.syn_ns for c in conns] == [0, 200 * MS]
    assert conns[1].starts == [0, 49] and conns[1].first_after(211 * MS) == 220 * MS


def exchange(index: int, armed_s: float, stamp_s: float) -> RawExchange:
    plan = RequestPlan(index=index, prompt="p", prompt_tokens=1, max_tokens=1, scheduled_at=armed_s)
    wire = Wire(CLIENT, SERVER, 0, [], armed_at=armed_s)
    return RawExchange(plan, stamp_s, stamp_s + 1, 200, [], wire=wire)


def test_sent_at_becomes_the_departure_and_the_lag_behind_the_stamp_is_kept():
    clock = ClockMap(0, 0, 0, 0)  # packet clock = client clock
    # request 1 armed at 5 ms, stamped 9.5 ms, left at 10 ms: lag 0.5 ms; request 2 armed
    # at 20 ms, stamped 30 ms, left at 100 ms (the process descheduled): lag 70 ms; request
    # 3 on a connection never captured keeps its stamp
    exs = [exchange(0, 0.005, 0.0095), exchange(1, 0.020, 0.030), exchange(2, 0.2, 0.25)]
    exs[2].wire = Wire(("127.0.0.1", 40001), SERVER, 0, [], armed_at=0.2)
    found, lags = depart_all(exs, departures(SEGMENTS, 8000), clock)
    assert found == 2 and [round(x, 6) for x in lags] == [0.5, 70.0]
    assert [round(ex.sent_at, 6) for ex in exs] == [0.01, 0.1, 0.25]


def stamps(lags: list[float]) -> ReceiveTimestamps:
    return ReceiveTimestamps(source="capture", requests_departed=len(lags), departure_lag_ms=distribution(lags))


def test_an_open_loop_late_to_its_departures_is_invalid_though_its_stamps_were_on_time():
    health = judge(cpu_utilization=0.1, loop_lags_ms=[0.1] * 50, send_lags_ms=[0.5] * 100, open_loop=True,
                   mean_gap_s=0.01)
    assert health.valid
    # departures 0.5 ms after the stamps for 98 requests, 40 ms for 2: P99 of the send lags
    # to departure (schedule -> departure) 1.0 ms for 98, 40.5 ms for 2 > the 10 ms limit
    lags = [1.0] * 98 + [40.5] * 2
    judged = judge_departures(health, stamps([0.5] * 98 + [40.0] * 2), lags, open_loop=True, mean_gap_s=0.01)
    assert not judged.valid and "measured to the requests' captured departures" in judged.reasons[0]
    assert "departures from the capture for 100 requests" in judged.notes[-1]


def test_a_closed_loop_counts_from_its_departures_and_is_told_so():
    health = judge(cpu_utilization=0.1, loop_lags_ms=[0.1] * 50, send_lags_ms=[], open_loop=False)
    judged = judge_departures(health, stamps([0.2, 0.4, 20.0]), [], open_loop=False, mean_gap_s=None)
    assert judged.valid
    assert judged.notes[-1].endswith("TTFT and E2E count from the departure")
    assert "0.400 ms (P50)" in judged.notes[-1]
    assert judge_departures(health, ReceiveTimestamps(source="read"), [], open_loop=False,
                            mean_gap_s=None) == health


def test_the_departures_filter_keeps_outgoing_segments_to_the_engine_port():
    arrivals, leaving = bpf_program(8000), departures_program(8000)
    assert arrivals[1] == (0x15, 16, 0, 4) and leaving[1] == (0x15, 0, 16, 4)  # PACKET_OUTGOING
    assert arrivals[15] == (0x48, 0, 0, 0) and leaving[15] == (0x48, 0, 0, 2)  # source / dest port
    assert leaving[16] == (0x15, 0, 1, 8000)


def test_no_departure_without_the_clients_syn():
    assert departures([out(10, 1001, ACK, 200)], 8000) == {}

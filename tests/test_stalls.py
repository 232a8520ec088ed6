"""The stall rule: one long stall of the client's event loop, found and counted per request.

Hand-computed cases (``docs/metrics.md``, "Client stalls"): the TTFT and TPOT bounds of a
request against stall windows, the count against the limits, and the verdict at 0.5 %.
"""

from __future__ import annotations

import json

from pytest_goodput.load.selfcheck.health import LoopLagMonitor, judge
from pytest_goodput.load.selfcheck.stalls import Stalls, first_content_at, read_bounds, request_delays
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.metrics import judge_loop_lag
from pytest_goodput.measure.stall_rule import delayed_count, stall_reason, too_many


def chunk(text: str) -> bytes:
    return f"data: {json.dumps({'choices': [{'text': text}]})}\n\n".encode()


def exchange(index: int, sent: float, reads: list[float], warmup: bool = False) -> RawExchange:
    plan = RequestPlan(index=index, prompt="p", prompt_tokens=1, max_tokens=len(reads),
                       scheduled_at=sent, warmup=warmup)
    body = [(t, chunk("a")) for t in reads] + [(reads[-1], b"data: [DONE]\n\n")]
    return RawExchange(plan=plan, sent_at=sent, end_at=reads[-1], status=200, reads=body)


def bounds(ex: RawExchange, stalls: list[tuple[float, float]]) -> tuple[float, float]:
    ttft, tpot = read_bounds(ex, Stalls(stalls))
    return round(ttft * 1e3, 6), round(tpot * 1e3, 6)


EVERY_10MS = [round(0.091 + 0.010 * k, 3) for k in range(11)]  # first token read at 91 ms


def test_a_first_token_read_right_after_a_stall_may_have_waited_the_whole_stall():
    # stall 10..90 ms, first content read at 91 ms (within the 5 ms slack): the token may have
    # come at 10 ms, so TTFT is high by at most 90 - 10 = 80 ms; the stream came after it.
    assert bounds(exchange(0, 0.0, EVERY_10MS), [(0.010, 0.090)]) == (80.0, 0.0)


def test_a_stall_before_the_send_counts_only_from_the_send():
    # written at 30 ms during a stall 10..90 ms (a closed loop stamps the write): bound 60 ms
    assert bounds(exchange(0, 0.030, EVERY_10MS), [(0.010, 0.090)]) == (60.0, 0.0)


def test_a_first_token_read_later_than_the_slack_was_not_held_up():
    late = [0.200 + 0.010 * k for k in range(3)]
    assert bounds(exchange(0, 0.0, late), [(0.010, 0.090)]) == (0.0, 0.0)


def test_a_stall_mid_stream_spreads_over_the_chunk_gaps():
    # reads 20..220 ms every 20 ms (11 chunks, 10 gaps); stall 100..160 ms overlaps 60 ms:
    # TPOT high by at most 60 / 10 = 6 ms; the first token (20 ms) came before the stall.
    reads = [0.020 + 0.020 * k for k in range(11)]
    assert bounds(exchange(0, 0.0, reads), [(0.100, 0.160)]) == (0.0, 6.0)


def test_two_stalls_within_the_slack_of_the_first_read_take_the_longer_bound():
    # stalls 10..50 ms and 52..60 ms, first content read at 53 ms, within both stalls' slack: the first may have waited 50 - 10 = 40 ms (first stall), the second 53 - 52 = 1 ms
    reads = [0.053 + 0.010 * k for k in range(5)]
    assert bounds(exchange(0, 0.0, reads), [(0.010, 0.050), (0.052, 0.060)])[0] == 40.0


def test_stalls_overlap_is_summed_over_many_windows_and_cut_at_the_stream():
    # stream 20..220 ms; stalls 0..30 (10 ms inside), 100..110, 120..130, 215..300 (5 ms):
    # overlap 10 + 10 + 10 + 5 = 35 ms over 10 gaps = 3.5 ms
    reads = [0.020 + 0.020 * k for k in range(11)]
    stalls = [(0.0, 0.030), (0.100, 0.110), (0.120, 0.130), (0.215, 0.300)]
    assert bounds(exchange(0, 0.0, reads), stalls)[1] == 3.5


def test_the_rule_reads_only_a_streams_first_events_to_find_its_first_content():
    # the events after the first content are counted by their framing, never decoded: a
    # stream whose later bytes are no JSON at all still has its bound
    reads = [0.020 + 0.020 * k for k in range(11)]
    ex = exchange(0, 0.0, reads)
    ex.reads[1:11] = [(t, b"data: {not json\n\n") for t, _ in ex.reads[1:11]]
    assert bounds(ex, [(0.100, 0.160)]) == (0.0, 6.0)


def test_delays_keep_measured_requests_over_3ms_and_late_sends():
    stalls = [(0.010, 0.090)]
    exchanges = [exchange(0, 0.0, EVERY_10MS, warmup=True),  # warm-up: not measured
                 exchange(1, 0.0, EVERY_10MS),               # read 80 ms late
                 exchange(2, 0.0, [0.3, 0.31]),              # after the stall: nothing
                 exchange(3, 0.0, [0.3, 0.31])]              # sent 25 ms late (open loop)
    assert request_delays(exchanges, stalls, {3: 25.0}) == [(0.0, 80.0, 0.0), (25.0, 0.0, 0.0)]


def test_the_count_takes_late_sends_always_and_late_reads_unless_receive_times_are_exact():
    delays = [(0.0, 80.0, 0.0), (0.0, 0.0, 6.0), (25.0, 0.0, 0.0)]
    assert delayed_count(delays, 10.0) == 2
    assert delayed_count(delays, 5.0) == 3
    assert delayed_count(delays, None) == 1


def test_more_than_half_a_percent_delayed_is_invalid():
    assert not too_many(1, 240) and too_many(2, 240)  # 0.5 % of 240 is 1.2
    assert too_many(1, 100) and not too_many(0, 10)


def _judged(delays, measured=240, exact=False):
    return judge(cpu_utilization=0.1, loop_lags_ms=[0.2] * 100 + [85.0], send_lags_ms=[0.1] * 240,
                 open_loop=False, requests=242, measured=measured, delays=delays, exact_receive=exact)


def test_one_stall_that_delayed_two_of_240_invalidates_a_run_its_loop_lag_p99_passes():
    h = _judged([(0.0, 80.0, 0.0), (0.0, 41.0, 0.0)])
    assert h.loop_lag_p99_ms is not None and h.loop_lag_p99_ms < 1.0  # the P99 rule sees nothing
    assert not h.valid and h.delayed_requests == 2
    assert h.reasons == [stall_reason(2, 240, 85.0, 10.0)]
    assert "2 of 240 measured requests" in h.reasons[0] and "longest loop stall 85 ms" in h.reasons[0]


def test_one_delayed_request_in_240_is_a_note_and_exact_receive_times_clear_read_delays():
    one = _judged([(0.0, 80.0, 0.0)])
    assert one.valid and one.delayed_requests == 1 and "not held against the run" in one.notes[0]
    exact = _judged([(0.0, 80.0, 0.0), (0.0, 41.0, 0.0)], exact=True)
    assert exact.valid and exact.delayed_requests == 0


def test_the_count_is_judged_again_at_the_limit_the_latencies_set():
    # during the run the ceiling (10 ms) counts one; an ITL P50 of 2 ms sets the limit to 3 ms
    # (the floor), which counts both: 2 of 240 > 0.5 %
    h = _judged([(0.0, 8.0, 0.0), (0.0, 80.0, 0.0)])
    assert h.valid and h.delayed_requests == 1
    again = judge_loop_lag(h, ttft_p50_ms=20.0, itl_p50_ms=2.0)
    assert not again.valid and again.delayed_requests == 2
    assert again.reasons == [stall_reason(2, 240, 85.0, again.loop_lag_limit_ms)]


def test_the_monitor_keeps_a_window_for_a_wake_up_later_than_3ms():
    import asyncio
    import time

    m = LoopLagMonitor()

    async def blocked() -> None:
        m.start()
        await asyncio.sleep(0.02)
        time.sleep(0.05)  # the loop blocked 50 ms
        await asyncio.sleep(0.02)
        await m.stop()
    asyncio.run(blocked())
    assert any(e - s >= 0.045 for s, e in m.stalls), m.stalls


def test_the_ttft_bound_counts_to_the_first_chunk_with_visible_text() -> None:
    ex = exchange(0, 0.0, [0.010, 0.091, 0.101])
    ex.reads[0] = (0.010, chunk(" "))  # a whitespace flush: TTFT counts to the read at 91 ms
    assert first_content_at(ex) == 0.091
    blank = exchange(1, 0.0, [0.010, 0.020])
    blank.reads[:2] = [(0.010, chunk(" ")), (0.020, chunk("\n"))]
    assert first_content_at(blank) == 0.010  # whitespace only: its first chunk

"""The simulator's pure performance model, in virtual time (no sockets, no wall clock)."""

from __future__ import annotations

import random

import pytest

from pytest_goodput.sim.model import (
    EngineModel,
    RequestTooLong,
    SimRequest,
    draw_output_length,
    simulate,
)
from pytest_goodput.sim.profile import (
    PRESETS,
    SimProfile,
    SimProfileError,
    profile_from_env_and_args,
)

DEFAULT = SimProfile()  # noise off, 4 ms base, 0.4 ms/seq, 0.002 ms/ctx token, 0.02 ms/prefill token


def poisson(rate: float, n: int, seed: int = 1, isl: int = 128, osl: int = 64) -> list[SimRequest]:
    rng, t, out = random.Random(seed), 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        out.append(SimRequest(i, isl, osl, t))
    return out


def p(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, -(-len(s) * pct // 100) - 1)]


def attainment(lines, ttft_s: float, tpot_s: float) -> float:
    return sum(1 for x in lines if x.ttft <= ttft_s and x.tpot <= tpot_s) / len(lines)


def test_single_request_timing_is_hand_computable() -> None:
    (line,) = simulate(DEFAULT, [SimRequest("a", 128, 4)])
    prefill = 4.0 + 128 * 0.02  # ms
    decodes = [4.0 + 0.4 + 0.002 * ctx for ctx in (129, 130, 131)]
    expected, t = [], prefill
    expected.append(t)
    for d in decodes:
        t += d
        expected.append(t)
    assert [x * 1000 for x in line.token_times] == pytest.approx(expected, abs=1e-9)
    assert line.ttft == pytest.approx(0.00656)
    assert line.tpot == pytest.approx(sum(decodes) / 3 / 1000)


def test_chunked_prefill_splits_a_long_prompt_over_the_token_budget() -> None:
    (line,) = simulate(DEFAULT, [SimRequest("a", 1000, 1)])
    assert line.ttft * 1000 == pytest.approx((4 + 512 * 0.02) + (4 + 488 * 0.02))


def test_decodes_and_prefill_share_one_step() -> None:
    m = EngineModel(DEFAULT)
    m.add_request("a", 16, 10)
    m.step()  # a prefilled, first token
    m.add_request("b", 100, 10)
    res = m.step()
    assert res.decode_seqs == 1 and res.prefill_tokens == 100
    assert res.duration_s * 1000 == pytest.approx(4 + 0.4 + 0.002 * 17 + 100 * 0.02)
    assert [(r, n) for r, n, _ in res.emitted] == [("a", 1), ("b", 1)]


def test_ttft_and_tpot_rise_with_load() -> None:
    rows = []
    for rate in (4.0, 12.0, 20.0):
        lines = simulate(DEFAULT, poisson(rate, 600))
        rows.append((p([x.ttft for x in lines], 50), p([x.tpot for x in lines], 50)))
    ttfts, tpots = zip(*rows)
    assert ttfts[0] < ttfts[1] < ttfts[2]
    assert tpots[0] < tpots[1] < tpots[2]
    assert tpots[2] > 2 * tpots[0]


def test_attainment_collapses_past_the_knee() -> None:
    # SLO: TTFT <= 200 ms, TPOT <= 40 ms. The default preset saturates near 17-18 req/s.
    low = attainment(simulate(DEFAULT, poisson(8.0, 800)), 0.2, 0.04)
    near = attainment(simulate(DEFAULT, poisson(14.0, 800)), 0.2, 0.04)
    past = attainment(simulate(DEFAULT, poisson(24.0, 800)), 0.2, 0.04)
    assert low == 1.0
    assert near >= 0.95
    assert past < 0.2


def test_batch_never_exceeds_max_num_seqs() -> None:
    prof = SimProfile(max_num_seqs=4)
    m = EngineModel(prof)
    for i in range(10):
        m.add_request(i, 8, 5)
    widest = 0
    while m.has_work:
        m.step()
        widest = max(widest, m.num_running)
    assert widest == 4
    assert m.generation_tokens_total == 50 and m.prompt_tokens_total == 80


def test_kv_exhaustion_preempts_and_every_request_still_completes() -> None:
    small = SimProfile(kv_capacity_tokens=1024, block_size=16, prefix_caching=False)
    reqs = [SimRequest(i, 100, 300) for i in range(8)]  # 8 x 400 tokens >> 1024
    m = EngineModel(small)
    lines = m.simulate(reqs)
    assert m.preemptions_total > 0
    assert sum(x.preemptions for x in lines) == m.preemptions_total
    assert all(len(x.token_times) == 300 for x in lines)
    assert m.kv_usage == 0.0 and not m.has_work
    # recompute costs prompt tokens again, but prompt tokens are counted once
    assert m.prompt_tokens_total == 800
    roomy = EngineModel(SimProfile(kv_capacity_tokens=8192, prefix_caching=False))
    roomy.simulate(reqs)
    assert roomy.preemptions_total == 0


def test_kv_usage_tracks_blocks() -> None:
    m = EngineModel(SimProfile(kv_capacity_tokens=1600, block_size=16, prefix_caching=False))
    m.add_request("a", 160, 10)  # 10 blocks of 100
    m.step()  # prefill 160 tokens -> 10 blocks
    assert m.kv_usage == pytest.approx(0.10)
    m.step()  # decode token 161 -> 11th block
    assert m.kv_usage == pytest.approx(0.11)
    assert m.abort("a") and m.kv_usage == 0.0 and not m.has_work


@pytest.mark.parametrize("knob", ["slowdown", "time_scale"])
def test_step_factor_scales_every_time_exactly(knob: str) -> None:
    reqs = [SimRequest(i, 64 + 8 * i, 32) for i in range(20)]  # all arrive at t=0
    base = simulate(DEFAULT, reqs)
    slow = simulate(DEFAULT.model_copy(update={knob: 1.10}), reqs)
    for a, b in zip(base, slow):
        assert b.token_times == pytest.approx([1.10 * t for t in a.token_times], rel=1e-12)


def test_deterministic_for_a_seed() -> None:
    noisy = SimProfile(noise_sigma=0.2, seed=7)
    a = simulate(noisy, poisson(12.0, 200))
    b = simulate(noisy, poisson(12.0, 200))
    c = simulate(noisy.model_copy(update={"seed": 8}), poisson(12.0, 200))
    assert [x.token_times for x in a] == [x.token_times for x in b]
    assert [x.token_times for x in a] != [x.token_times for x in c]


def test_noise_is_mean_preserving() -> None:
    m = EngineModel(SimProfile(noise_sigma=0.3, seed=3, step_base_ms=10.0))
    durs = []
    for i in range(4000):
        m.add_request(i, 1, 1)
        durs.append(m.step().duration_s)
    mean = sum(durs) / len(durs)
    assert mean == pytest.approx(0.01 + 0.00002, rel=0.03)
    assert min(durs) < 0.007 < 0.014 < max(durs)


def test_prefix_caching_skips_shared_prefill() -> None:
    reqs = [SimRequest(i, 512, 8, float(i), prefix_key="sys", prefix_tokens=480) for i in range(4)]
    m = EngineModel(DEFAULT)
    lines = m.simulate(reqs)
    assert lines[0].ttft * 1000 == pytest.approx(4 + 512 * 0.02)
    for x in lines[1:]:
        assert x.cached_tokens == 480
        assert x.ttft * 1000 == pytest.approx(4 + 32 * 0.02)
    assert m.prefix_cache_hits_total == 3 * 480
    assert m.prefix_cache_queries_total == 4 * 512
    off = EngineModel(DEFAULT.model_copy(update={"prefix_caching": False}))
    assert all(x.cached_tokens == 0 for x in off.simulate(reqs))
    assert off.prefix_cache_hits_total == 0


def test_cached_prefix_blocks_are_evicted_under_pressure() -> None:
    prof = SimProfile(kv_capacity_tokens=640, block_size=16)  # 40 blocks
    m = EngineModel(prof)
    m.simulate([SimRequest("p", 320, 1, prefix_key="k")])  # leaves 20 evictable blocks
    assert m.kv_usage == 0.0
    lines = m.simulate([SimRequest("big", 600, 8, 1.0)])  # needs 38 blocks
    assert len(lines[0].token_times) == 8 and m.preemptions_total == 0
    again = m.simulate([SimRequest("q", 320, 1, 2.0, prefix_key="k")])
    assert again[0].cached_tokens < 320  # the prefix was evicted, at least partly


def test_request_larger_than_the_kv_cache_is_rejected() -> None:
    m = EngineModel(SimProfile(kv_capacity_tokens=256))
    with pytest.raises(RequestTooLong):
        m.add_request("x", 200, 100)


def test_output_length_draws() -> None:
    rng = random.Random(0)
    assert draw_output_length(rng, 64, 0, 0.5, ignore_eos=True) == 64
    lens = [draw_output_length(rng, 64, 10, 0.05, ignore_eos=False) for _ in range(2000)]
    assert min(lens) >= 11 and max(lens) == 64
    assert 20 < sum(lens) / len(lens) < 40  # 10 + geometric(0.05) capped at 64: mean ~28
    a = [draw_output_length(random.Random(5), 64, 0, 0.02, False) for _ in range(3)]
    assert a[0] == a[1] == a[2]


def test_model_is_fast_enough_for_gate_benchmarks() -> None:
    # generous: thousands of requests per CPU second are expected; 1000 must stay well < 5 s
    import time

    t0 = time.process_time()
    simulate(DEFAULT, poisson(15.0, 1000))
    assert time.process_time() - t0 < 5.0


# --- profile ----------------------------------------------------------------------------


def test_profile_precedence_preset_env_args() -> None:
    env = {"GOODPUT_SIM_PRESET": "llama3-8b-h100", "GOODPUT_SIM_SLOWDOWN": "1.2",
           "GOODPUT_SIM_KV_CAPACITY_TOKENS": "4096", "GOODPUT_SIM_PREFIX_CACHING": "false",
           "GOODPUT_SIM_MAX_QUEUE": "none"}
    prof = profile_from_env_and_args({"kv_capacity_tokens": 2048, "seed": None}, env=env)
    assert prof.preset == "llama3-8b-h100" and prof.max_num_seqs == 256
    assert prof.slowdown == 1.2 and prof.kv_capacity_tokens == 2048
    assert prof.prefix_caching is False and prof.max_queue is None
    assert profile_from_env_and_args({"preset": "default"}, env=env).max_num_seqs == 32


def test_profile_errors_name_the_knob() -> None:
    with pytest.raises(SimProfileError, match="GOODPUT_SIM_SLOWDOWN"):
        profile_from_env_and_args(env={"GOODPUT_SIM_SLOWDOWN": "fast"})
    with pytest.raises(SimProfileError, match="unknown simulator preset 'nope'"):
        profile_from_env_and_args(env={"GOODPUT_SIM_PRESET": "nope"})
    with pytest.raises(SimProfileError, match="error_status"):
        profile_from_env_and_args({"error_status": 404}, env={})


def test_presets_are_valid_and_h100_is_faster_per_token() -> None:
    for name in PRESETS:
        profile_from_env_and_args({"preset": name}, env={})
    h100 = profile_from_env_and_args({"preset": "llama3-8b-h100"}, env={})
    lines = simulate(h100, poisson(5.0, 300, isl=1024, osl=128))
    assert 0.03 < p([x.ttft for x in lines], 50) < 0.06  # 1024 x 0.025 ms + a 6 ms step
    assert 0.006 < p([x.tpot for x in lines], 50) < 0.015

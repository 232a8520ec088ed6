"""A/B mode's paired analysis (judge/sequential/ab.py), on hand-computed rounds."""

from __future__ import annotations

import math

import pytest

from pytest_goodput.judge.sequential.ab import (
    DEFAULT_RULE,
    RULES,
    StoppingRule,
    analyse,
    check_rounds,
    compare_paired,
    looks,
    round_order,
)
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.schema.outcomes.ab import ABRound

TPOT = MetricDef.of("metrics.tpot_ms.p50")  # lower is better, tolerance 5 %
THROUGHPUT = MetricDef.of("throughput.output_tokens_per_s")  # higher is better, 5 %
T_2_99 = 6.964556734283274  # t_{2, 0.99}: 98 % two-sided, one look (scipy.stats.t.ppf)
T_2_95 = 2.919985580355516  # t_{2, 0.95}: the cleared side's 5 % at one look
BONFERRONI = RULES["bonferroni"]


def rounds_of(path: str, base: list[float], head: list[float]) -> list[ABRound]:
    return [ABRound(index=i + 1, order=round_order(0, i + 1), base={path: b}, head={path: h})
            for i, (b, h) in enumerate(zip(base, head))]


def log_rounds(path: str, ds: list[float], base: float = 10.0) -> list[ABRound]:
    return rounds_of(path, [base] * len(ds), [base * math.exp(d) for d in ds])


def test_known_ratios_give_the_exact_mean_change_and_interval() -> None:
    # d = 0.10, 0.12, 0.14: mean 0.12, SD 0.02, n 3; one look (min = max = 3): t_{2, 0.99}.
    rounds = log_rounds(TPOT.path, [0.10, 0.12, 0.14])
    c, decided = compare_paired(TPOT, rounds, n_looks=1)
    half = T_2_99 * 0.02 / math.sqrt(3)
    assert c is not None
    assert c.change == pytest.approx(math.expm1(0.12), rel=1e-9)
    assert c.interval[0] == pytest.approx(math.expm1(0.12 - half), rel=1e-6)
    assert c.interval[1] == pytest.approx(math.expm1(0.12 + half), rel=1e-6)
    assert c.baseline == pytest.approx(10.0) and c.current == pytest.approx(10 * math.exp(0.12))
    # +12.7 % is worse than 5 % and the interval [+4.0 %, +22.2 %] excludes 0: regressed by the
    # gate's rule, though not decided early (its lower end is inside the tolerance).
    assert c.verdict == "regressed"
    assert not decided
    result, stop = analyse(rounds, [TPOT], min_rounds=3, max_rounds=3)
    assert stop and not result.stopped_early
    assert result.regressed == [TPOT.path]
    assert "round limit 3" in result.stop_reason


def test_bonferroni_spends_alpha_over_the_looks() -> None:
    rounds = log_rounds(TPOT.path, [0.10, 0.12, 0.14])
    one, _ = compare_paired(TPOT, rounds, n_looks=1)
    eight, _ = compare_paired(TPOT, rounds, n_looks=looks(3, 10))
    assert looks(3, 10) == 8
    assert eight.interval[1] > one.interval[1] and eight.interval[0] < one.interval[0]
    result, _ = analyse(rounds, [TPOT], rule=BONFERRONI, min_rounds=3, max_rounds=10)
    assert result.alpha_per_look == pytest.approx(0.02 / 8)
    assert BONFERRONI.levels(5, 3, 10, 0.98) == pytest.approx((0.01 / 8, 0.01 / 8))


def test_stops_early_when_clearly_regressed() -> None:
    # Throughput down ~26 % in every round: the whole interval is beyond the tolerance.
    ds = [-0.30, -0.31, -0.29]
    result, stop = analyse(log_rounds(THROUGHPUT.path, ds, 600.0), [THROUGHPUT, TPOT], min_rounds=3)
    assert stop and result.stopped_early and result.decided and result.rounds_used == 3
    assert result.regressed == [THROUGHPUT.path]
    assert "regressed" in result.stop_reason
    # Not yet at the second round: the first look is at min_rounds.
    _, stop2 = analyse(log_rounds(THROUGHPUT.path, ds[:2], 600.0), [THROUGHPUT], min_rounds=3)
    assert not stop2


def test_a_a_with_small_noise_passes_and_stops() -> None:
    ds = [0.002, -0.001, 0.0]
    result, stop = analyse(log_rounds(TPOT.path, ds), [TPOT], min_rounds=3)
    assert stop and result.stopped_early
    assert [c.verdict for c in result.comparisons] == ["pass"]
    assert result.stop_reason == "every gated metric decided"


def test_undecided_at_the_round_limit_is_inconclusive_or_underpowered() -> None:
    # Mean +10.5 % (worse than 5 %) but the interval reaches 0: inconclusive.
    result, stop = analyse(log_rounds(TPOT.path, [0.20, -0.05, 0.15]), [TPOT], min_rounds=3, max_rounds=3)
    assert stop and not result.stopped_early and not result.decided
    assert result.comparisons[0].verdict == "inconclusive"
    assert result.undecided == [TPOT.path]
    assert "undecided: metrics.tpot_ms.p50" in result.stop_reason
    # Mean ~0 but the interval's worse end beyond the tolerance: underpowered.
    result, _ = analyse(log_rounds(TPOT.path, [0.05, -0.05, 0.0]), [TPOT], min_rounds=3, max_rounds=3)
    assert result.comparisons[0].verdict == "underpowered"
    # Before the limit, the same rounds do not stop the run.
    _, stop = analyse(log_rounds(TPOT.path, [0.05, -0.05, 0.0]), [TPOT], min_rounds=3, max_rounds=5)
    assert not stop


def test_the_error_rate_is_absolute() -> None:
    rounds = rounds_of("error_rate", [0.0, 0.0, 0.0], [0.02, 0.03, 0.025])
    c, decided = compare_paired(MetricDef.of("error_rate"), rounds, n_looks=1)
    half = T_2_99 * 0.005 / math.sqrt(3)
    assert c.scale == "absolute"
    assert c.change == pytest.approx(0.025)
    assert c.interval == pytest.approx((0.025 - half, 0.025 + half))
    assert c.verdict == "regressed" and not decided  # lower end 0.49 pp is inside 0.5 pp
    # An equal error rate in every round (no failures) is decided: pass.
    c, decided = compare_paired(MetricDef.of("error_rate"), rounds_of("error_rate", [0.0] * 3, [0.0] * 3))
    assert c.verdict == "pass" and decided


def test_the_error_rate_is_always_compared_and_unmeasured_metrics_are_left_out() -> None:
    rounds = [ABRound(index=i, order="base-head", base={TPOT.path: 10.0, "error_rate": 0.0},
                      head={TPOT.path: 10.0, "error_rate": 0.0}) for i in (1, 2, 3)]
    goodput = MetricDef.of("goodput.requests_per_s")
    result, stop = analyse(rounds, [goodput, TPOT], min_rounds=3)
    assert [c.metric for c in result.comparisons] == [TPOT.path, "error_rate"]
    assert stop and all(c.verdict == "pass" for c in result.comparisons)


def test_dropped_rounds_are_counted_not_judged() -> None:
    rounds = log_rounds(TPOT.path, [0.0, 0.001, -0.001])
    rounds.insert(1, ABRound(index=9, order="head-base", dropped="head invalid twice"))
    result, stop = analyse(rounds, [TPOT], min_rounds=3, max_rounds=4)
    assert result.rounds_used == 3 and result.rounds_dropped == 1
    assert stop and result.comparisons[0].verdict == "pass"
    # Only dropped rounds at the limit: nothing judged, the reason says so.
    only = [ABRound(index=i, order="base-head", dropped="x") for i in (1, 2, 3)]
    result, stop = analyse(only, [TPOT], min_rounds=3, max_rounds=3)
    assert stop and result.rounds_used == 0 and "0 round(s) kept" in result.stop_reason


def test_no_latency_improves_while_the_error_rate_rose() -> None:
    rounds = [ABRound(index=i, order="base-head", base={TPOT.path: 10.0, "error_rate": 0.0},
                      head={TPOT.path: 7.0 + i * 0.01, "error_rate": 0.1}) for i in (1, 2, 3)]
    result, _ = analyse(rounds, [TPOT], min_rounds=3)
    tpot = result.comparisons[0]
    assert tpot.verdict == "pass" and "error rate rose" in tpot.note


def test_round_order_is_seeded_and_mixes_both_orders() -> None:
    orders = [round_order(7, r) for r in range(1, 21)]
    assert orders == [round_order(7, r) for r in range(1, 21)]
    assert {"base-head", "head-base"} == set(orders)


@pytest.mark.parametrize("seed", range(20))
def test_round_orders_are_balanced_in_every_pair_of_rounds(seed: int) -> None:
    orders = [round_order(seed, r) for r in range(1, 13)]
    assert all(orders[i] != orders[i + 1] for i in range(0, 12, 2))
    assert orders.count("base-head") == 6


def test_which_engine_leads_a_pair_is_random_across_seeds() -> None:
    firsts = {round_order(seed, 1) for seed in range(20)}
    sequences = {tuple(round_order(seed, r) for r in range(1, 13, 2)) for seed in range(20)}
    assert firsts == {"base-head", "head-base"} and len(sequences) > 10


@pytest.mark.parametrize("lo,hi", [(1, 5), (4, 3), (3, 1001)])
def test_bad_round_limits_are_refused(lo: int, hi: int) -> None:
    with pytest.raises(ValueError):
        check_rounds(lo, hi)


def test_one_look_spends_each_sides_whole_budget() -> None:
    # min = max = 3: one look, so the regressed side is held to α = 1 % and the cleared side
    # to its own 5 %: d = 0.00, 0.01, 0.02 (mean 0.01, SD 0.01).
    rounds = log_rounds(TPOT.path, [0.00, 0.01, 0.02])
    assert DEFAULT_RULE.levels(3, 3, 3, 0.98) == pytest.approx((0.01, 0.05))
    se = 0.01 / math.sqrt(3)
    # Worse end at 5 %: exp(0.01 + 2.920 * 0.00577) - 1 = +2.72 %, within the 5 % tolerance.
    assert math.expm1(0.01 + T_2_95 * se) == pytest.approx(0.0272, abs=1e-4)
    result, stop = analyse(rounds, [TPOT], min_rounds=3, max_rounds=3)
    c = result.comparisons[0]
    assert stop and result.decided and c.verdict == "pass"
    assert c.interval[1] == pytest.approx(math.expm1(0.01 + T_2_99 * se), rel=1e-6)  # +5.15 %: 98 %
    assert result.alpha_per_look == pytest.approx(0.02) and result.clear_alpha_per_look == pytest.approx(0.05)
    # Bonferroni gave the cleared side the regressed side's 1 %: +5.15 % is beyond 5 %.
    result, _ = analyse(rounds, [TPOT], min_rounds=3, max_rounds=3, rule=BONFERRONI)
    assert result.comparisons[0].verdict == "underpowered" and not result.decided


def test_the_first_look_spends_what_the_spending_functions_say() -> None:
    # Looks after rounds 3 … 10: the first at information 3/10, where the spending functions
    # are closed-form. Pocock-type: α ln(1 + (e - 1) 0.3) = 0.41574 α (the default rule, both
    # sides); O'Brien–Fleming-type: 2 - 2 Φ(z_{0.995} / √0.3) = 2.57e-6 of α = 1 %.
    assert DEFAULT_RULE.levels(3, 3, 10, 0.98) == pytest.approx((0.0041574, 0.020787), rel=1e-4)
    a, _ = StoppingRule("obf", "pocock", 0.05).levels(3, 3, 10, 0.98)
    assert a == pytest.approx(2.566e-6, rel=1e-3)
    # Every later look is held to less than its share of a fixed-size test, yet well above
    # Bonferroni's α / 8 = 0.125 % (the default 4 … 12: 0.15 % to 0.45 %, cleared 1.2 % to 2.3 %:
    # the t statistic's own boundaries, below the normal-theory levels of 0.21 % and 1.3 %).
    levels = [DEFAULT_RULE.levels(n, 4, 12, 0.98) for n in range(4, 13)]
    assert all(0.0014 < a < 0.005 and 0.011 < b < 0.023 for a, b in levels)


def test_a_bad_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown split 'linear'"):
        StoppingRule("linear", "pocock", 0.05)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="clear_alpha"):
        StoppingRule("obf", "pocock", 0.7)

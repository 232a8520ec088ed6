"""Frontier extraction, step lookup and baseline comparison, against hand-computed values."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any, Optional

import pytest

from pytest_goodput.judge.shapes.frontier import compare_frontiers, ratio_interval
from pytest_goodput.judge.noise.frontier_noise import (
    noise_by_load,
    relative_half_width,
    throughput_interval,
)
from pytest_goodput.measure.frontier import (
    max_throughput_under_slo,
    nearest_rank,
    pareto_frontier,
    point_from_result,
    step_lookup,
    step_polyline,
)
from pytest_goodput.schema.outcomes.frontier import FrontierPoint
from pytest_goodput.schema.runs.results import (
    ClientHealth,
    Distribution,
    Goodput,
    LatencyMetrics,
    PercentileSLOCheck,
    RequestRecord,
    RunResult,
    Throughput,
    Window,
)
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def pt(x: Optional[float], y: Optional[float], load: float = 1.0, **kw: Any) -> FrontierPoint:
    return FrontierPoint(load=load, load_kind="concurrency", interactivity=x, throughput=y, **kw)


def xy(points: list[FrontierPoint]) -> list[tuple[Optional[float], Optional[float]]]:
    return [(p.interactivity, p.throughput) for p in points]


# A baseline frontier: (interactivity tok/s/user, throughput tok/s), each with its own load.
BASE = [pt(10, 1000, 64), pt(20, 800, 32), pt(40, 500, 8), pt(80, 200, 1)]


def scaled(points: list[FrontierPoint], factor: float) -> list[FrontierPoint]:
    return [p.model_copy(update={"throughput": p.throughput * factor}) for p in points]


# ---------------------------------------------------------------- pareto_frontier


def test_dominated_points_are_dropped_and_result_sorted_by_interactivity() -> None:
    a, b, c, d = pt(10, 100), pt(20, 50), pt(15, 40), pt(5, 90)  # c < b, d < a
    assert xy(pareto_frontier([c, b, d, a])) == [(10, 100), (20, 50)]


def test_equal_interactivity_keeps_higher_throughput_and_equal_throughput_keeps_higher_x() -> None:
    assert xy(pareto_frontier([pt(10, 90), pt(10, 100)])) == [(10, 100)]
    assert xy(pareto_frontier([pt(10, 100), pt(20, 100)])) == [(20, 100)]


def test_duplicates_keep_lowest_load_whatever_the_order() -> None:
    dup = [pt(10, 100, load=4), pt(10, 100, load=2), pt(10, 100, load=8), pt(30, 20, load=16)]
    for perm in itertools.permutations(dup):
        front = pareto_frontier(list(perm))
        assert [(p.interactivity, p.throughput, p.load) for p in front] == [(10, 100, 2), (30, 20, 16)]


def test_result_does_not_depend_on_input_order() -> None:
    rng = random.Random(7)
    pts = [pt(rng.randint(1, 30), rng.randint(1, 30), load=i) for i in range(40)]
    expected = pareto_frontier(pts)
    for _ in range(20):
        rng.shuffle(pts)
        assert pareto_frontier(pts) == expected
    # brute force: nothing kept is dominated, everything dropped is dominated or a duplicate
    for p in pts:
        dominated = any(
            q.interactivity >= p.interactivity and q.throughput >= p.throughput
            and (q.interactivity, q.throughput) != (p.interactivity, p.throughput)
            for q in pts
        )
        on_front = any((q.interactivity, q.throughput) == (p.interactivity, p.throughput) for q in expected)
        assert dominated != on_front


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, None])
def test_non_finite_values_are_excluded(bad: Optional[float]) -> None:
    pts = [pt(bad, 1e9), pt(1e9, bad), pt(10, 100)]
    assert xy(pareto_frontier(pts)) == [(10, 100)]


def test_one_point_and_empty() -> None:
    assert xy(pareto_frontier([pt(3, 4)])) == [(3, 4)]
    assert pareto_frontier([]) == []
    assert pareto_frontier([pt(None, None)]) == []


# ---------------------------------------------------------------- step lookup


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (-math.inf, 1000), (0, 1000), (10, 1000),  # left of / at the left end: first point
        (10.0001, 800), (20, 800), (30, 500), (40, 500), (80, 200),
        (80.0001, None), (1e9, None), (math.nan, None),  # beyond the right end: nothing
    ],
)
def test_step_lookup(x: float, expected: Optional[float]) -> None:
    assert step_lookup(BASE, x) == expected


def test_step_lookup_on_empty_frontier() -> None:
    assert step_lookup([], 1.0) is None


def test_step_polyline_vertices_and_agreement_with_lookup() -> None:
    xs, ys = step_polyline(BASE[:3], x_start=0)
    assert xs == [0, 10, 10, 20, 20, 40]
    assert ys == [1000, 1000, 800, 800, 500, 500]
    # inside every horizontal segment the drawn level equals step_lookup
    rng = random.Random(1)
    for _ in range(200):
        x = rng.uniform(0, 40)
        levels = [ys[i] for i in range(len(xs) - 1) if xs[i] < x < xs[i + 1] and ys[i] == ys[i + 1]]
        if levels:
            assert levels == [step_lookup(BASE[:3], x)]
    assert step_polyline([]) == ([], [])
    assert step_polyline([pt(5, 7)]) == ([5], [7])


# ---------------------------------------------------------------- max under SLO


def test_max_throughput_under_slo() -> None:
    pts = [pt(10, 900, slo_ok=False), pt(20, 700, slo_ok=True), pt(30, 700, slo_ok=True, load=2),
           pt(40, 300, slo_ok=True), pt(5, 2000, slo_ok=None)]
    best = max_throughput_under_slo(pts)
    assert best is not None and (best.interactivity, best.throughput) == (30, 700)
    assert max_throughput_under_slo([pt(1, 1, slo_ok=False), pt(2, 2)]) is None
    assert max_throughput_under_slo([]) is None


# ---------------------------------------------------------------- comparisons


@pytest.mark.parametrize(
    ("factor", "verdict"), [(0.9, "regressed"), (1.0, "pass"), (1.1, "improved")]
)
def test_shifted_frontiers(factor: float, verdict: str) -> None:
    cmp = compare_frontiers(BASE, scaled(BASE, factor), tolerance=0.05)
    assert [r.verdict for r in cmp.points] == [verdict] * 4
    assert [r.ratio for r in cmp.points] == pytest.approx([factor] * 4)
    assert cmp.worst_ratio == pytest.approx(factor)
    assert cmp.verdict == verdict


def test_crossing_frontiers_regress_only_where_current_is_lower() -> None:
    # current is better at low interactivity (big batches), worse at high interactivity
    cur = [pt(10, 1200), pt(20, 900), pt(40, 400), pt(80, 150)]
    cmp = compare_frontiers(BASE, cur, tolerance=0.05)
    assert [r.ratio for r in cmp.points] == pytest.approx([1.2, 1.125, 0.8, 0.75])
    assert [r.verdict for r in cmp.points] == ["improved", "improved", "regressed", "regressed"]
    assert cmp.verdict == "regressed"
    assert cmp.worst is not None and cmp.worst.interactivity == 80


def test_current_on_a_different_grid_uses_best_point_at_least_as_interactive() -> None:
    cur = [pt(15, 960), pt(50, 450), pt(60, 100)]
    cmp = compare_frontiers(BASE, cur, tolerance=0.05)
    # x=10 -> 960 (from x=15); x=20 -> 450 (x=50); x=40 -> 450; x=80 -> none at all
    assert [r.ratio for r in cmp.points] == pytest.approx([0.96, 0.5625, 0.9, 0.0])
    assert [r.verdict for r in cmp.points] == ["pass", "regressed", "regressed", "regressed"]
    assert cmp.points[3].current is None
    assert cmp.points[1].current is not None and cmp.points[1].current.interactivity == 50
    assert cmp.worst_ratio == 0.0


def test_dominated_baseline_points_are_not_judged() -> None:
    cmp = compare_frontiers(BASE + [pt(15, 10)], BASE)
    assert [r.interactivity for r in cmp.points] == [10, 20, 40, 80]


def test_noise_turns_a_small_regression_inconclusive() -> None:
    cur = scaled(BASE, 0.9)
    wide = compare_frontiers(BASE, cur, 0.05, noise=lambda p, side: 0.05)
    # [0.9 * 0.95 / 1.05, 0.9 * 1.05 / 0.95] = [0.81429, 0.99474]: straddles 0.95
    assert wide.points[0].interval == pytest.approx((0.814286, 0.994737), abs=1e-6)
    assert {r.verdict for r in wide.points} == {"inconclusive"} and wide.verdict == "inconclusive"
    narrow = compare_frontiers(BASE, cur, 0.05, noise=lambda p, side: 0.02)
    # upper bound 0.9 * 1.02 / 0.98 = 0.93673 < 0.95
    assert narrow.points[0].interval[1] == pytest.approx(0.936735, abs=1e-6)
    assert narrow.verdict == "regressed"


def test_noise_keeps_an_uncertain_improvement_at_pass() -> None:
    cmp = compare_frontiers(BASE, scaled(BASE, 1.1), 0.05, noise=lambda p, side: 0.05)
    # lower bound 1.1 * 0.95 / 1.05 = 0.99524, not above 1.05
    assert cmp.verdict == "pass"


def test_missing_current_point_regresses_whatever_the_noise() -> None:
    cmp = compare_frontiers(BASE, BASE[:3], 0.05, noise=lambda p, side: 0.5)
    assert cmp.points[3].ratio == 0.0 and cmp.points[3].interval == (0.0, 0.0)
    assert cmp.points[3].verdict == "regressed"


def test_noise_is_asked_per_side() -> None:
    seen: list[tuple[float, str]] = []

    def noise(p: FrontierPoint, side: str) -> Optional[float]:
        seen.append((p.load, side))
        return None  # unknown -> zero width

    cmp = compare_frontiers(BASE[:1], [pt(12, 990, load=3)], noise=noise)
    assert seen == [(3, "current"), (64, "baseline")]
    assert cmp.points[0].interval == pytest.approx((0.99, 0.99))

    by_load = noise_by_load({("concurrency", 64.0): 0.1}, {("concurrency", 3.0): 0.2})
    assert by_load(pt(1, 1, load=64), "baseline") == 0.1
    assert by_load(pt(1, 1, load=64), "current") is None
    assert by_load(pt(1, 1, load=3), "current") == 0.2


def test_ratio_interval_edges() -> None:
    assert ratio_interval(1.0, 0.0, 0.0) == (1.0, 1.0)
    assert ratio_interval(1.0, 0.1, 1.0)[1] == math.inf
    assert ratio_interval(0.5, 2.0, 0.0)[0] == 0.0  # never negative


def test_empty_baseline_is_new_and_empty_current_regresses() -> None:
    new = compare_frontiers([], BASE)
    assert new.verdict == "new" and new.points == [] and new.worst_ratio is None
    assert new.to_metric_comparison().verdict == "new"
    gone = compare_frontiers(BASE, [])
    assert gone.verdict == "regressed" and gone.worst_ratio == 0.0


def test_tolerance_is_validated() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        compare_frontiers(BASE, BASE, tolerance=-0.1)


def test_as_metric_comparison() -> None:
    mc = compare_frontiers(BASE, [pt(10, 1200), pt(20, 900), pt(40, 400), pt(80, 150)]).to_metric_comparison()
    assert (mc.metric, mc.direction, mc.verdict) == ("frontier_throughput", "higher", "regressed")
    assert (mc.baseline, mc.current) == (200, 150)
    assert mc.change == pytest.approx(-0.25)
    assert mc.interval == pytest.approx((-0.25, -0.25))
    assert "2 regressed" in mc.note and "2 improved" in mc.note


# ---------------------------------------------------------------- from a RunResult


def _dist() -> Distribution:
    return Distribution()


def make_result(
    requests: list[RequestRecord],
    spec: Optional[dict[str, Any]] = None,
    load: Optional[dict[str, float]] = None,
    tokens_per_s: float = 1000.0,
    window_s: float = 10.0,
    **kw: Any,
) -> RunResult:
    return RunResult(
        spec=ScenarioSpec(**(spec or {"scenario": "concurrency", "concurrency": 8})),
        load=load if load is not None else {"concurrency": 8},
        window=Window(start=0.0, end=window_s, seconds=window_s),
        issued=len(requests),
        completed=sum(r.ok for r in requests),
        metrics=LatencyMetrics(ttft_ms=_dist(), tpot_ms=_dist(), itl_ms=_dist(), e2e_ms=_dist()),
        throughput=Throughput(requests_per_s=1.0, output_tokens_per_s=tokens_per_s, total_tokens_per_s=2 * tokens_per_s),
        send_lag_ms=_dist(),
        token_count_source="usage",
        client=ClientHealth(valid=True, cpu_utilization=0.1),
        requests=requests,
        **kw,
    )


def req(i: int, tpot: Optional[float], ttft: Optional[float] = 100.0, ok: bool = True,
        warmup: bool = False, tokens: int = 64) -> RequestRecord:
    return RequestRecord(index=i, ok=ok, warmup=warmup, scheduled_at=0.0, tpot_ms=tpot,
                         ttft_ms=ttft, output_tokens=tokens if ok else 0)


REQS = [req(0, 30, 300), req(1, 10, 100), req(2, 40, 400), req(3, 20, 200),
        req(4, None, None, ok=False), req(5, 5, 50, warmup=True), req(6, None, 150, tokens=1)]


def test_nearest_rank() -> None:
    assert nearest_rank([30, 10, 40, 20], 50) == 20  # ceil(2.0) = 2nd
    assert nearest_rank([30, 10, 40, 20], 90) == 40  # ceil(3.6) = 4th
    assert nearest_rank([30, 10, 40, 20], 25) == 10
    assert nearest_rank([], 50) is None
    with pytest.raises(ValueError):
        nearest_rank([1.0], 0)


def test_point_from_result_p50_and_p90_per_gpu() -> None:
    res = make_result(REQS)
    p50 = point_from_result(res)
    # ok, non-warm-up TPOTs: 10, 20, 30, 40 -> P50 = 20 ms -> 50 tok/s/user
    assert (p50.tpot_ms, p50.interactivity, p50.samples) == (20, 50, 4)
    assert p50.ttft_ms == 200  # TTFTs 100, 150, 200, 300, 400: ceil(2.5) = 3rd
    assert (p50.load, p50.load_kind, p50.throughput) == (8, "concurrency", 1000)
    assert p50.slo_ok is None  # the spec states no SLO
    p90 = point_from_result(res, percentile=90, gpus=4)
    assert (p90.tpot_ms, p90.interactivity, p90.throughput) == (40, 25, 250)
    with pytest.raises(ValueError):
        point_from_result(res, gpus=0)


def test_point_from_result_without_tpot_is_kept_off_the_frontier() -> None:
    p = point_from_result(make_result([req(0, None), req(1, None, ok=False)]))
    assert p.interactivity is None and p.samples == 0
    assert pareto_frontier([p]) == []
    # and survives a JSON round trip
    assert FrontierPoint.model_validate_json(p.model_dump_json()) == p


def test_point_from_result_load_kind_and_slo() -> None:
    sweep = make_result(REQS, spec={"scenario": "sweep", "sweep": (1, 2), "sweep_over": "rate"},
                        load={"rate": 2.5})
    assert (point_from_result(sweep).load_kind, point_from_result(sweep).load) == ("rate", 2.5)
    server = make_result(REQS, spec={"scenario": "server", "rate": 3.0, "tpot_ms": 50}, load={},
                         goodput=Goodput(requests_per_s=1, tokens_per_s=1, attainment=1, good=4,
                                         issued=4, target=0.99, met=True),
                         percentile_slos=[PercentileSLOCheck(
                             name="tpot_p99_ms", metric="tpot", percentile=99, limit_ms=35,
                             value_ms=40, ok=False, samples=4, over_limit=1, proven=False)])
    p = point_from_result(server)
    assert (p.load_kind, p.load, p.slo_ok) == ("rate", 3.0, False)
    offline = make_result(REQS, spec={"scenario": "offline"}, load={})
    assert (point_from_result(offline).load_kind, point_from_result(offline).load) == ("concurrency", 7)


def test_throughput_interval() -> None:
    same = make_result([req(i, 10, tokens=50) for i in range(10)], window_s=2.0)
    assert throughput_interval(same) == pytest.approx((250.0, 250.0))  # 10 * 50 / 2, no spread
    mixed = [req(i, 10, tokens=(i % 5) * 40) for i in range(50)] + [req(50, None, ok=False)]
    res = make_result(mixed, window_s=4.0)
    lo, hi = throughput_interval(res, seed=3)  # type: ignore[misc]
    point = sum(r.output_tokens for r in mixed) / 4.0  # 1000 tok/s
    assert lo < point < hi
    assert throughput_interval(res, seed=3) == (lo, hi)  # seeded: reproducible
    lo4, hi4 = throughput_interval(res, seed=3, gpus=4)  # type: ignore[misc]
    assert (lo4, hi4) == pytest.approx((lo / 4, hi / 4))
    assert relative_half_width((lo, hi), point) == pytest.approx((hi - lo) / 2 / point)
    # the bootstrap standard error of a sum of n draws is sqrt(n) * sd; 95 % ~ +-1.96 se
    import statistics

    toks = [r.output_tokens for r in mixed]
    se = math.sqrt(len(toks)) * statistics.pstdev(toks) / 4.0
    assert (hi - lo) / 2 == pytest.approx(1.96 * se, rel=0.15)
    assert throughput_interval(make_result([], window_s=1.0)) is None
    assert relative_half_width(None, 1.0) is None


def test_nearest_rank_is_exact_at_whole_ranks() -> None:
    # 0.9 * 10 is 9.000000000000002 in floating point; the rank is still the 9th
    assert nearest_rank([float(i) for i in range(1, 11)], 90) == 9.0


def test_worked_example_of_docs_frontiers_md() -> None:
    base = [pt(80, 75, 1), pt(50, 190, 4), pt(25, 560, 16), pt(12.5, 540, 32), pt(10, 900, 64)]
    cur = [pt(85, 70, 1), pt(52, 200, 4), pt(26, 520, 16), pt(12, 950, 64)]
    assert xy(pareto_frontier(base)) == [(10, 900), (25, 560), (50, 190), (80, 75)]
    plain = compare_frontiers(base, cur, 0.05)
    assert [r.ratio for r in plain.points] == pytest.approx([950 / 900, 520 / 560, 200 / 190, 70 / 75])
    assert [r.verdict for r in plain.points] == ["improved", "regressed", "improved", "regressed"]
    noisy = compare_frontiers(base, cur, 0.05, noise=lambda p, side: 0.03)
    assert [r.verdict for r in noisy.points] == ["pass", "inconclusive", "pass", "inconclusive"]
    assert noisy.points[1].interval == pytest.approx((0.8745, 0.9860), abs=1e-4)
    tight = compare_frontiers(base, cur, 0.05, noise=lambda p, side: 0.01)
    assert [r.verdict for r in tight.points] == ["pass", "regressed", "pass", "inconclusive"]
    assert tight.points[1].interval[1] == pytest.approx(0.9473, abs=1e-4)
    assert tight.verdict == "regressed" and tight.worst is not None and tight.worst.interactivity == 25


def test_interactivity_noise_within_tolerance_is_matched() -> None:
    base = [pt(10, 900, 64), pt(50, 190, 4), pt(80, 75, 1)]
    # the same engine again: every point 0.1 % less interactive, same throughput
    again = [pt(x * 0.999, y, load) for x, y, load in ((10, 900, 64), (50, 190, 4), (80, 75, 1))]
    assert compare_frontiers(base, again, 0.05).verdict == "pass"
    strict = compare_frontiers(base, again, 0.05, x_tolerance=0.0)
    assert strict.verdict == "regressed" and strict.worst_ratio == 0.0
    # 6 % less interactive is beyond the 5 % slack: the point is no longer served
    slower = [pt(x * 0.94, y, load) for x, y, load in ((10, 900, 64), (50, 190, 4), (80, 75, 1))]
    assert compare_frontiers(base, slower, 0.05).points[-1].verdict == "regressed"
    with pytest.raises(ValueError, match="x_tolerance"):
        compare_frontiers(base, again, 0.05, x_tolerance=1.5)

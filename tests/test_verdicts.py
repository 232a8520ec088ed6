"""Verdict engine: metric recomputation and verdicts on synthetic samples."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import chi2
from scipy.stats import t as t_dist
import pytest

from pytest_goodput import stats
from pytest_goodput.schema.registry import RUN_CV as DEFAULT_RUN_CV
from pytest_goodput.schema.registry import RUN_CV_BY_LATENCY as DEFAULT_RUN_CV_BY_LATENCY
from pytest_goodput.judge.scalar.verdicts import (
    CONFIDENCE,
    DEFAULT_METRICS,
    PRIOR_RUNS,
    MetricDef,
    compare,
    compare_metric,
    decide,
    default_run_cv,
    metric_value,
    pairable,
)
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, Samples
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def _records() -> list[RequestRecord]:
    """Ten hand-made requests: one warm-up, one HTTP failure, one too slow for the TTFT SLO."""
    rows = [  # (sent, ttft_ms, tpot_ms, e2e_ms, out, prompt)
        (0.0, 100.0, 20.0, 1360.0, 64, 128),
        (0.1, 120.0, 22.0, 1506.0, 64, 128),
        (0.2, 90.0, 18.0, 1224.0, 64, 130),
        (0.3, 600.0, 25.0, 2175.0, 64, 128),  # TTFT over 500 ms: not good
        (0.4, 110.0, 21.0, 1433.0, 64, 127),
        (0.5, 95.0, None, 95.0, 1, 128),  # one token: TPOT undefined
        (0.6, 130.0, 30.0, 2020.0, 64, 128),
        (0.7, 105.0, 19.0, 1302.0, 64, 126),
    ]
    recs = [
        RequestRecord(index=i, ok=True, scheduled_at=s, sent_at=s, first_token_at=s + t / 1e3,
                      end_at=s + e / 1e3, ttft_ms=t, tpot_ms=p, e2e_ms=e, output_tokens=o,
                      prompt_tokens=pr, token_count_source="usage")
        for i, (s, t, p, e, o, pr) in enumerate(rows)
    ]
    recs.append(RequestRecord(index=8, ok=False, error_kind="http_status", http_status=500,
                              scheduled_at=0.8, sent_at=0.8, end_at=0.85))
    recs.append(RequestRecord(index=9, ok=True, warmup=True, scheduled_at=-1.0, sent_at=-1.0,
                              end_at=-0.5, ttft_ms=1.0, tpot_ms=1.0, e2e_ms=500.0, output_tokens=64))
    return recs


def test_metric_value_agrees_with_summarize() -> None:
    spec = ScenarioSpec(scenario="server", rate=10.0, ttft_ms=500.0, tpot_ms=40.0, requests=9)
    run = summarize(_records(), spec, ClientHealth(valid=True, cpu_utilization=0.1))
    samples = Samples.from_records([r for r in run.requests], run.window.seconds)
    assert run.window.seconds == pytest.approx(0.8)  # open loop: first to last scheduled arrival
    expect = {
        "goodput.requests_per_s": run.goodput.requests_per_s,
        "goodput.tokens_per_s": run.goodput.tokens_per_s,
        "goodput.attainment": run.goodput.attainment,
        "throughput.requests_per_s": run.throughput.requests_per_s,
        "throughput.output_tokens_per_s": run.throughput.output_tokens_per_s,
        "throughput.total_tokens_per_s": run.throughput.total_tokens_per_s,
    }
    for lat in ("ttft_ms", "tpot_ms", "e2e_ms"):
        expect[f"metrics.{lat}.mean"] = getattr(run.metrics, lat).mean  # means: successes only
    for path, value in expect.items():
        assert metric_value(samples, path) == pytest.approx(value), path
    # Hand-computed: 7 good of 9 issued. The gate ranks the failed request as +inf: P50 TTFT
    # of [90, 95, 100, 105, 110, 120, 130, 600, inf] is the 5th, 110 (the run's own P50 over
    # successes is 105); P99 is the 9th, +inf; the error rate is 1/9.
    assert metric_value(samples, "goodput.attainment") == pytest.approx(7 / 9)
    assert run.metrics.ttft_ms.p50 == 105.0
    assert metric_value(samples, "metrics.ttft_ms.p50") == 110.0
    assert metric_value(samples, "metrics.ttft_ms.p99") == math.inf
    assert metric_value(samples, "error_rate") == pytest.approx(1 / 9)
    ok_only = Samples.from_records([r for r in run.requests if r.ok], run.window.seconds)
    for lat in ("ttft_ms", "tpot_ms", "e2e_ms"):
        for stat in ("p50", "p90", "p95", "p99", "max"):
            assert metric_value(ok_only, f"metrics.{lat}.{stat}") == getattr(getattr(run.metrics, lat), stat)


def test_metric_value_edges() -> None:
    empty = Samples(window_s=0.0, ok=[], ttft_ms=[], tpot_ms=[], e2e_ms=[], output_tokens=[], prompt_tokens=[])
    assert metric_value(empty, "metrics.ttft_ms.p99") is None
    assert metric_value(empty, "goodput.attainment") is None
    assert metric_value(empty, "throughput.requests_per_s") == 0.0
    nan = Samples(window_s=1.0, ok=[True, True], ttft_ms=[float("nan"), 5.0], tpot_ms=[None, None],
                  e2e_ms=[1.0, 2.0], output_tokens=[1, 1], prompt_tokens=[None, None])
    assert metric_value(nan, "metrics.ttft_ms.p99") == 5.0
    assert metric_value(nan, "metrics.tpot_ms.p50") is None
    with pytest.raises(ValueError):
        metric_value(nan, "metrics.bogus.p99")


def _run(rng: np.random.Generator, n: int = 300, scale: float = 1.0, pgood: float = 0.95) -> Samples:
    ttft = rng.lognormal(math.log(100.0), 0.3, n) * scale
    tpot = rng.lognormal(math.log(20.0), 0.1, n) * scale
    good = rng.random(n) < pgood
    return Samples(window_s=60.0, ok=[True] * n, good=good.tolist(), ttft_ms=ttft.tolist(),
                   tpot_ms=tpot.tolist(), e2e_ms=(ttft + 63 * tpot).tolist(), output_tokens=[64] * n,
                   prompt_tokens=[128] * n)


def gate_fails(comparisons, strict: bool) -> bool:
    """What the judge's fails() decides from verdicts alone: regressed always fails; inconclusive
    and underpowered only in strict mode."""
    bad = {"regressed", "inconclusive", "underpowered"} if strict else {"regressed"}
    return any(c.verdict in bad for c in comparisons)


def _by_metric(cs: list[MetricComparison]) -> dict[str, MetricComparison]:
    return {c.metric: c for c in cs}


def test_identical_runs_pass() -> None:
    rng = np.random.default_rng(7)
    base = [_run(rng) for _ in range(3)]
    cs = compare(base, [base[-1]], DEFAULT_METRICS.values())
    assert [c.metric for c in cs] == [*DEFAULT_METRICS, "error_rate"]  # always compared
    for c in cs:
        assert c.verdict in ("pass", "underpowered"), c
        assert c.change == pytest.approx(0.0, abs=0.2)
        assert c.interval[0] < 0.0 < c.interval[1] or c.change == 0.0
    assert not gate_fails(cs, strict=False)


def test_clear_drop_with_many_samples_regresses() -> None:
    rng = np.random.default_rng(11)
    base = [_run(rng, n=3000) for _ in range(3)]
    cur = [_run(rng, n=3000, scale=1.3, pgood=0.95 * 0.7)]
    cs = _by_metric(compare(base, cur, DEFAULT_METRICS.values()))
    for path in ("goodput.requests_per_s", "goodput.attainment", "metrics.ttft_ms.p99",
                 "metrics.tpot_ms.p99", "metrics.e2e_ms.p50"):
        assert cs[path].verdict == "regressed", cs[path]
    assert cs["goodput.requests_per_s"].change == pytest.approx(-0.3, abs=0.05)
    assert cs["goodput.requests_per_s"].interval[1] < 0
    assert cs["throughput.output_tokens_per_s"].verdict == "pass"  # same tokens in the same window
    assert "across 3 baseline sessions" in cs["goodput.attainment"].note
    assert gate_fails(cs.values(), strict=False)


def test_small_sample_drop_is_inconclusive() -> None:
    n = 40
    base = Samples(window_s=10.0, ok=[True] * n, good=[True] * 36 + [False] * 4, ttft_ms=[1.0] * n,
                   tpot_ms=[1.0] * n, e2e_ms=[1.0] * n, output_tokens=[10] * n, prompt_tokens=[1] * n)
    cur = base.model_copy(update={"good": [True] * 32 + [False] * 8})  # 0.9 -> 0.8: 11 % drop
    c = compare_metric(DEFAULT_METRICS["goodput.requests_per_s"], [base], [cur])
    assert c.change == pytest.approx(32 / 36 - 1)
    # Worse than tolerance but not proven, and one baseline session could not have proven
    # even twice the tolerance: underpowered, with what would fix it.
    assert c.verdict == "underpowered"
    assert "1 baseline session: run-to-run spread unknown" in c.note
    assert "could only detect a worse change beyond" in c.note
    assert gate_fails([c], strict=True) and not gate_fails([c], strict=False)


def test_improvement_is_improved() -> None:
    rng = np.random.default_rng(13)
    base = [_run(rng, n=1000) for _ in range(3)]
    cur = [_run(rng, n=1000, scale=0.7)]
    cs = _by_metric(compare(base, cur, DEFAULT_METRICS.values()))
    assert cs["metrics.e2e_ms.p50"].verdict == "improved"
    assert cs["metrics.tpot_ms.p99"].verdict == "improved"
    assert not gate_fails(cs.values(), strict=False)


def test_edge_cases() -> None:
    rng = np.random.default_rng(17)
    base = _run(rng, n=50)
    failed = Samples(window_s=5.0, ok=[False] * 10, good=[False] * 10, ttft_ms=[None] * 10,
                     tpot_ms=[None] * 10, e2e_ms=[None] * 10, output_tokens=[0] * 10, prompt_tokens=[None] * 10)
    c = compare_metric(DEFAULT_METRICS["metrics.ttft_ms.p99"], [base], [failed])
    assert c.verdict == "regressed" and "failures (counted as +inf)" in c.note
    c = compare_metric(DEFAULT_METRICS["goodput.requests_per_s"], [base], [failed])
    assert c.verdict == "regressed" and c.current == 0.0
    c = compare_metric(DEFAULT_METRICS["goodput.requests_per_s"], [failed], [base])
    assert c.verdict == "improved" and "baseline is 0" in c.note
    c = compare_metric(DEFAULT_METRICS["goodput.requests_per_s"], [failed], [failed])
    assert c.verdict == "pass"
    no_good = base.model_copy(update={"good": None})
    c = compare_metric(DEFAULT_METRICS["goodput.attainment"], [no_good], [base])
    assert c.verdict == "new"
    # measured on neither side: left out; only the error rate, always compared, remains
    assert [c.metric for c in compare([no_good], [no_good], [DEFAULT_METRICS["goodput.attainment"]])] == ["error_rate"]
    with pytest.raises(ValueError):
        compare_metric(DEFAULT_METRICS["goodput.attainment"], [base], [])


@pytest.mark.parametrize(
    ("direction", "change", "interval", "verdict"),
    [("higher", -0.10, (-0.15, -0.05), "regressed"), ("higher", -0.10, (-0.2, 0.01), "inconclusive"),
     ("higher", -0.03, (-0.05, -0.01), "pass"), ("higher", 0.10, (0.05, 0.15), "improved"),
     ("lower", 0.25, (0.1, 0.4), "regressed"), ("lower", -0.25, (-0.4, -0.1), "improved"),
     ("lower", 0.25, (-0.1, 0.6), "inconclusive")],
)
def test_decide_rule(direction: str, change: float, interval: tuple[float, float], verdict: str) -> None:
    assert decide(direction, change, interval, 0.05) == verdict


def test_decide_tolerance_rule_is_stricter() -> None:
    assert decide("higher", -0.10, (-0.15, -0.03), 0.05, "zero") == "regressed"
    assert decide("higher", -0.10, (-0.15, -0.03), 0.05, "tolerance") == "inconclusive"


def test_custom_metric_def() -> None:
    rng = np.random.default_rng(19)
    base = [_run(rng) for _ in range(2)]
    d = MetricDef("metrics.ttft_ms.mean", "lower", 0.05)
    c = compare_metric(d, base, [_run(rng, scale=1.5)])
    assert c.verdict == "regressed" and c.method.startswith("bootstrap")


def test_p99_interval_is_finite_and_round_trips_json() -> None:
    rng = np.random.default_rng(23)
    base = [_run(rng) for _ in range(3)]
    c = compare_metric(DEFAULT_METRICS["metrics.ttft_ms.p99"], base, [_run(rng)])
    assert c.interval is not None and all(math.isfinite(v) for v in c.interval)
    assert MetricComparison.model_validate_json(c.model_dump_json()) == c


def test_single_small_baseline_cannot_prove_p99_regression() -> None:
    # 300 baseline requests cannot bound their P99 from above at 98 % (needs ≥ 459):
    # even a doubling is only inconclusive, never a false "regressed" on thin evidence.
    rng = np.random.default_rng(29)
    c = compare_metric(DEFAULT_METRICS["metrics.ttft_ms.p99"], [_run(rng)], [_run(rng, scale=2.0)])
    assert c.verdict in ("inconclusive", "underpowered")
    assert c.interval is not None and c.interval[0] < 0.0
    c = compare_metric(DEFAULT_METRICS["metrics.ttft_ms.p99"], [_run(rng, n=600)], [_run(rng, scale=2.0)])
    assert c.verdict == "regressed"


def _scaled(s: Samples, factor: float) -> Samples:
    """The same requests served ``factor`` times slower (what a replayed schedule pairs)."""
    return s.model_copy(update={
        "ttft_ms": [v * factor for v in s.ttft_ms], "tpot_ms": [v * factor for v in s.tpot_ms],
        "e2e_ms": [v * factor for v in s.e2e_ms], "window_s": s.window_s * factor,
    })


def test_default_run_cv_by_latency_then_kind() -> None:
    assert default_run_cv("error_rate") == 0.002  # absolute: the error rate is judged in pp
    assert default_run_cv("metrics.ttft_ms.p99") == DEFAULT_RUN_CV_BY_LATENCY["ttft_ms"]
    assert default_run_cv("metrics.tpot_ms.p99") == DEFAULT_RUN_CV["percentile"]
    assert default_run_cv("goodput.requests_per_s") == DEFAULT_RUN_CV["rate"]
    assert default_run_cv("goodput.attainment") == DEFAULT_RUN_CV["proportion"]


def test_pairable_needs_equal_request_counts() -> None:
    rng = np.random.default_rng(31)
    a, b = _run(rng, n=300), _run(rng, n=300)
    assert pairable([a, b], [a])
    assert not pairable([a], [_run(rng, n=299)])


def test_paired_identical_run_interval_is_the_prior_alone() -> None:
    # Same requests on both sides: the paired within-run half-widths are 0, and one baseline
    # session measures no spread, so the interval is exactly exp(±h) − 1 with
    # h = t(ν₀; (1 + confidence)/2) · σ₀ · √(1 + 1/1): the machine prior of one session.
    rng = np.random.default_rng(37)
    base = _run(rng)
    c = compare_metric(DEFAULT_METRICS["metrics.ttft_ms.p99"], [base], [base], paired=True)
    h = stats.t_ppf(0.5 + CONFIDENCE / 2.0, PRIOR_RUNS) * default_run_cv("metrics.ttft_ms.p99") * math.sqrt(2.0)
    assert c.change == 0.0 and c.verdict in ("pass", "underpowered")
    assert c.interval == pytest.approx((math.expm1(-h), math.expm1(h)))
    assert c.method.startswith("paired bootstrap")


def test_sessions_prediction_interval_hand_computed() -> None:
    # Five baseline sessions whose P50 TPOT differ (each run's TPOT all equal: no request-level
    # noise, so the paired within-run term is 0) and a current session equal to their mean.
    # Session values v = 10, 10.5, 9.8, 10.2, 10.1 ms; s = SD of ln v; the measured spread
    # s²·(1 + 1/5) exceeds the prior σ₀²·(1 + 1/5), so the data alone decide:
    # h = t(4; 0.99) · s · √1.2.
    n = 50
    vals = [10.0, 10.5, 9.8, 10.2, 10.1]

    def run(v: float) -> Samples:
        return Samples(window_s=10.0, ok=[True] * n, good=None, ttft_ms=[50.0] * n, tpot_ms=[v] * n,
                       e2e_ms=[500.0] * n, output_tokens=[64] * n, prompt_tokens=[128] * n)

    gm = math.exp(sum(math.log(v) for v in vals) / 5)
    defn = MetricDef.of("metrics.tpot_ms.p50", 0.15)
    c = compare_metric(defn, [[run(v)] for v in vals], [run(gm)], paired=True)
    logs = np.log(vals)
    s = float(np.std(logs, ddof=1))
    assert s ** 2 > default_run_cv("metrics.tpot_ms.p50") ** 2
    h = stats.t_ppf(0.5 + CONFIDENCE / 2.0, 4) * s * math.sqrt(1.2)
    assert c.change == pytest.approx(0.0, abs=1e-12)
    assert c.interval == pytest.approx((math.expm1(-h), math.expm1(h)), rel=1e-6)
    assert c.detectable == pytest.approx(max(0.15, math.expm1(h)))
    assert "across 5 baseline sessions" in c.note and c.verdict == "pass"
    # Power: the resolution e^h − 1 = 11.0 % rests on a variance with 4 degrees of freedom;
    # its 95 % lower bound is h·√(4 / χ²(4; 0.95)) = h·√(4 / 9.488) → 7.0 %.
    bound = math.expm1(h * math.sqrt(4 / chi2.ppf(0.95, 4)))
    assert math.expm1(h) == pytest.approx(0.1103, abs=5e-4) and bound == pytest.approx(0.0700, abs=5e-4)
    # At a 10 % tolerance the resolution exceeds it only within its own sampling error: a note.
    loose = compare_metric(MetricDef.of("metrics.tpot_ms.p50", 0.10), [[run(v)] for v in vals],
                           [run(gm)], paired=True)
    assert loose.verdict == "pass" and "only within the sampling error" in loose.note
    # At 6 % even the lower bound exceeds it: underpowered, and the note says what would fix
    # it: a 2.5 % session spread needs t·s·√(1 + 1/S) < 6 %, which no number of sessions gives.
    tight = compare_metric(MetricDef.of("metrics.tpot_ms.p50", 0.06), [[run(v)] for v in vals],
                           [run(gm)], paired=True)
    assert tight.verdict == "underpowered" and "more baseline sessions alone will not do" in tight.note
    assert "(at least 7.0% with 95% confidence)" in tight.note
    # What would do: the PR measured over K launches against n sessions, the fewest K first,
    # h = t(n − 1; 0.99) · s · √(1/K + 1/n) within 95 % of the tolerance (the data still decide
    # alone: s exceeds the prior's 2 %, and no request-level noise).
    need = next((k, m) for k in range(2, 21) for m in range(5, 26)
                if math.expm1(t_dist.ppf(0.99, m - 1) * s * math.sqrt(1 / k + 1 / m)) < 0.06 * 0.95)
    assert need == (2, 11)  # s = 2.55 %: 2.76 · 2.55 % · √(1/2 + 1/11) = 5.57 % (n = 10: 5.73 %)
    assert (f"measure the PR over {need[0]} engine launches (--goodput-head-launches) against "
            f"{need[1]} baseline sessions") in tight.note


def test_repeats_of_one_session_are_one_session() -> None:
    # Three repeats of one session count as one session: no spread is measured from them.
    rng = np.random.default_rng(47)
    runs = [_run(rng) for _ in range(3)]
    one = compare_metric(DEFAULT_METRICS["metrics.tpot_ms.p99"], [runs], [runs[0]], paired=True)
    three = compare_metric(DEFAULT_METRICS["metrics.tpot_ms.p99"], runs, [runs[0]], paired=True)
    assert "1 baseline session" in one.note and "across 3 baseline sessions" in three.note


def test_an_intermittent_slowdown_does_not_widen_its_own_noise() -> None:
    # The current session's repeats never feed the spread: x(1.0, 3.0) regresses like x(1.3, 1.3).
    rng = np.random.default_rng(53)
    base = [_run(rng) for _ in range(5)]
    d = DEFAULT_METRICS["metrics.tpot_ms.p99"]
    steady = compare_metric(d, base, [_scaled(base[0], 1.3), _scaled(base[0], 1.3)], paired=True)
    bursty = compare_metric(d, base, [_scaled(base[0], 1.0), _scaled(base[0], 3.0)], paired=True)
    assert steady.verdict == "regressed" and bursty.verdict == "regressed"


def test_failures_cannot_improve_a_latency() -> None:
    # The slowest 4 % of requests time out instead: P99 counts them as +inf (regressed), the
    # error rate is compared and rises, and the P50 may drop but is never "improved".
    rng = np.random.default_rng(59)
    base = [_run(rng, n=300) for _ in range(5)]
    cur = base[0]
    slow = np.argsort(np.asarray(cur.e2e_ms))[-12:]
    ok = [i not in set(slow.tolist()) for i in range(300)]
    cur = cur.model_copy(update={"ok": ok, "ttft_ms": [v if o else None for v, o in zip(cur.ttft_ms, ok)],
                                 "tpot_ms": [v if o else None for v, o in zip(cur.tpot_ms, ok)],
                                 "e2e_ms": [v if o else None for v, o in zip(cur.e2e_ms, ok)]})
    cs = _by_metric(compare(base, [cur], [*DEFAULT_METRICS.values(), MetricDef.of("metrics.e2e_ms.p90")],
                            paired=True))
    assert cs["metrics.ttft_ms.p99"].verdict == "regressed"
    assert cs["error_rate"].verdict == "regressed" and cs["error_rate"].change == pytest.approx(0.04)
    assert cs["error_rate"].scale == "absolute"
    assert all(c.verdict != "improved" for m, c in cs.items() if m.startswith("metrics."))


def test_paired_proves_a_p99_rise_the_unpaired_interval_cannot() -> None:
    # Every request twice as slow: unpaired, 300 baseline requests cannot bound their own P99
    # (see test_single_small_baseline_cannot_prove_p99_regression); paired, request i is
    # compared with request i and the rise is plain.
    rng = np.random.default_rng(41)
    base = _run(rng)
    cur = _scaled(base, 2.0)
    d = DEFAULT_METRICS["metrics.ttft_ms.p99"]
    unpaired = compare_metric(d, [base], [cur])
    paired = compare_metric(d, [base], [cur], paired=True)
    assert unpaired.verdict in ("inconclusive", "underpowered")
    assert paired.verdict == "regressed"
    assert paired.change == pytest.approx(1.0)
    assert paired.interval[0] > 0.0 and paired.interval[1] < unpaired.interval[1]


def test_paired_goodput_counts_the_same_requests() -> None:
    # Three baseline runs replaying one schedule; the current run loses 30 of the same 285
    # good requests in the same window: change −30/285, and the paired interval excludes 0.
    n = 300
    good = [True] * 285 + [False] * 15
    base = [Samples(window_s=25.0, ok=[True] * n, good=good, ttft_ms=[50.0] * n, tpot_ms=[15.0] * n,
                    e2e_ms=[1000.0] * n, output_tokens=[64] * n, prompt_tokens=[128] * n)] * 3
    cur = base[0].model_copy(update={"good": [True] * 255 + [False] * 45})
    c = compare_metric(DEFAULT_METRICS["goodput.requests_per_s"], base, [cur], paired=True)
    assert c.change == pytest.approx(255 / 285 - 1)
    assert c.interval[1] < 0.0 and c.verdict == "regressed"


def test_paired_falls_back_when_runs_differ_in_size() -> None:
    """Fewer than half the requests in common: the unpaired intervals decide."""
    rng = np.random.default_rng(43)
    base, cur = [_run(rng, n=300)], [_run(rng, n=140)]
    c = compare_metric(DEFAULT_METRICS["metrics.tpot_ms.p99"], base, cur, paired=True)
    assert c.method.startswith("order-statistic")


def test_runs_bounded_by_duration_are_paired_on_the_requests_they_share() -> None:
    """One schedule, one run measured 280 requests and the other 300 (a duration bound):
    request i is the same request in both, so the first 280 pair. The workload's spread
    (token counts of 16..112) cancels; unpaired, it swamps a 20 % throughput drop."""
    rng = np.random.default_rng(5)
    n = 300
    tokens = [int(t) for t in rng.integers(16, 113, size=n)]
    base = Samples(window_s=30.0, ok=[True] * n, ttft_ms=[50.0] * n, tpot_ms=[15.0] * n,
                   e2e_ms=[1000.0] * n, output_tokens=tokens, prompt_tokens=[128] * n)
    m = 280  # the slower run measured fewer requests in its window: 20 % fewer tokens/s
    cur = Samples(window_s=30.0 * m / n / 0.8, ok=[True] * m, ttft_ms=[50.0] * m,
                  tpot_ms=[15.0] * m, e2e_ms=[1000.0] * m, output_tokens=tokens[:m],
                  prompt_tokens=[128] * m)
    defn = DEFAULT_METRICS["throughput.output_tokens_per_s"]
    paired = compare_metric(defn, [base], [cur], paired=True)
    unpaired = compare_metric(defn, [base], [cur], paired=False)
    assert paired.method.startswith("paired bootstrap (first 280 requests)")
    assert paired.change == pytest.approx(sum(tokens[:m]) / sum(tokens) * n / m * 0.8 - 1)
    assert paired.verdict == "regressed"
    assert unpaired.interval[1] - unpaired.interval[0] > paired.interval[1] - paired.interval[0]


def test_two_sessions_are_underpowered_and_the_note_says_how_many_would_do() -> None:
    """Two sessions 3 % apart (s = 2.1 %, 1 degree of freedom): t(1; 0.99) = 31.8 makes the
    resolution enormous, and even its 95 % lower bound (× √(1/3.84)) is far beyond 10 %. At
    the spread measured so far, five sessions would do: t(4; 0.99)·s·√1.2 = 8.6 % < 9.5 %."""
    n = 50

    def run(v: float) -> Samples:
        return Samples(window_s=10.0, ok=[True] * n, good=None, ttft_ms=[50.0] * n, tpot_ms=[v] * n,
                       e2e_ms=[500.0] * n, output_tokens=[64] * n, prompt_tokens=[128] * n)

    c = compare_metric(MetricDef.of("metrics.tpot_ms.p50", 0.10), [[run(10.0)], [run(10.3)]],
                       [run(10.15)], paired=True)
    s = abs(math.log(10.3 / 10.0)) / math.sqrt(2)
    assert stats.t_ppf(0.99, 4) * s * math.sqrt(1.2) == pytest.approx(0.086, abs=5e-4)
    assert c.verdict == "underpowered"
    assert "record 3 more baseline session(s) (5 in all)" in c.note, c.note

"""Hand-built TestOutcomes covering every status, shared by the report tests and goldens."""

from __future__ import annotations

from pytest_goodput.schema.outcomes.outcome import MetricComparison, SLOOutcome, TestOutcome

SPEC = {
    "scenario": "server",
    "rate": 8.0,
    "arrival": "poisson",
    "requests": 400,
    "isl": 128,
    "osl": 64,
    "slo": "mlperf/llama2-70b/interactive",
    "ttft_ms": 450.0,
    "tpot_ms": 40.0,
    "attainment": 0.99,
    "percentile_slos": {"ttft_p99_ms": 450.0, "tpot_p99_ms": 40.0},
    "tolerance": 0.05,
}
ENV_BASE = {
    "hardware": "1xH100-80GB",
    "model": "tinyllama",
    "scenario_hash": "3f2a9c1e0b7d4a55",
    "plugin_version": "0.1.0",
    "python": "3.11.7",
    "client_cpu": "AMD EPYC 7763 x2",
    "git_commit": "a1b2c3d4e5f6",
    "engine_name": "vllm",
    "engine_version": "0.6.1",
}
ENV_CUR = {**ENV_BASE, "git_commit": "0f9e8d7c6b5a", "engine_version": "0.6.3"}
KEY = {
    "goodput.requests_per_s": 7.84,
    "goodput.attainment": 0.98,
    "throughput.output_tokens_per_s": 512.3,
    "metrics.ttft_ms.p99": 312.0,
    "metrics.tpot_ms.p99": 31.5,
}


def cmp(metric: str, baseline: float, current: float, verdict: str, **kw) -> MetricComparison:
    direction = "lower" if "_ms" in metric else "higher"
    change = (current - baseline) / baseline
    interval = kw.pop("interval", (change - 0.03, change + 0.03))
    return MetricComparison(
        metric=metric,
        direction=direction,
        baseline=baseline,
        current=current,
        change=change,
        interval=interval,
        tolerance=kw.pop("tolerance", 0.05),
        verdict=verdict,
        method=kw.pop("method", "bootstrap"),
        **kw,
    )


def outcome(nodeid: str, line: int = 9, **kw) -> TestOutcome:
    path = nodeid.split("::", 1)[0]
    base = dict(
        nodeid=nodeid,
        location=(path, line),
        scenario="server",
        spec=SPEC,
        key_metrics=KEY,
        current_env=ENV_CUR,
        baseline_env=ENV_BASE,
        baseline_status="compared",
        what_changed={"engine_version": ("0.6.1", "0.6.3"), "git_commit": ("a1b2c3d4e5f6", "0f9e8d7c6b5a")},
    )
    base.update(kw)
    return TestOutcome(**base)


def passed() -> TestOutcome:
    return outcome(
        "tests/test_serve.py::test_chat_server",
        comparisons=[
            cmp("metrics.tpot_ms.p99", 31.0, 31.5, "pass"),
            cmp("goodput.requests_per_s", 7.8, 7.84, "pass"),
            cmp("metrics.ttft_ms.p99", 320.0, 312.0, "pass"),
        ],
        slos=[
            SLOOutcome(name="attainment", limit=0.99, value=0.995, ok=True, note="398 of 400 requests met every per-request SLO"),
            SLOOutcome(name="ttft_p99_ms", limit=450.0, value=312.0, ok=True, proven=False,
                       note="not proven at 99% confidence: 400 samples, 0 over the limit; a proof needs 459"),
        ],
    )


def regressed() -> TestOutcome:
    return outcome(
        "tests/test_serve.py::test_param[a|b]",
        line=41,
        comparisons=[
            cmp("metrics.ttft_ms.p99", 300.0, 345.0, "inconclusive", interval=(-0.02, 0.31),
                note="worse than tolerance\nbut not significant"),
            cmp("goodput.requests_per_s", 8.0, 6.8, "regressed", interval=(-0.19, -0.11)),
            cmp("metrics.tpot_ms.p99", 30.0, 30.3, "pass"),
        ],
    )


def slo_failed() -> TestOutcome:
    return outcome(
        "tests/test_slo.py::test_interactive",
        line=12,
        scenario="interactive",
        slos=[
            SLOOutcome(name="attainment", limit=0.99, value=0.9625, ok=False, note="385 of 400 requests met every per-request SLO"),
            SLOOutcome(name="ttft_p99_ms", limit=450.0, value=512.4, ok=False, proven=True),
            SLOOutcome(name="tpot_p99_ms", limit=40.0, value=38.0, ok=True, proven=True),
        ],
        comparisons=[cmp("goodput.requests_per_s", 7.9, 7.7, "pass")],
    )


def invalid() -> TestOutcome:
    return outcome(
        "tests/test_load.py::test_heavy",
        line=3,
        client_valid=False,
        client_reasons=["send lag P99 212 ms > 50 ms", "client CPU 98% of one core"],
        comparisons=[cmp("throughput.output_tokens_per_s", 900.0, 610.0, "regressed")],
    )


def errored() -> TestOutcome:
    return outcome(
        "tests/test_load.py::test_engine_down",
        line=20,
        error="engine did not become ready within 60 s: connection refused on 127.0.0.1:8000",
        key_metrics={},
        baseline_status="off",
        baseline_env=None,
        what_changed={},
    )


def new() -> TestOutcome:
    return outcome(
        "tests/test_offline.py::test_batch",
        scenario="offline",
        spec={"scenario": "offline", "requests": 200, "isl": 128, "osl": 64},
        baseline_status="new",
        baseline_env=None,
        what_changed={},
        key_metrics={"throughput.output_tokens_per_s": 2048.0},
    )


def incomparable() -> TestOutcome:
    return outcome(
        "tests/test_serve.py::test_other_gpu",
        line=70,
        baseline_status="incomparable",
        incomparable_reasons=["hardware differs: baseline '1xA100-40GB', current '1xH100-80GB'"],
        baseline_env={**ENV_BASE, "hardware": "1xA100-40GB"},
    )


def _pts(rows: list[tuple[float, float, float, bool]]) -> list[dict]:
    """Sweep points (load, tok/s/user, output tok/s, SLO met) as a sweep records them."""
    return [{"load": load, "load_kind": "concurrency", "interactivity": x, "throughput": y, "slo_ok": ok}
            for load, x, y, ok in rows]


def _by_load(load: float, base_thr: float, cur_thr: float, base_tpot: float, cur_tpot: float,
             verdict: str) -> dict:
    """The judge's equal-load comparison of one sweep point (throughput and TPOT)."""
    thr = cmp("throughput.output_tokens_per_s", base_thr, cur_thr, verdict if cur_thr < base_thr else "pass")
    tpot = cmp("metrics.tpot_ms.p50", base_tpot, cur_tpot, "pass")
    return {"load": load, "verdict": verdict, "throughput": thr.model_dump(mode="json"),
            "tpot": tpot.model_dump(mode="json"), "worst": thr.model_dump(mode="json")}


def _step(x: float, base: dict, cur: dict | None, ratio: float, verdict: str) -> dict:
    return {"interactivity": x, "baseline": base, "current": cur, "ratio": ratio,
            "interval": [ratio, ratio], "verdict": verdict}


def sweep() -> TestOutcome:
    cur = _pts([(1.0, 50.0, 180.0, True), (4.0, 33.3, 396.0, True), (16.0, 20.0, 610.0, False)])
    base = _pts([(1.0, 50.0, 175.0, True), (4.0, 33.3, 400.0, True), (16.0, 20.0, 600.0, False)])
    return outcome(
        "tests/test_sweep.py::test_frontier",
        line=5,
        scenario="sweep",
        spec={"scenario": "sweep", "sweep": [1, 4, 16], "sweep_over": "concurrency", "requests": 200,
              "isl": 128, "osl": 64},
        comparisons=[cmp("frontier_throughput", 400.0, 396.0, "pass", method="pareto step lookup",
                         note="worst at 33.3 tok/s/user of 3 points; all points pass")],
        frontier={
            "points": cur, "current": cur, "baseline": base,
            "comparison": {
                "verdict": "pass", "tolerance": 0.05,
                "worst": _step(33.3, base[1], cur[1], 0.99, "pass"),
                "by_load": [_by_load(1.0, 175.0, 180.0, 20.0, 20.0, "pass"),
                            _by_load(4.0, 400.0, 396.0, 30.0, 30.0, "pass"),
                            _by_load(16.0, 600.0, 610.0, 50.0, 50.0, "pass")],
                "points": [_step(50.0, base[0], cur[0], 180.0 / 175.0, "pass"),
                           _step(33.3, base[1], cur[1], 0.99, "pass"),
                           _step(20.0, base[2], cur[2], 610.0 / 600.0, "pass")],
            },
        },
    )


#: The engine's own numbers for the sweep regression: a longer queue, a fuller KV cache.
SERVER_BASE = {"waiting_mean": 0.5, "waiting_max": 2.0, "running_mean": 12.0, "running_max": 16.0,
               "kv_cache_usage_mean": 0.4, "kv_cache_usage_max": 0.55, "preemptions": 0.0}
SERVER_CUR = {"waiting_mean": 6.0, "waiting_max": 14.0, "running_mean": 9.6, "running_max": 16.0,
              "kv_cache_usage_mean": 0.85, "kv_cache_usage_max": 0.99, "preemptions": 12.0,
              "prefix_cache_hit_rate": 0.25}


def sweep_regressed() -> TestOutcome:
    """A 20 % slower engine: every point loses throughput and interactivity; the most
    interactive baseline point (25 tok/s/user) is out of reach of every current point."""
    base = _pts([(1.0, 25.0, 209.0, True), (4.0, 20.0, 640.0, True), (16.0, 12.5, 1600.0, False)])
    cur = _pts([(1.0, 20.8, 174.0, True), (4.0, 16.7, 533.0, True), (16.0, 10.4, 1333.0, False)])
    thr = cmp("frontier_throughput", 1600.0, 1333.0, "regressed", interval=(-0.19, -0.15),
              method="equal-load points: bootstrap",
              note="worst at load 16 (throughput -16.7%) of 3 points compared at equal load; 3 regressed")
    return outcome(
        "tests/test_sweep.py::test_frontier_slower",
        line=30,
        scenario="sweep",
        spec={"scenario": "sweep", "sweep": [1, 4, 16], "sweep_over": "concurrency", "requests": 200,
              "isl": 128, "osl": 64, "ttft_ms": 450.0, "tpot_ms": 80.0},
        key_metrics={"frontier.max_output_tokens_per_s": 1333.0, "frontier.points": 3.0},
        comparisons=[thr],
        current_env={**ENV_CUR, "engine_flags": "GOODPUT_SIM_SLOWDOWN=1.2"},
        what_changed={"engine_flags": (None, "GOODPUT_SIM_SLOWDOWN=1.2")},
        server={"baseline": SERVER_BASE, "current": SERVER_CUR},
        frontier={
            "points": cur, "current": cur, "baseline": base,
            "comparison": {
                "verdict": "regressed", "tolerance": 0.05,
                "worst": _step(25.0, base[0], None, 0.0, "regressed"),
                "by_load": [_by_load(1.0, 209.0, 174.0, 40.0, 48.0, "regressed"),
                            _by_load(4.0, 640.0, 533.0, 50.0, 60.0, "regressed"),
                            _by_load(16.0, 1600.0, 1333.0, 80.0, 96.0, "regressed")],
                "points": [_step(25.0, base[0], None, 0.0, "regressed"),
                           _step(20.0, base[1], cur[0], 174.0 / 640.0, "regressed"),
                           _step(12.5, base[2], cur[2], 1333.0 / 1600.0, "regressed")],
            },
        },
    )


def capacity() -> TestOutcome:
    """A capacity search: 2 → 4 → 8 req/s doubling, then bisection between 4 and 8."""
    probes = [
        {"rate": 2.0, "attainment": 1.0, "passed": True, "goodput_rps": 2.0, "good": 40, "issued": 40},
        {"rate": 4.0, "attainment": 0.975, "passed": True, "goodput_rps": 3.9, "good": 78, "issued": 80},
        {"rate": 8.0, "attainment": 0.6, "passed": False, "goodput_rps": 4.8, "good": 96, "issued": 160},
        {"rate": 6.0, "attainment": 0.85, "passed": False, "goodput_rps": 5.1, "good": 102, "issued": 120},
        {"rate": 5.0, "attainment": 0.91, "passed": True, "goodput_rps": 4.55, "good": 91, "issued": 100},
    ]
    cur = {"requests_per_s": 5.0, "lower": 5.0, "upper": 6.0, "target": 0.9, "probes": probes, "complete": True}
    base = {"requests_per_s": 6.0, "lower": 6.0, "upper": 7.0, "target": 0.9, "probes": [], "complete": True}
    return outcome(
        "tests/test_cap.py::test_capacity",
        line=8,
        scenario="capacity",
        spec={"scenario": "capacity", "rate": 2.0, "duration_s": 20.0, "isl": 128, "osl": 64,
              "ttft_ms": 450.0, "attainment": 0.9},
        key_metrics={"capacity.requests_per_s": 5.0},
        comparisons=[cmp("capacity.requests_per_s", 6.0, 5.0, "inconclusive", interval=(-0.3, 0.02),
                         method="capacity search brackets")],
        capacity={"current": cur, "baseline": base},
    )


def all_outcomes() -> list[TestOutcome]:
    """Every status once, deliberately out of node-id order."""
    return [sweep(), regressed(), passed(), slo_failed(), invalid(), errored(), new(), incomparable()]

"""Hand-built TestOutcomes covering every status, shared by the report tests and goldens."""

from __future__ import annotations

from pytest_goodput.schema.outcome import MetricComparison, SLOOutcome, TestOutcome

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


def sweep() -> TestOutcome:
    pts = lambda xs: [{"load": float(i + 1), "load_kind": "concurrency", "interactivity": x, "throughput": y}
                      for i, (x, y) in enumerate(xs)]
    return outcome(
        "tests/test_sweep.py::test_frontier",
        line=5,
        scenario="sweep",
        comparisons=[cmp("frontier_throughput", 400.0, 396.0, "pass", method="pareto step lookup",
                         note="worst at 33.3 tok/s/user of 3 points; all points pass")],
        frontier={
            "current": pts([(50.0, 180.0), (33.3, 396.0), (20.0, 610.0)]),
            "baseline": pts([(50.0, 175.0), (33.3, 400.0), (20.0, 600.0)]),
            "comparison": {"verdict": "pass", "tolerance": 0.05, "worst": {"ratio": 0.99, "interactivity": 33.3}},
        },
    )


def all_outcomes() -> list[TestOutcome]:
    """Every status once, deliberately out of node-id order."""
    return [sweep(), regressed(), passed(), slo_failed(), invalid(), errored(), new(), incomparable()]

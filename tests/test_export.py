"""``--goodput-export`` writers: each format against its published schema or source, and a
hand-computed run (docs/export.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest

from pytest_goodput.interop.writers import (
    ExportedTest,
    ExportError,
    ExportTarget,
    ExportUsageError,
    export,
    file_path,
    parse_target,
    parse_targets,
)
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, RunResult
from pytest_goodput.schema.scenario.spec import build_spec

SCHEMAS = Path(__file__).parent / "data" / "schemas"
ENV = {"model": "tiny-model", "hardware": "cpu-ci", "engine": "pytest-goodput-sim", "engine_version": "0.2.0",
       "engine_cmd": "serve --api-key sk-SECRETSECRETSECRETSECRET"}


def _rec(i, sched, sent, first, end, out, prompt, itl, ok=True):
    return RequestRecord(
        index=i, ok=ok, scheduled_at=sched, sent_at=sent, first_token_at=first if ok else None,
        last_token_at=(first + sum(itl) / 1000) if ok else None, end_at=end,
        ttft_ms=(first - sent) * 1000 if ok else None, e2e_ms=(end - sent) * 1000 if ok else None,
        tpot_ms=(sum(itl) / len(itl)) if ok and itl else None, itl_ms=itl, output_tokens=out if ok else 0,
        prompt_tokens=prompt, send_lag_ms=(sent - sched) * 1000, token_count_source="usage",
        error_kind=None if ok else "http_status", error_detail=None if ok else "HTTP 503")


def hand_run(measured_at: str = "2026-12-04T09:00:00Z") -> RunResult:
    """Three completed requests (TTFT 100, 200, 300 ms from their sends) and one failure."""
    records = [
        _rec(0, 0.0, 0.001, 0.101, 0.501, 5, 10, [100.0, 100.0, 100.0, 100.0]),
        _rec(1, 1.0, 1.0, 1.2, 1.6, 3, 20, [200.0, 200.0]),
        _rec(2, 2.0, 2.0, 2.3, 2.3, 1, 30, []),
        _rec(3, 3.0, 3.0, 0.0, 3.05, 0, 40, [], ok=False),
    ]
    spec = build_spec({"scenario": "concurrency", "concurrency": 1, "requests": 4,
                       "max_error_rate": 0.5, "ttft_p99_ms": 450, "ttft_ms": 250})
    run = summarize(records, spec, ClientHealth(valid=True, cpu_utilization=0.1), load={"concurrency": 1})
    return run.model_copy(update={"measured_at": measured_at})


def judged(run: RunResult) -> ExportedTest:
    outcome = Outcome(nodeid="tests/test_chat.py::test_chat", scenario="concurrency", comparisons=[
        MetricComparison(metric="metrics.ttft_ms.p99", direction="lower", baseline=250.0, current=300.0,
                         change=0.2, interval=(0.05, 0.35), tolerance=0.15, verdict="regressed")],
        baseline_status="compared")
    return ExportedTest("tests/test_chat.py::test_chat", (run,), outcome, dict(ENV))


def _doc(fmt: str, tests: list[ExportedTest]) -> object:
    (path, text), = export(ExportTarget(fmt, "out.json"), tests)
    assert path == "out.json"
    return json.loads(text)


# --- llm-d Benchmark Report v0.2.1 -----------------------------------------------------------

#: Units llm-d's models allow per field (``UNIT_RULES`` and ``check_units`` in schema_v0_2.py at
#: llm-d/llm-d-benchmark 8bc9f1dd): the JSON Schema only knows the unit names.
LLMD_UNITS = {
    ("latency", "time_to_first_token"): {"ms", "s"}, ("latency", "request_latency"): {"ms", "s"},
    ("latency", "time_per_output_token"): {"ms/token", "s/token"},
    ("latency", "inter_token_latency"): {"ms/token", "s/token"},
    ("requests", "input_length"): {"count", "pixels"}, ("requests", "output_length"): {"count", "pixels"},
    ("throughput", "input_token_rate"): {"tokens/s"}, ("throughput", "output_token_rate"): {"tokens/s"},
    ("throughput", "total_token_rate"): {"tokens/s"}, ("throughput", "request_rate"): {"queries/s"},
}


def test_llmd_report_validates_against_the_published_schema_with_llmds_units():
    doc = _doc("llmd", [judged(hand_run())])
    schema = json.loads((SCHEMAS / "llmd_benchmark_report_v0_2_1.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    agg = doc["results"]["request_performance"]["aggregate"]
    for (group, field), allowed in LLMD_UNITS.items():
        assert agg[group][field]["units"] in allowed, (group, field)
    # the numbers are ours, in ms: TTFT mean of 100, 200, 300; nearest-rank P50 = 200
    ttft = agg["latency"]["time_to_first_token"]
    assert (ttft["mean"], ttft["p50"], ttft["p99"], ttft["units"]) == pytest.approx((200.0, 200.0, 300.0, "ms"))
    assert agg["requests"] == {**agg["requests"], "total": 4, "failures": 1}
    assert agg["requests"]["input_length"]["mean"] == pytest.approx(20.0)  # completed requests only
    assert doc["version"] == "0.2.1"
    # the gate's verdict where the format has a place for it
    assert "status:regressed" in doc["run"]["keywords"]
    assert "regressed:metrics.ttft_ms.p99" in doc["run"]["keywords"]
    assert doc["run"]["time"]["start"] == "2026-12-04T09:00:00Z"


def test_llmd_report_of_an_unjudged_run_validates_too():
    run = hand_run()
    doc = _doc("llmd", [ExportedTest("run", (run,))])
    schema = json.loads((SCHEMAS / "llmd_benchmark_report_v0_2_1.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["run"]["keywords"] == ["pytest-goodput"]


def test_llmd_writes_one_report_per_run_with_stable_ids():
    a, b = hand_run("2026-12-04T09:00:00Z"), hand_run("2026-12-04T09:01:00Z")
    files = export(ExportTarget("llmd", "out/report.json"), [ExportedTest("t.py::x", (a, b))])
    assert [p for p, _ in files] == ["out/report.x-1.json".replace("x-1", "t-x-1"),
                                     "out/report.t-x-2.json"]
    docs = [json.loads(t) for _, t in files]
    assert docs[0]["run"]["uid"] != docs[1]["run"]["uid"]
    assert docs[0]["run"]["eid"] == docs[1]["run"]["eid"]  # one experiment
    again = export(ExportTarget("llmd", "out/report.json"), [ExportedTest("t.py::x", (a, b))])
    assert again == files


# --- vllm bench serve result JSON --------------------------------------------------------------

#: Every key ``vllm bench serve --save-result --save-detailed`` writes for a generation run, from
#: vllm/benchmarks/serve.py at vllm-project/vllm 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1
#: (``main_async``'s ``result_json``, ``benchmark``'s ``result`` and ``process_one_metric``),
#: with its unit: per-request arrays in seconds, aggregates in ms.
VLLM_KEYS = {
    "date": "", "endpoint_type": "", "backend": "", "label": "", "model_id": "", "tokenizer_id": "",
    "num_prompts": "count", "request_rate": "req/s", "burstiness": "", "max_concurrency": "count",
    "duration": "s", "completed": "count", "failed": "count", "total_input_tokens": "tokens",
    "total_output_tokens": "tokens", "request_throughput": "req/s", "request_goodput": "req/s",
    "output_throughput": "tok/s", "total_token_throughput": "tok/s", "input_lens": "tokens",
    "output_lens": "tokens", "ttfts": "s", "itls": "s", "latencies": "s", "start_times": "s",
    "queue_times": "s", "errors": "",
    **{f"{stat}_{m}_ms": "ms" for m in ("ttft", "tpot", "itl", "e2el")
       for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99")},
}


def test_vllm_result_has_vllms_keys_and_units_and_vllms_numbers_hand_computed():
    run = hand_run()
    doc = _doc("vllm", [judged(run)])
    assert set(doc) <= set(VLLM_KEYS), set(doc) - set(VLLM_KEYS)
    assert {"ttfts", "itls", "latencies", "mean_ttft_ms", "p99_tpot_ms", "errors"} <= set(doc)
    # per-request arrays in seconds, from each request's send; a failure reads as vLLM's: 0.0, []
    assert doc["ttfts"] == pytest.approx([0.1, 0.2, 0.3, 0.0])
    assert doc["latencies"] == pytest.approx([0.5, 0.6, 0.3, 0.0])
    assert doc["itls"] == [pytest.approx([0.1] * 4), pytest.approx([0.2] * 2), [], []]
    assert doc["queue_times"] == pytest.approx([0.001, 0.0, 0.0, 0.0])
    assert doc["input_lens"] == [10, 20, 30, 40] and doc["output_lens"] == [5, 3, 1, 0]
    assert doc["errors"][:3] == ["", "", ""] and "http_status" in doc["errors"][3]
    # aggregates in ms, as vLLM computes them: numpy mean, median, population SD, linear percentiles
    assert doc["mean_ttft_ms"] == pytest.approx(200.0)
    assert doc["median_ttft_ms"] == pytest.approx(200.0)
    assert doc["std_ttft_ms"] == pytest.approx(math.sqrt(20000 / 3))
    assert doc["p99_ttft_ms"] == pytest.approx(298.0)  # 200 + 0.98 × 100
    assert doc["mean_tpot_ms"] == pytest.approx(150.0)  # (0.5−0.1)/4 and (0.6−0.2)/2; a 1-token answer has none
    assert doc["p99_tpot_ms"] == pytest.approx(199.0)
    assert doc["mean_itl_ms"] == pytest.approx(800 / 6) and doc["median_itl_ms"] == pytest.approx(100.0)
    assert doc["mean_e2el_ms"] == pytest.approx(1400 / 3)
    assert (doc["completed"], doc["failed"], doc["total_input_tokens"], doc["total_output_tokens"]) == (3, 1, 60, 9)
    # the rates divide by our window, so they are our throughput numbers
    assert doc["duration"] == pytest.approx(run.window.seconds)
    assert doc["request_throughput"] == pytest.approx(run.throughput.requests_per_s)
    assert doc["output_throughput"] == pytest.approx(run.throughput.output_tokens_per_s)
    assert doc["total_token_throughput"] == pytest.approx(run.throughput.total_tokens_per_s)
    assert doc["request_rate"] == "inf" and doc["max_concurrency"] == 1 and doc["backend"] == "openai"
    assert doc["date"] == "20261204-090000" and doc["model_id"] == "tiny-model"


def test_vllm_of_a_run_whose_every_request_failed_reads_as_vllms():
    """vLLM writes 0 for every latency statistic when nothing completed; failures are counted."""
    records = [_rec(i, float(i), float(i), 0.0, i + 0.05, 0, 10, [], ok=False) for i in range(3)]
    spec = build_spec({"scenario": "concurrency", "concurrency": 1, "requests": 3, "max_error_rate": 1.0})
    run = summarize(records, spec, ClientHealth(valid=True, cpu_utilization=0.1), load={"concurrency": 1})
    doc = _doc("vllm", [ExportedTest("t.py::down", (run,))])
    assert (doc["completed"], doc["failed"], doc["mean_ttft_ms"], doc["p99_itl_ms"]) == (0, 3, 0.0, 0.0)
    assert doc["request_throughput"] == 0.0 and doc["ttfts"] == [0.0, 0.0, 0.0]
    llmd = _doc("llmd", [ExportedTest("t.py::down", (run,))])
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / "llmd_benchmark_report_v0_2_1.json").read_text())).validate(llmd)
    assert llmd["results"]["request_performance"]["aggregate"]["requests"]["failures"] == 3


def test_an_interrupted_run_is_not_exported():
    from pytest_goodput.schema.runs.results import Interrupted

    cut = hand_run().model_copy(update={"interrupted": Interrupted(reason="interrupted (Ctrl-C)", planned=8,
                                                                   done=4, unfinished=4)})
    assert export(ExportTarget("vllm", "v.json"), [ExportedTest("t.py::x", (cut,))]) == []
    (path, _), = export(ExportTarget("vllm", "v.json"), [ExportedTest("t.py::x", (hand_run(), cut))])
    assert path == "v.json"  # one run left: at PATH itself


def test_vllm_refuses_a_sketched_run_naming_the_formats_that_can_hold_it():
    run = hand_run().model_copy(update={"percentiles": "sketch"})
    with pytest.raises(ExportError, match="sketched.*llmd, bmf or pytorch"):
        export(ExportTarget("vllm", "v.json"), [ExportedTest("t.py::x", (run,))])


# --- Bencher Metric Format ---------------------------------------------------------------------

def test_bmf_validates_and_its_bounds_are_the_order_statistic_and_wilson_intervals():
    run = hand_run()
    doc = _doc("bmf", [judged(run)])
    jsonschema.Draft7Validator(json.loads((SCHEMAS / "bencher_bmf.json").read_text())).validate(doc)
    measures = doc["tests/test_chat.py::test_chat"]
    assert measures["ttft-p99-ms"]["value"] == pytest.approx(300.0)
    # 3 TTFTs cannot bound a P99 from above; from below the order-statistic interval takes the
    # largest rank l with P(B ≤ l − 1) ≤ 2.5 %, B ~ Binomial(3, 0.99): P(B ≤ 1) = 0.0003 and
    # P(B ≤ 2) = 1 − 0.99³ = 0.0297, so l = 2 (200 ms).
    assert measures["ttft-p99-ms"]["lower_value"] == pytest.approx(200.0)
    assert "upper_value" not in measures["ttft-p99-ms"]
    # P50 of three values: P(B ≤ 0) = 1/8 > 2.5 % and P(B ≤ 2) = 7/8 < 97.5 %: unbounded both ways
    assert measures["ttft-p50-ms"] == {"value": pytest.approx(200.0)}
    # the attainment (2 of 4 requests within ttft_ms=250) has Wilson's 95 % interval:
    # centre (0.5 + z²/8) / (1 + z²/4) = 0.5, half-width z/(1 + z²/4) · √(1/16 + z²/64) = 0.34996
    att = measures["goodput-attainment"]
    assert (att["value"], att["lower_value"], att["upper_value"]) == pytest.approx((0.5, 0.15004, 0.84996), abs=1e-5)
    assert measures["throughput-output-tokens-per-s"] == {"value": pytest.approx(run.throughput.output_tokens_per_s)}


def test_bmf_and_pytorch_of_a_sweep_have_one_benchmark_per_load():
    """Sweep points (or capacity probes) offered different loads: one benchmark each, never
    values of different loads as repeats of one."""
    runs = [hand_run().model_copy(update={"load": {"concurrency": float(users)}}) for users in (1, 2, 2)]
    doc = _doc("bmf", [ExportedTest("t.py::sweep", tuple(runs))])
    assert set(doc) == {"t.py::sweep [concurrency=1]", "t.py::sweep [concurrency=2]"}
    records = _doc("pytorch", [ExportedTest("t.py::sweep", tuple(runs))])
    ttft = {r["benchmark"]["extra_info"]["test"]: r["metric"]["benchmark_values"] for r in records
            if r["metric"]["name"] == "metrics.ttft_ms.p99"}
    assert {k: len(v) for k, v in ttft.items()} == {"t.py::sweep [concurrency=1]": 1,
                                                    "t.py::sweep [concurrency=2]": 2}


# --- PyTorch benchmark database records --------------------------------------------------------

def test_pytorch_records_have_the_v3_fields_strings_in_extra_info_and_the_verdict():
    run2 = hand_run("2026-12-04T09:01:00Z")
    test = judged(hand_run())
    test = ExportedTest(test.nodeid, (*test.runs, run2), test.outcome, test.environment)
    records = _doc("pytorch", [test])
    assert isinstance(records, list) and records
    for rec in records:
        assert rec["benchmark"]["name"] == "pytest-goodput" and rec["model"]["name"] == "tiny-model"
        assert isinstance(rec["metric"]["name"], str)
        assert all(isinstance(v, float) for v in rec["metric"]["benchmark_values"])
        for part in ("benchmark", "model", "metric"):  # ClickHouse Map(String, String)
            assert all(isinstance(v, str) for v in rec[part]["extra_info"].values()), rec[part]
        assert "engine_cmd" not in rec["model"]["extra_info"]
    ttft = next(r for r in records if r["metric"]["name"] == "metrics.ttft_ms.p99")
    assert ttft["metric"]["benchmark_values"] == pytest.approx([300.0, 300.0])  # one per repeat
    assert ttft["metric"]["target_value"] == 450.0  # the spec's ttft_p99_ms
    info = ttft["metric"]["extra_info"]
    assert (info["verdict"], info["unit"], json.loads(info["change_interval"])) == ("regressed", "ms", [0.05, 0.35])


# --- FORMAT=PATH ------------------------------------------------------------------------------

@pytest.mark.parametrize("value,needle", [
    ("llmd", "give FORMAT=PATH, FORMAT one of llmd, vllm, bmf, pytorch"),
    ("csv=out.csv", "unknown format 'csv'; allowed: llmd, vllm, bmf, pytorch"),
    ("bmf=", "no PATH after '='"),
])
def test_a_bad_target_names_what_is_wrong_and_the_formats_allowed(value, needle):
    with pytest.raises(ExportUsageError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_target(value)


def test_targets_repeat_and_one_path_is_not_given_twice():
    assert parse_targets(["llmd=a.json", "BMF=b.json"]) == [ExportTarget("llmd", "a.json"),
                                                          ExportTarget("bmf", "b.json")]
    with pytest.raises(ExportUsageError, match="given twice"):
        parse_targets(["llmd=a.json", "vllm=a.json"])
    assert file_path("out/r.json", "t-x-2") == "out/r.t-x-2.json" and file_path("out/r", "a") == "out/r.a"

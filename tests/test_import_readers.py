"""Other tools' files to our records, on hand-computed cases: TPOT from the chunk gaps, a
failed request counted as data, summaries marked as such."""

from __future__ import annotations

import pytest

from pytest_goodput.interop.readers.formats import detect, read
from pytest_goodput.interop.readers.imported import TPOT_STREAM_END, ForeignFileError


def vllm_doc(**extra):
    doc = {"date": "20261204-085914", "backend": "vllm", "endpoint_type": "vllm", "model_id": "m",
           "num_prompts": 2, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 2,
           "duration": 1.0, "completed": 1, "failed": 1, "total_input_tokens": 10, "total_output_tokens": 3,
           "request_throughput": 1.0, "output_throughput": 3.0, "total_token_throughput": 13.0,
           "mean_ttft_ms": 100.0, "median_ttft_ms": 100.0, "p99_ttft_ms": 100.0,
           "mean_tpot_ms": 25.0, "median_tpot_ms": 25.0, "p99_tpot_ms": 25.0}
    doc.update(extra)
    return doc


def test_vllm_detailed_tpot_is_ours_from_the_gaps_and_a_failure_is_data():
    doc = vllm_doc(ttfts=[0.1, 0.0], itls=[[0.01, 0.03], []], input_lens=[10, 10], output_lens=[3, 0],
                   errors=["", "HTTP 500"], latencies=[0.15, 0.0], start_times=[5.0, 5.5])
    assert detect(doc) == "vllm-bench"
    run = read(doc)
    ok, failed = run.result.requests
    # TPOT = (0.01 + 0.03) s / (3 - 1) = 20 ms; vLLM's own (E2E - TTFT)/(N - 1) would say 25 ms.
    assert ok.ttft_ms == pytest.approx(100.0) and ok.tpot_ms == pytest.approx(20.0)
    assert ok.e2e_ms == pytest.approx(150.0) and ok.itl_ms == pytest.approx([10.0, 30.0])
    assert not failed.ok and failed.error_detail == "HTTP 500" and failed.sent_at == pytest.approx(0.5)
    assert run.result.issued == 2 and run.result.completed == 1
    assert run.source.per_request and run.result.measured_at == "2026-12-04T08:59:14"


def test_vllm_summary_only_keeps_vllms_definition():
    run = read(vllm_doc())
    assert not run.source.per_request and run.result.requests == []
    assert run.source.definitions["tpot_ms"] == TPOT_STREAM_END
    assert run.result.metrics.tpot_ms.p50 == 25.0 and run.result.metrics.ttft_ms.p99 == 100.0
    assert run.result.spec.scenario == "concurrency" and run.result.spec.concurrency == 2


def aiperf_row(start_ns, ttft, latency, chunks, osl, error=None, phase="profiling"):
    return {"metadata": {"request_start_ns": start_ns, "benchmark_phase": phase},
            "metrics": {"time_to_first_token": {"value": ttft, "unit": "ms"},
                        "request_latency": {"value": latency, "unit": "ms"},
                        "inter_chunk_latency": {"value": chunks, "unit": "ms"},
                        "output_sequence_length": {"value": osl, "unit": "tokens"},
                        "input_sequence_length": {"value": 7, "unit": "tokens"},
                        "usage_prompt_cache_read_tokens": {"value": 4, "unit": "tokens"}},
            "error": error}


def test_aiperf_records_leave_warmup_out_and_count_errors():
    rows = [aiperf_row(0, 5.0, 30.0, [10.0], 2, phase="warmup"),
            aiperf_row(2_000_000_000, 40.0, 100.0, [20.0, 40.0], 3),
            aiperf_row(1_000_000_000, None, 10.0, None, 0, error={"message": "refused", "code": 503})]
    run = read(rows)
    first, second = run.result.requests  # by start time; the warm-up one left out
    assert not first.ok and first.error_detail == "refused"
    assert second.sent_at == pytest.approx(1.0) and second.tpot_ms == pytest.approx(30.0)  # 60 ms / 2
    assert run.result.issued == 2 and run.result.completed == 1
    # The engine's prefix-cache hits: 4 of the completed request's 7 prompt tokens.
    assert run.result.cached_prompt_tokens == 4 and run.result.prefix_cache_hit_rate == pytest.approx(4 / 7)


def test_unknown_documents_and_forced_formats():
    assert detect({"hello": 1}) is None
    with pytest.raises(ForeignFileError, match="not a aiperf file"):
        read(vllm_doc(), "aiperf")

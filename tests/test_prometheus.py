"""Prometheus scraping: parsing, counter deltas and the engine-neutral mapping."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from pytest_goodput.engines.prometheus import (
    COUNTERS,
    GAUGES,
    delta,
    metrics_url,
    neutral,
    parse,
    scrape,
    server_metrics,
)

VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 4.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1000.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 500.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e9
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 2000.0
# HELP vllm:prefix_cache_queries_total Prefix cache queries.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 800.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 200.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 5.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 9.0
vllm:time_to_first_token_seconds_count{model_name="m"} 9.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 1.5
"""

# As llama.cpp's server (xllamacpp 2026.10) prints it with --metrics.
LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 71
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 0
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 13
# HELP llamacpp:n_tokens_max Largest observed sequence length (prompt + generation)
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 64
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
"""

SGLANG = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 162.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 12.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.28
# HELP sglang:num_retracted_requests_total Retracted requests.
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{model_name="m"} 6.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 7557572.0
"""


def test_parse_sums_label_sets_and_drops_buckets_and_created() -> None:
    m = parse(VLLM)
    assert m["vllm:num_requests_running"] == 5.0
    assert m["vllm:prompt_tokens_total"] == 1500.0
    assert m["vllm:time_to_first_token_seconds_count"] == 9.0
    assert m["vllm:time_to_first_token_seconds_sum"] == 1.5
    assert not any(k.endswith(("_bucket", "_created")) for k in m)


def test_neutral_names_per_engine() -> None:
    assert neutral(parse(VLLM)) == {
        "running": 5.0, "waiting": 7.0, "kv_cache_usage": 0.25, "preemptions": 4.0,
        "prompt_tokens": 1500.0, "generation_tokens": 2000.0,
        "prefix_cache_hits": 200.0, "prefix_cache_queries": 800.0,
    }
    assert neutral(parse(LLAMACPP)) == {
        "running": 2.0, "waiting": 1.0, "prompt_tokens": 71.0, "generation_tokens": 13.0,
        "prefix_cache_hits": 0.0,
    }
    assert neutral(parse(SGLANG)) == {
        "running": 162.0, "waiting": 12.0, "kv_cache_usage": 0.28, "preemptions": 6.0,
        "generation_tokens": 7557572.0,
    }


def test_old_vllm_gpu_cache_name_is_understood() -> None:
    assert neutral({"vllm:gpu_cache_usage_perc": 0.5}) == {"kv_cache_usage": 0.5}
    assert "vllm:gpu_cache_usage_perc" in GAUGES["kv_cache_usage"]


def test_delta_only_for_counters_and_resets_count_from_zero() -> None:
    before = {"a_total": 10.0, "b_count": 3.0, "c_sum": 1.0, "gauge": 5.0, "gone_total": 1.0}
    after = {"a_total": 25.0, "b_count": 3.0, "c_sum": 0.5, "gauge": 9.0, "new_total": 4.0}
    # c_sum went down: the engine restarted, so all of 0.5 is new
    assert delta(before, after) == {"a_total": 15.0, "b_count": 0.0, "c_sum": 0.5}


def test_server_metrics_gauges_after_and_before_counters_as_increase() -> None:
    before = parse(LLAMACPP)
    after = dict(before)
    after.update({
        "llamacpp:requests_processing": 0.0, "llamacpp:requests_deferred": 0.0,
        "llamacpp:prompt_tokens_total": 171.0, "llamacpp:tokens_predicted_total": 413.0,
    })
    assert server_metrics(before, after) == {
        "running": 0.0, "running_before": 2.0, "waiting": 0.0, "waiting_before": 1.0,
        "prompt_tokens": 100.0, "generation_tokens": 400.0, "prefix_cache_hits": 0.0,
    }
    assert server_metrics(None, after) == {}
    assert set(COUNTERS) | set(GAUGES) >= {"running", "preemptions", "prefix_cache_queries"}


def test_metrics_url() -> None:
    assert metrics_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("http://h:1") == "http://h:1/metrics"
    assert metrics_url("http://h:1/prometheus/metrics") == "http://h:1/prometheus/metrics"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        routes = {"/metrics": (200, VLLM), "/json/metrics": (200, '[{"gpu": 1}]')}
        code, body = routes.get(self.path, (404, "not found"))
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def metrics_server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_scrape_over_http(metrics_server: str) -> None:
    m = scrape(metrics_server + "/v1")
    assert m is not None and m["vllm:generation_tokens_total"] == 2000.0
    assert scrape(metrics_server + "/missing/metrics") is None  # 404
    assert scrape(metrics_server + "/json/metrics") is None  # not Prometheus text


def test_scrape_of_a_closed_port_is_none() -> None:
    from pytest_goodput.engines.launch import free_port

    assert scrape(f"http://127.0.0.1:{free_port()}/v1", timeout_s=2) is None

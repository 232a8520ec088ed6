"""The simulator over HTTP: a real server subprocess on 127.0.0.1, port 0, bounded requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Iterator, Optional

import httpx
import pytest

_LAUNCH = "import sys; from pytest_goodput.sim.server import main; sys.exit(main(sys.argv[1:]))"


class Sim:
    def __init__(self, proc: subprocess.Popen, url: str) -> None:
        self.proc, self.url = proc, url
        self.root = url[: -len("/v1")]


def start_sim(*flags: str, env: Optional[dict[str, str]] = None) -> Sim:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GOODPUT_SIM_")}
    full_env.update(env or {})
    proc = subprocess.Popen([sys.executable, "-c", _LAUNCH, "--port", "0", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(20)
    if not line or not line[0].startswith("http://127.0.0.1:"):
        proc.kill()
        _, err = proc.communicate()
        raise RuntimeError(f"simulator did not start: {line!r} {err[-2000:]}")
    return Sim(proc, line[0].strip())


def stop_sim(sim: Sim) -> str:
    """Terminate the server, close its pipes and return its stderr."""
    sim.proc.terminate()
    try:
        _, err = sim.proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        sim.proc.kill()
        _, err = sim.proc.communicate()
    return err


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    s = start_sim("--seed", "3")
    yield s
    stop_sim(s)


def sse_events(resp: httpx.Response) -> list:
    out = []
    for line in resp.iter_lines():
        if line.startswith("data: "):
            payload = line[6:]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def test_prints_base_url_and_serves_models_and_health(sim: Sim) -> None:
    assert sim.url.endswith("/v1")
    assert httpx.get(sim.root + "/health", timeout=5).status_code == 200
    models = httpx.get(sim.url + "/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == ["goodput-sim"]


def test_streaming_completion_with_exact_usage(sim: Sim) -> None:
    body = {"model": "goodput-sim", "prompt": "one two three four five", "max_tokens": 7,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    with httpx.stream("POST", sim.url + "/completions", json=body, timeout=10) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12,
                                    "prompt_tokens_details": {"cached_tokens": 0}}
    tokens = events[:-2]
    assert len(tokens) == 7
    assert all(len(e["choices"][0]["text"].split()) == 1 for e in tokens)
    assert [e["choices"][0]["finish_reason"] for e in tokens] == [None] * 6 + ["length"]
    assert len({e["id"] for e in events[:-1]}) == 1


def test_streaming_chat_starts_with_a_role_only_chunk(sim: Sim) -> None:
    body = {"messages": [{"role": "system", "content": "be brief"},
                         {"role": "user", "content": [{"type": "text", "text": "hi there you"}]}],
            "max_completion_tokens": 4, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    with httpx.stream("POST", sim.url + "/chat/completions", json=body, timeout=10) as r:
        events = sse_events(r)
    first = events[0]["choices"][0]["delta"]
    assert first == {"role": "assistant", "content": ""}
    content = [e["choices"][0]["delta"]["content"] for e in events[1:-2]]
    assert len(content) == 4 and all(c.strip() for c in content)
    assert events[0]["object"] == "chat.completion.chunk"
    assert events[-2]["usage"]["prompt_tokens"] == 5  # "be brief" + "hi there you"


def test_non_streaming_responses_are_deterministic_and_ids_unique(sim: Sim) -> None:
    body = {"prompt": "the same prompt", "max_tokens": 12, "ignore_eos": True}
    a = httpx.post(sim.url + "/completions", json=body, timeout=10).json()
    b = httpx.post(sim.url + "/completions", json=body, timeout=10).json()
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    assert len(a["choices"][0]["text"].split()) == 12
    assert a["id"] != b["id"]
    assert a["usage"] == {"prompt_tokens": 3, "completion_tokens": 12, "total_tokens": 15,
                          "prompt_tokens_details": {"cached_tokens": 0}}
    chat = httpx.post(sim.url + "/chat/completions", timeout=10, json={
        "messages": [{"role": "user", "content": "x y"}], "max_tokens": 3, "ignore_eos": True}).json()
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert chat["usage"]["completion_tokens"] == 3 and chat["choices"][0]["finish_reason"] == "length"


def test_pseudo_eos_varies_lengths_and_respects_min_tokens(sim: Sim) -> None:
    lengths, reasons = [], set()
    for i in range(30):
        r = httpx.post(sim.url + "/completions", timeout=10, json={
            "prompt": f"p {i}", "max_tokens": 64, "min_tokens": 5}).json()
        n = r["usage"]["completion_tokens"]
        assert n == len(r["choices"][0]["text"].split())
        lengths.append(n)
        reasons.add(r["choices"][0]["finish_reason"])
    assert min(lengths) >= 6 and max(lengths) <= 64
    assert len(set(lengths)) > 5 and "stop" in reasons


def test_bad_requests_get_400(sim: Sim) -> None:
    r = httpx.post(sim.url + "/completions", content=b"not json", timeout=5)
    assert r.status_code == 400 and "error" in r.json()
    r = httpx.post(sim.url + "/completions", json={"prompt": "a", "max_tokens": 10**6}, timeout=5)
    assert r.status_code == 400 and "KV cache" in r.json()["error"]["message"]


def test_metrics_parse_and_counters_move(sim: Sim) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    def scrape() -> dict[str, float]:
        text = httpx.get(sim.root + "/metrics", timeout=5).text
        return {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}

    before = scrape()
    words = " ".join(f"w{i}" for i in range(40))  # 2 full blocks of 16: a cacheable prefix
    for _ in range(2):
        httpx.post(sim.url + "/completions", timeout=10,
                   json={"prompt": words, "max_tokens": 5, "ignore_eos": True})
    after = scrape()
    for gauge in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert 0 <= after[gauge] <= (1 if "perc" in gauge else 1000)
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == 10
    assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] == 80
    assert after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"] == 80
    assert after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"] == 32
    assert "vllm:num_preemptions_total" in after


def test_project_client_measures_the_simulator(sim: Sim) -> None:
    import pytest_goodput.load.client.event_loop as loop_mod
    import pytest_goodput.load.client.http as client_mod
    import pytest_goodput.measure.records.record as record_mod

    async def go() -> list:
        async with client_mod.OpenAIClient(sim.url, "goodput-sim") as c:
            plans = [client_mod.RequestPlan(i, "alpha beta gamma delta", 4, 16, time.perf_counter())
                     for i in range(8)]
            import asyncio

            return await asyncio.gather(*(c.send(pl) for pl in plans))

    exchanges = loop_mod.run(go())
    records = [record_mod.to_record(ex, stream=True, api="completions") for ex in exchanges]
    assert all(r.ok for r in records), [r.error_detail for r in records]
    assert {r.output_tokens for r in records} == {16}
    assert {r.prompt_tokens for r in records} == {4}
    assert {r.token_count_source for r in records} == {"usage"}
    assert all(r.ttft_ms > 0 and r.tpot_ms > 0 for r in records)
    assert len({r.response_id for r in records}) == 8


def test_env_knobs_inject_errors_and_name_the_model() -> None:
    s = start_sim(env={"GOODPUT_SIM_ERROR_RATE": "1", "GOODPUT_SIM_ERROR_STATUS": "429",
                       "GOODPUT_SIM_MODEL_NAME": "envmodel"})
    try:
        assert httpx.get(s.url + "/models", timeout=5).json()["data"][0]["id"] == "envmodel"
        r = httpx.post(s.url + "/completions", json={"prompt": "a", "max_tokens": 2}, timeout=5)
        assert r.status_code == 429
    finally:
        stop_sim(s)


def test_error_rate_flag_gives_500s_and_bad_knob_exits_2() -> None:
    s = start_sim("--error-rate", "1")
    try:
        codes = {httpx.post(s.url + "/completions", json={"prompt": "a"}, timeout=5).status_code
                 for _ in range(5)}
        assert codes == {500}
    finally:
        stop_sim(s)
    bad = subprocess.run([sys.executable, "-c", _LAUNCH, "--port", "0"], capture_output=True,
                         text=True, timeout=30, env={**os.environ, "GOODPUT_SIM_SLOWDOWN": "-1"})
    assert bad.returncode == 2 and "slowdown" in bad.stderr


def test_queue_limit_refuses_and_faults_break_streams() -> None:
    # one sequence at a time, 50 ms steps: requests pile up in the queue
    s = start_sim("--max-num-seqs", "1", "--max-queue", "2", "--queue-full-status", "503",
                  "--time-scale", "12.5", "--drop-prob", "0", "--stall-prob", "0")
    try:
        import concurrent.futures as cf

        def one(i: int) -> int:
            return httpx.post(s.url + "/completions", timeout=20, json={
                "prompt": f"q {i}", "max_tokens": 3, "ignore_eos": True}).status_code

        with cf.ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(one, range(8)))
        assert codes.count(503) >= 4 and codes.count(200) >= 2, codes
        assert set(codes) == {200, 503}
    finally:
        stop_sim(s)

    s = start_sim("--drop-prob", "1", "--seed", "1")
    try:
        with pytest.raises(httpx.HTTPError):
            with httpx.stream("POST", s.url + "/completions", timeout=10, json={
                    "prompt": "a b", "max_tokens": 20, "stream": True, "ignore_eos": True}) as r:
                sse_events(r)
        assert httpx.get(s.root + "/health", timeout=5).status_code == 200
    finally:
        err = stop_sim(s)
    assert "Traceback" not in err


def test_stall_delays_one_gap() -> None:
    s = start_sim("--stall-prob", "1", "--stall-ms", "300")
    try:
        times = []
        with httpx.stream("POST", s.url + "/completions", timeout=10, json={
                "prompt": "a b", "max_tokens": 10, "stream": True, "ignore_eos": True}) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    times.append(time.perf_counter())
        gaps = sorted(b - a for a, b in zip(times, times[1:]))
        assert len(times) == 10
        assert gaps[-1] >= 0.25  # the stall; generous lower bound only
    finally:
        stop_sim(s)


def test_small_kv_cache_preempts_over_http_and_trace_records_every_token(tmp_path) -> None:
    import concurrent.futures as cf

    trace = tmp_path / "trace.jsonl"
    s = start_sim("--kv-capacity-tokens", "512", "--no-prefix-caching", "--trace", str(trace))
    try:
        def one(i: int) -> dict:
            body = {"prompt": " ".join(f"w{i}x{j}" for j in range(50)), "max_tokens": 120,
                    "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            with httpx.stream("POST", s.url + "/completions", json=body, timeout=30) as r:
                return sse_events(r)[-2]["usage"]

        with cf.ThreadPoolExecutor(6) as pool:
            usages = list(pool.map(one, range(6)))
        assert all(u == {"prompt_tokens": 50, "completion_tokens": 120, "total_tokens": 170}
                   for u in usages)
        from prometheus_client.parser import text_string_to_metric_families

        text = httpx.get(s.root + "/metrics", timeout=5).text
        values = {x.name: x.value for f in text_string_to_metric_families(text) for x in f.samples}
        assert values["vllm:num_preemptions_total"] > 0  # 6 x 170 tokens > 512
        assert values["vllm:kv_cache_usage_perc"] == 0.0
    finally:
        stop_sim(s)
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert len(lines) == 6
    for rec in lines:
        assert len(rec["intended"]) == len(rec["written"]) == 120
        assert rec["intended"] == sorted(rec["intended"])
        # a token is never written before the end of the step that produced it
        assert all(w >= i for w, i in zip(rec["written"], rec["intended"]))

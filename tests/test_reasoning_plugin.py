"""Reasoning models end to end: the simulator's reasoning phase, a TTFO SLO in a marker."""

from __future__ import annotations

import json
import time

import httpx
import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# and exception classes (httpx) must not be loaded twice, so the plugin's lazily loaded
# core is imported before any pytester run.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.engines.engine import simulator
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.records.record import to_record

pytest_plugins = ["pytester"]

REASONING = 12


@pytest.fixture(scope="module")
def thinking_sim_url():
    """A simulator whose chat answers follow a 12-token reasoning phase (both field names)."""
    with simulator(reasoning_tokens=REASONING, reasoning_field="both") as eng:
        yield eng.base_url


def test_simulator_streams_reasoning_before_the_answer(thinking_sim_url):
    body = {"model": "m", "messages": [{"role": "user", "content": "a b c"}], "max_tokens": 5,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    reads = []
    with httpx.Client(timeout=10) as client:
        sent = time.perf_counter()
        with client.stream("POST", thinking_sim_url + "/chat/completions", json=body) as resp:
            assert resp.status_code == 200
            for data in resp.iter_bytes():
                reads.append((time.perf_counter(), data))
    text = b"".join(d for _, d in reads).decode()
    events = [json.loads(line[6:]) for line in text.splitlines()
              if line.startswith("data: {")]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    kinds = ["r" if "reasoning_content" in d else "a" for d in deltas[1:]]  # after the role chunk
    assert kinds == ["r"] * REASONING + ["a"] * 5  # reasoning first, then the answer
    assert all(d.get("reasoning") == d["reasoning_content"] for d in deltas if "reasoning_content" in d)
    assert events[-1]["usage"]["completion_tokens"] == REASONING + 5
    assert events[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": REASONING}
    r = to_record(RawExchange(RequestPlan(0, "a b c", 3, 5, sent), sent, reads[-1][0], 200, reads),
                  stream=True, api="chat", min_output_tokens=5)
    assert r.ok and (r.output_tokens, r.reasoning_tokens, r.answer_tokens) == (17, REASONING, 5)
    assert r.reasoning_token_source == "usage"
    assert r.ttfo_ms > r.ttft_ms  # twelve decode steps of reasoning in between
    # completions have no reasoning parser: the knob leaves them alone
    plain = httpx.post(thinking_sim_url + "/completions", timeout=10,
                       json={"prompt": "a b c", "max_tokens": 3, "ignore_eos": True}).json()
    assert plain["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6,
                              "prompt_tokens_details": {"cached_tokens": 0}}


def test_ttfo_slo_holds_generous_and_breaks_tiny(pytester, thinking_sim_url):
    pytester.makepyfile(test_perf="""
import pytest

SHAPE = dict(scenario="server", api="chat", requests=30, rate=30.0, isl=16, osl=4)

@pytest.mark.goodput(**SHAPE, ttfo_p99_ms=60000)
def test_generous(goodput):
    r = goodput.run()
    assert r.metrics.reasoning_tokens.mean == 12
    assert r.metrics.ttfo_ms.p50 > r.metrics.ttft_ms.p50

@pytest.mark.goodput(**SHAPE, ttfo_p99_ms=0.001)
def test_tiny(goodput):
    goodput.run()
""")
    out = pytester.path / "out.json"
    res = pytester.runpytest(f"--goodput-url={thinking_sim_url}", f"--goodput-json={out}")
    res.assert_outcomes(passed=1, failed=1)
    text = res.stdout.str()
    assert "TTFO P99" in text and "BROKEN" in text
    doc = json.loads(out.read_text())
    slos = {t["outcome"]["nodeid"].split("::")[-1]: {s["name"]: s for s in t["outcome"]["slos"]}
            for t in doc["tests"]}
    assert slos["test_generous"]["ttfo_p99_ms"]["ok"] is True
    tiny = slos["test_tiny"]["ttfo_p99_ms"]
    assert tiny["ok"] is False and tiny["value"] > 0.001
    run = next(t for t in doc["tests"] if t["outcome"]["nodeid"].endswith("test_tiny"))["runs"][0]
    assert run["metrics"]["ttfo_ms"]["count"] == 30
    assert {r["reasoning_tokens"] for r in run["requests"]} == {REASONING}


def test_longer_reasoning_than_the_baseline_is_a_workload_change(pytester):
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="server", api="chat", requests=20, rate=10.0, isl=16, osl=4)
def test_gate():
    pass
""")
    # steps 3x the default: a busy machine's client keeps up with the token pace
    with simulator(reasoning_tokens=REASONING, time_scale=3) as sim:
        pytester.runpytest(f"--goodput-url={sim.base_url}", "--goodput-update-baseline",
                           "--goodput-sessions=2").assert_outcomes(passed=1)
    with simulator(reasoning_tokens=REASONING * 2, time_scale=3) as longer:
        res = pytester.runpytest(f"--goodput-url={longer.base_url}", "--goodput-baseline")
    text = res.stdout.str()
    assert ("workload changed: the model thinks 100 % longer (reasoning tokens per request "
            "12 → 24): a workload change, not a performance change") in text, text


def test_simulator_honours_reasoning_effort_and_budget(thinking_sim_url):
    def reasoning_of(**controls) -> tuple[int, dict]:
        body = {"model": "m", "messages": [{"role": "user", "content": "a b c"}], "max_tokens": 2,
                "ignore_eos": True, **controls}
        resp = httpx.post(thinking_sim_url + "/chat/completions", json=body, timeout=10)
        doc = resp.json()
        return resp.status_code, doc.get("usage", {}).get("completion_tokens_details", doc)

    assert reasoning_of(reasoning_effort="high") == (200, {"reasoning_tokens": 2 * REASONING})
    assert reasoning_of(reasoning_effort="low") == (200, {"reasoning_tokens": REASONING // 2})
    assert reasoning_of(reasoning_effort="high", thinking_token_budget=5) == (200, {"reasoning_tokens": 5})
    status, err = reasoning_of(reasoning_effort="maximal")
    assert status == 400 and "reasoning_effort must be one of low, medium, high" in err["error"]["message"]

"""The trace-replay example gate of docs/workloads.md, run as written on the simulator.

The test module is the documentation's code block (extracted, so docs and test cannot
drift), replaying a small chat trace: 40 rows over about 8 s of trace time that share a
512-token system prompt (hash id 0), replayed twice as fast (about 10 requests/s).
Recorded (two sessions), it passes A/A, and a simulator slowed by 30 % fails it as a
regression; a changed trace file is not compared with the baseline of the old one. The CLI
replays a CSV trace over two client processes.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fake_selfcheck

# pytester's in-process runs drop modules first imported inside them; the plugin's lazily
# loaded core (numpy, httpx) is imported here, before any run.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.github  # noqa: F401
import pytest_goodput.report.md.markdown  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.engines.engine import simulator

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parents[1] / "docs" / "workloads.md"


def docs_example() -> str:
    """The first Python block of the "Trace replay" section of docs/workloads.md."""
    section = DOCS.read_text().split("\n## Trace replay\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "docs/workloads.md: the Trace replay section has no python block"
    return blocks[0]


def chat_trace(rows: int = 40, mean_gap_ms: float = 200.0, seed: int = 7) -> str:
    """Mooncake JSONL: every row shares block 0 (a 512-token system prompt), then its own words."""
    rng = random.Random(seed)
    t, out = 0, []
    for i in range(rows):
        out.append({"timestamp": t, "input_length": 512 + rng.randint(16, 160),
                    "output_length": rng.randint(24, 48), "hash_ids": [0, i + 1]})
        t += int(rng.expovariate(1 / mean_gap_ms))
    return "".join(json.dumps(r) + "\n" for r in out)


@pytest.fixture(scope="module")
def slower_sim_url():
    """The injected regression: every engine step 30 % slower."""
    with simulator(slowdown=1.3) as eng:
        yield eng.base_url


def test_docs_example_gate_passes_a_a_and_catches_the_regression(pytester, sim_url, slower_sim_url):
    code = docs_example()
    assert 'scenario="trace", trace="traces/chat.jsonl"' in code
    pytester.makepyfile(test_trace_gate=code)
    (pytester.path / "traces").mkdir()
    trace = pytester.path / "traces" / "chat.jsonl"
    trace.write_text(chat_trace())

    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline", "--goodput-sessions=2")
    res.assert_outcomes(passed=1)
    doc = json.loads(next((pytester.path / ".goodput" / "baselines").rglob("*.json")).read_text())
    assert doc["spec"]["trace_sha256"] == __import__("hashlib").sha256(trace.read_bytes()).hexdigest()
    summary = doc["sessions"][0]["summary"]
    assert len(doc["sessions"]) == 2 and summary

    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline")
    res.assert_outcomes(passed=1)  # A/A

    res = pytester.runpytest(f"--goodput-url={slower_sim_url}", "--goodput-baseline")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "regressed" in out and "Traceback" not in out

    trace.write_text(chat_trace(rows=12, seed=8))  # another trace under the same name
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline")
    assert "the scenario spec changed since the baseline was recorded" in res.stdout.str()


def test_a_bad_trace_is_a_collection_error_before_any_engine(pytester):
    """The trace is read when the test's spec is built, at collection: a bad file is refused as
    a bad marker argument is, naming the file, the line and the field, before anything runs."""
    pytester.makepyfile(test_trace_gate=docs_example())
    (pytester.path / "traces").mkdir()
    (pytester.path / "traces" / "chat.jsonl").write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 20}\n'
        '{"timestamp": 100, "input_length": 0, "output_length": 20}\n')
    res = pytester.runpytest("--goodput-url=http://127.0.0.1:9/v1", "--goodput-model=m")
    res.assert_outcomes(errors=1)
    assert res.ret == pytest.ExitCode.INTERRUPTED
    out = res.stdout.str()
    assert ("chat.jsonl:2: 'input_length' must be a whole number of tokens >= 1, got 0 "
            "(in test_trace_gate.py::test_chat_traffic_at_twice_its_speed)") in out
    assert "Traceback" not in out and "cannot reach" not in out


def test_a_missing_trace_is_a_collection_error(pytester):
    pytester.makepyfile(test_trace_gate=docs_example())
    res = pytester.runpytest("--goodput-url=http://127.0.0.1:9/v1", "--goodput-model=m")
    res.assert_outcomes(errors=1)
    out = res.stdout.str()
    assert "trace file 'traces/chat.jsonl' does not exist (in test_trace_gate.py::" in out
    assert "Traceback" not in out and "cannot reach" not in out


def test_cli_replays_a_csv_trace_over_two_workers_and_reports_its_shape(tmp_path, sim_url):
    trace = tmp_path / "t.csv"
    # Rows 0, 1 and 3 start with block 7 (512 tokens, cut to each row's length), row 2 is alone.
    trace.write_text("timestamp,input_length,output_length,hash_ids\n0,40,8,7\n200,60,8,7\n200,20,8,9\n"
                     "600,80,8,7 8\n")
    out = tmp_path / "r.json"
    # The numbers checked here come from the trace and the engine, not from timing: a passing
    # self-check keeps a busy machine from making the run invalid (exit 3).
    cmd = fake_selfcheck.cli("run", "--url", sim_url, "--scenario", "trace", "--trace", str(trace),
                             "--trace-time-scale", "0.5", "--workers", "2", "--json", str(out))
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    result = json.loads(out.read_text())
    assert result["issued"] == 4 and result["completed"] == 4 and result["client"]["workers"] == 2
    # offsets 0, 0.1, 0.1, 0.3 s: span 0.3 s, 3 gaps -> 10 req/s; ISL mean 50, OSL mean 8
    assert result["load"]["trace_requests"] == 4 and result["load"]["trace_span_s"] == pytest.approx(0.3)
    assert result["load"]["trace_rate"] == pytest.approx(10.0)
    assert (result["load"]["trace_isl_mean"], result["load"]["trace_osl_mean"]) == (50.0, 8.0)
    assert [r["prompt_tokens"] for r in result["requests"]] == [40, 60, 20, 80]
    assert "trace_requests=4" in res.stdout
    # The simulator caches 16-token blocks: row 1 finds row 0's first 32 tokens (of 40), row 3
    # row 1's first 48 (of 60), whichever worker sent them; the simulator counts exactly that.
    assert result["server_metrics"]["prefix_cache_hits"] == 32 + 48

    trace.write_text("timestamp,input_length,output_length\n5,40,8\n1,60,8\n")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "t.csv:3: timestamp 1 ms is earlier than 5 ms" in res.stderr and "Traceback" not in res.stderr

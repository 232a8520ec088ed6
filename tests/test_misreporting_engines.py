"""Engines that misreport, through the CLI: none is counted as an ok, fast request.

Each engine is the reference server (``refserver.py``, 127.0.0.1) streaming 32 tokens 10 ms
apart, with one lie: a usage count above what it streamed, a ``finish_reason`` of ``abort``
after 8 tokens, a stream that stops after 8 tokens with nothing more, an error event after 8
tokens, or a whitespace chunk flushed at once before a 100 ms stall (docs/metrics.md,
"Responses cross-checked" and "The first output chunk").
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from refserver import serve_in_thread

LOAD = ["--scenario", "concurrency", "--concurrency", "1", "--requests", "6", "--warmup", "0",
        "--isl", "8", "--osl", "32", "--timeout", "10"]
HONEST: dict[str, Any] = {"ttft_ms": 40.0, "itl_ms": 10.0}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", *args], capture_output=True,
                          text=True, timeout=180, cwd=cwd)


def run(tmp_path: Path, name: str, load: list[str] = LOAD, **lie: Any) -> tuple[int, dict]:
    out = tmp_path / f"{name}.json"
    with serve_in_thread(**{**HONEST, **lie}) as srv:
        res = cli("run", "--url", f"http://127.0.0.1:{srv.port}", "--model", "ref-model", *load,
                  "--json", str(out), cwd=tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    assert out.exists(), res.stdout + res.stderr
    return res.returncode, json.loads(out.read_text())


@pytest.mark.parametrize(("lie", "told"), [
    ({"usage_tokens": 128}, "128"),  # 4x: TPOT would read 2.4 ms instead of 10
    ({"usage_tokens": 35, "token_text": "x"}, "35"),  # +9 %: one-character tokens hold at most 33
])
def test_a_usage_count_above_what_was_streamed_is_not_believed(tmp_path: Path, lie: dict, told: str) -> None:
    code, result = run(tmp_path, "overcount", **lie)
    requests = result["requests"]
    assert code == 0 and all(r["ok"] for r in requests)
    # every request counted from the stream: 32 content chunks, not the usage's count
    assert {(r["output_tokens"], r["token_count_source"]) for r in requests} == {(32, "chunks")}
    assert all(f"usage.completion_tokens {told} is more than the stream could hold" in r["usage_disagreement"]
               for r in requests)
    notes = result["client"]["notes"]
    assert any("usage disagreed with the stream on 6 of 6 measured requests" in n for n in notes), notes


@pytest.mark.parametrize(("lie", "kind", "detail"), [
    ({"end_after": 8, "finish_reason": "abort", "usage_tokens": 32}, "finish_reason", "'abort' after 8"),
    ({"end_after": 8, "end_how": "close", "usage": "none"}, "truncated", "after 8 content chunk(s)"),
    ({"end_after": 8, "end_how": "error"}, "engine_error", "engine overloaded: request aborted"),
])
def test_a_response_cut_short_is_a_failed_request(tmp_path: Path, lie: dict, kind: str, detail: str) -> None:
    code, result = run(tmp_path, kind, **lie)
    requests = result["requests"]
    assert code == 1  # every request failed: the run breaks its error-rate SLO
    assert Counter(r["error_kind"] for r in requests) == {kind: 6}
    assert all(detail in r["error_detail"] and r["tpot_ms"] is None for r in requests)
    assert result["failures"] == {kind: 6}  # the run's failure breakdown


def test_a_whitespace_flush_before_a_stall_reads_as_the_ttft_regression_it_is(tmp_path: Path) -> None:
    load = [*LOAD[:5], "16", *LOAD[6:]]
    code, base = run(tmp_path, "base", load)
    assert code == 0
    # the honest engine: believed, no blank chunk, nothing noted
    assert {(r["output_tokens"], r["token_count_source"], r["usage_disagreement"], r["leading_blank_chunks"])
            for r in base["requests"]} == {(32, "usage", None, 0)}
    assert not any("usage disagreed" in n or "whitespace-only" in n for n in base["client"]["notes"])
    # " " flushed at once, the real first token 100 ms later than the baseline's
    code, head = run(tmp_path, "head", load, blank_first=" ", ttft_ms=140.0)
    assert code == 0 and all(r["leading_blank_chunks"] == 1 for r in head["requests"])
    assert any("16 of 16 measured requests began with whitespace-only chunks" in n
               for n in head["client"]["notes"])
    out = tmp_path / "compare.json"
    res = cli("compare", str(tmp_path / "base.json"), str(tmp_path / "head.json"), "--json", str(out),
              cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    (outcome,) = json.loads(out.read_text())["outcomes"]
    verdicts = {c["metric"]: c["verdict"] for c in outcome["comparisons"]}
    assert verdicts["metrics.ttft_ms.p99"] == "regressed", verdicts  # the concurrency gate's TTFT

"""A real engine in CI: llama.cpp's server (xllamacpp wheel) serving a tiny random model.

Needs the ``llamacpp`` extra (xllamacpp, gguf); skipped without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

pytest.importorskip("xllamacpp", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")
pytest.importorskip("gguf", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")

import pytest_goodput  # noqa: E402
from pytest_goodput.engines.launch import LaunchedEngine, launch
from pytest_goodput.engines.prometheus import scrape, server_metrics
from pytest_goodput.engines.tinyllama import DEFAULT_WORDS, write_tiny_llama
from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.client.http import OpenAIClient
from pytest_goodput.measure.records.exchange import RequestPlan
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.schema.runs.results import RequestRecord

pytestmark = pytest.mark.llamacpp

REPO = str(Path(pytest_goodput.__file__).resolve().parent.parent)
MODEL = "tiny"


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_tiny_llama(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture(scope="module")
def engine(model_path: str) -> Iterator[LaunchedEngine]:
    cmd = [
        sys.executable, "-m", "pytest_goodput.engines.llamacpp_server", "--model", model_path,
        "--port", "{port}", "--parallel", "8", "--threads", "1", "--metrics", "--alias", MODEL,
    ]
    env = {"PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with launch(cmd, env=env, ready_timeout_s=60) as eng:
        yield eng
    assert not eng.alive()


def _send(base_url: str, api: str, lengths: list[int]) -> list[RequestRecord]:
    async def go() -> list[RequestRecord]:
        async with OpenAIClient(base_url, MODEL, api=api, timeout_s=30) as client:
            now = time.perf_counter()
            plans = [
                RequestPlan(i, f"request {i} about the {DEFAULT_WORDS[i % 40]} model", None, n, now)
                for i, n in enumerate(lengths)
            ]
            exchanges = await asyncio.gather(*(client.send(p) for p in plans))
        return [to_record(ex, stream=True, api=api, min_output_tokens=ex.plan.max_tokens) for ex in exchanges]

    return run(go())


def test_model_file_is_deterministic(tmp_path: Path, model_path: str) -> None:
    def digest(p: str) -> str:
        return hashlib.sha256(Path(p).read_bytes()).hexdigest()

    assert digest(write_tiny_llama(tmp_path / "again.gguf")) == digest(model_path)
    assert digest(write_tiny_llama(tmp_path / "other.gguf", seed=1)) != digest(model_path)


def test_models_endpoint_lists_the_alias(engine: LaunchedEngine) -> None:
    ids = [m["id"] for m in httpx.get(engine.base_url + "/models", timeout=10).json()["data"]]
    assert ids == [MODEL]


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_streams_exactly_max_tokens_with_usage(engine: LaunchedEngine, api: str) -> None:
    lengths = [1, 2, 7, 16, 33, 64, 100, 128, 3, 50, 80, 5]  # 12 requests over 8 slots: some queue
    records = _send(engine.base_url, api, lengths)
    for rec, n in zip(records, lengths):
        assert rec.ok, (rec.error_kind, rec.error_detail)
        assert rec.token_count_source == "usage"
        assert rec.output_tokens == n
        assert rec.prompt_tokens is not None and rec.prompt_tokens > 0
        assert rec.ttft_ms is not None and rec.e2e_ms is not None and rec.ttft_ms <= rec.e2e_ms
        if n >= 2 and rec.tokens_at_once:
            # a busy client read every chunk at one instant: no time passed, no TPOT
            assert rec.tpot_ms is None and rec.itl_ms == []
        elif n - rec.leading_blank_chunks >= 2:
            # one token a chunk; whitespace-only first tokens start neither TTFT nor the
            # inter-token latencies (docs/metrics.md, "The first output chunk")
            assert rec.tpot_ms is not None and len(rec.itl_ms) == n - rec.leading_blank_chunks - 1
        if api == "completions":  # one word piece per chunk, so chunks == tokens
            assert rec.content_chunks == n


def test_text_is_plain_words_and_never_stops_early(engine: LaunchedEngine) -> None:
    body = {"model": MODEL, "prompt": "the river", "max_tokens": 300, "temperature": 1.0, "seed": 3}
    out = httpx.post(engine.base_url + "/completions", json=body, timeout=30).json()
    choice = out["choices"][0]
    assert choice["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 300
    assert re.fullmatch(r"[ a-z]+", choice["text"]), choice["text"][:200]


def test_metrics_counters_move_by_what_was_served(engine: LaunchedEngine) -> None:
    before = scrape(engine.base_url)
    assert before is not None, "llama.cpp started with --metrics serves /metrics"
    lengths = [10, 20, 30, 40]
    records = _send(engine.base_url, "completions", lengths)
    assert all(r.ok for r in records)
    after = scrape(engine.base_url)
    m = server_metrics(before, after)
    assert m["generation_tokens"] == sum(lengths)
    served_prompt = sum(r.prompt_tokens or 0 for r in records)
    # llama.cpp counts prompt tokens it computed; tokens reused from a slot's cache are apart
    assert m["prompt_tokens"] + m["prefix_cache_hits"] == served_prompt
    assert m["running"] == 0 and m["waiting"] == 0

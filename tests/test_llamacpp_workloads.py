"""Multi-turn and shared-prefix workloads on a real engine: llama.cpp's server (xllamacpp)
with the tiny random-weight model, on the CPU, no download.

Asserts counts, never timing: every prompt and output count is the engine's own
(``usage``), each turn's prompt holds the previous turn's prompt and answer, and the
engine's slot cache shows in ``usage.prompt_tokens_details.cached_tokens``. Needs the
``llamacpp`` extra; skipped without it.
"""

from __future__ import annotations

from typing import Iterator

import pytest

pytest.importorskip("xllamacpp", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")
pytest.importorskip("gguf", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")

from pytest_goodput.engines.engine import Engine  # noqa: E402
from pytest_goodput.load.scenario import run_scenario  # noqa: E402
from pytest_goodput.schema.runs.results import RunResult  # noqa: E402
from pytest_goodput.schema.scenario.spec import build_spec  # noqa: E402
from tiny_llamacpp import ALIAS, two_slot_engine  # noqa: E402

pytestmark = [pytest.mark.llamacpp]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with two_slot_engine(tmp_path_factory) as eng:
        yield eng


def exact(r: RunResult, issued: int, osl: int) -> None:
    """Every request answered in full, counted by the engine (usage), none estimated."""
    assert r.issued == r.completed == issued and r.failures == {}
    assert r.token_count_source == "usage"
    for q in r.requests:
        assert q.ok, (q.error_kind, q.error_detail)
        assert q.token_count_source == "usage" and q.output_tokens == osl
        assert q.cached_tokens is not None and 0 <= q.cached_tokens <= q.prompt_tokens


def test_multiturn_conversation_prompts_grow_by_each_answer(engine: Engine) -> None:
    isl, osl, turns = 16, 8, 3
    spec = build_spec(dict(scenario="concurrency", concurrency=2, api="chat", turns=turns,
                           requests=3 * turns, isl=isl, osl=osl))
    r = run_scenario(spec, engine.base_url, ALIAS)
    exact(r, 3 * turns, osl)
    convs: dict[int, list] = {}
    for q in r.requests:
        convs.setdefault(q.conversation, []).append(q)
    assert sorted(convs) == [0, 1, 2]
    for c, qs in convs.items():
        qs.sort(key=lambda q: q.turn)
        assert [q.turn for q in qs] == [1, 2, 3] and [q.index for q in qs] == [3 * c, 3 * c + 1, 3 * c + 2]
        for prev, cur in zip(qs, qs[1:]):
            # the engine's count of turn t+1's prompt holds turn t's prompt, its answer and a
            # new message of at least isl tokens (the chat template adds a few more)
            assert cur.prompt_tokens >= prev.prompt_tokens + prev.output_tokens + isl
            # the history is the slot's cached prompt: at least turn t's prompt is reused
            assert cur.cached_tokens >= prev.prompt_tokens // 2, (prev, cur)
    assert r.prefix_cache_hit_rate is not None and r.prefix_cache_hit_rate > 0.3
    assert r.metrics.ttft_later_ms.count == 6 and set(r.metrics.ttft_ms_by_turn) == {"1", "2", "3"}


def test_shared_prefix_is_served_from_the_cache(engine: Engine) -> None:
    isl, osl, prefix = 8, 8, 64
    spec = build_spec(dict(scenario="concurrency", concurrency=1, api="chat", requests=6,
                           isl=isl, osl=osl, prefix_len=prefix))
    r = run_scenario(spec, engine.base_url, ALIAS)
    exact(r, 6, osl)
    first, *rest = sorted(r.requests, key=lambda q: q.index)
    assert first.prompt_tokens >= prefix + isl
    # one user, one group: every request after the first finds the prefix in a slot
    assert all(q.cached_tokens >= prefix for q in rest), [q.cached_tokens for q in rest]
    assert r.cached_prompt_tokens == sum(q.cached_tokens for q in r.requests)

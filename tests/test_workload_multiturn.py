"""Multi-turn conversations and shared prefixes end to end, on the simulator.

The example gates of ``docs/workloads.md`` are run as written (extracted from the page, so
docs and test cannot drift): recorded, passed A/A, and the multi-turn one fails once the
simulator's prefix cache is off. The driver's behaviour (history, order, failed turns) is
checked on a scripted sender, without timing.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

import fake_selfcheck

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# and exception classes (httpx) must not be loaded twice, so the plugin's lazily loaded
# core is imported before any pytester run.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.engines.engine import simulator
from pytest_goodput.load.coordinator import drive
from pytest_goodput.load.requests.schedule import think_times
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.schema.scenario.spec import SpecError, build_spec

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[1] / "docs" / "workloads.md"


def doc_example(section: str) -> str:
    """The first ```python block of ``## <section>`` in docs/workloads.md."""
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", body, re.S).group(1)


@pytest.fixture(autouse=True)
def _passing_selfcheck(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate sessions decide the gate's verdict on the engine (a prefix cache or none), not
    the client's validity: a busy neighbour must neither fail one nor make it measure again."""
    if "pytester" in request.fixturenames:
        fake_selfcheck.install(monkeypatch)


def gate(pytester, url: str, *flags: str):
    """One plugin session against ``url`` (in this process: the self-check passes) and its JSON."""
    out = pytester.path / "out.json"
    res = pytester.runpytest(f"--goodput-url={url}", f"--goodput-json={out}", *flags)
    return res, json.loads(out.read_text())["tests"][0]


def test_multiturn_doc_gate_passes_aa_and_fails_without_the_prefix_cache(pytester, sim_url):
    pytester.makepyfile(test_chat="import pytest\n\n\n" + doc_example("Multi-turn chat"))
    res, test = gate(pytester, sim_url, "--goodput-update-baseline")
    res.assert_outcomes(passed=1)
    run = test["runs"][0]
    later = [r for r in run["requests"] if r["turn"] >= 2]
    assert len(later) == 48 and all(r["cached_tokens"] > 0 for r in later)
    assert 0.5 < run["prefix_cache_hit_rate"] < 1
    assert run["window"]["basis"] == "sends"  # turns are not chained end-to-schedule
    # A/A: the same engine again passes the gate
    gate(pytester, sim_url, "--goodput-baseline")[0].assert_outcomes(passed=1)
    with simulator(prefix_caching="false") as cold:
        res, test = gate(pytester, cold.base_url, "--goodput-baseline")
    res.assert_outcomes(failed=1)
    assert "TTFT turns 2+ P50" in res.stdout.str()
    assert test["runs"][0]["prefix_cache_hit_rate"] is None  # the cold engine reports no cache
    verdicts = {v["metric"]: v["verdict"] for v in test["outcome"]["comparisons"]}
    assert verdicts["metrics.ttft_later_ms.p50"] == "regressed"


def test_shared_prefix_doc_gate_runs_and_passes_aa(pytester, sim_url):
    pytester.makepyfile(test_prefix="import pytest\n\n\n" + doc_example("Shared prefixes"))
    res, test = gate(pytester, sim_url, "--goodput-update-baseline")
    res.assert_outcomes(passed=1)
    assert test["runs"][0]["prefix_cache_hit_rate"] > 0.5
    gate(pytester, sim_url, "--goodput-baseline")[0].assert_outcomes(passed=1)


class Scripted:
    """Answers turn t of conversation c with the words ``a<c>t<t>``; fails request ``fail``."""

    def __init__(self, fail: int = -1) -> None:
        self.plans: list[RequestPlan] = []
        self.fail = fail

    async def send(self, plan: RequestPlan) -> RawExchange:
        self.plans.append(plan)
        await asyncio.sleep(0)
        if plan.index == self.fail:
            return RawExchange(plan, 1.0, 1.1, 500, [(1.1, b'{"error": "boom"}')])
        chunk = {"choices": [{"delta": {"content": f"a{plan.conversation}t{plan.turn}"}}]}
        data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        return RawExchange(plan, 1.0, 1.1, 200, [(1.05, data)])


def drive_conversations(spec, sender: Scripted) -> list[RawExchange]:
    return asyncio.run(drive(spec, sender, salt=7)).exchanges


def test_each_turn_carries_the_history_it_was_answered():
    spec = build_spec(dict(scenario="concurrency", concurrency=2, api="chat", turns=3,
                           requests=6, warmup_requests=3, isl=4, osl=2))
    sender = Scripted(fail=4)  # conversation 1, turn 2
    out = drive_conversations(spec, sender)
    by_index = {ex.plan.index: ex.plan for ex in out}
    assert sorted(by_index) == list(range(9))
    assert [(p.conversation, p.turn, p.warmup) for p in (by_index[i] for i in range(9))] == [
        (0, 1, True), (0, 2, True), (0, 3, True), (1, 1, False), (1, 2, False), (1, 3, False),
        (2, 1, False), (2, 2, False), (2, 3, False)]
    p = by_index[2]
    roles = [m["role"] for m in p.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in p.messages[1::2]] == ["a0t1", "a0t2"]
    assert p.messages[0]["content"] == by_index[0].prompt and p.messages[-1]["content"] == p.prompt
    # the failed turn (request 4) is left out: turn 3 follows turn 1's answer
    assert [m["content"] for m in by_index[5].messages] == [
        by_index[3].prompt, "a1t1", by_index[5].prompt]


def test_think_times_are_seeded_exponential_draws():
    spec = build_spec(dict(scenario="concurrency", concurrency=1, api="chat", turns=4,
                           requests=8, think_time_s=2.0))
    a, b = think_times(spec, 0), think_times(spec, 1)
    assert len(a) == 3 and a == think_times(spec, 0) and a != b and all(x >= 0 for x in a)
    assert think_times(spec.model_copy(update={"think_time_s": 0.0}), 0) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("args, message", [
    (dict(turns=2, scenario="concurrency", concurrency=2, requests=4), "needs api='chat'"),
    (dict(turns=2, api="chat", scenario="offline", requests=4), "runs in scenario 'concurrency'"),
    (dict(turns=3, api="chat", scenario="concurrency", concurrency=2, requests=4),
     "requests=4 must be a multiple of turns=3"),
    (dict(turns=2, api="chat", scenario="concurrency", concurrency=2, duration_s=5.0), "not duration_s="),
    (dict(scenario="offline", think_time_s=1.0), "think_time_s= applies only to conversations"),
    (dict(scenario="offline", prefix_groups=4), "need prefix_len="),
])
def test_conversation_arguments_that_cannot_run_are_refused(args, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        build_spec(args)


def test_defaults_leave_the_identity_of_existing_specs_alone():
    spec = build_spec(dict(scenario="server", rate=2.0))
    assert not {"turns", "think_time_s", "prefix_len", "prefix_groups", "prefix_fraction"} & set(spec.identity())


def test_a_turns_prompt_length_estimate_includes_its_history():
    spec = build_spec(dict(scenario="concurrency", concurrency=1, api="chat", turns=3,
                           requests=3, isl=4, osl=2))
    plans = {ex.plan.index: ex.plan for ex in drive_conversations(spec, Scripted())}
    # 4 words per message, one word per scripted answer: 4, then 4 + 1 + 4, then 9 + 1 + 4
    assert [plans[i].prompt_tokens for i in range(3)] == [4, 9, 14]


def test_open_loop_conversations_arrive_on_schedule_and_count_from_it():
    from pytest_goodput.load.requests.schedule import arrival_offsets

    spec = build_spec(dict(scenario="server", rate=200.0, api="chat", turns=2, requests=6,
                           concurrency=2, isl=4, osl=2))
    out = drive_conversations(spec, Scripted())
    plans = {ex.plan.index: ex.plan for ex in out}
    assert sorted(plans) == list(range(6)) and all(p.open_loop for p in plans.values())
    assert [(plans[i].conversation, plans[i].turn) for i in range(6)] == [
        (0, 1), (0, 2), (1, 1), (1, 2), (2, 1), (2, 2)]
    # first turns are due at the conversations' scheduled arrivals (rate 200/s, seeded)
    gaps = [plans[2 * k].scheduled_at - plans[0].scheduled_at for k in range(3)]
    assert gaps == pytest.approx(arrival_offsets(spec, 3).tolist())
    assert [m["content"] for m in plans[3].messages] == [plans[2].prompt, "a1t1", plans[3].prompt]

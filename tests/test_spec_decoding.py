"""Speculative decoding: tokens per chunk, the simulator's draft/accept model and vLLM counters,
the acceptance rate in the server summary and the report's "why" block, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import report_fixtures as fx

# pytester's in-process runs drop modules first imported inside them (see test_reasoning_plugin)
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.engines.engine import simulator
from pytest_goodput.engines.prometheus import server_metrics
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.report.md.md_context import why_block
from pytest_goodput.run.engine_view import server_summary
from pytest_goodput.schema.runs.results import ClientHealth, RunResult
from pytest_goodput.schema.scenario.spec import build_spec
from pytest_goodput.sim.model import EngineModel
from pytest_goodput.sim.openai import ChunkEncoder
from pytest_goodput.sim.profile import SimProfile

pytest_plugins = ["pytester"]
DOCS = Path(__file__).resolve().parents[1] / "docs" / "workloads.md"


def _sse(*events: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def _delta(text: str) -> dict:
    return {"id": "x", "choices": [{"index": 0, "text": text}]}


def test_tokens_per_chunk_hand_computed():
    # 7 tokens (usage) in 2 content chunks: 3.5 tokens per chunk; ITL splits the one gap of
    # 60 ms over the 6 tokens after the first chunk... as 1 + 6: (7 - 1) / (2 - 1) per chunk
    plan = RequestPlan(0, "a", 1, 7, 0.0)
    reads = [(0.10, _sse(_delta(" a"))[:-14]), (0.16, _sse(_delta(" b c d e f g"), {
        "id": "x", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 7}}))]
    r = to_record(RawExchange(plan, 0.0, 0.2, 200, reads), stream=True, api="completions")
    assert r.ok and (r.output_tokens, r.content_chunks, r.tokens_per_chunk) == (7, 2, 3.5)
    assert r.itl_ms == pytest.approx([10.0] * 6)  # 60 ms over the 6 tokens of the second chunk
    # without usage the count is the chunks themselves: tokens per chunk says nothing
    bare = [(0.1, _sse(_delta(" a"), _delta(" b c")))]
    assert to_record(RawExchange(plan, 0.0, 0.2, 200, bare), stream=True,
                     api="completions").tokens_per_chunk is None


def _emitted(profile: SimProfile, max_tokens: int) -> tuple[list[int], EngineModel]:
    model = EngineModel(profile)
    model.add_request("r", 8, max_tokens)
    counts = []
    while model.has_work:
        counts += [n for _, n, _ in model.step().emitted]
    return counts, model


def test_simulator_steps_emit_one_plus_accepted_tokens():
    # k = 3, every draft accepted: the prefill emits 1 token, each decode step 1 + 3, the last
    # step only what is left of max_tokens (14 = 1 + 4 + 4 + 4 + 1)
    counts, model = _emitted(SimProfile(spec_tokens=3, spec_accept=1.0), 14)
    assert counts == [1, 4, 4, 4, 1]
    s = model.spec
    assert (s.drafts_total, s.draft_tokens_total, s.accepted_tokens_total) == (4, 12, 12)
    assert model.generation_tokens_total == 14
    none, model0 = _emitted(SimProfile(spec_tokens=3, spec_accept=0.0), 5)
    assert none == [1, 1, 1, 1, 1] and model0.spec.accepted_tokens_total == 0
    assert model0.spec.draft_tokens_total == 12  # 4 decode steps x 3 drafts, all rejected
    off, model_off = _emitted(SimProfile(), 5)
    assert off == [1] * 5 and model_off.spec.drafts_total == 0


def test_a_decode_step_pays_for_verifying_its_drafts():
    # one decoding sequence, context 9 tokens: 4 + 0.4 + 0.002 x 9 = 4.418 ms, plus 3 drafts
    # verified at the prefill price: + 3 x 0.02 = 4.478 ms
    for k, ms in ((0, 4.418), (3, 4.478)):
        model = EngineModel(SimProfile(spec_tokens=k, prefix_caching=False))
        model.add_request("r", 8, 20)
        model.step()  # the prefill
        assert model.step().duration_s * 1000 == pytest.approx(ms)


def test_a_step_of_several_tokens_is_one_chunk():
    enc = ChunkEncoder("r", False, "m", "length")
    words = [b" a", b" b", b" c", b" d", b" e"]
    groups = {1: 4}  # tokens 1..3 came out of one step
    chunks = enc.chunks(words, 0, 0, 3, 5, 0, groups)  # only 3 tokens ready yet
    assert [c.split(b'"text":"')[1].split(b'"')[0] for c in chunks] == [b" a", b" b c"]
    assert groups == {3: 4}  # the rest of the step's tokens, when they are written
    rest = enc.chunks(words, 0, 3, 5, 5, 0, groups)
    assert [c.split(b'"text":"')[1].split(b'"')[0] for c in rest] == [b" d", b" e"]
    assert b'"finish_reason":"length"' in rest[-1]


def test_acceptance_rate_from_counters_hand_computed():
    before = {"vllm:spec_decode_num_draft_tokens_total": 100.0, "vllm:spec_decode_num_accepted_tokens_total": 50.0}
    after = {"vllm:spec_decode_num_draft_tokens_total": 400.0, "vllm:spec_decode_num_accepted_tokens_total": 260.0}
    server = server_metrics(before, after)
    assert (server["spec_decode_draft_tokens"], server["spec_decode_accepted_tokens"]) == (300.0, 210.0)
    other = {"spec_decode_draft_tokens": 100.0, "spec_decode_accepted_tokens": 30.0}
    runs = [RunResult.model_construct(server_metrics=m) for m in (server, other, {})]
    # over all runs: (210 + 30) / (300 + 100) = 0.6
    assert server_summary(runs)["spec_decode_acceptance_rate"] == pytest.approx(0.6)
    assert "spec_decode_acceptance_rate" not in server_summary(runs[2:])


def test_why_block_shows_acceptance_beside_an_improved_tpot():
    improved = fx.passed().model_copy(update={
        "comparisons": [fx.cmp("metrics.tpot_ms.p99", 31.0, 20.0, "improved")],
        "server": {"baseline": {"spec_decode_acceptance_rate": 0.5},
                   "current": {"spec_decode_acceptance_rate": 0.8}}})
    text = why_block(improved)
    assert "| spec-decode acceptance rate (accepted / draft tokens) | 50.0% | 80.0% | +30.00 pp |" in text
    no_spec = improved.model_copy(update={"server": {"baseline": fx.SERVER_BASE, "current": fx.SERVER_CUR}})
    assert why_block(no_spec) == ""  # an improvement alone gets no block


def _docs_example() -> str:
    text = DOCS.read_text(encoding="utf-8")
    body = text.split("\n## Speculative decoding\n", 1)[1].split("\n## ", 1)[0]
    return body.split("```python\n", 1)[1].split("```", 1)[0]


def test_docs_gate_sees_tokens_per_chunk_and_acceptance(pytester):
    """The docs' example on a simulator accepting half its drafts, then all of them: TPOT
    improves, 64 tokens come as 1 + 21 chunks of 3 (k = 2), and the report says why."""
    pytester.makepyfile(test_docs_spec_gate=_docs_example())
    report = pytester.path / "report.md"
    out = pytester.path / "out.json"
    # steps twice the default's: a busy CI machine's client keeps up with the chunks
    with simulator(spec_tokens=2, spec_accept=0.5, time_scale=2.0) as half:
        pytester.runpytest(f"--goodput-url={half.base_url}", "--goodput-update-baseline",
                           "--goodput-sessions=3").assert_outcomes(passed=1)
    with simulator(spec_tokens=2, spec_accept=1.0, time_scale=2.0) as full:
        res = pytester.runpytest(f"--goodput-url={full.base_url}", "--goodput-baseline",
                                 f"--goodput-report={report}", f"--goodput-json={out}")
    res.assert_outcomes(passed=1)
    assert "tok/chunk" in res.stdout.str()
    test = json.loads(out.read_text())["tests"][0]
    run = test["runs"][0]
    assert run["metrics"]["tokens_per_chunk"]["mean"] == pytest.approx(64 / 22)
    assert test["outcome"]["comparisons"][0]["verdict"] == "improved"
    text = report.read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| spec-decode acceptance rate"))
    assert row.split(" | ")[2] == "100.0%", row  # current: every draft accepted


def test_loop_lag_is_judged_against_the_gap_between_chunks():
    # 9 tokens (usage) in chunks of 1, 4, 4 at 100, 108, 116 ms: ITL 8 x 2 ms, 3 tokens per
    # chunk, so the reads are 2 x 3 = 6 ms apart: a loop lag P99 of 5 ms is within that (the
    # per-token ITL alone would set the 3 ms floor and fail the client)
    plan = RequestPlan(0, "a", 1, 9, 0.0)
    reads = [(0.100, _sse(_delta(" a"))[:-14]), (0.108, _sse(_delta(" b c d e"))[:-14]),
             (0.116, _sse(_delta(" f g h i"), {"id": "x", "choices": [],
                                                "usage": {"prompt_tokens": 1, "completion_tokens": 9}}))]
    r = to_record(RawExchange(plan, 0.0, 0.12, 200, reads), stream=True, api="completions")
    assert r.tokens_per_chunk == 3.0 and r.itl_ms == pytest.approx([2.0] * 8)
    client = ClientHealth(valid=True, cpu_utilization=0.1, loop_lag_p99_ms=5.0, loop_lag_limit_ms=10.0)
    result = summarize([r], build_spec({"scenario": "offline", "requests": 1}), client)
    assert result.client.loop_lag_limit_ms == pytest.approx(6.0)
    assert result.client.valid


def test_a_step_straddling_the_end_of_the_reasoning_is_two_chunks():
    enc = ChunkEncoder("r", True, "m", "length")
    words = [b" a", b" b", b" c", b" d", b" e"]
    chunks = enc.chunks(words, 0, 0, 5, 5, 2, {1: 4})  # reasoning tokens 0-1; a step made 1-3
    kinds = [(d := json.loads(c[6:])["choices"][0]["delta"]) and
             (("reasoning", d["reasoning_content"]) if "reasoning_content" in d else ("answer", d["content"]))
             for c in chunks]
    assert kinds == [("reasoning", " a"), ("reasoning", " b"), ("answer", " c d"), ("answer", " e")]
    assert json.loads(chunks[-1][6:])["choices"][0]["finish_reason"] == "length"


def test_lower_acceptance_fails_the_gate_naming_it_and_a_a_passes(pytester):
    """The docs' example recorded on a simulator accepting 80 % of its drafts: the same engine
    passes with the acceptance rate judged *pass*; one accepting 30 % fails, the acceptance
    rate *regressed* and named in the terminal."""
    pytester.makepyfile(test_docs_spec_gate=_docs_example())
    out = pytester.path / "out.json"
    with simulator(spec_tokens=2, spec_accept=0.8, time_scale=2.0) as sim:
        pytester.runpytest(f"--goodput-url={sim.base_url}", "--goodput-update-baseline",
                           "--goodput-sessions=3").assert_outcomes(passed=1)
        same = pytester.runpytest(f"--goodput-url={sim.base_url}", "--goodput-baseline",
                                  f"--goodput-json={out}")
    same.assert_outcomes(passed=1)
    rows = {c["metric"]: c for c in json.loads(out.read_text())["tests"][0]["outcome"]["comparisons"]}
    assert rows["spec_decode.acceptance_rate"]["verdict"] == "pass", rows
    with simulator(spec_tokens=2, spec_accept=0.3, time_scale=2.0) as low:
        res = pytester.runpytest(f"--goodput-url={low.base_url}", "--goodput-baseline",
                                 f"--goodput-json={out}")
    res.assert_outcomes(failed=1)
    rows = {c["metric"]: c for c in json.loads(out.read_text())["tests"][0]["outcome"]["comparisons"]}
    acc = rows["spec_decode.acceptance_rate"]
    assert acc["verdict"] == "regressed", acc
    # k = 2: (p + p²) / 2 accepted per draft token, 72 % at p = 0.8 and 19.5 % at p = 0.3
    assert acc["baseline"] == pytest.approx(0.72, abs=0.08) and acc["current"] == pytest.approx(0.195, abs=0.08)
    assert "spec-decode acceptance" in res.stdout.str()

"""Workload sameness: the prompt fingerprint and the output-length check, hand-computed
(docs/metrics.md, "Workload sameness")."""

from __future__ import annotations

import hashlib
from typing import Optional

import pytest

from pytest_goodput.judge.judge import Policy, fails, judge
from pytest_goodput.judge.workload import check_workload, length_change
from pytest_goodput.load.requests.prompt_set import DURATION_COVERED, prompt_set, unsalted_prompts
from pytest_goodput.load.requests.workload import build_workload
from pytest_goodput.measure.records.exchange import RequestPlan
from pytest_goodput.report.text.terminal import failure_message, render_summary
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.scenario.spec import build_spec
from pytest_goodput.schema.outcomes.workload_check import PromptSet
from pytest_goodput.stats.student import welch_different

SPEC = build_spec({"scenario": "server", "rate": 10, "requests": 8, "isl": 12, "osl": 4, "seed": 5})


def plans(spec=SPEC, n: int = 8, salt: Optional[int] = None, warmup: int = 0) -> list[RequestPlan]:
    items = build_workload(spec, n + warmup, salt=salt)
    return [RequestPlan(i, it.prompt, it.prompt_tokens, it.max_tokens, 0.0, warmup=i < warmup)
            for i, it in enumerate(items)]


# --- the fingerprint ------------------------------------------------------------------------


def fp(spec, plan_list):
    return prompt_set(spec, plan_list, unsalted_prompts(spec))


def test_same_seed_same_fingerprint_whatever_the_run_nonce():
    a = fp(SPEC, plans(salt=123))
    b = fp(SPEC, plans(salt=987_654))
    assert a == b and a.requests == 8 and len(a.sha256) == 16
    # the order of the exchanges does not matter (sorted by index), warm-up is not covered
    assert fp(SPEC, list(reversed(plans(salt=1)))) == a
    # the fingerprint is over the prompts the builders make without the nonce
    h = hashlib.sha256()
    for it in build_workload(SPEC, 8, salt=None):
        h.update(f"{len(it.prompt.encode())}:{it.max_tokens}:".encode() + it.prompt.encode())
    assert a.sha256 == h.hexdigest()[:16]


def test_different_prompts_or_lengths_give_a_different_fingerprint():
    a = fp(SPEC, plans(salt=1))
    other_seed = SPEC.model_copy(update={"seed": 6})
    assert fp(other_seed, plans(other_seed, salt=1)).sha256 != a.sha256
    longer_prompts = SPEC.model_copy(update={"isl": 13})
    assert fp(longer_prompts, plans(longer_prompts, salt=1)).sha256 != a.sha256
    longer = plans(salt=1)
    longer[0].max_tokens += 1  # the requested output length is part of the request
    assert fp(SPEC, longer).sha256 != a.sha256


def test_nonces_in_prefixes_and_trace_blocks_do_not_change_the_fingerprint(tmp_path):
    from pytest_goodput.load.plan import open_loop_setup
    from pytest_goodput.load.trace import load_trace

    shared = SPEC.model_copy(update={"prefix_len": 6, "prefix_groups": 2})
    assert fp(shared, plans(shared, salt=1)) == fp(shared, plans(shared, salt=2)) != fp(SPEC, plans(salt=1))
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(f'{{"timestamp": {i * 10}, "input_length": 40, "output_length": 3, '
                             f'"hash_ids": [0, {i}]}}\n' for i in range(6)))
    spec = build_spec({"scenario": "trace", "trace": str(trace), "trace_block_size": 16})
    t = load_trace(spec)
    runs = []
    for salt in (1, 2):
        sched, supply, _, _ = open_loop_setup(spec, None, t, salt)
        sent = [supply.plan(i, 0.0, False) for i in range(len(sched))]
        runs.append(prompt_set(spec, sent, unsalted_prompts(spec, None, t)))
    assert runs[0] == runs[1] and runs[0].requests == 6
    assert sent[0].prompt.split()[:16] == sent[1].prompt.split()[:16]  # hash id 0: a shared block


def test_duration_bounded_runs_cover_their_first_requests():
    spec = build_spec({"scenario": "server", "rate": 10, "duration_s": 5, "isl": 12, "osl": 4})
    n = DURATION_COVERED + 10
    a = fp(spec, plans(spec, n, salt=1))
    b = fp(spec, plans(spec, n + 20, salt=2))
    assert a == b and a.requests == DURATION_COVERED
    assert fp(spec, plans(spec, n, salt=1, warmup=2)) != a  # warm-up shifts the set


# --- the two-sample test and the length check ------------------------------------------------


def test_welch_test_by_hand():
    # a = [10, 12] mean 11, s² = 2; b = [20, 22] mean 21; se = sqrt(1 + 1) = 1.414, t = 7.07,
    # df = 2 -> t(0.995, 2) = 9.92: not significant at 99 %; with four each it is
    assert not welch_different([10, 12], [20, 22])
    assert welch_different([10, 12, 10, 12], [20, 22, 20, 22])
    assert welch_different([5, 5, 5], [4, 4, 4])  # constant lengths: any difference
    assert not welch_different([5, 5, 5], [5, 5, 5])
    assert not welch_different([5], [])


def test_length_change_needs_size_and_significance():
    c = length_change("answer_tokens", [100.0] * 10, [80.0] * 10)
    assert (c.baseline, c.current, c.significant, c.changed) == (100.0, 80.0, True, True)
    assert c.change == pytest.approx(-0.2)
    # 8 % shorter: significant but within the 10 % threshold
    assert not length_change("answer_tokens", [100.0] * 10, [92.0] * 10).changed
    # 25 % shorter on average, but two noisy requests a side prove nothing
    noisy = length_change("answer_tokens", [50.0, 150.0], [25.0, 125.0])
    assert noisy.change == pytest.approx(-0.25) and not noisy.significant and not noisy.changed


def samples(output: list[int], reasoning: Optional[list[int]] = None,
            fp: Optional[PromptSet] = PromptSet(sha256="a" * 16, requests=4)) -> Samples:
    n = len(output)
    return Samples(window_s=1.0, ok=[True] * n, ttft_ms=[10.0] * n, tpot_ms=[1.0] * n,
                   e2e_ms=[50.0] * n, output_tokens=output, prompt_tokens=[4] * n,
                   ttfo_ms=[10.0] * n, reasoning_tokens=reasoning if reasoning is not None else [0] * n,
                   prompt_set=fp)


def test_shorter_outputs_are_a_workload_change_not_a_speed_up():
    check, reason = check_workload([[samples([64] * 4)]], [samples([38, 38, 38, 38])])
    assert reason is None and check.prompts == "same"
    assert check.changes == ["outputs are 41 % shorter (output tokens per request 64 → 38): a "
                             "workload change, not a performance change"]  # 38/64 - 1 = -0.406
    # a reasoning model: thinking and answer lengths are named apart
    check, _ = check_workload([[samples([120] * 4, [100] * 4)]], [samples([150] * 4, [130] * 4)])
    assert check.changes == ["the model thinks 30 % longer (reasoning tokens per request 100 → 130): "
                             "a workload change, not a performance change"]  # answers: 20 → 20
    assert [c.column for c in check.lengths] == ["reasoning_tokens", "answer_tokens"]


def test_prompt_fingerprints_decide_comparability():
    other = PromptSet(sha256="b" * 16, requests=4)
    check, reason = check_workload([[samples([4] * 4)]], [samples([4] * 4, fp=other)])
    assert check.prompts == "differ"
    assert reason == ("the prompts differ from the baseline's (prompt fingerprint aaaaaaaaaaaaaaaa → "
                      "bbbbbbbbbbbbbbbb over the first 4 requests): a different workload, not a "
                      "performance change")
    assert check_workload([[samples([4] * 4, fp=None)]], [samples([4] * 4)])[0].prompts == "unrecorded"
    fewer = PromptSet(sha256="b" * 16, requests=3)
    assert check_workload([[samples([4] * 4)]], [samples([4] * 4, fp=fewer)])[0].prompts == "unchecked"


def evidence(s: Samples) -> Side:
    return Side.of_samples(SPEC, [[s]])


def test_the_judge_names_the_change_and_strict_mode_fails_it():
    base, short = evidence(samples([64] * 4)), evidence(samples([38] * 4))
    outcome = judge("t.py::test_a", short, base, Policy())
    assert outcome.baseline_status == "compared" and outcome.workload.prompts == "same"
    assert outcome.workload_changes[0].startswith("outputs are 41 % shorter")
    # TTFT and TPOT did not move: no verdict regressed (at 4 requests against one session the
    # latencies are underpowered: the prior spread dominates), and the status names the change
    assert all(c.change == 0.0 and c.verdict in ("pass", "underpowered") for c in outcome.comparisons)
    assert outcome.status == "workload-changed"
    assert not fails(outcome, Policy())  # the change is named, it fails in strict mode only
    assert fails(outcome, Policy(strict=True))
    message = failure_message(outcome)
    assert message.startswith("goodput workload-changed: t.py::test_a")
    assert "workload changed: outputs are 41 % shorter" in message
    summary = render_summary([outcome])
    assert "1 workload-changed" in summary and "≠ workload-changed" in summary
    assert "  workload changed: outputs are 41 % shorter" in summary  # in the test's details
    same = judge("t.py::test_a", base, base, Policy(strict=True))
    assert same.workload_changes == [] and same.workload.prompts == "same"


def test_different_prompts_make_the_comparison_incomparable():
    other = evidence(samples([64] * 4, fp=PromptSet(sha256="c" * 16, requests=4)))
    outcome = judge("t.py::test_a", other, evidence(samples([64] * 4)), Policy())
    assert outcome.baseline_status == "incomparable" and outcome.comparisons == []
    assert outcome.incomparable_reasons[0].startswith("the prompts differ from the baseline's")
    assert fails(outcome, Policy(strict=True)) and not fails(outcome, Policy())


def test_an_old_baseline_is_compared_and_said_once():
    old = evidence(samples([64] * 4, fp=None))
    outcomes = [judge(f"t.py::test_{k}", evidence(samples([64] * 4)), old, Policy()) for k in "ab"]
    assert all(o.baseline_status == "compared" and o.workload.prompts == "unrecorded" for o in outcomes)
    text = render_summary(outcomes)
    assert text.count("without a prompt fingerprint") == 1
    assert "goodput: 2 comparisons without a prompt fingerprint" in text


def test_the_markdown_report_names_the_workload_change():
    from pytest_goodput.report.md.markdown import render_markdown

    outcome = judge("t.py::test_a", evidence(samples([38] * 4)), evidence(samples([64] * 4)), Policy())
    text = render_markdown([outcome])
    assert "> **Workload changed** (not a performance change): outputs are 41 % shorter" in text

"""Workload sameness: the prompt fingerprint and the output-length check, hand-computed
(docs/metrics.md, "Workload sameness")."""

from __future__ import annotations

from typing import Optional

import pytest

from pytest_goodput.judge.judge import Policy, fails, judge
from pytest_goodput.judge.workload import check_workload, length_change
from pytest_goodput.load.prompt_set import DURATION_COVERED, mask_nonce, prompt_set
from pytest_goodput.load.workload import build_workload, index_words
from pytest_goodput.measure.exchange import RequestPlan
from pytest_goodput.report.terminal import failure_message, render_summary
from pytest_goodput.schema.evidence import Evidence
from pytest_goodput.schema.results import Samples
from pytest_goodput.schema.spec import build_spec
from pytest_goodput.schema.workload_check import PromptSet
from pytest_goodput.stats.welch import welch_different

SPEC = build_spec({"scenario": "server", "rate": 10, "requests": 8, "isl": 12, "osl": 4, "seed": 5})


def plans(spec=SPEC, n: int = 8, salt: Optional[int] = None, warmup: int = 0) -> list[RequestPlan]:
    items = build_workload(spec, n + warmup, salt=salt)
    return [RequestPlan(i, it.prompt, it.prompt_tokens, it.max_tokens, 0.0, warmup=i < warmup)
            for i, it in enumerate(items)]


# --- the fingerprint ------------------------------------------------------------------------


def test_same_seed_same_fingerprint_whatever_the_run_nonce():
    a = prompt_set(SPEC, plans(salt=123), 123)
    b = prompt_set(SPEC, plans(salt=987_654), 987_654)
    assert a == b and a.requests == 8 and len(a.sha256) == 16
    # the order of the exchanges does not matter (sorted by index), warm-up is not covered
    assert prompt_set(SPEC, list(reversed(plans(salt=1))), 1) == a


def test_different_prompts_or_lengths_give_a_different_fingerprint():
    a = prompt_set(SPEC, plans(salt=1), 1)
    other_seed = SPEC.model_copy(update={"seed": 6})
    assert prompt_set(other_seed, plans(other_seed, salt=1), 1).sha256 != a.sha256
    edited = plans(salt=1)
    edited[3].prompt += " extra"
    assert prompt_set(SPEC, edited, 1).sha256 != a.sha256
    longer = plans(salt=1)
    longer[0].max_tokens += 1  # the requested output length is part of the request
    assert prompt_set(SPEC, longer, 1).sha256 != a.sha256
    swapped = plans(salt=1)
    swapped[0].index, swapped[1].index = 1, 0  # schedule order is part of the workload
    assert prompt_set(SPEC, swapped, 1).sha256 != a.sha256


def test_the_nonce_is_masked_even_when_a_prompt_cuts_it_short():
    salt = 0x00ABCD
    nonce = index_words(salt, 4)
    assert mask_nonce(" ".join(["the"] * 3 + nonce + ["x", "y"]), salt) == "the the the <nonce> x y"
    assert mask_nonce(" ".join(["the"] * 3 + nonce[:2]), salt) == "the the the <nonce>"
    assert mask_nonce("a b c d e", None) == "a b c d e"
    tiny = SPEC.model_copy(update={"isl": 5})
    assert prompt_set(tiny, plans(tiny, salt=5), 5) == prompt_set(tiny, plans(tiny, salt=6), 6)


def test_duration_bounded_runs_cover_their_first_requests():
    spec = build_spec({"scenario": "server", "rate": 10, "duration_s": 5, "isl": 12, "osl": 4})
    n = DURATION_COVERED + 10
    a = prompt_set(spec, plans(spec, n, salt=1), 1)
    b = prompt_set(spec, plans(spec, n + 20, salt=2), 2)
    assert a == b and a.requests == DURATION_COVERED
    assert prompt_set(spec, plans(spec, n, salt=1, warmup=2), 1) != a  # warm-up shifts the set


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


def evidence(s: Samples) -> Evidence:
    return Evidence(spec=SPEC, spec_hash=SPEC.identity_hash(), history=[[s]])


def test_the_judge_names_the_change_and_strict_mode_fails_it():
    base, short = evidence(samples([64] * 4)), evidence(samples([38] * 4))
    outcome = judge("t.py::test_a", short, base, Policy())
    assert outcome.baseline_status == "compared" and outcome.workload.prompts == "same"
    assert outcome.workload_changes[0].startswith("outputs are 41 % shorter")
    # TTFT and TPOT did not move: every verdict passes, and the status names the change
    assert all(c.verdict == "pass" for c in outcome.comparisons)
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
    from pytest_goodput.report.markdown import render_markdown

    outcome = judge("t.py::test_a", evidence(samples([38] * 4)), evidence(samples([64] * 4)), Policy())
    text = render_markdown([outcome])
    assert "> **Workload changed** (not a performance change): outputs are 41 % shorter" in text

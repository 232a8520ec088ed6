"""Output agreement (docs/metrics.md, "Output agreement"): fingerprints, the measured
threshold's hand-computed case, the guard's on/off rule, and the prints a baseline keeps."""

from __future__ import annotations

import pytest

from pytest_goodput.judge import judge
from pytest_goodput.judge.output_guard import output_comparison
from pytest_goodput.judge.sequential.head_launches import look, settle
from pytest_goodput.load.requests.controls import sampling_body
from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.measure.outputs.agreement import agreed_prefix, agreement, output_print
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError, build_spec
from pytest_goodput.sim.outputs import text_offset
from pytest_goodput.store import samples_file

GREEDY = ScenarioSpec(scenario="concurrency", concurrency=2, requests=4, temperature=0)


def run(prints: dict[int, str] | None) -> Samples:
    n = 4
    return Samples(window_s=1.0, ok=[True] * n, ttft_ms=[10.0] * n, tpot_ms=[1.0] * n, e2e_ms=[20.0] * n,
                   output_tokens=[8] * n, prompt_tokens=[16] * n,
                   output_prints=None if prints is None else {k: output_print(v) for k, v in prints.items()})


def test_a_late_divergence_agrees_early_and_the_whole_output_decides():
    a, b = "x" * 300, "x" * 100 + "y" * 200
    assert output_print(a) != output_print(b)
    assert agreed_prefix(output_print(a), output_print(b)) == 1  # the first 64 characters agree
    assert agreed_prefix(output_print(a), output_print(a)) == 3
    assert agreement({0: "p", 1: "q", 2: "r"}, {1: "q", 2: "z", 3: "s"}) == (1, 2)  # shared prompts 1, 2


def test_agreement_hand_computed():
    # Baseline runs: A = a b c d, B = a b c x -> the baseline agrees with itself on 3 of 4.
    # Current C = a y c d: against A 3 of 4 (a, c, d), against B 2 of 4 (a, c) -> 5 of 8.
    base = [[run({0: "a", 1: "b", 2: "c", 3: "d"})], [run({0: "a", 1: "b", 2: "c", 3: "x"})]]
    cur = [run({0: "a", 1: "y", 2: "c", 3: "d"})]
    c = output_comparison(GREEDY, base, cur, tolerance=0.02, confidence=0.95)
    assert (c.metric, c.direction, c.scale) == ("output.agreement", "higher", "absolute")
    assert (c.baseline, c.current, c.change) == (0.75, 0.625, pytest.approx(-0.125))
    # per prompt: baseline b = 1 1 1 0, current c = 1 0 1 0.5, d = 0 -1 0 0.5; mean -0.125,
    # SD sqrt(1.1875 / 3) = 0.62915, half width t(0.975, 3) 3.18245 x 0.62915 / 2 = 1.00112
    assert c.interval == pytest.approx((-1.12612, 0.87612), abs=1e-4)
    assert c.verdict == "inconclusive"  # worse than the tolerance, within the noise of 4 prompts
    assert c.note.endswith("of the 3 differing outputs, 0 agree in their first 64 characters")


def test_outputs_that_changed_on_many_prompts_regress_and_unchanged_ones_pass():
    texts = {i: f"out {i}" for i in range(40)}
    base = [[run(texts), run(texts)]]
    same = output_comparison(GREEDY, base, [run(texts)], tolerance=0.02, confidence=0.95)
    assert (same.verdict, same.current, same.baseline) == ("pass", 1.0, 1.0)
    drifted = {i: (t if i % 3 else "other") for i, t in texts.items()}
    wrong = output_comparison(GREEDY, base, [run(drifted)], tolerance=0.02, confidence=0.95)
    assert wrong.verdict == "regressed" and wrong.current == pytest.approx(26 / 40)


def test_one_baseline_run_cannot_measure_its_own_agreement():
    texts = {i: "t" for i in range(4)}
    c = output_comparison(GREEDY, [[run(texts)]], [run(texts)], tolerance=0.02, confidence=0.95)
    assert c.verdict == "underpowered" and "1 baseline run" in c.note
    old = output_comparison(GREEDY, [[run(None)]], [run(texts)], tolerance=0.02, confidence=0.95)
    assert old.verdict == "new"


def test_random_sampling_turns_the_guard_off_and_the_judge_says_so():
    sampled = GREEDY.model_copy(update={"temperature": 0.7})
    texts = {i: "t" for i in range(4)}
    assert not sampled.guards_outputs and GREEDY.guards_outputs
    out = judge("t", Side.of_samples(sampled, [[run(texts)]]), Side.of_samples(sampled, [[run(texts)], [run(texts)]]))
    assert "output.agreement" not in {c.metric for c in out.comparisons}
    assert any(n.startswith("output guard off: sampling not deterministic (temperature=0.7") for n in out.notes)
    assert "> **Output guard off:** sampling not deterministic (temperature=0.7" in render_markdown([out])
    on = judge("t", Side.of_samples(GREEDY, [[run(texts)]]), Side.of_samples(GREEDY, [[run(texts)], [run(texts)]]))
    assert {c.metric: c.verdict for c in on.comparisons}["output.agreement"] == "pass"
    assert "| output agreement |" in render_markdown([on]) and "Output guard off" not in render_markdown([on])


def test_sampling_fields_sent_and_a_forced_guard_needs_greedy_sampling():
    assert sampling_body(ScenarioSpec(scenario="offline", requests=1)) == {}
    assert sampling_body(ScenarioSpec(scenario="offline", requests=1, temperature=0, seed=7)) == {
        "temperature": 0, "seed": 7}
    assert sampling_body(ScenarioSpec(scenario="offline", requests=1, temperature=0.5)) == {"temperature": 0.5}
    with pytest.raises(SpecError, match="output_guard=True needs deterministic sampling: temperature=0"):
        build_spec({"scenario": "offline", "requests": 1, "temperature": 0.5, "output_guard": True})
    # the guard is a gate setting: turning it off keeps the baseline comparable
    assert GREEDY.identity_hash() == GREEDY.model_copy(update={"output_guard": False}).identity_hash()


def test_a_baseline_keeps_the_prints_and_older_files_still_read():
    texts = {i: f"o{i}" for i in range(4)}
    back = samples_file.decode(samples_file.encode([[run(texts)], [run(None)]]))
    assert back[0][0].output_prints == run(texts).output_prints
    assert back[1][0].output_prints is None


def test_the_simulators_output_follows_the_prompts_end_and_drift_changes_a_share():
    salted = ["zero one two ab cd ef gh " + " ".join(f"w{i}_{j}" for j in range(20)) for i in range(400)]
    resalted = [p.replace("ab cd ef gh", "ij kl mn op") for p in salted]
    assert [text_offset(p, 997) for p in salted] == [text_offset(p, 997) for p in resalted]
    moved = sum(text_offset(p, 997) != text_offset(p, 997, 0.5) for p in salted)
    assert 150 <= moved <= 250  # about half of 400


def test_head_launches_end_on_a_regressed_agreement_but_never_wait_for_it():
    def outcome(verdict: str) -> Outcome:
        c = MetricComparison(metric="output.agreement", direction="higher", baseline=0.9, current=0.85,
                             change=-0.05, interval=(-0.15, 0.05), tolerance=0.02, verdict=verdict, scale="absolute")
        return Outcome(nodeid="t", scenario="concurrency", baseline_status="compared", comparisons=[c])

    lk = look(1, 3, 5)
    assert settle(outcome("inconclusive"), outcome("inconclusive"), lk)[1]  # nothing else pending: decided
    regressed, decided = settle(outcome("regressed"), outcome("regressed"), lk)
    assert decided and regressed.regressed

"""The passing self-check reaches the processes an integration test starts, and only those; the
product's re-measure rule keeps the real verdict on its first try there too."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import fake_selfcheck
from selfcheck_site import sitecustomize

PROBE = ("import pytest_goodput.load.selfcheck.health as h, pytest_goodput.measure.metrics as m; "
         "print(sorted(n for n, f in [('judge', h.judge), ('judge_workers', h.judge_workers), "
         "('judge_loop_lag', m.judge_loop_lag)] if getattr(f, 'forced_valid', False)))")


def test_the_site_patches_the_modules_the_fake_names():
    assert sitecustomize.PATCHED == set(fake_selfcheck.VERDICTS)


RULE = ("import pytest_goodput.run.runner as r, pytest_goodput.run.remeasure as rm; "
        "print(getattr(r.until_valid, 'first_tries_real', False), r.until_valid is rm.until_valid)")


def test_a_started_python_process_has_the_passing_check():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['judge', 'judge_loop_lag', 'judge_workers']"
    assert os.environ["GOODPUT_TEST_SELFCHECK"] == "retry"
    rule = subprocess.run([sys.executable, "-c", RULE], capture_output=True, text=True, check=True).stdout
    assert rule.split() == ["True", "True"]  # the importer took the wrapped rule


@pytest.mark.forced_selfcheck
def test_a_forced_selfcheck_test_starts_processes_whose_rule_is_untouched():
    assert os.environ["GOODPUT_TEST_SELFCHECK"] == "pass"
    rule = subprocess.run([sys.executable, "-c", RULE], capture_output=True, text=True, check=True).stdout
    assert rule.split() == ["False", "True"]


def test_the_first_try_keeps_its_real_verdict_and_the_re_measure_is_forced():
    import pytest_goodput.run.remeasure as rule
    from pytest_goodput.schema.runs.results import ClientHealth

    def check() -> ClientHealth:
        return ClientHealth(valid=False, reasons=["planted"], cpu_utilization=0.1)
    judged = fake_selfcheck.passing(check)
    seen: list[bool] = []

    def measure() -> bool:
        seen.append(judged().valid)
        return seen[-1]
    original = getattr(rule.until_valid, "__wrapped__", rule.until_valid)
    until_valid = fake_selfcheck.first_tries_real(original)
    assert until_valid(measure, lambda ok: [] if ok else ["planted"], lambda why: None) is True
    assert seen == [False, True]  # the product measured again; its second try was forced valid
    seen.clear()
    assert original(measure, lambda ok: [] if ok else ["planted"], lambda why: None) is True
    assert seen == [True]  # outside the rule's first tries every verdict is forced


@pytest.mark.real_selfcheck
def test_a_real_selfcheck_test_starts_processes_with_the_real_check():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    import pytest_goodput.load.selfcheck.health as health
    assert not getattr(health.judge, "forced_valid", False)

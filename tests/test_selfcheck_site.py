"""The passing self-check reaches the processes an integration test starts, and only those."""

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


def test_a_started_python_process_has_the_passing_check():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['judge', 'judge_loop_lag', 'judge_workers']"
    assert os.environ["GOODPUT_TEST_SELFCHECK"] == "pass"


@pytest.mark.real_selfcheck
def test_a_real_selfcheck_test_starts_processes_with_the_real_check():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    import pytest_goodput.load.selfcheck.health as health
    assert not getattr(health.judge, "forced_valid", False)

"""Property tests over what users and servers control: specs, baseline files, SSE, records.

A bounded example budget per target keeps CI fast; ``bench/fuzz.py`` runs the same targets
(``fuzz_targets.py``) with tens of thousands of inputs (docs/reliability.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).parent))
from fuzz_targets import TARGETS  # noqa: E402

BUDGET = 150


def _property(target):
    @settings(max_examples=BUDGET, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(target.strategy)
    def prop(example):
        target.check(example)

    return prop


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_no_crash_outside_the_documented_errors(target):
    _property(target)()


def test_the_checks_catch_a_crash():
    """The harness is not vacuous: a check that crashes is reported as a failure."""

    def crashing(example):
        raise IndexError("planted")

    target = TARGETS[0]
    with pytest.raises(IndexError):
        _property(type(target)(target.name, target.strategy, crashing, target.allowed))()

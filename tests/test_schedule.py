"""Arrival schedules: reproducible, right mean rate and burstiness, bounded as the spec says."""

import math

import numpy as np
import pytest

from pytest_goodput.load.requests.schedule import (
    arrival_offsets,
    gap_cv,
    gaps,
    mean_rate,
    offsets_from_gaps,
    open_loop_schedule,
    warmup_mask,
)
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def spec(**kw):
    kw.setdefault("scenario", "server")
    kw.setdefault("rate", 10.0)
    return ScenarioSpec(**kw)


def test_offsets_from_gaps_starts_at_zero():
    assert offsets_from_gaps(np.array([1.0, 2.0, 0.5])).tolist() == [0.0, 1.0, 3.0, 3.5]


def test_constant_is_exact():
    off = arrival_offsets(spec(arrival="constant", rate=4.0), 5)
    assert off.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_offline_all_at_zero():
    assert arrival_offsets(ScenarioSpec(scenario="offline", requests=3), 3).tolist() == [0, 0, 0]


def test_seeded_reproducible_and_prefix_stable():
    a = arrival_offsets(spec(seed=7), 500)
    b = arrival_offsets(spec(seed=7), 500)
    c = arrival_offsets(spec(seed=8), 500)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.array_equal(arrival_offsets(spec(seed=7), 1000)[:500], a)


def test_poisson_mean_rate_and_cv():
    off = arrival_offsets(spec(rate=50.0, seed=1), 40_000)
    assert mean_rate(off) == pytest.approx(50.0, rel=0.03)
    assert gap_cv(off) == pytest.approx(1.0, abs=0.03)
    assert np.all(np.diff(off) >= 0)


@pytest.mark.parametrize("shape", [0.25, 0.5, 4.0])
def test_gamma_cv_is_one_over_sqrt_shape(shape):
    off = arrival_offsets(spec(rate=20.0, arrival="gamma", burstiness=shape, seed=3), 40_000)
    assert mean_rate(off) == pytest.approx(20.0, rel=0.04)
    assert gap_cv(off) == pytest.approx(1 / math.sqrt(shape), rel=0.05)


def test_gamma_shape_one_matches_poisson_statistics():
    g = gaps("gamma", 5.0, 40_000, burstiness=1.0, seed=2)
    assert g.mean() == pytest.approx(0.2, rel=0.03)
    assert g.std() / g.mean() == pytest.approx(1.0, abs=0.03)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rate"):
        gaps("poisson", 0.0, 3)
    with pytest.raises(ValueError, match="unknown arrival"):
        gaps("weibull", 1.0, 3)


def test_warmup_mask_by_count_and_time():
    off = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    assert warmup_mask(off, 2, 0.0).tolist() == [True, True, False, False, False]
    assert warmup_mask(off, 0, 1.2).tolist() == [True, True, True, False, False]
    assert warmup_mask(off, 4, 1.2).tolist() == [True, True, True, True, False]


def test_schedule_requests_exclude_warmup():
    s = open_loop_schedule(spec(requests=30, warmup_requests=5))
    assert len(s) == 35 and s.measured == 30
    assert s.warmup[:5].all() and not s.warmup[5:].any()
    assert np.array_equal(s.offsets, arrival_offsets(spec(requests=30, warmup_requests=5), 35))


def test_schedule_time_warmup_then_requests():
    s = open_loop_schedule(spec(rate=10.0, requests=20, warmup_s=2.0, arrival="constant"))
    # constant 0.1 s gaps: offsets 0.0 .. 1.9 (20 requests) are warm-up
    assert int(s.warmup.sum()) == 20 and s.measured == 20
    assert s.measured_start == pytest.approx(2.0)


def test_schedule_duration_bounds_measured_window():
    s = open_loop_schedule(spec(rate=10.0, duration_s=3.0, warmup_requests=4, arrival="constant", requests=None))
    # measured from offset 0.4; last issued at <= 0.4 + 3.0 -> offsets 0.4 .. 3.4 (31 requests)
    assert s.measured == 31
    assert s.offsets[-1] == pytest.approx(3.4)


def test_schedule_duration_poisson_covers_window():
    s = open_loop_schedule(spec(rate=200.0, duration_s=5.0, requests=None, seed=4))
    assert s.offsets[-1] <= 5.0
    assert s.measured == pytest.approx(1000, rel=0.1)
    longer = arrival_offsets(spec(rate=200.0, seed=4), len(s) + 1)
    assert longer[-1] > 5.0  # the next arrival would have been past the window


def test_schedule_requests_or_duration_whichever_first():
    s = open_loop_schedule(spec(rate=10.0, duration_s=100.0, requests=7, arrival="constant"))
    assert s.measured == 7

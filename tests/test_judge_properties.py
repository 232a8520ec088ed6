"""Invariants of the stored-baseline judge with failures in the runs (docs/statistics.md,
"Failures in percentiles"), as hypothesis properties over the public ``judge()``.

Real engines fail requests (timeouts under load, preemptions, a 500 now and then), in the
baseline's sessions and in the run being judged. Whatever the failures, a worse run must
never read better:

* a current run worse than every baseline session on every request (slower by a factor
  beyond the tolerance, failing wherever any session failed) is never *improved* nor *pass*;
* adding failures to the current run never improves any verdict;
* making every current latency slower never improves any verdict.

"Improves" is read on how a verdict reads the run (``judge_scenarios.reading``): *improved* <
within the tolerance < worse but not shown < *regressed*; *underpowered* reads by its change.

Each is shown to fail when its bug is put back (docs/performance.md, "Judge: failures in
percentiles"): the +∞ baseline centre (the issue case below; the first property at 40
examples), failures dropped from percentiles (the second property), a repeat whose failures
reach the percentile dropped from its session (the repeat case below).
"""

from __future__ import annotations

import warnings

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from judge_scenarios import Workload, readings, run, spec, verdicts  # noqa: E402

from pytest_goodput.judge import Policy  # noqa: E402
from pytest_goodput.schema.runs.results import Samples  # noqa: E402

LATENCIES = ("metrics.ttft_ms.p50", "metrics.ttft_ms.p99", "metrics.tpot_ms.p50",
             "metrics.tpot_ms.p99")
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@st.composite
def baselines(draw):
    """A workload and 1-6 baseline sessions, each run with a few failures (up to 4 %)."""
    n = draw(st.sampled_from([60, 120, 240]))
    sessions = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    w = Workload.draw(n, seed)
    failing = [sorted(set(draw(st.lists(st.integers(0, n - 1), max_size=max(1, n // 25)))))
               for _ in range(sessions)]
    base = [[run(w, rng, failed=f)] for f in failing]
    return w, base, rng, seed


def _with_failures(s: Samples, extra: list[int]) -> Samples:
    ok = list(s.ok)
    for i in extra:
        ok[i] = False
    none = lambda col: [v if o else None for v, o in zip(col, ok)]  # noqa: E731
    good = [bool(g) and o for g, o in zip(s.good or [], ok)] if s.good is not None else None
    return s.model_copy(update={"ok": ok, "good": good, "ttft_ms": none(s.ttft_ms),
                                "tpot_ms": none(s.tpot_ms), "e2e_ms": none(s.e2e_ms),
                                "output_tokens": [t if o else 0 for t, o in zip(s.output_tokens, ok)]})


def _scaled(s: Samples, k: float) -> Samples:
    mul = lambda col: [v * k if v is not None else None for v in col]  # noqa: E731
    return s.model_copy(update={"ttft_ms": mul(s.ttft_ms), "tpot_ms": mul(s.tpot_ms),
                                "e2e_ms": mul(s.e2e_ms), "window_s": s.window_s * k})


@SETTINGS
@given(baselines(), st.floats(1.5, 3.0))
def test_a_run_worse_on_every_request_is_never_improved_nor_pass(case, factor):
    w, base, rng, _ = case
    n = w.n
    # Worse than every session on every request: the slowest session's latency of request i
    # times the factor, and failed wherever any session failed it.
    failed = sorted({i for s in base for i, o in enumerate(s[0].ok) if not o})
    if len(failed) > n // 2:
        return
    with warnings.catch_warnings():  # a request no session measured stays NaN: handled below
        warnings.simplefilter("ignore", RuntimeWarning)
        slowest = {c: np.nanmax([[v if v is not None else np.nan for v in getattr(s[0], c)]
                                 for s in base], axis=0) for c in ("ttft_ms", "tpot_ms", "e2e_ms")}
    cur = run(w, rng, failed=failed)
    ok = cur.ok
    cur = cur.model_copy(update={
        c: [float(v) * factor if o and np.isfinite(v) else (float(np.nanmax(slowest[c])) * factor
                                                           if o else None)
            for v, o in zip(slowest[c], ok)] for c in slowest})
    cur = cur.model_copy(update={"window_s": max(s[0].window_s for s in base) * factor})
    sp = spec(n)
    for strict in (False, True):
        out, v, fails = verdicts(sp, base, [cur], Policy(strict=strict))
        for m in LATENCIES + ("goodput.requests_per_s",):
            c = next((x for x in out.comparisons if x.metric == m), None)
            assert c is not None, f"{m} left out of the verdicts"
            if "in every baseline session and in the current run" in c.note:
                continue  # +∞ on both sides: the percentile cannot tell (the error rate does)
            assert v[m] not in ("improved", "pass"), (m, v[m], c.note)
        assert v["error_rate"] != "improved"
        assert fails or not strict  # strict mode fails what is not shown to hold


def _show(out, m: str) -> str:
    c = next(x for x in out.comparisons if x.metric == m)
    return f"{c.verdict} {c.baseline} -> {c.current} {c.change} {c.interval}: {c.note}"


def _slowest(s: Samples, k: int) -> list[int]:
    """Indices of the k slowest successful requests by TTFT: the ones whose failure a
    survivor-biased judge would read as a speed-up."""
    ok = [i for i, v in enumerate(s.ttft_ms) if v is not None]
    return sorted(ok, key=lambda i: s.ttft_ms[i])[-k:]


@SETTINGS
@given(baselines(), st.lists(st.integers(0, 399), max_size=12), st.integers(0, 12),
       st.floats(1.0, 1.5))
def test_adding_failures_to_the_current_run_never_improves_a_verdict(case, extra, slowest, k):
    w, base, rng, _ = case
    cur = _scaled(run(w, rng, failed=[i for i, o in enumerate(base[0][0].ok) if not o]), k)
    worse = _with_failures(cur, [i % w.n for i in extra] + _slowest(cur, slowest))
    sp = spec(w.n)
    b_out, a_out = verdicts(sp, base, [cur])[0], verdicts(sp, base, [worse])[0]
    before, after = readings(b_out), readings(a_out)
    for m, r in after.items():
        assert r >= before.get(m, 1), (m, before.get(m), r, _show(b_out, m), _show(a_out, m))


@SETTINGS
@given(baselines(), st.floats(1.0, 1.6), st.floats(1.01, 1.5), st.integers(0, 12))
def test_a_strictly_worse_current_session_never_improves_a_verdict(case, k, more, fail):
    """Two repeats; the worse session is slower on every request and one repeat also fails
    its slowest requests (enough of them reach its P99: a run of +∞ is evidence, never dropped)."""
    w, base, rng, _ = case
    failed = [i for i, o in enumerate(base[-1][0].ok) if not o]
    cur = [_scaled(run(w, rng, failed=failed), k) for _ in range(2)]
    worse = [_scaled(cur[0], more), _with_failures(_scaled(cur[1], more), _slowest(cur[1], fail))]
    sp = spec(w.n)
    before = readings(verdicts(sp, base, cur)[0])
    after = readings(verdicts(sp, base, worse)[0])
    for m in LATENCIES:
        if m in before:
            assert after[m] >= before[m], (m, before[m], after[m])


def _samples(ttft: list) -> Samples:
    ok = [v is not None for v in ttft]
    return Samples(window_s=10.0, ok=ok, good=ok, ttft_ms=ttft, tpot_ms=[5.0 if o else None for o in ok],
                   e2e_ms=[100.0 if o else None for o in ok], output_tokens=[8 if o else 0 for o in ok],
                   prompt_tokens=[4] * len(ttft))


def test_a_session_whose_failures_reach_the_percentile_counts_at_the_slowest_success():
    """Hand-computed (docs/metrics.md, "Comparisons"): P50 of 4 requests is rank 2. Session A
    10, 20, 30, 40 ms → 20; session B 15 ms and three failures → rank 2 is a failure, counted
    at the baseline's slowest success, 40 → 40. Centre √(20·40) = 28.28 ms; the current run
    22, 24, 26, 28 → 24 ms, change 24 / 28.28 − 1 = −15.1 %."""
    from pytest_goodput.judge.scalar.verdicts import MetricDef, compare_metric

    base = [[_samples([10.0, 20.0, 30.0, 40.0])], [_samples([15.0, None, None, None])]]
    c = compare_metric(MetricDef.of("metrics.ttft_ms.p50"), base, [_samples([22.0, 24.0, 26.0, 28.0])])
    assert c.baseline == pytest.approx(800 ** 0.5) and c.current == pytest.approx(24.0)
    assert c.change == pytest.approx(24 / 800 ** 0.5 - 1)
    assert "failures reach this percentile in 1 of 2 baseline session(s), counted at the slowest success (40)" in c.note
    # the current run's failures reach it while a baseline session's did not: regressed
    worse = compare_metric(MetricDef.of("metrics.ttft_ms.p50"), base, [_samples([22.0, None, None, None])])
    assert worse.verdict == "regressed"


def test_one_failing_baseline_session_does_not_invert_a_slower_run():
    """Issue case: one of five sessions had 3 timeouts in 200 (its P99 reached by failures);
    a current run twice as slow on every request, with no failure, was read *improved*."""
    w, rng = Workload.draw(200, 1), np.random.default_rng(5)
    base = [[run(w, rng)] for _ in range(4)] + [[run(w, rng, failed=[3, 50, 120])]]
    cur = [run(w, rng, ttft_factor=2.0, tpot_factor=2.0)]
    for strict in (False, True):
        out, v, fails = verdicts(spec(200, attainment=0.95, max_error_rate=0.02), base, cur,
                                 Policy(strict=strict))
        assert v["metrics.ttft_ms.p99"] == v["metrics.tpot_ms.p99"] == "regressed" and fails


def test_a_repeat_whose_failures_reach_the_percentile_is_never_left_out():
    """A/A with two repeats, then one repeat failing its five slowest requests (its P99 of 200
    reached by failures, no baseline session's): *regressed*, never the other repeat's pass."""
    w, rng = Workload.draw(200, 2), np.random.default_rng(9)
    base = [[run(w, rng), run(w, rng)] for _ in range(3)]
    same = [run(w, rng), run(w, rng)]
    failing = [same[0], _with_failures(same[1], _slowest(same[1], 5))]
    before = readings(verdicts(spec(200), base, same)[0])
    after = readings(verdicts(spec(200), base, failing)[0])
    assert before["metrics.ttft_ms.p99"] <= 2 and after["metrics.ttft_ms.p99"] == 3

"""A/B mode never reads a worse head as a better one: failures at a percentile are evidence.

Through the public A/B analysis (``judge.sequential.ab.analyse``, as ``run.ab.run_ab`` calls it: once
per round until it says stop), on rounds whose values come from per-request samples by the
gate's definitions (``values.metric_value``: failures rank +∞ in percentiles).
"""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_goodput.judge.sequential.ab import analyse, round_order
from pytest_goodput.judge.values import metric_value
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.schema.outcomes.ab import ABResult, ABRound
from pytest_goodput.schema.runs.results import Samples

TTFT99, TPOT99 = MetricDef.of("metrics.ttft_ms.p99"), MetricDef.of("metrics.tpot_ms.p99")
DEFS = [TTFT99, TPOT99]
RANK = {"improved": 0, "pass": 1, "underpowered": 2, "inconclusive": 2, "regressed": 3}
PATHS = [d.path for d in DEFS]


def samples(rng: random.Random, n: int, failed: int, slow: float = 1.0) -> Samples:
    """``n`` requests, the last ``failed`` of them timed out; TTFT and TPOT lognormal × ``slow``."""
    ttft = [slow * 40.0 * math.exp(rng.gauss(0.0, 0.3)) for _ in range(n)]
    tpot = [slow * 8.0 * math.exp(rng.gauss(0.0, 0.2)) for _ in range(n)]
    ok = [i < n - failed for i in range(n)]
    return Samples(window_s=20.0, ok=ok, ttft_ms=[t if o else None for t, o in zip(ttft, ok)],
                   tpot_ms=[t if o else None for t, o in zip(tpot, ok)],
                   e2e_ms=[t if o else None for t, o in zip(ttft, ok)],
                   output_tokens=[64 if o else 0 for o in ok], prompt_tokens=[128] * n)


def values(s: Samples) -> dict[str, float | None]:
    return {p: metric_value(s, p) for p in (*PATHS, "error_rate")}


def replay(rounds: list[ABRound], defs: list[MetricDef], min_rounds: int = 4) -> ABResult:
    """The analysis after each round until it stops, as ``run_ab`` calls it."""
    for n in range(1, len(rounds) + 1):
        res, stop = analyse(rounds[:n], defs, min_rounds=min_rounds, max_rounds=len(rounds), seed=0)
        if stop:
            break
    return res


def fails(res: ABResult, strict: bool) -> bool:
    bad = ("regressed", "inconclusive", "underpowered") if strict else ("regressed",)
    return any(c.verdict in bad for c in res.comparisons)


def verdicts(res: ABResult) -> dict[str, str]:
    return {c.metric: c.verdict for c in res.comparisons}


# --- the issue's cases, from per-request samples --------------------------------------


def issue_rounds(head_failed: list[int], base_failed: int, slow: float, seed: int = 1) -> list[ABRound]:
    """12 rounds of 200 requests: round r's head times out ``head_failed[r]`` of them."""
    rng = random.Random(seed)
    return [ABRound(index=r + 1, order=round_order(seed, r + 1),
                    base=values(samples(rng, 200, base_failed)),
                    head=values(samples(rng, 200, head_failed[r], slow)))
            for r in range(12)]


def test_a_slower_head_with_failures_at_p99_fails_and_none_of_its_rounds_is_left_out() -> None:
    # 30 % slower on every latency, 3 of 200 timed out (P99 = +inf) against the base's 2 of
    # 200 (P99 finite): the error rate's +0.5 pp is inside its tolerance, the P99s are not.
    res = replay(issue_rounds([3] * 12, 2, 1.3), DEFS)
    v = verdicts(res)
    assert v[TTFT99.path] == v[TPOT99.path] == "regressed"
    assert fails(res, strict=False) and res.decided
    assert not any("without a comparable value" in c.note for c in res.comparisons)
    assert all("never left out" in c.note for c in res.comparisons if c.metric in PATHS)


def test_a_head_failing_at_p99_in_half_its_rounds_never_passes() -> None:
    for seed in range(6):
        res = replay(issue_rounds([3, 0] * 6, 0, 1.0, seed), DEFS)
        v = verdicts(res)
        assert v[TTFT99.path] not in ("pass", "improved") and v[TPOT99.path] not in ("pass", "improved")
        assert fails(res, strict=True)


def test_rounds_where_only_the_base_failed_count_for_the_head() -> None:
    rng = random.Random(3)
    rounds = [ABRound(index=r, order="base-head", base=values(samples(rng, 200, 3)),
                      head=values(samples(rng, 200, 0))) for r in range(1, 5)]
    res, stop = analyse(rounds, DEFS, min_rounds=4, max_rounds=12)
    assert stop and verdicts(res)[TTFT99.path] == "improved"


# --- properties -------------------------------------------------------------------------


@st.composite
def ab_rounds(draw: st.DrawFn) -> list[ABRound]:
    """4 to 12 rounds of the two P99s: base values, head = base × exp(change), some +inf."""
    n = draw(st.integers(4, 12))
    spread = draw(st.sampled_from([0.0, 0.01, 0.05, 0.2]))
    shift = draw(st.floats(-0.3, 0.5))
    inf = st.floats(0.0, 1.0)
    p_head, p_base = draw(st.sampled_from([0.0, 0.1, 0.4])), draw(st.sampled_from([0.0, 0.0, 0.1, 0.3]))
    out = []
    for r in range(n):
        base: dict[str, float | None] = {}
        head: dict[str, float | None] = {}
        for p in PATHS:
            b = draw(st.floats(5.0, 50.0))
            h = b * math.exp(shift + spread * draw(st.floats(-2.0, 2.0)))
            base[p] = math.inf if draw(inf) < p_base else b
            head[p] = math.inf if draw(inf) < p_head else h
        out.append(ABRound(index=r + 1, order=round_order(0, r + 1), base=base, head=head))
    return out


def worse(rounds: list[ABRound], factor: dict[str, float], failed: set[tuple[int, str]]) -> list[ABRound]:
    """The same rounds with the head ×``factor`` (≥ 1) per metric and failures at the
    percentile (+inf) in the ``failed`` (round, metric) pairs."""
    return [r.model_copy(update={"head": {p: (math.inf if (i, p) in failed else v * factor[p])
                                          for p, v in r.head.items()}})
            for i, r in enumerate(rounds)]


failures = st.sets(st.tuples(st.integers(0, 11), st.sampled_from(PATHS)), max_size=8)
factors = st.fixed_dictionaries({p: st.floats(1.0, 1.5) for p in PATHS})


@settings(max_examples=200, deadline=None)
@given(ab_rounds(), factors, failures)
def test_a_strictly_worse_head_never_turns_a_failing_verdict_into_a_pass(
        rounds: list[ABRound], factor: dict[str, float], failed: set[tuple[int, str]]) -> None:
    new = worse(rounds, factor, failed)
    for strict in (False, True):
        if fails(replay(rounds, DEFS), strict):
            assert fails(replay(new, DEFS), strict), strict
        old_look, _ = analyse(rounds, DEFS, min_rounds=4, max_rounds=12)
        if fails(old_look, strict):
            assert fails(analyse(new, DEFS, min_rounds=4, max_rounds=12)[0], strict), strict


@settings(max_examples=200, deadline=None)
@given(ab_rounds(), failures)
def test_adding_failures_to_the_head_never_improves_any_verdict(
        rounds: list[ABRound], failed: set[tuple[int, str]]) -> None:
    new = worse(rounds, {p: 1.0 for p in PATHS}, failed)
    # One look on the same rounds: every metric's verdict.
    old_v = verdicts(analyse(rounds, DEFS, min_rounds=4, max_rounds=12)[0])
    new_v = verdicts(analyse(new, DEFS, min_rounds=4, max_rounds=12)[0])
    for p, v in old_v.items():
        assert RANK[new_v[p]] >= RANK[v], (p, v, new_v[p])
    # The whole sequential job, one gated metric at a time (stopping couples the metrics).
    for d in DEFS:
        old_r, new_r = verdicts(replay(rounds, [d])), verdicts(replay(new, [d]))
        assert RANK[new_r[d.path]] >= RANK[old_r[d.path]], (d.path, old_r, new_r)

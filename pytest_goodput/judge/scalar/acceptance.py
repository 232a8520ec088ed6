"""Speculative decoding's acceptance rate, judged session by session (pure).

The acceptance rate (accepted / draft tokens, from the engine's counters: vLLM's
``vllm:spec_decode_num_accepted_tokens_total`` / ``..._num_draft_tokens_total``, the
simulator's the same) is one number per session, not a per-request column, so it is judged
like a run-level shape: the current sessions' geometric mean against the baseline
sessions', on the log scale. One session's value varies by σ: the sessions' own spread
(each side's sample variance of ln a, pooled) shrunk towards the registry's prior
(``run_cv``, ``PRIOR_RUNS`` pseudo-sessions), which also stands in when there is no spread
to measure. The change ``d`` has variance ``σ² · (1/k_b + 1/k_c)``; its interval is d ± z·SD
at the judge's confidence, and the verdict is the gate's rule (``verdicts.decide``). A
draft that lost its acceptance slows every TPOT that speculation shortened: a lower rate is
worse (``docs/metrics.md``, "Tokens per chunk (speculative decoding)").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import fmean, variance
from typing import Optional

from pytest_goodput.judge.noise.spread import PRIOR_RUNS, z_of
from pytest_goodput.judge.scalar.verdicts import CONFIDENCE, decide
from pytest_goodput.schema.outcomes.outcome import MetricComparison
from pytest_goodput.schema.registry import ACCEPTANCE, metric
from pytest_goodput.schema.runs.session import Session

#: Where a recorded session keeps the rate (``run/engine_view.py``'s summary, ``server.<key>``).
SUMMARY_KEY = "server.spec_decode_acceptance_rate"
METHOD = "session acceptance rates, log scale; session spread shrunk to the prior, normal"


def session_acceptance(session: Session) -> Optional[float]:
    """A session's acceptance rate: the one its summary recorded, else Σ accepted / Σ draft
    tokens over its runs' server counters; None when it drafted nothing (speculation off, or
    no ``/metrics``)."""
    recorded = session.summary.get(SUMMARY_KEY)
    if recorded is not None:
        return recorded
    counted = [r.server_metrics for r in session.results
               if r.server_metrics and r.server_metrics.get("spec_decode_draft_tokens")]
    if not counted:
        return None
    return (sum(m.get("spec_decode_accepted_tokens", 0.0) for m in counted)
            / sum(m["spec_decode_draft_tokens"] for m in counted))


def _log_spread(sides: Sequence[Sequence[float]], prior_cv: float) -> float:
    """Variance of one session's ln(rate): the sides' pooled sample variance shrunk to the prior."""
    prior = math.log1p(prior_cv * prior_cv)  # a lognormal's σ² for that CV
    measured = [[math.log(v) for v in side] for side in sides if len(side) >= 2]
    df = sum(len(side) - 1 for side in measured)
    ss = sum((len(side) - 1) * variance(side) for side in measured)
    return (PRIOR_RUNS * prior + ss) / (PRIOR_RUNS + df)


def acceptance_comparison(baseline: Sequence[Session], current: Sequence[Session], tolerance: float,
                          confidence: float = CONFIDENCE) -> Optional[MetricComparison]:
    """The acceptance rate as a verdict; None unless both sides drafted (a baseline recorded
    before speculation, or a run without it, is not judged on it)."""
    base = [a for a in map(session_acceptance, baseline) if a is not None]
    cur = [a for a in map(session_acceptance, current) if a is not None]
    if not base or not cur:
        return None
    info = metric(ACCEPTANCE)
    b = math.exp(fmean(math.log(max(v, 1e-9)) for v in base))
    c = math.exp(fmean(math.log(max(v, 1e-9)) for v in cur))
    d = math.log(max(c, 1e-9)) - math.log(b)
    half = z_of(confidence) * math.sqrt(_log_spread([base, cur], info.run_cv)
                                         * (1.0 / len(base) + 1.0 / len(cur)))
    change, interval = math.expm1(d), (math.expm1(d - half), math.expm1(d + half))
    verdict = decide(info.direction, change, interval, tolerance)
    note = (f"accepted / draft tokens {c:.1%} (baseline sessions: "
            f"{', '.join(f'{v:.1%}' for v in base)})")
    return MetricComparison(
        metric=ACCEPTANCE, direction=info.direction, baseline=b, current=c, change=change,
        interval=interval, tolerance=tolerance, verdict=verdict,  # type: ignore[arg-type]
        method=METHOD, note=note, detectable=max(-math.expm1(-half), tolerance))

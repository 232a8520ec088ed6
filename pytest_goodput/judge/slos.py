"""SLO checks of a run on its own: error rate, attainment, percentile SLOs with their proofs (pure)."""

from __future__ import annotations

from pytest_goodput.schema.outcome import SLOOutcome
from pytest_goodput.schema.results import RunResult


def slo_outcomes(result: RunResult, strict: bool) -> list[SLOOutcome]:
    """Error rate, attainment against its target, and each percentile SLO with its proof.

    The error rate always applies (default limit 0: a failed request fails the test). An unproven percentile SLO (too few requests for 99 % confidence) passes with a note,
    and fails only in strict mode.
    """
    failed = sum(result.failures.values())
    rate = failed / result.issued if result.issued else 1.0
    limit = result.spec.max_error_rate
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(result.failures.items()))
    out: list[SLOOutcome] = [
        SLOOutcome(
            name="error_rate",
            limit=limit,
            value=rate,
            ok=result.issued > 0 and rate <= limit,
            note=(f"{failed} of {result.issued} requests failed ({kinds})" if failed
                  else "no request failed") if result.issued else "no request was issued",
        )
    ]
    g = result.goodput
    if g is not None:
        out.append(
            SLOOutcome(
                name="attainment",
                limit=g.target,
                value=g.attainment,
                ok=g.met,
                note=f"{g.good} of {g.issued} requests met every per-request SLO",
            )
        )
    for c in result.percentile_slos:
        note = ""
        if c.ok and not c.proven:
            note = (
                f"not proven at 99% confidence: {c.samples} samples, {c.over_limit} over the "
                f"limit; a proof needs {c.requests_needed}"
            )
        out.append(
            SLOOutcome(
                name=c.name,
                limit=c.limit_ms,
                value=c.value_ms,
                ok=c.ok and (c.proven or not strict),
                proven=c.proven,
                note=note,
            )
        )
    return out

"""SLO checks of the current runs on their own: error rate, attainment, percentile SLOs with
their proofs (pure).

Every repeat is judged: a test meets an SLO only when each of its runs does, and the
outcome shows the worst run (a bad first repeat cannot hide behind a good second one).
"""

from __future__ import annotations

from typing import Optional, Sequence

from pytest_goodput import stats
from pytest_goodput.schema.outcomes.outcome import SLOOutcome
from pytest_goodput.schema.runs.results import RunResult


def run_slo_outcomes(result: RunResult, strict: bool) -> list[SLOOutcome]:
    """Error rate, attainment against its target, and each percentile SLO with its proof.

    The error rate always applies (default limit 0: a failed request fails the test). A
    broken percentile SLO is proven by its own samples (a value above the limit is a fact of
    this run); a held one needs MLPerf's early-stopping count at 99 % confidence, and an
    unproven hold passes with a note — and fails only in strict mode.
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
        elif not c.ok:
            note = f"{c.over_limit} of {c.samples} samples over the limit"
        # No finite value from samples: the percentile's rank falls on a failed request (+∞).
        infinite = c.value_ms is None and c.samples > 0
        if infinite:
            note += f"; P{c.percentile:g} falls on a failed request (+∞)"
        out.append(
            SLOOutcome(
                name=c.name,
                limit=c.limit_ms,
                value=c.value_ms,
                ok=c.ok and (c.proven or not strict),
                # A break needs no early-stopping proof: the run's own samples show it.
                proven=True if not c.ok else c.proven,
                note=note,
                infinite=infinite,
            )
        )
    return out


def _worse(a: SLOOutcome, b: SLOOutcome, higher_is_worse: bool) -> SLOOutcome:
    """The worse of two runs' outcomes of one SLO: a failure first, then the worse value."""
    if a.ok != b.ok:
        return b if a.ok else a
    if a.proven is not None and b.proven is not None and a.proven != b.proven:
        return b if a.proven else a
    av, bv = a.value, b.value
    if av is None or bv is None:  # None: +∞ (a failed request) or no value at all
        return a if av is None else b
    return b if (bv > av) == higher_is_worse and bv != av else a


def pooled_proof(results: Sequence[RunResult], name: str, strict: bool,
                 o: SLOOutcome) -> SLOOutcome:
    """A percentile SLO every run held, proven over the repeats' pooled samples.

    Repeats replay one workload at one load, so their requests are more samples of the same
    latency distribution, and MLPerf's early-stopping count applies to all of them together:
    two runs of 240 requests prove a P99 that neither proves alone (459 needed). A break
    stays a break: any run above the limit fails the SLO, proof or not.
    """
    checks = [c for r in results for c in r.percentile_slos if c.name == name]
    if len(checks) < 2 or not all(c.ok for c in checks) or o.proven:
        return o
    n, over = sum(c.samples for c in checks), sum(c.over_limit for c in checks)
    proven, needed = stats.percentile_proof(n, over, checks[0].percentile)
    if proven:
        return o.model_copy(update={"ok": True, "proven": True, "note": (
            f"proven at 99% confidence over the {len(checks)} runs' pooled samples: {n} "
            f"samples, {over} over the limit")})
    per_run = -(-(needed or n) // len(checks))
    return o.model_copy(update={"ok": not strict, "proven": False, "note": (
        f"not proven at 99% confidence: {n} samples over {len(checks)} runs, {over} over the "
        f"limit; a proof needs {needed} ({per_run} requests per run)")})


def slo_outcomes(results: Sequence[RunResult], strict: bool) -> list[SLOOutcome]:
    """Each SLO over every run: the worst run's outcome, naming it when there are several;
    a held percentile SLO is proven over the runs' pooled samples (:func:`pooled_proof`)."""
    per_run = [run_slo_outcomes(r, strict) for r in results]
    if len(per_run) == 1:
        return per_run[0]
    merged: dict[str, tuple[SLOOutcome, int]] = {}
    for i, outcomes in enumerate(per_run):
        for o in outcomes:
            seen: Optional[tuple[SLOOutcome, int]] = merged.get(o.name)
            higher_is_worse = o.name != "attainment"
            if seen is None or _worse(seen[0], o, higher_is_worse) is o:
                merged[o.name] = (o, i)
    out = []
    for name, (o, i) in merged.items():
        o = pooled_proof(results, name, strict, o)
        held = [c.ok for r in results for c in r.percentile_slos if c.name == name]
        broken = (held.count(False) if held else
                  sum(1 for outcomes in per_run for x in outcomes if x.name == name and not x.ok))
        where = (f"run {i + 1} of {len(per_run)}" + (f"; {broken} of {len(per_run)} runs broke it"
                                                      if broken else ""))
        out.append(o.model_copy(update={"note": f"{where}: {o.note}" if o.note else where}))
    return out

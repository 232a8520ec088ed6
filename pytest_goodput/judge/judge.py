"""From a test's run results and its stored baseline to a :class:`TestOutcome` (pure).

This is where the gate's policy lives: which metrics gate a scenario by default, which SLO
checks a run must pass, and when a test fails.
"""

from __future__ import annotations

from typing import Optional

from pytest_goodput.judge.identity import identity_mismatches, what_changed
from pytest_goodput.judge.verdicts import DEFAULT_METRICS, MetricDef, compare
from pytest_goodput.schema.baseline import BaselineFile
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.outcome import MetricComparison, SLOOutcome, TestOutcome
from pytest_goodput.schema.results import RunResult, Samples
from pytest_goodput.schema.spec import ScenarioSpec

#: Headline numbers kept in reports and baseline summaries, by path into a RunResult.
KEY_METRICS: tuple[str, ...] = (
    "goodput.requests_per_s",
    "goodput.tokens_per_s",
    "goodput.attainment",
    "throughput.requests_per_s",
    "throughput.output_tokens_per_s",
    "metrics.ttft_ms.p50",
    "metrics.ttft_ms.p99",
    "metrics.tpot_ms.p50",
    "metrics.tpot_ms.p99",
    "metrics.itl_ms.p99",
    "metrics.e2e_ms.p99",
)


def lookup(result: RunResult, path: str) -> Optional[float]:
    """``lookup(result, "metrics.ttft_ms.p99")``: a number from the result, or None."""
    node: object = result
    for part in path.split("."):
        if node is None:
            return None
        node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
    return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def key_metrics(result: RunResult) -> dict[str, Optional[float]]:
    values = {p: lookup(result, p) for p in KEY_METRICS}
    return {p: v for p, v in values.items() if v is not None}


def default_gate(spec: ScenarioSpec) -> tuple[str, ...]:
    """Metrics gated when the marker names none: each scenario's headline numbers."""
    if spec.scenario in ("sweep", "capacity"):
        return ()  # judged as a frontier / a capacity, not per run
    if spec.scenario == "offline":
        return ("throughput.output_tokens_per_s",)
    if spec.scenario == "concurrency":
        return ("throughput.output_tokens_per_s", "metrics.tpot_ms.p50", "metrics.ttft_ms.p99")
    gated: tuple[str, ...] = ()
    if spec.has_request_slos:
        gated += ("goodput.requests_per_s",)
    return gated + ("metrics.ttft_ms.p99", "metrics.tpot_ms.p99")


def tolerance_for(
    spec: ScenarioSpec, path: str, default_tolerance: Optional[float], fallback: float
) -> float:
    """``tolerances[path]`` > marker ``tolerance`` > command line / ini > ``fallback``."""
    for tol in (spec.tolerances.get(path), spec.tolerance, default_tolerance):
        if tol is not None:
            return tol
    return fallback


def metric_defs(spec: ScenarioSpec, default_tolerance: Optional[float] = None) -> list:
    """The gated metrics with their direction and tolerance (see :func:`tolerance_for`)."""

    defs = []
    for path in spec.gate or default_gate(spec):
        base = DEFAULT_METRICS.get(path)
        direction = base.direction if base else ("lower" if "_ms" in path else "higher")
        tol = tolerance_for(spec, path, default_tolerance, base.tolerance if base else 0.05)
        defs.append(MetricDef(path=path, direction=direction, tolerance=tol))
    return defs


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


def build_outcome(
    *,
    nodeid: str,
    location: Optional[tuple[str, int]],
    spec: ScenarioSpec,
    results: list[RunResult],
    current_env: Fingerprint,
    baseline: Optional[BaselineFile],
    compare_enabled: bool,
    strict: bool,
    default_tolerance: Optional[float],
    seed: int = 0,
    extra_comparisons: Optional[list[MetricComparison]] = None,
) -> TestOutcome:
    """Judge one test: SLOs of the current run, then the comparison with its baseline."""

    head = results[-1]
    outcome = TestOutcome(
        nodeid=nodeid,
        location=location,
        scenario=spec.scenario,
        # A sweep or capacity search crosses the knee on purpose: its SLO status lives in
        # its frontier points / probes, not in its last run.
        slos=[] if spec.scenario in ("sweep", "capacity") else slo_outcomes(head, strict),
        client_valid=all(r.client.valid for r in results),
        client_reasons=[reason for r in results for reason in r.client.reasons],
        spec=spec.model_dump(mode="json"),
        key_metrics=key_metrics(head),
        current_env=current_env.flat(),
    )
    if not compare_enabled:
        return outcome
    if baseline is None or not baseline.runs:
        return outcome.model_copy(update={"baseline_status": "new"})
    base_env = baseline.latest.environment
    reasons = identity_mismatches(base_env, current_env)
    if baseline.spec_hash != spec.identity_hash():
        reasons.insert(0, "the scenario spec changed since the baseline was recorded")
    update = {
        "baseline_env": base_env.flat(),
        "what_changed": what_changed(base_env, current_env),
    }
    if reasons:
        return outcome.model_copy(
            update={**update, "baseline_status": "incomparable", "incomparable_reasons": reasons}
        )
    defs = metric_defs(spec, default_tolerance)
    baseline_runs = [s for run in baseline.runs for s in run.samples]
    # All repeats of the latest run feed the current side; history gives run-to-run spread.
    current_runs = [Samples.from_records(r.requests, r.window.seconds) for r in results]
    # Same spec hash means same seed: request i is the same request in every run, so the
    # comparison can pair them (it falls back to unpaired intervals when counts differ).
    comparisons: list[MetricComparison] = compare(
        baseline_runs, current_runs, defs, seed=seed, paired=True
    )
    comparisons += extra_comparisons or []
    return outcome.model_copy(
        update={**update, "baseline_status": "compared", "comparisons": comparisons}
    )


def fails(outcome: TestOutcome, strict: bool) -> bool:
    """Whether the test fails: errors, invalid runs, broken SLOs, regressions.

    Strict mode also fails inconclusive verdicts and baselines that cannot be compared
    (other hardware, model or spec): a comparison must not vanish silently.
    """
    if outcome.error or not outcome.client_valid or outcome.slo_failed or outcome.regressed:
        return True
    return strict and (bool(outcome.inconclusive) or outcome.baseline_status == "incomparable")

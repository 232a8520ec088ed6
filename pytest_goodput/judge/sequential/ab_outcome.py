"""An A/B run as a test outcome: the same verdicts, SLOs and sides as a baseline comparison (pure).

The base engine stands where the stored baseline stands in the gate (``baseline_*`` fields,
the "baseline" column of every report), the head engine where the current run stands. SLOs
are judged on the head's runs: the head is what the build would ship. ``fails`` judges the
outcome as it judges any other, so A/B and the stored-baseline gate cannot disagree on what
fails.
"""

from __future__ import annotations

from typing import Optional, Sequence

from pytest_goodput.judge.evidence import samples_of
from pytest_goodput.judge.comparability import what_changed
from pytest_goodput.judge.slos import slo_outcomes
from pytest_goodput.judge.workload import check_workload
from pytest_goodput.measure.frontier import pareto_frontier, point_from_result
from pytest_goodput.measure.headline import key_metrics, session_metrics
from pytest_goodput.schema.outcomes.ab import ABResult
from pytest_goodput.schema.outcomes.ab_summary import ABSummary
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Session, Sweep
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def ab_summary(result: ABResult, base: str, head: str) -> ABSummary:
    """What reports say about the rounds behind the verdicts."""
    return ABSummary(
        base=base, head=head, rounds_used=result.rounds_used, rounds_dropped=result.rounds_dropped,
        min_rounds=result.min_rounds, max_rounds=result.max_rounds, decided=result.decided,
        stop_reason=result.stop_reason, looks=result.looks, alpha_per_look=result.alpha_per_look,
        orders=["AB" if r.order == "base-head" else "BA" for r in result.rounds],
    )


def _frontiers(spec: ScenarioSpec, result: ABResult,
               sweeps: tuple[Sequence[RunResult], Sequence[RunResult]]
               ) -> tuple[dict, dict[str, Optional[float]], dict[str, Optional[float]]]:
    """A sweep's frontiers as reports draw them (the last judged round of each side), with
    the equal-load comparisons the rounds judged, and each side's headline numbers."""
    sides = []
    for runs in sweeps:
        points = [point_from_result(r, spec.frontier_percentile, spec.gpus) for r in runs]
        sides.append(([p.model_dump(mode="json") for p in points],
                      [p.model_dump(mode="json") for p in pareto_frontier(points)]))
    (_, base_front), (head_points, head_front) = sides
    frontier = {"points": head_points, "current": head_front, "baseline": base_front,
                "comparison": {"by_load": list(result.points)}}
    key = [session_metrics(Session(spec=spec, results=list(runs), sweep=Sweep(frontier=f)))
           for runs, (_, f) in zip(sweeps, sides)]
    return frontier, key[1], key[0]


def ab_outcome(
    nodeid: str,
    result: ABResult,
    head_runs: Sequence[RunResult],
    base_runs: Sequence[RunResult],
    *,
    base: str,
    head: str,
    base_env: Optional[Fingerprint] = None,
    head_env: Optional[Fingerprint] = None,
    strict: bool = False,
    location: Optional[tuple[str, int]] = None,
    sweeps: tuple[Sequence[RunResult], Sequence[RunResult]] = ((), ()),
) -> TestOutcome:
    """The test's outcome from an A/B result and the runs behind it.

    Too few kept rounds make the test *invalid* (the client set the pace of too many runs to
    judge anything), with each dropped round's reason. ``sweeps``: a sweep's last judged
    round, base and head, each point's run: the frontiers reports draw.
    """
    spec = result.spec
    assert spec is not None, "an A/B result carries the spec it ran"
    summary = ab_summary(result, base, head)
    reasons = [f"round {r.index}: {r.dropped}" for r in result.rounds if r.dropped]
    valid = result.rounds_used >= result.min_rounds
    if not valid:
        reasons.insert(0, f"only {result.rounds_used} of {len(result.rounds)} A/B rounds were valid "
                          f"(at least {result.min_rounds} needed)")
    notes = [summary.line()]
    if base_env is not None and head_env is not None:
        b_model, h_model = base_env.identity.get("model"), head_env.identity.get("model")
        if b_model != h_model:
            notes.append(f"the engines serve different models: base {b_model!r}, head {h_model!r}")
    workload, prompts_differ = (check_workload([samples_of(list(base_runs))], samples_of(list(head_runs)))
                                if base_runs and head_runs else (None, None))
    if prompts_differ:  # same spec and seed on both sides: only a tokenizer can make this differ
        notes.append(prompts_differ)
    frontier, key, base_key = None, key_metrics(head_runs[-1]) if head_runs else {}, (
        key_metrics(base_runs[-1]) if base_runs else None)
    if spec.sweep and sweeps[1]:
        frontier, key, base_key = _frontiers(spec, result, sweeps)
    return TestOutcome(
        nodeid=nodeid,
        location=location,
        scenario=spec.scenario,
        comparisons=list(result.comparisons) if valid else [],
        slos=slo_outcomes(list(head_runs), strict) if head_runs and not spec.sweep else [],
        baseline_status="compared",
        client_valid=valid,
        client_reasons=reasons if not valid else [],
        spec=spec.model_dump(mode="json"),
        baseline_spec=spec.model_dump(mode="json"),
        key_metrics=key,
        baseline_key_metrics=base_key,
        frontier=frontier,
        current_env=head_env.flat() if head_env is not None else {},
        baseline_env=base_env.flat() if base_env is not None else None,
        what_changed=what_changed(base_env, head_env) if base_env and head_env else {},
        workload=workload,
        notes=notes + list(result.notes),
        ab=summary,
    )

"""The one judge: a test's current runs against its baseline, to a :class:`TestOutcome` (pure).

The pytest plugin and ``python -m pytest_goodput compare`` both call :func:`judge` and
:func:`fails`, so the gate and the CLI cannot disagree. This is where the gate's policy
lives: which metrics gate a scenario, which SLO checks a run must pass, when runs are
comparable, how sweeps and capacity searches are judged, and when a test fails.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from pytest_goodput.judge.scalar.acceptance import acceptance_comparison
from pytest_goodput.judge.shapes.capacity import capacity_comparison
from pytest_goodput.judge.shapes.degradation import degradation_comparison
from pytest_goodput.judge.shapes.frontier import compare_by_load, compare_frontiers, frontier_metric
from pytest_goodput.judge.noise.frontier_noise import sweep_noise
from pytest_goodput.judge.noise.main_level import is_series, level_notes, level_spreads, main_level
from pytest_goodput.judge.comparability import clients_note, identity_mismatches, prompts_note, what_changed
from pytest_goodput.judge.noise.power_plan import noise_split
from pytest_goodput.judge.shapes.saturation import saturation_comparison
from pytest_goodput.judge.noise.sittings import sittings
from pytest_goodput.judge.output_guard import off_note, output_comparison
from pytest_goodput.judge.slos import slo_outcomes
from pytest_goodput.judge.scalar.summary_only import summary_comparisons
from pytest_goodput.judge.scalar.verdicts import compare
from pytest_goodput.judge.workload import check_workload
from pytest_goodput.schema.outcomes.frontier import FrontierPoint
from pytest_goodput.schema.outcomes.outcome import MetricComparison, TestOutcome
from pytest_goodput.schema.outcomes.shapes import SweepOutcome
from pytest_goodput.schema.registry import (ACCEPTANCE, DEGRADATION, OUTPUT_AGREEMENT, run_gate, sweep_point_gate,
                                            tolerance_for)
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.judge.vocabulary import CONFIDENCE, MetricDef


@dataclass(frozen=True)
class Policy:
    """How to judge: compare with a baseline at all, strict mode, the session's tolerance,
    whether this run is being recorded as the new baseline (update mode), and the two-sided
    confidence of the verdicts' intervals (a look of measuring the PR over several launches
    spends less than the whole budget: ``judge/sequential/head_launches.py``)."""

    compare: bool = True
    strict: bool = False
    tolerance: Optional[float] = None
    update: bool = False
    confidence: float = CONFIDENCE
    #: Launches the current side counts as (None: its sessions); a head-launch plan judges its
    #: data as if measured over the planned launches, to see what more launches could decide.
    current_sessions: Optional[int] = None
    #: Read the baseline's sessions as main's time series (``judge/noise/main_level.py``);
    #: False judges against every session as recorded (the benches' before).
    main_level: bool = True


def metric_defs(spec: ScenarioSpec, default_tolerance: Optional[float] = None) -> list[MetricDef]:
    """The gated metrics judged from per-request samples, with their direction and tolerance
    (see ``registry.tolerance_for``); degradation within the run is judged on its own
    (:func:`degradation_comparisons`)."""
    return [MetricDef.of(path, tolerance_for(spec, path, default_tolerance))
            for path in run_gate(spec) if path not in DEGRADATION]


def degradation_comparisons(spec: ScenarioSpec, current: Side, baseline: Side,
                            policy: Policy) -> list[MetricComparison]:
    """The gated degradation metrics (time slices), against the baseline sessions' own."""
    rows = (degradation_comparison(path, baseline.degradation, current.degradation,
                                   tolerance_for(spec, path, policy.tolerance), policy.confidence)
            for path in run_gate(spec) if path in DEGRADATION)
    return [r for r in rows if r is not None]


def _shape_comparisons(spec: ScenarioSpec, current: Side, baseline: Side,
                       policy: Policy) -> tuple[list[MetricComparison], Optional[dict[str, Any]]]:
    """Sweeps are judged as frontiers and capacity searches as capacities, not per run.

    A sweep is judged point by point at equal load against every baseline session (the
    scalar rule); the step lookup of the two frontiers is kept for the report.
    """
    extra: list[MetricComparison] = []
    comparison = None
    if spec.sweep and current.frontier is not None and baseline.frontier is not None:
        tol = tolerance_for(spec, "frontier_throughput", policy.tolerance)
        b, c = baseline.frontier, current.frontier
        noise = sweep_noise(spec.sweep, spec.sweep_over, baseline.latest, current.latest, spec.gpus)
        step = compare_frontiers(b, c, tol, noise, x_tolerance=spec.interactivity_tolerance)
        latency = [MetricDef.of(p, tolerance_for(spec, p, policy.tolerance))
                   for p in sweep_point_gate(spec)]
        by_load = compare_by_load(spec.sweep, baseline.history, current.latest, tol,
                                  spec.frontier_percentile, latency=latency,
                                  confidence=policy.confidence)
        comparison = {**step.model_dump(mode="json"), "by_load": by_load}
        extra.append(frontier_metric(by_load, step, tol))
        began = saturation_comparison(spec.sweep, spec.sweep_over, baseline.saturation_steps,
                                      current.saturation_steps[-1] if current.saturation_steps else None)
        if began is not None:
            extra.append(began)
    if current.capacity is not None and baseline.capacities:
        extra.append(capacity_comparison(
            baseline.capacities, current.capacity,
            tolerance_for(spec, "capacity.requests_per_s", policy.tolerance)))
    return extra, comparison


def judge(
    nodeid: str,
    current: Side,
    baseline: Optional[Side],
    policy: Policy = Policy(),
    *,
    location: Optional[tuple[str, int]] = None,
    seed: int = 0,
) -> TestOutcome:
    """Judge one test: SLOs of the current runs, then the comparison with its baseline."""
    spec = current.spec
    results = current.results
    # A sweep or capacity search crosses the knee on purpose: its SLO status lives in its
    # frontier points / probes, not in its last run.
    judged_alone = spec.scenario not in ("sweep", "capacity") and results
    frontier = None
    if current.frontier is not None:
        frontier = {"points": _json(current.points or []), "current": _json(current.frontier)}
        if current.saturation is not None:
            frontier["saturation"] = current.saturation.as_dict()
    outcome = TestOutcome(
        nodeid=nodeid,
        location=location,
        scenario=spec.scenario,
        slos=slo_outcomes(results, policy.strict) if judged_alone else [],
        client_valid=all(r.client.valid for r in results),
        client_reasons=[reason for r in results for reason in r.client.reasons],
        spec=spec.model_dump(mode="json"),
        key_metrics=current.summary,
        current_env=current.env.flat() if current.env is not None else {},
        frontier=frontier,
        slices=results[-1].slices if judged_alone else None,
    )
    if not policy.compare:
        return outcome
    if baseline is None or not (baseline.samples or baseline.summary_only):
        return outcome.model_copy(update={"baseline_status": "new"})
    update: dict[str, Any] = {}
    reasons: list[str] = []
    if baseline.env is not None:
        update["baseline_env"] = baseline.env.flat()
        if current.env is not None:
            reasons = identity_mismatches(baseline.env, current.env)
            update["what_changed"] = what_changed(baseline.env, current.env)
    if baseline.spec_hash != current.spec_hash:
        reasons.insert(0, "the scenario spec changed since the baseline was recorded")
    outcome = outcome.model_copy(update={"notes": [*outcome.notes, *clients_note(baseline, current)]})
    if baseline.summary_only or current.summary_only:  # imported summaries: no requests to pair
        return outcome.model_copy(update={
            **update, "baseline_status": "incomparable" if reasons else "compared",
            "incomparable_reasons": reasons, "baseline_key_metrics": dict(baseline.summary),
            "comparisons": [] if reasons else summary_comparisons(
                baseline, current, metric_defs(spec, policy.tolerance), policy.confidence)})
    # Same prompts, same output lengths? Different prompts are a different workload.
    workload, prompts_differ = check_workload(baseline.history, current.samples)
    if workload.prompts == "unrecorded" and (note := prompts_note(baseline, current)):
        workload = workload.model_copy(update={"prompts": "unchecked"})
        outcome = outcome.model_copy(update={"notes": [*outcome.notes, note]})
    update.update(workload=workload, baseline_key_metrics=dict(baseline.summary))
    if prompts_differ is not None:
        reasons.append(prompts_differ)
    if reasons:
        return outcome.model_copy(
            update={**update, "baseline_status": "incomparable", "incomparable_reasons": reasons}
        )
    # Kept one session per push, the baseline is main's time series: judged against main's
    # current level (the sessions since its newest step, a lone disturbed session set aside).
    baseline, notes, spreads, noise = _at_main_level(spec, baseline, policy)
    update["notes"] = outcome.notes + notes
    # Same spec hash means same seed: request i is the same request in every run, so the
    # comparison can pair them (it falls back to unpaired intervals when counts differ).
    # A committed baseline is judged on other days and machines: outside its sitting, the
    # verdicts add the between-sitting spread its back-to-back sessions could not show. The
    # sittings are those of the sessions the spread comes from: after a step on main, every
    # session kept (one sitting a push), not the one or two since the step.
    sit = sittings(noise.recorded_at, noise.client_cpus,
                   current.recorded_at[-1] if current.recorded_at else None,
                   current.client_cpus[-1] if current.client_cpus else None)
    # A current side of K sessions (the PR measured over K engine launches) averages K draws
    # of the launch level: its variance is σ²/K, not σ².
    comparisons = compare(baseline.history, current.samples, metric_defs(spec, policy.tolerance),
                          seed=seed, paired=True, sittings=sit, confidence=policy.confidence,
                          current_sessions=policy.current_sessions or max(1, len(current.history)),
                          spreads=spreads)
    comparisons = [_with_noise(c, baseline) for c in comparisons]
    extra, frontier_cmp = _shape_comparisons(spec, current, baseline, policy)
    extra += degradation_comparisons(spec, current, baseline, policy)
    guard = output_comparison(spec, baseline.history, current.samples, confidence=policy.confidence,
                              tolerance=tolerance_for(spec, OUTPUT_AGREEMENT, policy.tolerance))
    extra += [guard] if guard is not None else []
    update["notes"] += [note] if (note := off_note(spec)) else []
    # Speculative decoding: judged beside throughput whenever both sides drafted.
    accepted = (acceptance_comparison(baseline.sessions, current.sessions,
                                      tolerance_for(spec, ACCEPTANCE, policy.tolerance), policy.confidence)
                if spec.scenario not in ("sweep", "capacity") else None)
    extra += [accepted] if accepted is not None else []
    if frontier is not None and frontier_cmp is not None:
        update["frontier"] = SweepOutcome.model_validate(
            {**frontier, "baseline": _json(baseline.frontier or []), "comparison": frontier_cmp})
    return outcome.model_copy(
        update={**update, "baseline_status": "compared", "comparisons": comparisons + extra}
    )


def _at_main_level(spec: ScenarioSpec, baseline: Side,
                   policy: Policy) -> tuple[Side, list[str], dict[str, tuple[float, int, str]], Side]:
    """The baseline at main's current level, the notes saying how it was read, the spread
    across main's levels and the sessions that spread comes from; sweeps and capacity
    searches are judged on their shapes, whole (``judge/noise/main_level.py``)."""
    commits = [s.environment.provenance.get("git_commit") if s.environment is not None else None
               for s in baseline.sessions]
    if (not policy.main_level or spec.scenario in ("sweep", "capacity")
            or not is_series(baseline.recorded_at, baseline.client_cpus, commits)):
        return baseline, [], {}, baseline
    defs = metric_defs(spec, policy.tolerance)
    level = main_level(baseline.history, defs)
    if not level.moved:
        return baseline, [], {}, baseline
    labels = [c or s.recorded_at for c, s in zip(commits, baseline.sessions)]
    notes = level_notes(level, baseline.history, defs, labels)
    kept = [baseline.sessions[i] for i in level.kept]
    spreads = level_spreads(level, baseline.history, defs)
    pool = [s for i, s in enumerate(baseline.sessions) if i not in level.set_aside]
    noise = replace(baseline, sessions=pool if spreads else kept)
    return replace(baseline, sessions=kept), notes, spreads, noise


def _json(points: list[FrontierPoint]) -> list[dict[str, Any]]:
    return [p.model_dump(mode="json") for p in points]


def _with_noise(c: MetricComparison, baseline: Side) -> MetricComparison:
    """The comparison with its baseline's noise split within and between launches."""
    if c.metric == "error_rate":
        return c
    split = noise_split(baseline.history, c.metric)
    if split is None:
        return c
    between = split.between if split.within is not None else None  # no repeats: not separable
    return c.model_copy(update={"within_launch": split.within, "between_launch": between})


def fails(outcome: TestOutcome, policy: Policy) -> bool:
    """Whether the test fails: errors, invalid runs, broken SLOs, regressions.

    Strict mode also fails inconclusive and underpowered verdicts, baselines that cannot
    be compared (other hardware, model, spec or prompts) and workload changes (output
    lengths): a comparison must not vanish silently. In update mode
    regressions are recorded, not failed; SLOs, invalid runs and errors still fail.
    """
    if outcome.error or not outcome.client_valid or outcome.slo_failed:
        return True
    if policy.update:
        return False
    if outcome.regressed:
        return True
    return policy.strict and (bool(outcome.inconclusive) or bool(outcome.underpowered)
                              or outcome.baseline_status == "incomparable"
                              or bool(outcome.workload_changes))

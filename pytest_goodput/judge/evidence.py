"""Evidence for the judge from what the product holds: a measurement, a baseline file, run results."""

from __future__ import annotations

from typing import Optional

from pytest_goodput.measure.degradation import from_summary as degradation_from_summary
from pytest_goodput.measure.degradation import session_degradation
from pytest_goodput.measure.frontier import pareto_frontier, point_from_result
from pytest_goodput.measure.headline import key_metrics, measurement_metrics
from pytest_goodput.measure.saturation import point_saturation, saturation_record
from pytest_goodput.schema.runs.baseline import BaselineFile
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.evidence import Evidence
from pytest_goodput.schema.runs.measurement import Measurement
from pytest_goodput.schema.runs.results import RunResult, Samples
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def samples_of(runs: list[RunResult]) -> list[Samples]:
    """The per-request samples of each run, as baselines keep them.

    A sketched run keeps a uniform sample of its requests: its window is scaled by the
    sample's share, so a rate from the sample estimates the run's rate.
    """
    return [Samples.from_records(r.requests, r.samples_window_s(), r.prompt_set) for r in runs]


def _cpu(env: Optional[Fingerprint]) -> Optional[str]:
    return env.provenance.get("client_cpu") if env is not None else None


def from_measurement(m: Measurement, env: Optional[Fingerprint] = None,
                     at: Optional[str] = None) -> Evidence:
    """A fresh measurement: one session of runs, its frontier or capacity, its headline numbers.

    ``at``: when it was measured (ISO 8601), so the judge can tell whether it shares a
    sitting with the baseline's sessions.
    """
    frontier = m.frontier or {}
    return Evidence(
        recorded_at=[at], client_cpus=[_cpu(env)],
        spec=m.spec, spec_hash=m.spec.identity_hash(), history=[samples_of(m.runs)], env=env,
        summary=measurement_metrics(m), results=list(m.runs),
        frontier=frontier.get("current") if m.frontier is not None else None,
        points=frontier.get("points") if m.frontier is not None else None,
        capacity=m.capacity,
        capacities=[m.capacity] if m.capacity is not None else [],
        saturation_steps=[_step(frontier.get("saturation"))],
        saturation=frontier.get("saturation"),
        degradation=[_degradation(m.runs)],
    )


def _degradation(runs: list[RunResult]) -> dict[str, tuple[float, Optional[float]]]:
    return session_degradation([r.slices for r in runs])


def _step(saturation: Optional[dict]) -> Optional[float]:
    return None if saturation is None else float(saturation["step"])


def from_measurements(ms: list[Measurement], env: Optional[Fingerprint] = None,
                      at: Optional[str] = None) -> Evidence:
    """The PR measured over several engine launches, one session each (oldest first): the
    judge counts them as that many draws of the launch level (``judge/sequential/head_launches.py``)."""
    last = from_measurement(ms[-1], env, at)
    last.history = [samples_of(m.runs) for m in ms]
    last.saturation_steps = [_step((m.frontier or {}).get("saturation")) for m in ms]
    last.results = [r for m in ms for r in m.runs]
    last.degradation = [_degradation(m.runs) for m in ms]
    return last


def from_results(runs: list[RunResult], env: Optional[Fingerprint] = None) -> Evidence:
    """Run results read back from JSON (``run --json``, ``--goodput-json``): one session.

    Its time is the newest run's ``measured_at``: a run file is judged in or outside its
    baseline's sitting as the gate judges the same run (files from before the field: unknown,
    judged as a run in its baseline's sitting)."""
    spec = runs[0].spec
    return Evidence(spec=spec, spec_hash=spec.identity_hash(), history=[samples_of(runs)],
                    env=env, summary=key_metrics(runs[-1]), results=list(runs),
                    recorded_at=[runs[-1].measured_at], client_cpus=[_cpu(env)],
                    degradation=[_degradation(runs)])


def from_baseline(doc: BaselineFile, spec: Optional[ScenarioSpec] = None) -> Evidence:
    """A stored baseline: every recorded session, the newest one's environment and shapes.

    ``spec``: the test's current spec, when known; the file's own spec is read otherwise
    (comparability is decided by the stored hash either way).
    """
    latest = doc.latest if doc.runs else None
    return Evidence(
        recorded_at=[run.recorded_at for run in doc.runs],
        client_cpus=[_cpu(run.environment) for run in doc.runs],
        spec=spec if spec is not None else ScenarioSpec.model_validate(doc.spec),
        spec_hash=doc.spec_hash,
        history=[list(run.samples) for run in doc.runs],
        env=latest.environment if latest else None,
        summary=dict(latest.summary) if latest else {},
        frontier=latest.frontier if latest else None,
        capacity=latest.capacity if latest else None,
        capacities=[run.capacity for run in doc.runs if run.capacity is not None],
        saturation_steps=[run.summary.get("sweep.saturation_step") for run in doc.runs],
        degradation=[degradation_from_summary(run.summary) for run in doc.runs],
    )


def sweep_spec_of(runs: list[RunResult], like: Optional[ScenarioSpec] = None) -> ScenarioSpec:
    """The sweep spec whose points ``runs`` are, in their order (``run --json`` of a sweep).

    A point's spec is the sweep's with its load filled in, so the sweep is each point's spec
    with the loads as ``sweep``; the fields a point overwrote (``concurrency``, ``rate``) are
    taken from ``like`` (the other side's sweep spec) when given, else left unset. Whether
    the two sides are the same sweep is then the judge's spec-hash check, as in the gate.
    """
    first = runs[0].spec
    by_rate = first.scenario != "concurrency"
    loads = tuple(r.spec.rate if by_rate else r.spec.concurrency for r in runs)
    if any(v is None for v in loads):
        raise ValueError("these runs are not the points of one sweep (a run has no load)")
    return first.model_copy(update={
        "scenario": "sweep", "sweep": loads, "sweep_over": "rate" if by_rate else "concurrency",
        "concurrency": like.concurrency if like is not None else None,
        "rate": like.rate if like is not None else None,
    })


def from_sweep_runs(runs: list[RunResult], env: Optional[Fingerprint] = None,
                    like: Optional[ScenarioSpec] = None) -> Evidence:
    """The points of one sweep, read back as run results: one session of a sweep test.

    A sweep that stopped past saturation measured a prefix of ``like``'s loads and its last
    point is past saturation: it is then ``like``'s sweep, with the rest skipped.
    """
    spec = sweep_spec_of(runs, like)
    points = [point_from_result(r, spec.frontier_percentile, spec.gpus) for r in runs]
    readings = [point_saturation(spec, runs, i) for i in range(len(runs))]
    assert spec.sweep is not None
    full = like.sweep if like is not None and like.sweep is not None else None
    stopped = (full is not None and len(full) > len(spec.sweep) and readings[-1].past
               and tuple(float(v) for v in full[:len(spec.sweep)]) == tuple(float(v) for v in spec.sweep))
    if stopped:
        spec = spec.model_copy(update={"sweep": full})
    saturation = saturation_record(spec, readings, stopped)
    return Evidence(
        saturation=saturation, saturation_steps=[float(saturation["step"])],
        spec=spec, spec_hash=spec.identity_hash(), history=[samples_of(runs)], env=env,
        summary=key_metrics(runs[-1]), results=list(runs),
        frontier=[p.model_dump(mode="json") for p in pareto_frontier(points)],
        points=[p.model_dump(mode="json") for p in points],
    )

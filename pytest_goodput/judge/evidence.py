"""The judge's input from what the product holds: fresh sessions, a baseline, run results."""

from __future__ import annotations

from typing import Optional

from pytest_goodput.measure.degradation import from_summary as degradation_from_summary
from pytest_goodput.measure.degradation import session_degradation
from pytest_goodput.measure.frontier import pareto_frontier, point_from_result
from pytest_goodput.measure.headline import key_metrics, session_metrics
from pytest_goodput.measure.saturation import point_saturation, saturation_record
from pytest_goodput.schema.runs.baseline import BaselineFile
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.results import RunResult, Samples
from pytest_goodput.schema.runs.session import Session, Sweep
from pytest_goodput.schema.runs.side import Side
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def samples_of(runs: list[RunResult]) -> list[Samples]:
    """The per-request samples of each run, as baselines keep them.

    A sketched run keeps a uniform sample of its requests: its window is scaled by the
    sample's share, so a rate from the sample estimates the run's rate.
    """
    return [Samples.from_records(r.requests, r.samples_window_s(), r.prompt_set) for r in runs]


def judged(s: Session, env: Optional[Fingerprint] = None, at: Optional[str] = None) -> Session:
    """A fresh session as the judge reads it: its samples, headline numbers and degradation
    derived from its runs, and when and where it was measured."""
    summary_only = s.summary_only  # no requests to sample
    return s.model_copy(update={
        "recorded_at": at, "environment": env, "summary": session_metrics(s),
        "samples": [] if summary_only else samples_of(s.results), "degradation": _degradation(s.results),
    })


def _spec(s: Session) -> ScenarioSpec:
    if s.spec is None:
        raise ValueError("a fresh session carries the spec it ran")
    return s.spec


def from_session(s: Session, env: Optional[Fingerprint] = None, at: Optional[str] = None,
                 slo_results: Optional[list[RunResult]] = None) -> Side:
    """A fresh session: its runs, its frontier or capacity, its headline numbers.

    ``at``: when it was measured (ISO 8601), so the judge can tell whether it shares a
    sitting with the baseline's sessions. ``slo_results``: the runs its SLOs and client
    validity are judged on, when more than its own (every launch the gate measured).
    """
    spec = _spec(s)
    return Side(spec, spec.identity_hash(), [judged(s, env, at)], slo_results)


def _degradation(runs: list[RunResult]) -> dict[str, tuple[float, Optional[float]]]:
    return session_degradation([r.slices for r in runs])


def from_sessions(sessions: list[Session], env: Optional[Fingerprint] = None,
                  at: Optional[str] = None) -> Side:
    """The PR measured over several engine launches, one session each (oldest first): the
    judge counts them as that many draws of the launch level (``judge/sequential/head_launches.py``).
    Only the newest session carries its time (``at``)."""
    spec = _spec(sessions[-1])
    return Side(spec, spec.identity_hash(),
                [*(judged(s, env) for s in sessions[:-1]), judged(sessions[-1], env, at)])


def from_results(runs: list[RunResult], env: Optional[Fingerprint] = None) -> Side:
    """Run results read back from JSON (``run --json``, ``--goodput-json``): one session.

    Its time is the newest run's ``measured_at``: a run file is judged in or outside its
    baseline's sitting as the gate judges the same run (files from before the field: unknown,
    judged as a run in its baseline's sitting)."""
    spec = runs[0].spec
    return Side(spec, spec.identity_hash(), [Session(
        recorded_at=runs[-1].measured_at, environment=env, summary=key_metrics(runs[-1]),
        samples=samples_of(runs), degradation=_degradation(runs), results=list(runs))])


def stored_session(session: Session) -> Session:
    """A stored session with what is derived from its summary filled in (its degradation)."""
    return session.model_copy(update={"degradation": degradation_from_summary(session.summary)})


def from_baseline(doc: BaselineFile, spec: Optional[ScenarioSpec] = None) -> Side:
    """A stored baseline: every recorded session.

    ``spec``: the test's current spec, when known; the file's own spec is read otherwise
    (comparability is decided by the stored hash either way).
    """
    return Side(spec if spec is not None else ScenarioSpec.model_validate(doc.spec), doc.spec_hash,
                [stored_session(s) for s in doc.sessions])


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
                    like: Optional[ScenarioSpec] = None) -> Side:
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
    sweep = Sweep(points=points, frontier=pareto_frontier(points),
                  saturation=saturation_record(spec, readings, stopped))
    return Side(spec, spec.identity_hash(), [Session(
        environment=env, summary=key_metrics(runs[-1]), samples=samples_of(runs), sweep=sweep,
        results=list(runs))])

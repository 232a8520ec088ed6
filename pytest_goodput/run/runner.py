"""Run a scenario spec against an engine: repeats, sweeps and capacity searches.

Orchestration only: the load generator measures, the pure modules judge. Progress is
reported across the whole measurement (every repeat, sweep point and capacity probe), so
it only moves forward and its total is what is left of the measurement, not of one run.
"""

from __future__ import annotations

from typing import Callable, Optional

from pytest_goodput.engines.engine import Engine
from pytest_goodput.engines.histograms import run_histograms
from pytest_goodput.engines.prometheus import families, fetch, flatten, server_metrics
from pytest_goodput.load.client.event_loop import RunInterrupted
from pytest_goodput.load.pools import RunStopped
from pytest_goodput.load.sending.loops import ProgressFn
from pytest_goodput.load.scenario import run_scenario
from pytest_goodput.measure.frontier import pareto_frontier, point_from_result
from pytest_goodput.measure.saturation import point_saturation, saturation_record
from pytest_goodput.run.capacity import search
from pytest_goodput.run.remeasure import paced_by_client, until_valid
from pytest_goodput.run.engine_view import GaugeSampler, GaugeScraper
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Session, Sweep
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: ``stage("point 2/4: concurrency 16")``: which run of a measurement is under way.
StageFn = Callable[[str], None]


def run_once(
    spec: ScenarioSpec, engine: Engine, progress: Optional[ProgressFn] = None
) -> RunResult:
    """One run of a single-load spec; the engine's ``/metrics`` are read before, during and after it."""
    metrics_url = engine.base_url.removesuffix("/v1") + "/metrics"
    before_families = families(fetch(metrics_url))  # parsed once: flat numbers and histograms
    before = flatten(before_families) if before_families is not None else None
    scraper = GaugeScraper(metrics_url) if before is not None else None
    sampler = GaugeSampler(scraper).start() if scraper is not None else None
    try:
        result = run_scenario(
            spec,
            engine.base_url,
            engine.resolve_model(),
            api_key_env=engine.api_key_env,
            progress=progress,
        )
    finally:
        during = sampler.stop() if sampler is not None else {}
        if scraper is not None:
            scraper.close()
    after_families = families(fetch(metrics_url)) if before is not None else None
    server = server_metrics(before, flatten(after_families) if after_families is not None else None)
    if server:
        server.update(during)
    clock = run_histograms(before_families, after_families)  # the engine's clock over the run
    update = {"server_metrics": server, "engine_histograms": clock}
    return result.model_copy(update={k: v for k, v in update.items() if v})


class Tracker:
    """Progress of a measurement's runs as one count that only moves forward.

    ``runs``: how many runs the measurement will make (None: not known yet, e.g. a capacity
    search before it brackets the knee); the total is then unknown and no ETA is claimed.
    """

    def __init__(self, progress: Optional[ProgressFn], runs: Optional[int],
                 stage: Optional[StageFn] = None) -> None:
        self._progress = progress
        self._stage = stage
        self.runs = runs
        self._base = 0  # requests finished by completed runs
        self._started = 0
        self._per_run = 0  # the latest run's own total (0: not known)
        self.finished: list[RunResult] = []  # every run made so far, in order

    def total(self, current_total: int) -> int:
        """Every planned run's requests: the finished ones' counts plus this and later runs'."""
        if self.runs is None or current_total <= 0:
            return 0
        return self._base + current_total * (self.runs - self._started + 1)

    def run(self, name: str, fn: Callable[[Optional[ProgressFn]], RunResult]) -> RunResult:
        """Run ``fn(progress)`` as the next run of the measurement, named ``name``."""
        self._started += 1
        if self._stage is not None:
            label = f"{self._started}/{self.runs}" if self.runs else f"{self._started}"
            self._stage(f"{name} {label}")
        last = [0]

        def part(done: int, total: int) -> None:
            last[0] = done
            self._per_run = total or self._per_run
            if self._progress is not None:
                self._progress(self._base + done, self.total(total or self._per_run))

        try:
            result = fn(part if self._progress is not None or self._stage is not None else None)
        except (RunInterrupted, RunStopped) as exc:  # the runs before it are evidence too
            raise exc.again([*self.finished, exc.partial]) from None
        finally:
            self._base += last[0]
        self.finished.append(result)
        return result


def valid_once(name: str, notes: list[str], run: Callable[[], RunResult]) -> RunResult:
    """``run()`` under the one re-measure rule (``remeasure.py``): once more if the client set
    its pace (a hiccup must not stop a capacity search or leave a sweep point unjudgeable);
    ``notes`` says so. A second invalid run is kept: its test is then invalid, with the reasons."""
    def again(reasons: list[str]) -> None:
        notes.append(f"{name} re-measured once: the client set the pace of the first run ({'; '.join(reasons)})")
    return until_valid(run, lambda r: paced_by_client([r]), again)


def point_spec(spec: ScenarioSpec, value: float) -> ScenarioSpec:
    """The single-load spec of one sweep point."""
    if spec.sweep_over == "rate":
        return spec.model_copy(update={"scenario": "server", "rate": float(value), "sweep": None})
    return spec.model_copy(
        update={"scenario": "concurrency", "concurrency": int(value), "sweep": None}
    )


def measure(
    spec: ScenarioSpec, engine: Engine, progress: Optional[ProgressFn] = None,
    stage: Optional[StageFn] = None,
) -> Session:
    """Run ``spec`` as its scenario asks and return every run it made, as one fresh session.

    ``progress(done, total)`` counts requests over the whole measurement (total 0: unknown);
    ``stage(text)`` names each run as it starts (``point 2/4``, ``probe 3``, ``repeat 1/2``).
    Ctrl-C raises ``RunInterrupted``, a worker that crashed or hung ``RunStopped``, with a
    ``Session`` of the runs made so far, the last one partial (marked ``interrupted``).
    ``spec`` is measured as given: a trace replay's digest is filled in where the spec is
    built (``load/trace.identified_spec``), never here.
    """
    try:
        return _measure(spec, engine, progress, stage)
    except (RunInterrupted, RunStopped) as exc:  # the runs made so far, the last one partial
        runs = exc.partial if isinstance(exc.partial, list) else []
        raise exc.again(Session(spec=spec, results=runs)) from None


def _measure(spec: ScenarioSpec, engine: Engine, progress: Optional[ProgressFn],
             stage: Optional[StageFn]) -> Session:
    if spec.scenario == "sweep":
        return sweep(spec, engine, progress, stage)
    if spec.scenario == "capacity":
        tracker = Tracker(progress, None, stage)

        notes: list[str] = []

        def probe(s: ScenarioSpec, e: Engine, _p: Optional[ProgressFn]) -> RunResult:
            return valid_once(f"probe at {s.rate:g} req/s", notes, lambda: tracker.run(
                f"probe at {s.rate:g} req/s,", lambda p: run_once(s, e, p)))

        m = search(spec, engine, probe, None, plan=lambda n: setattr(tracker, "runs", n))
        m.notes += notes
        return m
    tracker = Tracker(progress, spec.repeats, stage if spec.repeats > 1 else None)
    # Repeats share the seed: same prompts and schedule, so their spread is run-to-run noise.
    runs = [tracker.run("repeat", lambda p: run_once(spec, engine, p)) for _ in range(spec.repeats)]
    return Session(spec=spec, results=runs)


def sweep(spec: ScenarioSpec, engine: Engine, progress: Optional[ProgressFn] = None,
          stage: Optional[StageFn] = None) -> Session:
    """Each point in turn; by default the sweep stops after the first point past saturation
    (``measure/saturation.py``): the loads above it are skipped and named in the result."""
    assert spec.sweep is not None
    tracker = Tracker(progress, len(spec.sweep), stage)
    kind = "rate" if spec.sweep_over == "rate" else "concurrency"
    notes: list[str] = []
    runs: list[RunResult] = []
    readings = []
    for v in spec.sweep:
        runs.append(valid_once(f"{kind} {v:g}", notes, lambda v=v: tracker.run(
            f"{kind} {v:g}, point", lambda p: run_once(point_spec(spec, v), engine, p))))
        readings.append(point_saturation(spec, runs, len(runs) - 1))
        if readings[-1].past and spec.saturation_stop:
            break
    stopped = len(runs) < len(spec.sweep)
    saturation = saturation_record(spec, readings, stopped)
    if stopped:
        saved = sum(r.window.seconds for r in runs) / len(runs) * len(saturation.skipped)
        saturation.saved_s = saved
        notes.append(f"sweep stopped: past saturation at {kind} {saturation.began_at:g} "
                     f"({saturation.reason}); skipped {kind} "
                     f"{', '.join(f'{v:g}' for v in saturation.skipped)}, "
                     f"{len(saturation.skipped)} point(s), ~{saved:.0f} s of load")
    points = [point_from_result(r, spec.frontier_percentile, spec.gpus) for r in runs]
    front = pareto_frontier(points)
    return Session(spec=spec, results=runs, notes=notes,
                   sweep=Sweep(points=points, frontier=front, saturation=saturation))

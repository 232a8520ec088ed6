"""The gate's state for one pytest session (kept in ``config.stash``).

Owns the session's engine, judges each test's measurement against its baseline, records
baselines in update mode, and writes the session's reports at the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from pytest_goodput.engines import engine as eng
from pytest_goodput.engines.engine import Engine
from pytest_goodput.judge.judge import build_outcome, fails, tolerance_for
from pytest_goodput.plugin.settings import Settings
from pytest_goodput.schema.measurement import Measurement, measurement_metrics
from pytest_goodput.schema.outcome import TestOutcome
from pytest_goodput.schema.results import Samples
from pytest_goodput.schema.spec import ScenarioSpec
from pytest_goodput.store import baseline as store
from pytest_goodput.store.fingerprint import collect


class GoodputSession:
    def __init__(self, settings: Settings, rootdir: Path) -> None:
        self.settings = settings
        self.rootdir = rootdir
        self._engine: Optional[Engine] = None
        self._extra_engines: list[Engine] = []
        self.outcomes: list[TestOutcome] = []
        self.measurements: dict[str, Measurement] = {}
        self.errors: list[str] = []
        self.written: list[Path] = []
        self.skipped_writes: list[str] = []
        self.collected_nodeids: set[str] = set()
        self.collected_modules: set[str] = set()

    # --- engines -------------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The session's engine, started on first use (so ``--co`` starts nothing)."""
        if self._engine is None:
            from pytest_goodput.engines.engine import select

            s = self.settings
            self._engine = select(
                url=s.url, serve=s.serve, model=s.model, api_key_env=s.api_key_env
            )
        return self._engine

    def start_engine(self, *, serve: Optional[str] = None, url: Optional[str] = None,
                     model: Optional[str] = None, **sim_knobs: object) -> Engine:
        """A further engine for one test (e.g. a deliberately slowed simulator)."""

        s = self.settings
        if url:
            e = eng.attach(url, model or s.model, s.api_key_env)
        elif serve:
            e = eng.launch(serve, model or s.model, s.api_key_env)
        else:
            e = eng.simulator(model, **sim_knobs)
        self._extra_engines.append(e)
        return e

    def close(self) -> None:
        for e in self._extra_engines:
            e.close()
        self._extra_engines.clear()
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    # --- judging -------------------------------------------------------------------------
    @property
    def baseline_dir(self) -> Path:
        p = Path(self.settings.baseline_dir)
        return p if p.is_absolute() else self.rootdir / p

    def judge(
        self,
        nodeid: str,
        location: Optional[tuple[str, int]],
        spec: ScenarioSpec,
        m: Measurement,
        engine: Engine,
    ) -> TestOutcome:
        """Gate one test's measurement; in update mode also record it as the new baseline."""
        s = self.settings
        env = collect(
            model=engine.model or "?",
            spec_hash=spec.identity_hash(),
            hardware=s.hardware,
            engine=engine.provenance,
            cwd=str(self.rootdir),
        )
        path = store.path_for(self.baseline_dir, nodeid)
        use_store = s.compare or s.update
        base = None
        if use_store:
            try:
                base = store.load(path, nodeid)
            except store.BaselineError as exc:
                outcome = TestOutcome(
                    nodeid=nodeid, location=location, scenario=spec.scenario, error=str(exc)
                )
                self.outcomes.append(outcome)
                return outcome
        view, extra = self._shape_comparisons(spec, m, base)
        outcome = build_outcome(
            nodeid=nodeid,
            location=location,
            spec=spec,
            results=m.runs,
            current_env=env,
            baseline=base,
            compare_enabled=use_store,
            strict=s.strict,
            default_tolerance=s.tolerance,
            extra_comparisons=extra,
        )
        if view is not None:
            outcome = outcome.model_copy(update={"frontier": view})
        if m.kind != "runs":
            outcome = outcome.model_copy(update={"key_metrics": measurement_metrics(m)})
        if s.update:
            outcome = self._record(path, nodeid, spec, m, env, base, outcome)
        self.outcomes.append(outcome)
        self.measurements[nodeid] = m
        return outcome

    def _tolerance(self, spec: ScenarioSpec, metric: str) -> float:
        return tolerance_for(spec, metric, self.settings.tolerance, 0.05)

    def _shape_comparisons(
        self, spec: ScenarioSpec, m: Measurement, base: Optional[store.BaselineFile]
    ) -> tuple[Optional[dict], list]:
        """Sweeps are judged as frontiers and capacity searches as capacities, not per run."""
        latest = base.latest if base is not None and base.runs else None
        extra: list = []
        view = dict(m.frontier) if m.frontier is not None else None
        if view is not None and latest is not None and latest.frontier is not None and spec.sweep:
            from pytest_goodput.judge.frontier import compare_frontiers
            from pytest_goodput.judge.frontier_noise import sweep_noise
            from pytest_goodput.schema.frontier import FrontierPoint

            b = [FrontierPoint.model_validate(p) for p in latest.frontier]
            c = [FrontierPoint.model_validate(p) for p in view.get("current", [])]
            noise = sweep_noise(spec.sweep, spec.sweep_over, latest.samples, m.runs, spec.gpus)
            cmp = compare_frontiers(b, c, self._tolerance(spec, "frontier_throughput"), noise,
                                    x_tolerance=spec.interactivity_tolerance)
            view["baseline"] = latest.frontier
            view["comparison"] = cmp.model_dump(mode="json")
            extra.append(cmp.to_metric_comparison())
        if m.capacity is not None and latest is not None and latest.capacity is not None:
            from pytest_goodput.judge.capacity import capacity_comparison

            extra.append(capacity_comparison(
                latest.capacity, m.capacity, self._tolerance(spec, "capacity.requests_per_s")))
        return view, extra

    def _record(self, path: Path, nodeid: str, spec: ScenarioSpec, m: Measurement, env,
                base: Optional[store.BaselineFile], outcome: TestOutcome) -> TestOutcome:
        if not outcome.client_valid:
            self.skipped_writes.append(f"{nodeid}: client set the pace, baseline not recorded")
            return outcome
        if outcome.slo_failed:
            broken = ", ".join(o.name for o in outcome.slo_failed)
            self.skipped_writes.append(f"{nodeid}: SLO failed ({broken}), baseline not recorded")
            return outcome
        run = store.BaselineRun(
            recorded_at=store.now_iso(),
            environment=env,
            summary=measurement_metrics(m),
            samples=[Samples.from_records(r.requests, r.window.seconds) for r in m.runs],
            frontier=(m.frontier or {}).get("current"),
            capacity=m.capacity,
        )
        store.record(
            path,
            nodeid=nodeid,
            spec=spec.model_dump(mode="json"),
            spec_hash=spec.identity_hash(),
            run=run,
            existing=base,
            history=self.settings.history,
        )
        self.written.append(path)
        return outcome.model_copy(update={"baseline_status": "updated"})

    def fails(self, outcome: TestOutcome) -> bool:
        """In update mode regressions are recorded, not failed; SLOs and errors still fail."""
        if self.settings.update:
            return bool(outcome.error or outcome.slo_failed or not outcome.client_valid)
        return fails(outcome, self.settings.strict)

    # --- end of session ------------------------------------------------------------------
    def unused_baselines(self) -> list[Path]:
        """Baselines of collected test modules whose test no longer exists."""
        unused = []
        for nodeid, path in store.find_all(self.baseline_dir).items():
            module = nodeid.partition("::")[0]
            if module in self.collected_modules and nodeid not in self.collected_nodeids:
                unused.append(path)
        return unused

    def write_json(self, path: Path) -> None:
        doc = {
            "schema_version": 1,
            "tests": [
                {
                    "outcome": o.model_dump(mode="json"),
                    "runs": [
                        r.model_dump(mode="json") for r in self.measurements[o.nodeid].runs
                    ]
                    if o.nodeid in self.measurements
                    else [],
                }
                for o in self.outcomes
            ],
        }
        store.write_atomic(path, json.dumps(doc, indent=1) + "\n")

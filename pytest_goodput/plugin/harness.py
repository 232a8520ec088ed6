"""The object behind the ``goodput`` fixture: run the test's scenario, once, gated.

``run()`` makes the gated measurement (the marker's spec, with keyword overrides);
``measure()`` makes extra, ungated ones. A marked test that never calls ``run()`` is run
by the plugin after its body.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional, TextIO

import pytest

from pytest_goodput.engines.engine import Engine
from pytest_goodput.load.client.event_loop import RunInterrupted
from pytest_goodput.load.pools import RunStopped
from pytest_goodput.load.selfcheck.capture import CaptureError
from pytest_goodput.plugin.session import GoodputSession
from pytest_goodput.plugin.spec import current, spec_with_overrides
from pytest_goodput.report.progress import Progress, remeasure_line
from pytest_goodput.report.text.run_result import receive_note
from pytest_goodput.run.ab import ab_metrics, check_exclusive, measure_ab
from pytest_goodput.run.gating import ABMeasured
from pytest_goodput.run.interrupted import interrupted_outcome
from pytest_goodput.run.launches import kept_sessions, valid_session
from pytest_goodput.run.remeasure import paced_by_client, until_valid
from pytest_goodput.run.runner import measure
from pytest_goodput.schema.ab_options import ABOptions
from pytest_goodput.schema.environment import REMEASURED
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.redaction import redact
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.scenario.spec import ScenarioSpec, SpecError
from pytest_goodput.interop.readers.imported import is_judging, with_judging
from pytest_goodput.store.foreign import load_foreign


class GoodputHarness:
    def __init__(
        self,
        session: GoodputSession,
        nodeid: str,
        marker_args: dict[str, Any],
        engine_getter: Any,
        progress_stream: Optional[TextIO] = None,
        ab_options: Optional[ABOptions] = None,
        spec: Optional[ScenarioSpec] = None,
    ) -> None:
        self._session = session
        self._nodeid = nodeid
        self._marker_args = marker_args
        self._collected = spec  # the spec built and checked at collection (plugin/spec.py)
        self._engine_getter = engine_getter
        self._progress_stream = progress_stream
        self.spec: Optional[ScenarioSpec] = None
        self.measurement: Optional[Session] = None
        self.engine: Optional[Engine] = None
        self.remeasured_because: list[str] = []
        self.earlier_sessions: list[Session] = []
        self.head_planned = 1  # launches the PR side was planned over (judge/sequential/head_launches.py)
        self.notes: list[str] = []
        self._ab_options = ab_options or ABOptions()
        self.ab: Optional[ABMeasured] = None  # A/B mode: the rounds on base and head
        self.base_engine: Optional[Engine] = None
        #: An earlier session of a session-major recording (plugin/recording.py): measured
        #: and kept for the last session, not judged.
        self.pre_pass = False

    def _spec(self, overrides: dict[str, Any]) -> ScenarioSpec:
        """The spec built at collection, as is; a new one only for keyword overrides (or a test
        with no marker, or a trace file rewritten since: ``plugin/spec.py``)."""
        settings = self._session.settings
        if self._collected is not None and not overrides:
            return current(self._collected, self._marker_args, settings, self._nodeid)
        return spec_with_overrides(self._marker_args, overrides, settings, self._nodeid)

    def _measure(self, spec: ScenarioSpec, engine: Optional[Engine]) -> Session:
        eng = engine or self._engine_getter()

        # The runner counts over every repeat, sweep point and probe: progress only moves forward.
        bar = Progress(total=None, label=self._nodeid.rpartition("::")[2], stream=self._progress_stream)
        t0 = time.monotonic()
        try:
            m = measure(spec, eng, progress=bar.update, stage=bar.stage)
        except CaptureError as exc:  # capture=on where this engine cannot be captured
            refused = str(exc)
        except (RunInterrupted, RunStopped) as exc:  # the session reports the partial runs
            outcome = interrupted_outcome(self._nodeid, exc.partial, self.notes)
            self._session.outcomes.append(outcome)
            self._session.measurements[self._nodeid] = exc.partial
            if isinstance(exc, RunInterrupted):
                raise KeyboardInterrupt() from None  # pytest stops as on any Ctrl-C
            refused = outcome.error or str(exc)
        else:
            self.engine = eng
            return m
        finally:
            bar.close()
            self._session.ledger.charge(self._nodeid, [eng], time.monotonic() - t0)
        pytest.fail(redact(f"pytest-goodput: {refused}"), pytrace=False)  # no exception chain

    def run(self, engine: Optional[Engine] = None, base: Optional[Engine] = None,
            **overrides: Any) -> RunResult:
        """Measure the gated scenario (marker arguments, overridden by keywords); return its
        headline run. Called once per test (a second call is an error); a marked test that
        does not call it is measured after its body.

        What is measured: the scenario's ``repeats`` in one session when gating; one session
        per ``--goodput-sessions`` when recording a baseline (the engine relaunched in between
        when this process started it: the spread between sessions is the run-to-run noise
        later verdicts rest on); up to ``--goodput-head-launches`` launches when gating with
        more than one. What is returned: the newest session's last repeat; for a sweep, its
        highest-load point measured (the first past saturation when it stopped there); for a
        capacity search, its last probe. ``goodput.measurement`` holds every run of the newest
        session. With a base engine (``base=``, the marker's ``base_*`` or
        ``--goodput-base-*``) the test runs in A/B mode instead: rounds on base and head
        (``engine`` or the session's engine), no stored baseline; the head's last run is
        returned.
        """
        if self.measurement is not None or self.ab is not None:
            raise RuntimeError(
                "goodput.run() was already called in this test; one gated scenario per test "
                "(use goodput.measure() for extra, ungated runs)"
            )
        try:
            return self._run(engine, base, overrides)
        except SpecError as exc:  # bad arguments: the message names them
            message = str(exc)
        except ConnectionError as exc:  # an engine that does not answer
            message = f"pytest-goodput: {exc}"
        pytest.fail(redact(message), pytrace=False)  # outside the handler: no exception chain

    def _run(self, engine: Optional[Engine], base: Optional[Engine], overrides: dict[str, Any]) -> RunResult:
        self.spec = self._spec(overrides)
        options = self._session.ab_options(self._ab_options)
        if base is not None or options.has_base:
            return self._run_ab(engine, base, options)
        planned = self._session.head_launches(self.spec)
        if planned > 1:
            measured = self._head_launches(engine, planned)
        elif self._session.session_major:
            measured = self._session_major(engine)
        else:
            sessions = self._session.sessions_to_record()
            measured = []
            for i in range(sessions):
                if i:
                    self._relaunch(engine, i, sessions)
                measured.append(self._recorded_session(engine, i + 1))
            measured = self._kept(measured)
        self.earlier_sessions, self.measurement = measured[:-1], measured[-1]
        return self.measurement.result

    def _session_major(self, engine: Optional[Engine]) -> list[Session]:
        """One session of a session-major recording: this launch's measurement, kept for the
        last session (an earlier one), or judged with the kept ones (the last)."""
        k = self._session.recording_pass or self._session.sessions_to_record()
        m = self._recorded_session(engine, k)
        kept = self._session.pre_recorded.setdefault(self._nodeid, [])
        if self._session.recording_pass is not None:
            kept.append(m)
            self.pre_pass = True
            return [m]
        sessions = self._session.sessions_to_record()
        measured = [*self._session.pre_recorded.pop(self._nodeid), m]
        if len(measured) < sessions:
            self.notes.append(f"{len(measured)} of {sessions} sessions measured: the test failed "
                              "in an earlier session (it is recorded over those it passed)")
        eng = engine or self._engine_getter()
        if sessions > 1 and not eng.can_relaunch:
            self._relaunch(engine, 1, sessions)  # says why the sessions share one process
        return self._kept(measured)

    def _recorded_session(self, engine: Optional[Engine], k: int) -> Session:
        """Session ``k`` of a recording: a launch its client still paced after the re-measure
        is replaced by a fresh one while the recording has extra launches
        (``run/launches.py``); outside a recording, the measurement."""
        if not self._session.settings.update:
            return self._valid_measurement(engine)
        eng = engine or self._engine_getter()
        stream = self._progress_stream
        return valid_session(lambda: self._valid_measurement(engine), eng.relaunch if eng.can_relaunch else None,
                             self._session.launches, k, self._nodeid,
                             say=(lambda line: stream.write(line + "\n")) if stream is not None else None)

    def _kept(self, measured: list[Session]) -> list[Session]:
        """A recording's sessions to store (its paced ones left out: ``run/launches.py``)."""
        if not self._session.settings.update:
            return measured
        kept, note = kept_sessions(measured)
        if note:
            self.notes.append(note)
        return kept

    def _head_launches(self, engine: Optional[Engine], planned: int) -> list[Session]:
        """The PR measured launch by launch, judged after each, until the test is decided or
        ``planned`` launches are spent (``judge/sequential/head_launches.py``). An engine this process did
        not start cannot be relaunched: its sessions would share one launch, so it gets one
        (and is judged as the gate's single look)."""
        assert self.spec is not None
        eng = engine or self._engine_getter()
        measured = [self._valid_measurement(engine)]
        if not eng.can_relaunch:
            self.notes.append(f"measured over one launch, not up to {planned}: the engine "
                              f"({eng.kind}) was not started here, so it cannot be relaunched")
            return measured
        self.head_planned = planned
        while len(measured) < planned and not self._session.head_decided(
                self._nodeid, self.spec, measured, self.engine or eng):
            eng.relaunch()
            measured.append(self._valid_measurement(engine))
        return measured

    def _run_ab(self, engine: Optional[Engine], base: Optional[Engine], options: ABOptions) -> RunResult:
        assert self.spec is not None
        try:  # a sweep, a capacity search or repeats: refused before any engine starts
            ab_metrics(self.spec, self._session.settings.tolerance)
        except ValueError as exc:
            raise SpecError(f"{self._nodeid}: A/B mode: {exc}") from None
        head = engine or self._engine_getter()
        exclusive = self._session.settings.ab_exclusive
        if base is not None:
            self.base_engine = base
        else:
            self.base_engine, exclusive = self._session.base_engine(options, head)
        relaunch = bool(options.ab_relaunch)
        if exclusive or relaunch:
            try:
                check_exclusive(self.base_engine, head, "one engine at a time" if exclusive
                                else "ab_relaunch (relaunching each round)")
            except ValueError as exc:
                raise SpecError(f"{self._nodeid}: A/B mode: {exc}") from None
        stream, name = self._progress_stream, self._nodeid.rpartition("::")[2]
        say = (lambda line: stream.write(f"{name}: A/B {line}\n")) if stream is not None else None
        first = {id(e): e.launches for e in (self.base_engine, head)}
        t0 = time.monotonic()
        try:
            self.ab = measure_ab(self.spec, self.base_engine, head, min_rounds=options.ab_min_rounds,
                                 max_rounds=options.ab_max_rounds, tolerance=self._session.settings.tolerance,
                                 say=say, exclusive=exclusive, relaunch=relaunch,
                                 order_seed=options.ab_order_seed)
        finally:
            self._session.ledger.charge(self._nodeid, [self.base_engine, head], time.monotonic() - t0, first)
        self.engine = head
        note = receive_note([*self.ab.base_runs, *self.ab.head_runs])
        self.notes += [note] if note else []
        last = self.ab.head_runs[-1] if self.ab.head_runs else self.ab.last_head
        assert last is not None, "an A/B run makes at least one round"
        return last

    def _valid_measurement(self, engine: Optional[Engine]) -> Session:
        """A measurement under the one re-measure rule (``run/remeasure.py``): measured once
        more on this launch if the client set the pace; a second invalid one is kept."""
        assert self.spec is not None
        spec = self.spec
        first: list[str] = []

        def again(reasons: list[str]) -> None:
            first.extend(reasons)
            self.remeasured_because += reasons
            self.notes.append("re-measured once: the client set the pace of the first run ("
                              + "; ".join(reasons) + ")")
            if self._progress_stream is not None:
                self._progress_stream.write(remeasure_line(self._nodeid, reasons) + "\n")

        def measured() -> Session:
            m = self._measure(spec, engine)
            self.notes += m.notes  # sweep points and capacity probes re-measured on the way
            return m

        m = until_valid(measured, lambda m: paced_by_client(m.results) if m.kind == "runs" else [], again)
        if first:
            m.provenance[REMEASURED] = "; ".join(first)
        note = receive_note(m.results)
        if note and note not in self.notes:  # once per test, not per recorded session
            self.notes.append(note)
        return m

    def _relaunch(self, engine: Optional[Engine], i: int, sessions: int) -> None:
        eng = engine or self._engine_getter()
        if eng.can_relaunch:
            eng.relaunch()
        elif not self.notes or "one engine process" not in self.notes[-1]:
            self.notes.append(
                f"the {sessions} recorded sessions share one engine process ({eng.kind}: not "
                "started here, so not relaunched): launch-to-launch spread is not in the baseline")

    def judge_file(self, path: "str | os.PathLike[str]", format: Optional[str] = None,
                   **judging: Any) -> RunResult:
        """Gate a result file another tool wrote instead of measuring: ``vllm bench serve``
        JSON, AIPerf's ``profile_export.jsonl`` (or its artifact directory or aggregate JSON),
        a GuideLLM report (``format``: vllm-bench, aiperf or guidellm; default: told by
        content). It is judged and stored as a baseline like any run of this test, with the
        same report; a file with summaries only says so on every verdict. The load is the
        file's; SLOs and tolerances come from the marker and ``judging`` keywords (``slo=``,
        ``ttft_ms=``, ``tpot_ms=``, ``ttft_p99_ms=``, ``tolerance=``...)."""
        if self.measurement is not None or self.ab is not None:
            raise RuntimeError("goodput.run() or goodput.judge_file() was already called in this test")
        try:
            run = load_foreign(Path(path), format)
            message = f"pytest-goodput: {path}: not a vllm bench serve, AIPerf or GuideLLM result file"
            marker = {k: v for k, v in self._marker_args.items() if is_judging(k)}  # the load is the file's
            run = with_judging(run, {**marker, **judging}) if run is not None else None
        except ValueError as exc:
            run, message = None, f"pytest-goodput: {exc}"
        if run is None:
            pytest.fail(redact(message), pytrace=False)
        self.spec = run.result.spec
        self.measurement = Session(spec=run.result.spec, results=[run.result], source=run.source)
        # A file is one session: an earlier pass of a session-major recording would record
        # the same file again as if it were another launch.
        self.pre_pass = self._session.recording_pass is not None
        self.engine = Engine(kind="attach", base_url="imported", model=None,
                             provenance={"engine": f"imported from {run.source.tool}"})
        return run.result

    def finish_test(self, location: Optional[tuple[str, int]]) -> Optional[TestOutcome]:
        """The test's outcome once its body ran: measured now if the body did not run it, then
        judged by the session (A/B, or against the stored baseline); None for an earlier
        recording session, judged with the last."""
        if self.measurement is None and self.ab is None:
            self.run()  # a bad spec or an engine that does not answer fails the test, named
        if self.pre_pass:
            return None
        if self.ab is not None:
            assert self.base_engine is not None and self.engine is not None
            return self._session.judge_ab(self._nodeid, location, self.ab, self.base_engine, self.engine,
                                          notes=self.notes)
        assert self.spec is not None and self.measurement is not None and self.engine is not None
        return self._session.judge(self._nodeid, location, self.spec, self.measurement, self.engine,
                                   earlier=self.earlier_sessions, notes=self.notes, planned=self.head_planned)

    def measure(self, engine: Optional[Engine] = None, **overrides: Any) -> Session:
        """An extra, ungated measurement (not compared, not recorded)."""
        return self._measure(self._spec(overrides), engine)

    @property
    def result(self) -> Optional[RunResult]:
        if self.ab is not None:
            return self.ab.head_runs[-1] if self.ab.head_runs else self.ab.last_head
        return self.measurement.result if self.measurement else None

"""The gate's state for one pytest session (kept in ``config.stash``).

Owns the session's engine, judges each test's measurement against its baseline, records
baselines in update mode, and writes the session's reports at the end.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Callable, NoReturn, Optional

import pytest

from pytest_goodput.engines import engine as eng
from pytest_goodput.engines.engine import Engine, select
from pytest_goodput.engines.launch import EngineStartError
from pytest_goodput.judge.judge import Policy, fails
from pytest_goodput.load import ray_runtime
from pytest_goodput.plugin.ledger import Ledger
from pytest_goodput.plugin.settings import OPTIONS, Settings, in_ci
from pytest_goodput.report.text.power_plan import plan_lines
from pytest_goodput.run.affinity import ClientPlacement
from pytest_goodput.run.affinity import plan as plan_cpus
from pytest_goodput.run.gating import ABMeasured, HistoryPlace, TestGate
from pytest_goodput.run.launches import Launches
from pytest_goodput.schema.ab_options import ABOptions
from pytest_goodput.schema.outcomes.cost import EngineUse
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.redaction import redact
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.store import baseline as store
from pytest_goodput.store.history import default_dir as default_history_dir



class GoodputSession:
    def __init__(self, settings: Settings, rootdir: Path) -> None:
        self.settings = settings
        self.rootdir = rootdir
        self._engine: Optional[Engine] = None
        self._extra_engines: list[Engine] = []
        self._base_engines: dict[tuple[str, str], Engine] = {}
        self._exclusive: set[tuple[str, str]] = set()  # base engines run one at a time with the head
        self._cpu_plan: Optional[tuple[Optional[tuple[int, ...]], Optional[tuple[int, ...]]]] = None
        self._placement: Optional[ClientPlacement] = None
        self.outcomes: list[TestOutcome] = []
        self.measurements: dict[str, Session] = {}
        self.errors: list[str] = []
        self.written: list[Path] = []
        self.skipped_writes: list[str] = []
        self._gates: dict[str, TestGate] = {}  # a test's gate while its launches are judged
        self.kept_logs: list[str] = []  # engine logs kept after a failure, for the summary
        self.collected_nodeids: set[str] = set()
        self.collected_modules: set[str] = set()
        self.ledger = Ledger()  # engine launches and seconds of load, per test
        # Session-major recording (plugin/recording.py): the earlier session being run, if
        # any, and each test's measurements from the earlier sessions.
        self.session_major = False
        self.recording_pass: Optional[int] = None
        self.pre_recorded: dict[str, list[Session]] = {}
        self.launches = Launches()  # the recording's extra launches (run/launches.py)
        ray_runtime.configure(settings.ray)  # this session's Ray address (None: a local runtime)

    # --- engines -------------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The session's engine, started on first use (so ``--co`` starts nothing)."""
        if self._engine is None:
            s = self.settings
            refused = s.unnamed_engine()
            if refused is not None:  # CI, and no engine named: never the simulator unasked
                pytest.fail(refused, pytrace=False)
            engine_cpus = self._cpus()[0]
            self._engine = self.ledger.track(_started(lambda: select(
                url=s.url, serve=s.serve, model=s.model, api_key_env=s.api_key_env,
                ready_timeout_s=s.ready_timeout, cpus=engine_cpus,
            )))
            self._place_client()
        elif not self._engine.running:  # stopped by an A/B test that ran one engine at a time
            self._engine = _started(lambda: _restarted(self._engine))
        return self._engine

    def _cpus(self) -> tuple[Optional[tuple[int, ...]], Optional[tuple[int, ...]]]:
        """The engine's and the client's CPU sets (``--goodput-engine-cpus``/``-client-cpus``)."""
        if self._cpu_plan is None:
            s = self.settings
            self._cpu_plan = plan_cpus(s.engine_cpus, s.client_cpus, client_count=s.workers or 1)
        return self._cpu_plan

    def _place_client(self) -> None:
        client = self._cpus()[1]
        if client and self._placement is None:
            self._placement = ClientPlacement(client)

    def start_engine(self, *, serve: Optional[str] = None, url: Optional[str] = None,
                     model: Optional[str] = None, **sim_knobs: object) -> Engine:
        """A further engine for one test (e.g. a deliberately slowed simulator)."""

        s = self.settings
        if url:
            e = _started(lambda: eng.attach(url, model or s.model, s.api_key_env))
        elif serve:
            e = _started(lambda: eng.launch(serve, model or s.model, s.api_key_env,
                                            ready_timeout_s=s.ready_timeout, cpus=self._cpus()[0]))
        else:
            e = _started(lambda: eng.simulator(model, cpus=self._cpus()[0], **sim_knobs))
        self._place_client()
        self._extra_engines.append(self.ledger.track(e))
        return e

    def ab_options(self, marker: ABOptions) -> ABOptions:
        """The test's A/B options: the marker's base engine, else the session's; the marker's
        round limits, else the session's."""
        s = self.settings
        session = {"base_serve": s.base_serve, "base_url": s.base_url, "base_sim": s.base_sim}
        base = ({k: getattr(marker, k) for k in session} if marker.has_base else session)
        knobs = ("ab_min_rounds", "ab_max_rounds", "ab_relaunch")
        return ABOptions(**base, **{k: s.for_test(k, getattr(marker, k)) for k in knobs})

    def ab_options_of(self, marker: Optional[ABOptions]) -> ABOptions:
        """``ab_options`` of a marker that may name no A/B options at all."""
        return self.ab_options(marker or ABOptions())

    def next_recording_session(self) -> bool:
        """Between two sessions of a session-major recording: relaunch every engine this
        process started and still runs (the next session is a launch of its own). False when
        the session's engine cannot be relaunched (attached by URL)."""
        for e in self._extra_engines:
            if e.can_relaunch and e.running:
                e.relaunch()
        if self._engine is None or not self._engine.can_relaunch:
            return False
        if self._engine.running:
            self._engine.relaunch()
        return True

    def engine_use(self) -> EngineUse:
        """The session's engine launches, the seconds starting them and of load."""
        return self.ledger.engine_use(tests=len(self.outcomes))

    def base_engine(self, options: ABOptions, head: Engine) -> tuple[Engine, bool]:
        """The base engine these options name (started once per session and shared by tests)
        and whether it runs one engine at a time with ``head``: asked for
        (``--goodput-ab-exclusive``), or because it would not start while the head was up."""
        key = next((k, str(getattr(options, k))) for k in ("base_serve", "base_url", "base_sim")
                   if getattr(options, k) is not None)
        if key not in self._base_engines:
            s = self.settings
            if s.ab_exclusive and head.can_relaunch:
                head.close()
            if options.base_url:
                start = lambda: eng.attach(options.base_url or "", s.model, s.api_key_env)  # noqa: E731
            elif options.base_serve:
                start = lambda: eng.launch(options.base_serve or "", s.model, s.api_key_env,  # noqa: E731
                                           ready_timeout_s=s.ready_timeout, cpus=self._cpus()[0])
            else:
                knobs = options.sim_knobs()
                start = lambda: eng.simulator(s.model, cpus=self._cpus()[0],  # noqa: E731
                                              own_knobs_only=True, **knobs)
            failed: Optional[Exception] = None
            try:
                e = start()
            except (EngineStartError, ConnectionError, ValueError) as exc:
                failed = exc
            if failed is not None:  # failed outside the handler: no "during handling of" chain
                if not (isinstance(failed, EngineStartError) and head.can_relaunch and head.running):
                    _fail_start(failed)
                head.close()  # the two do not fit together: one at a time
                self._exclusive.add(key)
                e = _started(start)
            self._place_client()
            self._extra_engines.append(self.ledger.track(e))
            self._base_engines[key] = e
            if s.ab_exclusive:
                self._exclusive.add(key)
        return self._base_engines[key], key in self._exclusive

    def close(self) -> None:
        """Stop the engines, keeping their logs (``kept_logs``) when the session failed or an
        engine died, removing them otherwise."""
        keep = bool(self.errors) or any(self.fails(o) for o in self.outcomes)
        engines = self._extra_engines + ([self._engine] if self._engine is not None else [])
        for e in engines:
            e.close(keep_log=keep)
        self._extra_engines.clear()
        self._base_engines.clear()
        self._engine = None
        if self._placement is not None:
            self._placement.restore()
            self._placement = None
        self.kept_logs += [log for e in engines for log in e.kept_logs]
        ray_runtime.shutdown()  # only a runtime a run of this session started or joined

    # --- judging -------------------------------------------------------------------------
    @property
    def baseline_dir(self) -> Path:
        p = Path(self.settings.baseline_dir)
        return p if p.is_absolute() else self.rootdir / p

    def policy(self) -> Policy:
        s = self.settings
        return Policy(compare=s.compare, strict=s.strict, tolerance=s.tolerance, update=s.update)

    def sessions_to_record(self) -> int:
        """Sessions one test makes: ``--goodput-sessions`` when recording, else one."""
        return self.settings.sessions if self.settings.update else 1

    def head_launches(self, spec: ScenarioSpec) -> int:
        """Launches the PR side of a gated test may be measured over (marker > option): only
        when comparing with a stored baseline, and for runs (a sweep's points and a capacity
        search's probes are judged by their own rules)."""
        s = self.settings
        if s.update or not s.compare or s.ab or spec.scenario in ("sweep", "capacity"):
            return 1
        return s.for_test("head_launches", spec.head_launches)

    def test_gate(self, nodeid: str, spec: ScenarioSpec, engine: Engine, planned: int = 1) -> TestGate:
        """The test's gate, made once: its baseline read and its environment fingerprinted
        once for every look and the verdict (``run/gating.py``)."""
        gate = self._gates.get(nodeid)
        if gate is None:
            s = self.settings
            where = Path(s.history_dir) if s.history_dir else default_history_dir(self.baseline_dir)
            trail = HistoryPlace(where if where.is_absolute() else self.rootdir / where,
                                 gate=s.history_gate, window=s.history_window)
            gate = self._gates[nodeid] = TestGate(
                nodeid, spec, engine, baseline_dir=self.baseline_dir, policy=self.policy(), hardware=s.hardware,
                history=s.history, cwd=self.rootdir, planned=planned, trail=trail)
        return gate

    def head_decided(self, nodeid: str, spec: ScenarioSpec, measured: list[Session],
                     engine: Engine) -> bool:
        """Whether the launches measured so far decide the test (no further launch needed)."""
        return self.test_gate(nodeid, spec, engine, self.head_launches(spec)).decides(measured)

    def judge(
        self,
        nodeid: str,
        location: Optional[tuple[str, int]],
        spec: ScenarioSpec,
        m: Session,
        engine: Engine,
        earlier: Optional[list[Session]] = None,
        notes: Optional[list[str]] = None,
        planned: int = 1,
    ) -> TestOutcome:
        """Gate one test's measurement; in update mode also record every session as baseline.
        ``planned``: the launches the PR side was planned over (``earlier`` holds the others)."""
        gate = self.test_gate(nodeid, spec, engine, planned)
        del self._gates[nodeid]
        outcome = gate.finish([*(earlier or []), m], notes=notes or [], location=location,
                              cost=self.ledger.test_cost(nodeid),
                              again=redact(record_again_command(nodeid, self.settings)))
        self._gated(gate, outcome)
        if outcome.error is None:
            self.measurements[nodeid] = m
        return outcome

    def judge_ab(self, nodeid: str, location: Optional[tuple[str, int]], measured: ABMeasured,
                 base: Engine, head: Engine, notes: Optional[list[str]] = None) -> TestOutcome:
        """Gate one test's A/B run: the paired verdicts and the head's SLOs; nothing recorded."""
        assert measured.result.spec is not None
        gate = TestGate(nodeid, measured.result.spec, head, baseline_dir=self.baseline_dir, policy=self.policy(),
                        hardware=self.settings.hardware, cwd=self.rootdir)
        outcome = gate.finish_ab(measured, base, head, notes=notes or [], location=location,
                                 cost=self.ledger.test_cost(nodeid))
        self._gated(gate, outcome)
        if measured.head_runs:
            self.measurements[nodeid] = measured.head
        return outcome

    def _gated(self, gate: TestGate, outcome: TestOutcome) -> None:
        """What the session keeps of a gated test: its outcome, what its gate wrote or why
        not, its gate's errors."""
        self.outcomes.append(outcome)
        self.written += [gate.written] if gate.written is not None else []
        self.skipped_writes += [gate.skipped] if gate.skipped is not None else []
        self.errors += gate.errors

    def fails(self, outcome: TestOutcome) -> bool:
        policy = self.policy()
        if outcome.ab is not None and policy.update:  # recording does not excuse an A/B regression
            policy = Policy(compare=True, strict=policy.strict, tolerance=policy.tolerance)
        return fails(outcome, policy)

    # --- end of session ------------------------------------------------------------------
    def power_plans(self) -> list[str]:
        """After a recording, each written baseline's power plan: what one PR launch can detect
        and how many launches each tolerance needs (``python -m pytest_goodput plan`` again
        later, without running anything)."""
        if not self.settings.update:
            return []
        lines: list[str] = []
        for path in self.written:
            try:
                doc = store.load(path)
            except store.BaselineError:
                continue
            if doc is not None:
                lines += plan_lines(doc, tolerance=self.settings.tolerance)
        return lines

    def missing_baselines(self) -> Optional[str]:
        """What to say when the gate compared against nothing: no baseline directory, or none
        of its files for the tests that ran. A typo in the path or a CI cache miss would
        otherwise turn the gate into a silent no-op."""
        s = self.settings
        if not s.compare or s.update or not self.outcomes:
            return None
        if any(o.baseline_status != "new" or o.ab is not None for o in self.outcomes):
            return None
        where = self.baseline_dir
        state = "does not exist" if not where.exists() else "holds no baseline of these tests"
        return (f"{where} {state}: no goodput test was compared, so the gate judged nothing "
                "(record baselines with --goodput-update-baseline, or restore them; in CI, "
                "--goodput-allow-new lets a first run pass with its tests reported as new)")

    def missing_baselines_fail(self) -> bool:
        """Missing baselines fail the session in strict mode, and in CI unless new baselines
        are allowed there (``--goodput-allow-new``)."""
        s = self.settings
        return s.strict or (in_ci() is not None and not s.allow_new)

    def unused_baselines(self) -> list[Path]:
        """Baselines of collected test modules whose test no longer exists."""
        unused = []
        for nodeid, path in store.find_all(self.baseline_dir).items():
            module = nodeid.partition("::")[0]
            if module in self.collected_modules and nodeid not in self.collected_nodeids:
                unused.append(path)
        return unused


#: Settings a command that records a baseline again leaves out: it sets the first two itself,
#: and writes no report over the session's.
_NOT_REPEATED = frozenset({"history", "sessions", "json_path", "report"})


def record_again_command(nodeid: str, settings: Settings) -> str:
    """The command that records ``nodeid``'s baseline afresh: the session's command-line
    goodput settings (ini and environment apply again by themselves), as many sessions as
    this run recorded, and a history of exactly those, so the fresh sessions replace the
    kept ones."""
    argv = ["pytest", nodeid, "--goodput-update-baseline"]
    for opt in OPTIONS:
        if opt.field in _NOT_REPEATED or settings.sources.get(opt.field) != opt.flag:
            continue
        value = getattr(settings, opt.field)
        argv.append(opt.flag if opt.kind == "bool" else f"{opt.flag}={value}")
    if settings.sources.get("baseline_dir") == "--goodput-baseline":
        argv.append(f"--goodput-baseline={settings.baseline_dir}")
    argv += [f"--goodput-sessions={settings.sessions}", f"--goodput-history={settings.sessions}"]
    return shlex.join(argv)


def _restarted(engine: Engine) -> Engine:
    engine.start()
    return engine


def _started(start: Callable[[], Engine]) -> Engine:
    """Start an engine; one that cannot start fails the test with its message and log tail,
    without a traceback (its frames' arguments would show the serve command and environment)."""
    try:
        return start()
    except (EngineStartError, ConnectionError, ValueError) as exc:
        failed = exc
    _fail_start(failed)  # outside the handler: no "during handling of" chain


def _fail_start(exc: Exception) -> NoReturn:
    """Fail the test with an engine's start failure: its message and log tail, redacted."""
    pytest.fail(f"pytest-goodput: {redact(str(exc))}", pytrace=False)

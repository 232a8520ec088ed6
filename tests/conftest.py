"""Shared fixtures of the project's own tests, and the suite's two tiers.

Every test is in one tier, assigned here at collection (``pytest_collection_modifyitems``), never
by hand:

- ``fast``: pure layers and fake clients; starts no process, no engine and no nested pytest
  session, so it runs in parallel: ``pytest tests -m fast -n auto``.
- ``integration``: the simulator, pytester sessions, CLI subprocesses, llama.cpp, Ray, the
  workflow. The simulator sleeps through its steps, so three of these tests share the two
  cores without moving each other's verdicts: ``pytest tests -m "integration and not solo" -n 3
  --dist loadfile`` (a module's tests, and its module-scoped engines, on one worker).
- ``solo``: the integration tests that run alone, after the others: those whose engine
  computes on the CPU (llama.cpp, where a neighbour's load is the engine's slowdown), the
  emulated GitHub workflow (its unchanged pull requests must pass against its push) and the
  docs' example gates (their A/A holds a millisecond TTFT to 10 %), those
  that start a Ray runtime (its processes take both cores for seconds: the load workers lag
  beside neighbours) and those whose subject is the client's real self-check (marked
  ``real_selfcheck``), which a neighbour's load would turn invalid: ``pytest tests -m solo``.
  They are integration tests too.

A test is ``integration`` when it asks for a fixture that brings up a process or a nested
session (``pytester``, ``sim_url``...), when its module is one of ``INTEGRATION_MODULES``, or
when its code, or a helper, class or fixture of the test files it reaches, names something that
starts a process (``subprocess``, ``simulator``, ``runpytest``...; ``SPAWNING_NAMES``). A
``fast`` test that starts a process all the same fails, naming the tier it belongs to: the fast
tier stays what it says.

The suite also counts the product's re-measures (a run invalid because the client set the
pace, measured once more) made in this process and reports them after the session, so a loaded
runner shows; ``--max-remeasures N`` fails the session when one test needed more than N.

httpx imports httpcore lazily, at its first request. pytester's in-process runs drop modules
first imported inside them, and a re-imported httpcore's exceptions escape httpx's mapping
(a raw ``httpcore.ConnectError`` instead of ``httpx.ConnectError``), so httpcore is imported here,
before any test runs.
"""

from __future__ import annotations

import functools
import inspect
import multiprocessing.util
import os
import signal
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import httpcore  # noqa: F401
import pytest

import fake_selfcheck
import pytest_goodput.run.ab
import pytest_goodput.run.runner
from pytest_goodput.engines.engine import simulator
from pytest_goodput.plugin.harness import GoodputHarness

TESTS = Path(__file__).resolve().parent

# A shell that starts the suite in the background (`bash scripts/test &`, a script's `( … &)`)
# leaves SIGINT ignored, and an ignored signal survives exec: the Ctrl-C tests' CLIs and nested
# pytest sessions would never see their interrupt and finish instead. Python's own handler
# resets to the default at exec, so every process the tests start can be interrupted.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: A fast test's deadline (pytest-timeout; integration tests have the ini's ``timeout``): far
#: above the slowest fast test on a busy machine, so only a hang meets it.
FAST_TIMEOUT_S = 300

#: Fixtures that bring up a process, an engine or a nested pytest session.
INTEGRATION_FIXTURES = frozenset({"pytester", "testdir", "sim_url", "slow_sim_url"})

#: Names (globals or attributes) whose use starts a process, an engine or a nested session.
SPAWNING_NAMES = frozenset({
    "subprocess", "Popen", "create_subprocess_exec", "create_subprocess_shell", "fork", "spawn",
    "multiprocessing", "get_context", "simulator", "launch", "start_sim", "runpytest",
    "runpytest_subprocess", "runpytest_inprocess", "inline_run", "runpython", "ray",
})

#: Names whose use starts the tests' llama.cpp engine (tests/tiny_llamacpp.py) or a Ray runtime,
#: the module a serve command names to start llama.cpp, and the backend that puts the load on Ray.
#: ``World``: the hosted GitHub workflow emulated end to end (tests/test_workflow.py), whose
#: pull requests must read A/A-pass against a push recorded minutes before: beside three
#: neighbours the simulator's millisecond steps lag by more than a sweep point's noise.
#: ``doc_example``: the docs' example gates of workloads.md run as written, recorded then
#: A/A-gated minutes apart: their TTFT P50 of about 12 ms is held to 10 %, and beside three
#: neighbours the simulator's own clock moved 1.3 ms (+12 %, read engine-side) in a clean-clone run.
SOLO_NAMES = frozenset({"two_slot_engine", "write_tiny_llama", "ray", "World", "doc_example"})
LLAMACPP_MODULE = "pytest_goodput.engines.llamacpp_server"
RAY_BACKEND = "ray"

#: The CLI's commands that measure an engine (starting one when no --url is given): code that
#: names ``main`` and one of them runs an engine in this process.
MEASURING_COMMANDS = frozenset({"run", "ab", "sim"})

#: Modules whose every test is an integration test, whatever its code names: an engine, Ray
#: or the workflow is what they are about.
INTEGRATION_MODULES = frozenset({
    "test_llamacpp", "test_llamacpp_gate", "test_llamacpp_workloads", "test_ab_llamacpp",
    "test_ray_backend", "test_workflow", "test_sweep_e2e", "test_plugin_sweep",
})


def _code_names(code: types.CodeType) -> tuple[set[str], set[str]]:
    """The names a function's code uses (nested functions included), and its string constants."""
    names, strings = set(code.co_names), set()
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner, inner_strings = _code_names(const)
            names |= inner
            strings |= inner_strings
        elif isinstance(const, str):
            strings.add(const)
        elif isinstance(const, (tuple, frozenset)):  # a literal list or set of strings
            strings |= {c for c in const if isinstance(c, str)}
    return names, strings


def _ours(obj: Any) -> bool:
    """Defined in this directory's files (a test module, a helper module or this conftest)."""
    try:
        return Path(inspect.getfile(obj)).resolve().parent == TESTS
    except (TypeError, OSError):
        return False


Names = Callable[[set[str], set[str]], bool]


def _reaches(obj: Any, seen: set[int], hit: Names) -> bool:
    """Whether ``obj`` (a function or class of the test files) uses names for which ``hit``
    (code names, string constants) holds, directly or through the helpers, classes and
    fixtures of the test files it names."""
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if id(obj) in seen or not _ours(obj):
        return False
    seen.add(id(obj))
    if inspect.isclass(obj):
        return any(_reaches(v, seen, hit) for v in vars(obj).values()
                   if inspect.isfunction(v) or isinstance(v, (staticmethod, classmethod, property)))
    if isinstance(obj, (staticmethod, classmethod)):
        return _reaches(obj.__func__, seen, hit)
    if isinstance(obj, property):
        return any(_reaches(f, seen, hit) for f in (obj.fget, obj.fset) if f is not None)
    code = getattr(obj, "__code__", None)
    if code is None:
        return False
    names, strings = _code_names(code)
    if hit(names, strings):
        return True
    scope = getattr(obj, "__globals__", {})
    data = {s for n in names if n in scope for s in _strings(scope[n])}  # a module's constants
    return (bool(data) and hit(set(), data)) or any(
        _reaches(scope[n], seen, hit) for n in names
        if n in scope and (inspect.isfunction(scope[n]) or inspect.isclass(scope[n])))


def _strings(value: Any, depth: int = 0) -> set[str]:
    """The strings a module-level constant holds (a command line, a table of them)."""
    if isinstance(value, str):
        return {value}
    if depth > 3 or not isinstance(value, (list, tuple, frozenset, set, dict)):
        return set()
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
    return {s for v in items for s in _strings(v, depth + 1)}


def _starts_process(names: set[str], strings: set[str]) -> bool:
    return bool(names & SPAWNING_NAMES) or ("main" in names and bool(strings & MEASURING_COMMANDS))


def _runs_alone(names: set[str], strings: set[str]) -> bool:
    return bool(names & SOLO_NAMES) or RAY_BACKEND in strings or any(LLAMACPP_MODULE in s for s in strings)


def _uses(item: pytest.Item, hit: Names) -> bool:
    """Whether the test's function or one of its fixtures reaches a name ``hit`` holds for."""
    seen: set[int] = set()
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    funcs = [d.func for name, defs in fixtures.items() if name != "_fast_tier_starts_no_process" for d in defs]
    return any(_reaches(f, seen, hit) for f in [item.function, *funcs])  # type: ignore[attr-defined]


def tier(item: pytest.Item) -> str:
    """``integration`` or ``fast`` (module docstring)."""
    module = getattr(item, "module", None)
    if module is None or module.__name__.rsplit(".", 1)[-1] in INTEGRATION_MODULES:
        return "integration"
    if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "integration"
    return "integration" if _uses(item, _starts_process) else "fast"


def solo(item: pytest.Item) -> bool:
    """An integration test that runs alone (module docstring): a llama.cpp engine, a Ray
    runtime, or the client's real self-check."""
    if item.get_closest_marker("real_selfcheck"):
        return True
    return getattr(item, "module", None) is not None and _uses(item, _runs_alone)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = tier(item)
        item.add_marker(name)
        if name == "integration" and solo(item):
            item.add_marker("solo")
        elif item.get_closest_marker("llamacpp"):
            raise pytest.UsageError(
                f"{item.nodeid} is marked llamacpp but does not run alone: name what starts its "
                "engine in tests/conftest.py (SOLO_NAMES, LLAMACPP_MODULE)")
        if name == "fast" and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(FAST_TIMEOUT_S))


@pytest.fixture(scope="session", autouse=True)
def _matplotlib_font_cache() -> None:
    """matplotlib builds its font cache at first use by running ``fc-list``: on a fresh machine
    that is a process started inside whichever fast test plots first. Build it once, before any
    test's guard (skipped where matplotlib is not installed)."""
    try:
        import matplotlib.font_manager  # noqa: F401
    except ImportError:
        pass


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fast test that starts a process fails (it belongs to the integration tier)."""
    if request.node.get_closest_marker("fast") is None:
        yield
        return
    started: list[str] = []

    def refuse(self: subprocess.Popen, args: Any, *rest: Any, **kw: Any) -> None:
        started.append(repr(args)[:200])
        raise OSError(f"the fast tier starts no process ({args!r})")

    def refuse_fork(*args: Any, **kw: Any) -> None:
        started.append("a forked or spawned Python process")
        raise OSError("the fast tier starts no process")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    monkeypatch.setattr(multiprocessing.util, "spawnv_passfds", refuse_fork)
    monkeypatch.setattr(os, "fork", refuse_fork)
    yield
    if started:
        pytest.fail(f"a fast-tier test started a process ({started[0]}): it is an integration test; "
                    "name what starts it in tests/conftest.py (SPAWNING_NAMES, INTEGRATION_MODULES)",
                    pytrace=False)


@pytest.fixture(autouse=True)
def _selfcheck_passes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """An integration test not marked ``real_selfcheck`` decides one outcome on a busy machine:
    the client self-check's verdict is forced valid here and in the Python processes the test
    starts (tests/fake_selfcheck.py), on the product's re-measure only: a first try the client
    paced is measured again, as for users; its reasons stay in the run's notes."""
    if request.node.get_closest_marker("integration") is None or request.node.get_closest_marker("real_selfcheck"):
        return
    retry = request.node.get_closest_marker("forced_selfcheck") is None
    fake_selfcheck.install(monkeypatch, retry=retry)
    site = str(TESTS / "selfcheck_site")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (site, os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("GOODPUT_TEST_SELFCHECK", "retry" if retry else "pass")


# ---- the product's re-measures, counted per test ----

REMEASURES: Counter[str] = Counter()
#: Client self-check verdicts forced valid in this process (tests/fake_selfcheck.py), per test:
#: runs in which the client did not keep up, judged all the same because validity is not what
#: the test decides. Reported, like the re-measures, so a loaded runner shows.
FORCED: Counter[str] = Counter()
_CURRENT: list[str] = [""]  # the running integration test ("": none)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--max-remeasures", type=int, default=None, metavar="N",
                     help="fail the session when one test needed the product's re-measure more than "
                          "N times (default: report the counts after every session, fail on none: a "
                          "stalled first try is re-measured by design, tests/fake_selfcheck.py)")


def _counting_valid_once(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def valid_once(name: str, notes: list[str], run: Callable[[], Any]) -> Any:
        before = len(notes)
        try:
            return original(name, notes, run)
        finally:
            if _CURRENT[0] and len(notes) > before:
                REMEASURES[_CURRENT[0]] += 1
    return valid_once


def _counting_measurement(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _valid_measurement(self: GoodputHarness, engine: Any) -> Any:
        before = len(self.remeasured_because)
        try:
            return original(self, engine)
        finally:
            if _CURRENT[0] and len(self.remeasured_because) > before:
                REMEASURES[_CURRENT[0]] += 1
    return _valid_measurement


for _mod in (pytest_goodput.run.runner, pytest_goodput.run.ab):
    _mod.valid_once = _counting_valid_once(_mod.valid_once)
GoodputHarness._valid_measurement = _counting_measurement(GoodputHarness._valid_measurement)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]) -> Any:
    # Fast tests, and tests marked forced_selfcheck, re-measure only runs made invalid on
    # purpose: not the machine's doing.
    counted = item.get_closest_marker("integration") and not item.get_closest_marker("forced_selfcheck")
    _CURRENT[0] = item.nodeid if counted else ""
    before = len(fake_selfcheck.forced)
    try:
        return (yield)
    finally:
        if _CURRENT[0] and len(fake_selfcheck.forced) > before:
            FORCED[_CURRENT[0]] += len(fake_selfcheck.forced) - before
        _CURRENT[0] = ""


def pytest_testnodedown(node: Any, error: Any) -> None:  # xdist: a worker's counts
    output = getattr(node, "workeroutput", {})
    REMEASURES.update(output.get("goodput_remeasures", {}))
    FORCED.update(output.get("goodput_forced", {}))


def _over(config: pytest.Config) -> dict[str, int]:
    limit = config.getoption("--max-remeasures")
    return {} if limit is None else {k: n for k, n in REMEASURES.items() if n > limit}


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports
        workeroutput["goodput_remeasures"] = {k: n for k, n in REMEASURES.items() if n}
        workeroutput["goodput_forced"] = dict(FORCED)
        return
    if _over(session.config) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if getattr(config, "workeroutput", None) is not None:
        return
    counted = {k: n for k, n in REMEASURES.items() if n}
    terminalreporter.write_line(f"goodput re-measures in this session: {sum(counted.values())}"
                                + "".join(f"\n  {n} in {k}" for k, n in sorted(counted.items())))
    busiest = FORCED.most_common(5)
    terminalreporter.write_line(
        "client self-check verdicts forced valid in this session (tests not marked real_selfcheck; "
        f"the client did not keep up): {sum(FORCED.values())}"
        + "".join(f"\n  {n} in {k}" for k, n in busiest)
        + (f"\n  and {len(FORCED) - len(busiest)} more tests" if len(FORCED) > len(busiest) else ""))
    over = _over(config)
    if over:
        terminalreporter.write_line(
            f"more than {config.getoption('--max-remeasures')} re-measures in one test "
            f"(--max-remeasures): {', '.join(sorted(over))}: failing the session", red=True)

SIM = "import sys; from pytest_goodput.sim.server import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def sim_url():
    """A default simulator in its own process, for one test module (tests may override)."""
    proc = subprocess.Popen([sys.executable, "-c", SIM, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def slow_sim_url():
    """A simulator twice as slow as the default one, for regressions the gate must catch."""
    with simulator(slowdown=2.0) as eng:
        yield eng.base_url


@pytest.fixture(autouse=True)
def _not_in_ci(monkeypatch):
    """Tests see the environment a developer has: the gate's CI-only rules (a missing baseline
    fails in CI) and GitHub's annotations are tested where a test sets CI or GITHUB_ACTIONS."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


def pytest_report_header(config: pytest.Config) -> Optional[str]:
    """A bare ``pytest tests`` runs every tier serially: say what runs them as CI does."""
    if config.option.markexpr or getattr(config.option, "numprocesses", None):
        return None
    return ("every tier serially (over 30 minutes): `bash scripts/test` runs them in order and in "
            "parallel, as CI does (README, 'Developing pytest-goodput')")

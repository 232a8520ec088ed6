"""pytest wiring: options, ini keys, the ``goodput`` marker, fixtures and hooks — nothing else.

pytest imports this entry point in every test suite of an environment where pytest-goodput is
installed, so it imports only pytest and the plain-Python settings table; the gate's core is
loaded by ``_core()`` / ``_harness_class()`` below, once it is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

import pytest

from pytest_goodput.plugin.misspellings import check_names, misspelt_marker
from pytest_goodput.plugin.settings import (
    OPTIONS,
    Settings,
    SettingsError,
    ray_after_space,
    resolve,
)
from pytest_goodput.plugin.terminal_io import TerminalStream

if TYPE_CHECKING:
    from pytest_goodput.engines.engine import Engine
    from pytest_goodput.plugin.harness import GoodputHarness
    from pytest_goodput.plugin.session import GoodputSession
    from pytest_goodput.schema.scenario.spec import ScenarioSpec

MARKER = "goodput"
_settings_key = pytest.StashKey[Settings]()
_collected_key = pytest.StashKey["_Collected"]()
_session_key = pytest.StashKey["GoodputSession"]()
_spec_args_key = pytest.StashKey[dict]()  # the marker's arguments: for overrides and judge_file
_spec_key = pytest.StashKey["ScenarioSpec"]()  # the test's spec, built once at collection
_ab_key = pytest.StashKey[Any]()  # the marker's A/B options (schema.ab_options.ABOptions)
_harness_key = pytest.StashKey["GoodputHarness"]()
_machine_checked_key = pytest.StashKey[bool]()
#: The plugin's fixtures: a test that asks for one has goodput work, marked or not.
FIXTURES = frozenset({"goodput", "goodput_engine", "goodput_engine_factory"})


# --- Loading the core, deferred ------------------------------------------------------------
# Why deferred: the core (pydantic models, numpy statistics, httpx/httptools clients) takes
# about half a second to import, and pytest would pay it in every run of every test suite
# in the environment, goodput tests or not. So nothing below this entry point and
# ``settings`` is imported until a goodput test is collected, a goodput fixture is used, or
# the run records baselines (``--goodput-update-baseline``). These two functions are the
# only places that import it; bench/plugin_overhead.py measures what is left.


class _Core(NamedTuple):
    """What the hooks use from the layers below: the session, spec checks, and the hand-offs
    of a test's verdict and of the session's end (``plugin/core.py``)."""

    GoodputSession: type["GoodputSession"]
    SpecError: type[Exception]
    collected_spec: Callable[..., tuple["ScenarioSpec", dict, Any]]
    register: Callable[..., None]
    check_machine: Callable[..., None]
    finish_test: Callable[[pytest.Item, "GoodputHarness", "GoodputSession"], None]
    terminal_summary: Callable[[Any, "GoodputSession"], None]
    finish_session: Callable[[pytest.Session, "GoodputSession"], None]


def _core() -> _Core:
    """Import the gate's core (once per process; later calls are dictionary look-ups)."""
    from pytest_goodput.plugin import core

    return _Core(*(getattr(core, name) for name in _Core._fields))


def _harness_class() -> type["GoodputHarness"]:
    """The fixture's harness, which brings the load generator: only when a test measures."""
    from pytest_goodput.plugin.harness import GoodputHarness

    return GoodputHarness


@dataclass
class _Collected:
    """Node ids seen at collection (no core import); the unused-baseline check reads them."""

    nodeids: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)


MARKER_HELP = (
    "goodput(scenario='server', rate=..., concurrency=..., requests=..., isl=..., osl=..., ttft_ms=..., "
    "ttfo_ms=..., tpot_ms=..., ttft_p99_ms=..., slo='mlperf/llama2-70b/interactive', tolerance=..., "
    "gate=[...]): an LLM-serving performance scenario gated by SLOs and baselines. See docs/markers.md."
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("goodput", "LLM-serving performance gate (pytest-goodput)")
    for opt in OPTIONS:
        ini_type = "bool" if opt.kind == "bool" else "string"
        parser.addini(opt.ini, opt.help, type=ini_type, default=None)
        if not opt.cli:
            continue
        if opt.kind == "bool":
            group.addoption(opt.flag, action="store_true", default=False, dest=f"goodput_{opt.name}",
                            help=opt.help)
        else:
            group.addoption(opt.flag, action="append" if opt.kind == "list" else "store", default=None, dest=f"goodput_{opt.name}",
                            metavar=opt.name.upper(), help=opt.help)
    group.addoption(
        "--goodput-baseline", nargs="?", const="", default=None, metavar="DIR",
        dest="goodput_baseline",
        help="compare against stored baselines (default dir: ini goodput_baseline_dir, "
        "else .goodput/baselines)",
    )
    group.addoption(
        "--goodput-ray", nargs="?", const="local", default=None, metavar="ADDRESS", dest="goodput_ray",
        help="run the load workers on Ray actors: alone (or =local), on a Ray runtime started on this "
        "machine; =ADDRESS joins a cluster (auto, HOST:PORT, ray://HOST:PORT); needs pytest-goodput[ray]",
    )
    group.addoption(
        "--goodput-update-baseline", action="store_true", default=False,
        dest="goodput_update", help="record this run as the new baseline of each goodput test",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: {MARKER_HELP}")
    args = list(config.invocation_params.args)
    for i, arg in enumerate(args[:-1]):
        if arg == "--goodput-baseline" and not args[i + 1].startswith("-"):
            raise pytest.UsageError(
                f"pytest-goodput: write the directory as --goodput-baseline={args[i + 1]} "
                f"(with '='): after a space, {args[i + 1]!r} could be a test path"
            )
    if (why := ray_after_space(args)) is not None:
        raise pytest.UsageError(f"pytest-goodput: {why}")
    check_names(config, (opt.ini for opt in OPTIONS), MARKER)
    cli = {opt.name: config.getoption(f"goodput_{opt.name}", None) for opt in OPTIONS if opt.cli}
    cli["baseline"] = config.getoption("goodput_baseline")
    cli["update"] = config.getoption("goodput_update")
    cli["ray"] = config.getoption("goodput_ray")
    ini = {opt.name: config.getini(opt.ini) for opt in OPTIONS}
    try:
        settings = resolve(cli, ini)
    except SettingsError as exc:
        raise pytest.UsageError(f"pytest-goodput: {exc}") from None
    config.stash[_settings_key] = settings
    config.stash[_collected_key] = _Collected()
    if settings.update:
        # Recording reports unused baselines at the end even when no goodput test ran.
        _check_machine(config)
        _core().register(config, _session(config), lambda item: (_spec_args_key in item.stash, item.stash.get(_ab_key, None)))
    elif getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput"):
        # The xdist controller checks settings itself: a worker's usage error is an INTERNALERROR.
        _check_machine(config)


def _check_machine(config: pytest.Config) -> None:
    """Settings checked against this machine (``plugin.machine``), once the session has goodput
    work: a goodput test or fixture collected, or baselines recorded. Their checks load parts
    of the core, which a suite with no goodput work never pays for, whatever the environment
    sets; a bad value is still a usage error before any test runs."""
    if config.stash.get(_machine_checked_key, False):
        return
    config.stash[_machine_checked_key] = True
    settings = config.stash[_settings_key]
    if any(v is not None for v in (settings.engine_cpus, settings.client_cpus, settings.base_sim,
                                   settings.capture, settings.export)):
        _core().check_machine(settings)


def _session(config: pytest.Config) -> "GoodputSession":
    """The session's gate state, created (and the core imported) on first use."""
    gs = config.stash.get(_session_key, None)
    if gs is None:
        gs = _core().GoodputSession(config.stash[_settings_key], Path(str(config.rootpath)))
        collected = config.stash[_collected_key]
        gs.collected_nodeids, gs.collected_modules = collected.nodeids, collected.modules
        config.stash[_session_key] = gs
    return gs


def _marker_args(item: pytest.Item, markers: list[pytest.Mark]) -> dict[str, Any]:
    """Keyword arguments of every goodput marker on the item, the closest winning."""
    args: dict[str, Any] = {}
    for m in markers:
        if m.args:
            raise _core().SpecError(
                f"{item.nodeid}: goodput marker takes keyword arguments only, got positional {m.args!r}"
            )
        for key, value in m.kwargs.items():
            args.setdefault(key, value)
    return args


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    collected = config.stash[_collected_key]
    problems = []
    # A module named with ::node ids on the command line was not collected whole: its other
    # tests' baselines are not "unused".
    invocation = config.invocation_params.dir
    partial = {(invocation / a.split("::")[0]).resolve() for a in config.args if "::" in a}
    for item in items:
        collected.nodeids.add(item.nodeid)
        if not partial or item.path.resolve() not in partial:
            collected.modules.add(item.nodeid.partition("::")[0])
        if (typo := misspelt_marker(item, MARKER)) is not None:
            problems.append((item, typo))
        markers = list(item.iter_markers(MARKER))
        if markers or not FIXTURES.isdisjoint(getattr(item, "fixturenames", ())):
            _check_machine(config)
        if not markers or typo:
            continue
        core = _core()  # a goodput test: its spec is built and checked now, before anything runs
        try:
            spec, args, ab = core.collected_spec(_marker_args(item, markers), config.stash[_settings_key], item.nodeid)
            item.stash[_spec_key], item.stash[_spec_args_key], item.stash[_ab_key] = spec, args, ab
        except core.SpecError as exc:
            problems.append((item, str(exc)))
    if problems:
        _refuse(config, items, problems)


def _refuse(config: pytest.Config, items: list[pytest.Item], problems: list[tuple[pytest.Item, str]]) -> None:
    """Each test with bad marker arguments (or a bad trace file) is a collection error of its
    own, as an import error is: listed under ERRORS, counted in the summary line, and the session stops before any
    test runs (exit 2; ``--continue-on-collection-errors`` runs the others)."""
    bad = {id(item) for item, _ in problems}
    items[:] = [i for i in items if id(i) not in bad]
    for item, message in problems:
        # The summary line shows the node id and the message's first line, cut to the terminal's
        # width: what is wrong first, the test last.
        first, _, rest = message.partition("\n")
        first = f"{first.removeprefix(item.nodeid + ': ')} (in {item.nodeid})"
        report = pytest.CollectReport(item.nodeid, "failed", "\n".join(filter(None, (first, rest))), [])
        config.hook.pytest_collectreport(report=report)


def pytest_deselected(items: list[pytest.Item]) -> None:
    # Deselected tests still exist: their baselines are not "unused".
    for item in items:
        collected = item.config.stash.get(_collected_key, None)
        if collected is not None:
            collected.nodeids.add(item.nodeid)


@pytest.fixture(scope="session")
def goodput_engine(request: pytest.FixtureRequest) -> Iterator["Engine"]:
    """The session's engine: attached (URL), launched (command) or the embedded simulator."""
    session = _session(request.config)
    try:
        engine = session.engine
    except Exception as exc:  # noqa: BLE001 - shown to the user as a setup error
        pytest.fail(f"pytest-goodput could not start or reach the engine: {exc}", pytrace=False)
    yield engine


@pytest.fixture(scope="session")
def goodput_engine_factory(request: pytest.FixtureRequest) -> Callable[..., "Engine"]:
    """Start further engines: ``factory(slowdown=1.2)`` (simulator), ``factory(serve=CMD)``."""
    return _session(request.config).start_engine


@pytest.fixture
def goodput(request: pytest.FixtureRequest) -> "GoodputHarness":
    """Run this test's goodput scenario: ``goodput.run(**overrides)`` returns the result."""
    if hasattr(request.config, "workerinput"):  # an xdist worker
        pytest.fail(
            "goodput tests measure a shared engine and refuse to run under pytest-xdist; "
            "run them in their own invocation without -n (e.g. pytest -p no:xdist -m goodput)",
            pytrace=False,
        )
    item = request.node
    harness = _harness_class()(
        _session(request.config),
        item.nodeid,
        item.stash.get(_spec_args_key, {}),
        lambda: request.getfixturevalue("goodput_engine"),
        progress_stream=TerminalStream(request.config),
        ab_options=item.stash.get(_ab_key, None),
        spec=item.stash.get(_spec_key, None),
    )
    item.stash[_harness_key] = harness
    return harness


@pytest.fixture(autouse=True)
def _goodput_marked(request: pytest.FixtureRequest) -> None:
    """Give every marked test the ``goodput`` fixture even if it does not ask for it."""
    if _spec_args_key in request.node.stash:
        request.getfixturevalue("goodput")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    result = yield
    if (harness := item.stash.get(_harness_key, None)) is not None:  # a goodput test
        _core().finish_test(item, harness, _session(item.config))
    return result


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if (gs := config.stash.get(_session_key, None)) is not None:  # none: no goodput test, nothing to say
        _core().terminal_summary(terminalreporter, gs)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if (gs := session.config.stash.get(_session_key, None)) is not None:
        _core().finish_session(session, gs)


def pytest_unconfigure(config: pytest.Config) -> None:
    gs = config.stash.get(_session_key, None)
    if gs is not None:
        gs.close()

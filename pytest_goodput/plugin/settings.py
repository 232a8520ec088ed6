"""Plugin settings: one table drives the CLI options, the ini keys and the environment.

Precedence is marker > command line > ini file > environment > default (``precedence.pick``),
but for the hardware label an ini and an environment that disagree are an error (a CI matrix
labels its runners in the environment; an ini label must not silently win). Every resolved value remembers where it
came from, so a bad value is reported with its source (as pytest-timeout does).

Plain Python on purpose (no pydantic): pytest imports the plugin's entry point, and with it
this table, in every test suite of an environment where pytest-goodput is installed.
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Optional

from pytest_goodput.schema.cpus import CpuSetError, parse_cpus
from pytest_goodput.schema.precedence import pick
from pytest_goodput.schema.addresses import RayAddressError, check_ray_address


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected true/false")


@dataclass(frozen=True)
class Option:
    name: str  # attribute in Settings; CLI flag --goodput-<name with dashes>; ini goodput_<name>
    help: str
    kind: str = "str"  # str | float | bool | int | list (repeatable flag; words in ini and env)
    env: Optional[str] = None
    cli: bool = True
    attr: Optional[str] = None  # Settings field, when it differs from ``name``

    @property
    def field(self) -> str:
        return self.attr or self.name

    @property
    def flag(self) -> str:
        return "--goodput-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "goodput_" + self.name

    @property
    def env_var(self) -> str:
        return self.env or "GOODPUT_" + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option("url", "base URL of an OpenAI-compatible engine to attach to (http://host:port[/v1])"),
    Option("model", "model name to request (default: the engine's first listed model)"),
    Option("api_key_env", "name of the environment variable holding the API key (never stored)"),
    Option("serve", 'command that launches an engine, "{port}" replaced by a free port'),
    Option("engine", "sim: measure the embedded simulator. Needed where no --goodput-url or "
           "--goodput-serve names an engine and CI or GITHUB_ACTIONS is set: there, goodput tests "
           "fail rather than time the simulator unasked"),
    Option("ready_timeout", "seconds a launched engine (--goodput-serve) may take to answer its "
           "health probe before the run fails with its log (default 300, at most 86400)", "float"),
    Option("baseline_dir", "directory of stored baselines (default .goodput/baselines)", cli=False),
    Option("strict", "fail on inconclusive and underpowered verdicts, unproven percentile SLOs, "
           "workload changes and missing baselines", "bool"),
    Option("allow_new", "in CI (CI or GITHUB_ACTIONS set), accept a run with no stored baseline "
           "at all instead of failing it", "bool"),
    Option("tolerance", "default tolerated relative change of a gated metric (e.g. 0.05)", "float"),
    Option("json", "write every test's result, verdicts and per-request records to this JSON file",
           attr="json_path"),
    Option("report", "write the per-PR Markdown report to this file"),
    Option("scale", "multiply request counts and durations (e.g. 0.25 for a smoke run)", "float"),
    Option("hardware", "hardware label; baselines from other hardware are incomparable"),
    Option("history", "baseline sessions kept per test for run-to-run noise (default 10)", "int"),
    Option("sessions", "sessions one --goodput-update-baseline records, every test once per "
           "session, relaunching the engine between sessions when it started it (default 5)", "int"),
    Option("head_launches", "gating: measure each test's PR side over up to this many engine "
           "launches (relaunched in between when the plugin started the engine), judged after "
           "each and stopped as soon as the test is decided; the marker's head_launches= wins "
           "(default 1)", "int"),
    Option("workers", "client processes each run's load is sharded over (default 1)", "int"),
    Option("ray", "run each run's load workers on Ray actors: local (--goodput-ray alone) starts Ray "
           "on this machine, an ADDRESS joins a cluster (auto, HOST:PORT, ray://HOST:PORT)", cli=False),
    Option("history_dir", "directory of the main-branch history --goodput-update-baseline appends "
           "to (default: history next to the baseline directory)"),
    Option("history_gate", "fail a run that continues a creep: the last --goodput-history-window "
           "main-branch runs and this one lost more than the tolerance", "bool"),
    Option("history_window", "main-branch runs the creep gate looks back over (default 20)", "int"),
    Option("engine_cpus", "CPUs an engine the plugin starts (--goodput-serve or the simulator) runs on, "
           "with everything it starts: a list such as 0-3,6, or auto (the client keeps the last "
           "CPU, the engine the rest)"),
    Option("client_cpus", "CPUs the load generator runs on while the session's engine runs: a "
           "list such as 7, or auto (the last CPU; the engine, when started here, the rest)"),
    Option("base_serve", "A/B mode: command launching the base engine (\"{port}\" = a free port); "
           "every goodput test runs rounds on it and on the session's engine (the head), no "
           "stored baseline"),
    Option("base_url", "A/B mode: base URL of a running base engine (see --goodput-base-serve)"),
    Option("base_sim", "A/B mode: the simulator as base engine, with these knobs (slowdown=1.2,...) "
           "or 'default'; GOODPUT_SIM_* variables set only the head's"),
    Option("ab_min_rounds", "A/B mode: rounds before the first look (default 4, at least 2)", "int"),
    Option("ab_max_rounds", "A/B mode: most rounds per test (default 12)", "int"),
    Option("ab_exclusive", "A/B mode: one engine at a time, each run on a freshly started one "
           "(the default when the base cannot start while the head is up)", "bool"),
    Option("ab_relaunch", "A/B mode: relaunch both engines before every round, so the rounds' "
           "spread holds launch-to-launch spread (engines the plugin starts; one engine at a time "
           "does it by itself)", "bool"),
    Option("capture", "receive times from a packet capture of the engine's port (docs/capture.md): "
           "off (default), auto (when CAP_NET_RAW allows, else read-time stamps, said once), on "
           "(fail when it cannot capture)"),
    Option("export", "FORMAT=PATH, repeatable: write results for another tool (llmd, vllm, bmf, pytorch)", "list"),
)
BY_NAME = {o.name: o for o in OPTIONS}
CAPTURE_MODES = ("off", "auto", "on")
#: Engines ``--goodput-engine`` names (a URL or a command names the others).
ENGINES = ("sim",)
#: Values of CI and GITHUB_ACTIONS that mean "not in CI".
_NOT_SET = ("", "0", "false", "no", "off")

#: What a goodput test says in CI when no engine is named (``Settings.unnamed_engine``).
UNNAMED_ENGINE = (
    "pytest-goodput: no engine is named and this is CI ({ci}), so this test measures nothing "
    "rather than time the embedded simulator unasked. Name the engine one of three ways: "
    "attach to a running one with --goodput-url URL, launch one with --goodput-serve \"CMD\" "
    "(\"{{port}}\" becomes a free port), or choose the simulator with --goodput-engine=sim; each "
    "is also an ini key (goodput_url, goodput_serve, goodput_engine = sim) and an environment "
    "variable (GOODPUT_URL, GOODPUT_SERVE, GOODPUT_ENGINE=sim). See docs/engines.md."
)


def in_ci(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """``CI=true`` (the variable that says so), when CI or GITHUB_ACTIONS is set and not false;
    None on a developer's machine."""
    env = os.environ if env is None else env
    for name in ("CI", "GITHUB_ACTIONS"):
        value = env.get(name)
        if value is not None and value.strip().lower() not in _NOT_SET:
            return f"{name}={value}"
    return None


class SettingsError(ValueError):
    """A setting has a bad value; the message names the setting and where it came from."""


#: Bounds a resolved value must respect: field -> ((comparison, limit), ...).
_BOUNDS: dict[str, tuple[tuple[str, float], ...]] = {
    "tolerance": (("ge", 0), ("lt", 1)),
    "scale": (("gt", 0),),
    "history": (("ge", 1), ("le", 50)),
    "sessions": (("ge", 1), ("le", 20)),
    "head_launches": (("ge", 1), ("le", 20)),
    "workers": (("ge", 1), ("le", 64)),
    "ready_timeout": (("gt", 0), ("le", 86400)),
    "history_window": (("ge", 6), ("le", 500)),
    "ab_min_rounds": (("ge", 2), ("le", 1000)),
    "ab_max_rounds": (("ge", 2), ("le", 1000)),
}
#: The comparisons, worded as pydantic words them (the messages users saw before).
_COMPARISONS: dict[str, tuple[Callable[[Any, Any], bool], str]] = {
    "gt": (operator.gt, "greater than"),
    "ge": (operator.ge, "greater than or equal to"),
    "lt": (operator.lt, "less than"),
    "le": (operator.le, "less than or equal to"),
}


class OutOfBoundsError(ValueError):
    """A ``Settings`` field is outside its bounds (``resolve`` adds where it came from)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name, self.reason = name, reason


@dataclass
class Settings:
    """Resolved session-wide settings (the marker may still override tolerance)."""

    url: Optional[str] = None
    model: Optional[str] = None
    api_key_env: Optional[str] = None
    serve: Optional[str] = None
    engine: Optional[str] = None
    ready_timeout: float = 300.0
    baseline_dir: str = ".goodput/baselines"
    compare: bool = False
    update: bool = False
    strict: bool = False
    allow_new: bool = False
    tolerance: Optional[float] = None
    json_path: Optional[str] = None
    report: Optional[str] = None
    scale: float = 1.0
    hardware: Optional[str] = None
    history: int = 10
    sessions: int = 5
    head_launches: int = 1
    workers: Optional[int] = None
    ray: Optional[str] = None
    history_dir: Optional[str] = None
    history_gate: bool = False
    history_window: int = 20
    engine_cpus: Optional[str] = None
    client_cpus: Optional[str] = None
    base_serve: Optional[str] = None
    base_url: Optional[str] = None
    base_sim: Optional[str] = None
    ab_min_rounds: Optional[int] = None
    ab_max_rounds: Optional[int] = None
    ab_exclusive: bool = False
    ab_relaunch: bool = False
    capture: Optional[str] = None
    export: Optional[list[str]] = None  # FORMAT=PATH values, checked once the session has goodput work
    sources: dict[str, str] = field(default_factory=dict)

    def for_test(self, name: str, marker: Any) -> Any:
        """Knob ``name`` for one test: the marker's, else the session's (as :func:`resolve` picked it)."""
        return pick(("marker", marker), (self.sources.get(name, "default"), getattr(self, name)))[1]

    @property
    def engine_named(self) -> bool:
        """Whether the session's engine is named (a URL, a command, or the simulator by name)."""
        return bool(self.url or self.serve or self.engine)

    def unnamed_engine(self, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
        """Why goodput tests must fail: in CI with no engine named (else None)."""
        ci = in_ci(env)
        return UNNAMED_ENGINE.format(ci=ci) if ci and not self.engine_named else None

    @property
    def ab(self) -> bool:
        """A/B mode for every goodput test of the session (a base engine is set)."""
        return any(v is not None for v in (self.base_serve, self.base_url, self.base_sim))

    def __post_init__(self) -> None:
        for f in fields(self):  # in field order, so the first bad field is the one reported
            value = getattr(self, f.name)
            for op, limit in _BOUNDS.get(f.name, ()):
                compare, words = _COMPARISONS[op]
                # ``not compare(...)`` also rejects NaN, which fails every comparison
                if value is not None and not compare(value, limit):
                    raise OutOfBoundsError(f.name, f"Input should be {words} {limit}")
            if f.name in ("engine_cpus", "client_cpus") and value is not None \
                    and str(value).strip().lower() != "auto":
                try:
                    parse_cpus(value)
                except CpuSetError as exc:
                    raise OutOfBoundsError(f.name, str(exc)) from None
        self._one_engine()
        if self.capture is not None:
            self.capture = str(self.capture).strip().lower()
            if self.capture not in CAPTURE_MODES:
                raise OutOfBoundsError("capture", "allowed: " + ", ".join(CAPTURE_MODES))
        if self.ray is not None:
            try:
                self.ray = check_ray_address(self.ray)
            except RayAddressError as exc:
                raise OutOfBoundsError("ray", str(exc)) from None
        bases = [k for k in ("base_serve", "base_url", "base_sim") if getattr(self, k) is not None]
        if len(bases) > 1:
            raise OutOfBoundsError(bases[1], f"excludes {bases[0]}: give one base engine")
        if bases and self.update:
            raise OutOfBoundsError(bases[0], "A/B mode compares two engines in one job and records "
                                   "no baseline: drop --goodput-update-baseline or the base engine")
        if self.ab_relaunch and (self.url or self.base_url):
            raise OutOfBoundsError("ab_relaunch", "relaunches both engines: an engine attached "
                                   "by URL (--goodput-url, --goodput-base-url) cannot be restarted")
        if self.ab_exclusive and (self.url or self.base_url):
            raise OutOfBoundsError("ab_exclusive", "starts and stops both engines: an engine attached "
                                   "by URL (--goodput-url, --goodput-base-url) cannot be restarted")
        if (self.ab_min_rounds is not None and self.ab_max_rounds is not None
                and self.ab_max_rounds < self.ab_min_rounds):
            raise OutOfBoundsError("ab_max_rounds", f"Input should be at least ab_min_rounds "
                                   f"({self.ab_min_rounds})")
        if self.url and self.engine_cpus:
            raise OutOfBoundsError("engine_cpus", "applies to an engine the plugin starts "
                                   "(--goodput-serve or the simulator), not to one attached by URL; "
                                   "pin that engine where it is started, or set only client CPUs")

    def _one_engine(self) -> None:
        """Two of a URL, a serve command and ``engine=sim`` name the session's engine: the one
        from the stronger source wins (command line > ini > environment); from one source, an
        error naming both, since neither can be said to be meant."""
        if self.url and self.serve:
            url, serve = _rank(self.sources.get("url")), _rank(self.sources.get("serve"))
            if url == serve:
                raise OutOfBoundsError("serve", f"launches an engine and {self.sources.get('url', 'url')} "
                                       "attaches to another: name one (a URL attaches to a running "
                                       "engine, a serve command launches one)")
            if url < serve:
                self.serve = None
            else:
                self.url = None
        if self.engine is None:
            return
        self.engine = str(self.engine).strip().lower()
        if self.engine not in ENGINES:
            raise OutOfBoundsError("engine", "allowed: sim (the embedded simulator); name any other "
                                   "engine with --goodput-url or --goodput-serve")
        others = [k for k in ("url", "serve") if getattr(self, k)]
        if not others:
            return
        sim, other = _rank(self.sources.get("engine")), min(_rank(self.sources.get(k)) for k in others)
        if sim == other:
            where = self.sources.get(others[0], others[0])
            raise OutOfBoundsError("engine", f"names the simulator and {where} names another engine: "
                                   "name one")
        if sim < other:
            self.url = self.serve = None
        else:
            self.engine = None


def _rank(source: Optional[str]) -> int:
    """A source's strength: 0 command line (or set directly), 1 ini file, 2 environment."""
    if source is None:
        return 0
    return 1 if source.startswith("ini ") else 2 if source.startswith("environment ") else 0


def ray_after_space(args: list[str]) -> Optional[str]:
    """Why ``--goodput-ray VALUE`` (a space, no ``=``) on the command line is refused, or None.

    ``--goodput-ray`` alone means a Ray runtime started here, so the word after it is taken as
    the address: a test path there (``pytest --goodput-ray tests/``) is not one.
    """
    for flag, value in zip(args, args[1:]):
        if flag != "--goodput-ray" or value.startswith("-"):
            continue
        try:
            check_ray_address(value)
        except RayAddressError as exc:
            return (f"--goodput-ray: {exc}; after a space, {value!r} could be a test path: write "
                    "--goodput-ray=ADDRESS, or --goodput-ray alone after the test paths for a Ray "
                    "runtime started here")
    return None


_CONVERT: dict[str, Callable[[Any], Any]] = {"str": str, "float": float, "bool": _bool, "int": int, "list": str.split}


def resolve(
    cli: dict[str, Any],
    ini: dict[str, Any],
    env: Optional[dict[str, str]] = None,
) -> Settings:
    """Merge the sources by precedence and validate, naming the source of a bad value."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        flag = cli.get(opt.name)  # a store_true flag is False when absent; an ini "false" is a choice
        where, raw = pick((opt.flag, None if flag is False else flag), (f"ini {opt.ini}", ini.get(opt.name)),
                          (f"environment {opt.env_var}", env.get(opt.env_var)))
        if where is None:
            continue
        try:
            values[opt.field] = _CONVERT[opt.kind](" ".join(raw) if isinstance(raw, list) else raw)
        except (TypeError, ValueError):
            raise SettingsError(f"{where}: {raw!r} is not a valid {opt.kind} for {opt.name}") from None
        sources[opt.field] = where
    labels = (ini.get("hardware"), env.get(BY_NAME["hardware"].env_var))
    if not cli.get("hardware") and all(labels) and labels[0].strip() != labels[1].strip():
        raise SettingsError(f"ini goodput_hardware = {labels[0]!r} and environment GOODPUT_HARDWARE = "
                            f"{labels[1]!r} disagree: keep one label (CI labels its runner class in the "
                            "environment: remove the ini line), or pass --goodput-hardware")
    baseline_flag = cli.get("baseline")
    if baseline_flag is not None:
        values["compare"] = True
        if isinstance(baseline_flag, str) and baseline_flag:
            values["baseline_dir"] = baseline_flag
            sources["baseline_dir"] = "--goodput-baseline"
    if cli.get("update"):
        values["update"] = True
    try:
        return Settings(**values, sources=sources)
    except OutOfBoundsError as exc:
        name = exc.name
        raise SettingsError(
            f"{sources.get(name, name)}: {values.get(name)!r} is invalid for {name}: {exc.reason}"
        ) from None

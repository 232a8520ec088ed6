"""Plugin settings: one table drives the CLI options, the ini keys and the environment.

Precedence is marker > command line > ini file > environment > default. Every resolved
value remembers where it came from, so a bad value is reported with its source (as
pytest-timeout does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Optional

from pydantic import BaseModel, ConfigDict, Field


def _float(v: str) -> float:
    return float(v)


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
    kind: str = "str"  # str | float | bool | int
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
    Option("baseline_dir", "directory of stored baselines (default .goodput/baselines)", cli=False),
    Option("strict", "fail on inconclusive verdicts and unproven percentile SLOs", "bool"),
    Option("tolerance", "default tolerated relative change of a gated metric (e.g. 0.05)", "float"),
    Option("json", "write every test's result, verdicts and per-request records to this JSON file",
           attr="json_path"),
    Option("report", "write the per-PR Markdown report to this file"),
    Option("scale", "multiply request counts and durations (e.g. 0.25 for a smoke run)", "float"),
    Option("hardware", "hardware label; baselines from other hardware are incomparable"),
    Option("history", "baseline runs kept per test for run-to-run noise (default 5)", "int"),
    Option("workers", "client processes each run's load is sharded over (default 1)", "int"),
)
BY_NAME = {o.name: o for o in OPTIONS}


class SettingsError(ValueError):
    """A setting has a bad value; the message names the setting and where it came from."""


class Settings(BaseModel):
    """Resolved session-wide settings (the marker may still override tolerance)."""

    model_config = ConfigDict(extra="forbid")

    url: Optional[str] = None
    model: Optional[str] = None
    api_key_env: Optional[str] = None
    serve: Optional[str] = None
    baseline_dir: str = ".goodput/baselines"
    compare: bool = False
    update: bool = False
    strict: bool = False
    tolerance: Optional[float] = Field(None, ge=0, lt=1)
    json_path: Optional[str] = None
    report: Optional[str] = None
    scale: float = Field(1.0, gt=0)
    hardware: Optional[str] = None
    history: int = Field(5, ge=1, le=50)
    workers: Optional[int] = Field(None, ge=1, le=64)
    sources: dict[str, str] = Field(default_factory=dict)


_CONVERT: dict[str, Callable[[Any], Any]] = {"str": str, "float": _float, "bool": _bool, "int": int}


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
        for where, raw in (
            (opt.flag, cli.get(opt.name)),
            (f"ini {opt.ini}", ini.get(opt.name)),
            (f"environment {opt.env_var}", env.get(opt.env_var)),
        ):
            # A store_true flag is False when absent; an ini "false" is an explicit choice.
            if raw is None or raw == "" or (raw is False and where == opt.flag):
                continue
            try:
                values[opt.field] = _CONVERT[opt.kind](raw)
            except (TypeError, ValueError):
                raise SettingsError(
                    f"{where}: {raw!r} is not a valid {opt.kind} for {opt.name}"
                ) from None
            sources[opt.field] = where
            break
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
    except Exception as exc:  # pydantic.ValidationError
        errs = getattr(exc, "errors", lambda: [])()
        if errs:
            name = str(errs[0]["loc"][0])
            raise SettingsError(
                f"{sources.get(name, name)}: {values.get(name)!r} is invalid for {name}: "
                f"{errs[0]['msg']}"
            ) from None
        raise

"""Engines a run measures: attach to a URL, launch a command, or start the simulator.

The three share one handle so fixtures and the CLI treat them alike. API keys are
referred to by the name of their environment variable and never copied anywhere.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional, Sequence

import httpx

from pytest_goodput._version import __version__
from pytest_goodput.engines.launch import launch as start
from pytest_goodput.schema.cpus import format_cpus
from pytest_goodput.schema.addresses import normalize_base_url
from pytest_goodput.schema.redaction import redact, register_env, register_url

EngineKind = Literal["attach", "launch", "simulator"]

#: Seconds to wait for a launched engine to answer its health probe.
DEFAULT_READY_TIMEOUT_S = 300.0
#: The longest readiness wait one may ask for (a day: loading the largest models takes hours).
MAX_READY_TIMEOUT_S = 86400.0
SIM_READY_TIMEOUT_S = 60.0


@dataclass(repr=False)
class Engine:
    """A running OpenAI-compatible endpoint; ``close()`` stops what this process started."""

    kind: EngineKind
    base_url: str
    model: Optional[str] = None
    api_key_env: Optional[str] = None
    provenance: dict[str, str] = field(default_factory=dict)
    log_path: Optional[str] = None
    _handle: Any = None
    _start: Optional[Callable[[], Any]] = None  # starts a fresh process; None: not ours to restart
    kept_logs: list[str] = field(default_factory=list)  # logs close() kept: the engine died
    #: Processes this handle started (first start and every relaunch) and the seconds spent
    #: waiting for them to answer: what a verdict cost in engine starts (docs/metrics.md).
    launches: int = 0
    start_s: float = 0.0

    def __repr__(self) -> str:  # tracebacks show it: never with the URL's credentials
        return redact(f"<Engine {self.kind} {self.base_url} model={self.model!r}>")

    @property
    def can_relaunch(self) -> bool:
        """Whether this process started the engine and can start it afresh."""
        return self._start is not None

    def relaunch(self) -> None:
        """Stop the engine and start a fresh process of it (a new session for the baseline).

        Run-to-run noise on a launched engine is mostly launch-to-launch noise (memory
        layout, thread placement, caches), so a baseline's sessions each get their own.
        """
        if self._start is None:
            raise RuntimeError(f"an {self.kind} engine was not started here and cannot be relaunched")
        self.close()
        self.start()

    @property
    def running(self) -> bool:
        """False only for an engine of ours that was stopped (``close()``) and not started again."""
        return self._handle is not None or self._start is None

    def start(self) -> None:
        """Start a stopped engine of ours afresh (A/B mode with one engine at a time)."""
        if self._start is None or self._handle is not None:
            return
        self._handle = self._timed_start()
        self.base_url = self._handle.base_url
        self.log_path = str(self._handle.log_path)

    def _timed_start(self) -> Any:
        """Start a fresh process, counted in ``launches`` and timed into ``start_s``."""
        assert self._start is not None
        t0 = time.monotonic()
        handle = self._start()
        self.launches += 1
        self.start_s += time.monotonic() - t0
        return handle

    @property
    def pid(self) -> Optional[int]:
        """The process id of an engine this process started (None when attached)."""
        return getattr(self._handle, "pid", None)

    def resolve_model(self, timeout_s: float = 10.0) -> str:
        """The model name to request: as configured, else the engine's first listed model."""
        if self.model:
            return self.model

        headers = {}
        if self.api_key_env and os.environ.get(self.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        try:
            resp = httpx.get(f"{self.base_url}/models", headers=headers, timeout=timeout_s)
            resp.raise_for_status()
            data = resp.json().get("data") or []
        except httpx.TransportError as exc:  # nothing answers: naming a model would not help
            raise ConnectionError(redact(f"cannot reach {self.base_url}/models ({type(exc).__name__}): "
                                         "is the engine running at that URL?")) from None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            raise ConnectionError(redact(
                f"cannot list models at {self.base_url}/models ({type(exc).__name__}); "
                "name the model with --goodput-model (--model on the command line)"
            )) from None
        if not data or not isinstance(data[0], dict) or not data[0].get("id"):
            raise ConnectionError(redact(
                f"{self.base_url}/models lists no model; name one with --goodput-model "
                "(--model on the command line)"
            ))
        self.model = str(data[0]["id"])
        return self.model

    def close(self, keep_log: bool = False) -> None:
        """Stop what this process started. Its log is kept (``kept_logs``) when ``keep_log``
        (the run failed) or the engine died on its own, and removed otherwise."""
        if self._handle is not None:
            self._handle.close(keep_log=keep_log)
            if self._handle.kept_log:
                self.kept_logs.append(str(self._handle.kept_log))
            self._handle = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def attach(url: str, model: Optional[str] = None, api_key_env: Optional[str] = None) -> Engine:
    """Measure the engine at ``url``; its credentials and the API key are kept out of output."""
    register_url(url)
    register_env(api_key_env)
    try:
        base = normalize_base_url(url)
    except ValueError as exc:
        raise ValueError(redact(str(exc))) from None
    return Engine(
        kind="attach",
        base_url=base,
        model=model,
        api_key_env=api_key_env,
        provenance={"engine": "attached", "engine_url": redact(base)},
    )


def launch(
    command: str | list[str],
    model: Optional[str] = None,
    api_key_env: Optional[str] = None,
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    env: Optional[dict[str, str]] = None,
    cpus: Optional[Sequence[int]] = None,
) -> Engine:
    """Start ``command`` (``{port}`` is replaced by a free port) and wait until it is ready;
    ``cpus`` keeps it (and everything it starts) on those CPUs."""
    register_env(api_key_env)

    def fresh() -> Any:
        return start(command, env=env, ready_timeout_s=ready_timeout_s, cpus=cpus)

    t0 = time.monotonic()
    handle = fresh()
    started_s = time.monotonic() - t0
    argv = command if isinstance(command, list) else shlex.split(command)
    return Engine(
        kind="launch",
        base_url=handle.base_url,
        model=model,
        api_key_env=api_key_env,
        provenance={
            "engine": os.path.basename(argv[0]) if argv else "?",
            "engine_cmd": redact(shlex.join(argv)),
            **({"engine_cpus": format_cpus(cpus)} if cpus else {}),
        },
        log_path=str(handle.log_path),
        _handle=handle,
        _start=fresh,
        launches=1,
        start_s=started_s,
    )


def simulator(model: Optional[str] = None, cpus: Optional[Sequence[int]] = None, *,
              own_knobs_only: bool = False, **knobs: Any) -> Engine:
    """Start the embedded simulator in its own process; ``knobs`` override its profile.

    Knobs go through ``GOODPUT_SIM_*`` variables so a test can start a deliberately slowed
    engine (``simulator(slowdown=1.2)``) next to the session's normal one. ``own_knobs_only``
    ignores the ``GOODPUT_SIM_*`` variables of this process (an A/B base: they set the head).
    """

    env = {k: v for k, v in os.environ.items() if not (own_knobs_only and k.startswith("GOODPUT_SIM_"))}
    unset = [k for k in os.environ if k not in env]
    for key, value in knobs.items():
        env[f"GOODPUT_SIM_{key.upper()}"] = str(value)
    cmd = [sys.executable, "-m", "pytest_goodput", "sim", "--port", "0"]
    if model:
        cmd += ["--model", model]
    def fresh() -> Any:
        return start(cmd, env=env, ready_timeout_s=SIM_READY_TIMEOUT_S, url_from_stdout=True, cpus=cpus,
                     unset=unset)

    t0 = time.monotonic()
    handle = fresh()
    started_s = time.monotonic() - t0
    sim_env = {k: v for k, v in env.items() if k.startswith("GOODPUT_SIM_")}

    prov = {"engine": "pytest-goodput-sim", "engine_version": __version__}
    if sim_env:
        prov["engine_flags"] = redact(" ".join(f"{k}={v}" for k, v in sorted(sim_env.items())))
    if cpus:
        prov["engine_cpus"] = format_cpus(cpus)
    return Engine(
        kind="simulator",
        base_url=handle.base_url,
        model=model,
        provenance=prov,
        log_path=str(handle.log_path),
        _handle=handle,
        _start=fresh,
        launches=1,
        start_s=started_s,
    )


def select(
    *,
    url: Optional[str],
    serve: Optional[str],
    model: Optional[str],
    api_key_env: Optional[str],
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    cpus: Optional[Sequence[int]] = None,
) -> Engine:
    """Attach if a URL is given, else launch if a command is given, else the simulator.
    ``cpus`` pins an engine this process starts; an attached one cannot be pinned."""
    if url:
        if cpus:
            raise ValueError("engine CPUs apply to an engine the plugin starts, not to one attached by URL")
        return attach(url, model, api_key_env)
    if serve:
        return launch(serve, model, api_key_env, ready_timeout_s=ready_timeout_s, cpus=cpus)
    return simulator(model, cpus=cpus)

"""Start an OpenAI-compatible engine as a subprocess, wait until it serves, tear it all down.

Why this is more than ``Popen``: an engine that dies at start must fail the test with its own
words (the log tail), a port taken by someone else must not be mistaken for our engine being
ready, and no engine process may outlive the test run — not on ``close()``, not at interpreter
exit, and not when the parent is killed outright. The engine runs in its own session (process
group); :mod:`.procgroup` signals it as a whole on ``close()``, sweeps what is left at exit,
and keeps a watchdog that tears the group down if the parent dies.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from typing import IO, Mapping, Optional, Sequence

import httpx

from pytest_goodput.engines.ports import CLASH_PATTERNS, clashed_port, free_port, port_in_use
from pytest_goodput.engines.procgroup import (
    kill_group,
    release_watchdog,
    start_watchdog,
    track,
    untrack,
)
from pytest_goodput.schema.cpus import format_cpus
from pytest_goodput.schema.addresses import normalize_base_url
from pytest_goodput.schema.redaction import redact, register, register_command, secret_name

__all__ = ["EngineStartError", "LaunchedEngine", "launch", "free_port"]

PORT_PLACEHOLDER = "{port}"
_TAIL_LINES = 40
_URL_LINE = re.compile(r"^\s*(https?://\S+)\s*$")

class EngineStartError(RuntimeError):
    """The engine exited, clashed on its port, or was not ready in time; the message says which."""


def _tail(path: str, n: int = _TAIL_LINES, since: int = 0) -> str:
    """The last ``n`` lines of the log, only from byte offset ``since`` on."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(since, f.tell() - 64 * 1024))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:]) if lines else "(log is empty)"


class LaunchedEngine:
    """A running engine: ``base_url`` (ends with ``/v1``), ``pid``, ``log_path``; close it once."""

    def __init__(
        self, proc: subprocess.Popen[bytes], *, cmd: list[str], base_url: str, log_path: str,
        port: Optional[int], watchdog: Optional[subprocess.Popen[bytes]], grace_s: float,
        log_dir: Optional[str] = None,
    ) -> None:
        self.cmd, self.base_url, self.log_path, self.port = cmd, base_url, log_path, port
        self.log_dir = log_dir  # a temporary folder of our own, removed after a clean stop
        self.kept_log: Optional[str] = None  # the log, when close() kept it
        self.pid = proc.pid
        self._proc, self._watchdog, self._grace_s = proc, watchdog, grace_s
        self._closed = False
        self._lock = threading.Lock()
        track(self)

    @property
    def returncode(self) -> Optional[int]:
        return self._proc.poll()

    def alive(self) -> bool:
        """True while the engine's main process runs."""
        return self._proc.poll() is None

    def log_tail(self, n: int = _TAIL_LINES) -> str:
        return _tail(self.log_path, n)

    def close(self, grace_s: Optional[float] = None, keep_log: bool = False) -> Optional[int]:
        """SIGTERM the whole process group, SIGKILL what is left after the grace period.

        Idempotent and safe from atexit; returns the main process's exit code. The log's
        temporary folder is removed unless ``keep_log`` or the engine had died on its own
        (then ``kept_log`` is the log's path): logs of failures are evidence, logs of clean
        runs would pile up in the temp directory.
        """
        with self._lock:
            if self._closed:
                return self._proc.returncode
            self._closed = True
        died = self._proc.poll() is not None
        kill_group(self._proc, self._grace_s if grace_s is None else grace_s)
        release_watchdog(self._watchdog)
        untrack(self)
        if keep_log or died:
            self.kept_log = self.log_path
        elif self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        return self._proc.returncode

    def __enter__(self) -> "LaunchedEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "alive" if self.alive() else f"exited {self.returncode}"
        return f"<LaunchedEngine pid={self.pid} {self.base_url} {state} log={self.log_path}>"


#: Longest piece of an engine's output the log pump reads at once (a line without an end).
_PUMP_READ = 64 * 1024


class _LogPump:
    """Copies the engine's stdout and stderr into its log, line by line and redacted.

    Engines print their own arguments and settings at start (an ``--api-key``, an
    ``HF_TOKEN``); written straight to the file, those would land in a log that CI keeps as
    an artifact. On stdout the first line that is a URL is remembered (``url_from_stdout``).
    The log is closed when both streams end.
    """

    def __init__(self, log: IO[bytes], proc: subprocess.Popen[bytes], look_for_url: bool) -> None:
        self.log = log
        self.found: list[str] = []
        self.got_url, self.done = threading.Event(), threading.Event()
        self._lock, self._open = threading.Lock(), 2
        for name, src, look in (("stdout", proc.stdout, look_for_url), ("stderr", proc.stderr, False)):
            threading.Thread(target=self._copy, args=(src, look), daemon=True,
                             name=f"engine-{name}-{proc.pid}").start()

    def write(self, text: str) -> None:
        data = redact(text).encode()
        with self._lock:
            try:
                self.log.write(data)
            except (OSError, ValueError):  # closed: the engine's streams have ended
                pass

    def note(self, text: str) -> None:
        """A launcher line in the engine log (reopened when the engine's streams have ended)."""
        data = redact(f"# {text}\n").encode()
        with self._lock:
            try:
                if self.log.closed:
                    with open(self.log.name, "ab") as f:
                        f.write(data)
                else:
                    self.log.write(data)
            except (OSError, ValueError):
                pass

    def _copy(self, src: IO[bytes], look: bool) -> None:
        try:
            for raw in iter(lambda: src.readline(_PUMP_READ), b""):
                line = raw.decode("utf-8", "replace")
                self.write(line)
                if look and not self.found:
                    m = _URL_LINE.match(line)
                    if m:
                        self.found.append(m.group(1))
                        self.got_url.set()
        except (OSError, ValueError):
            pass
        finally:
            with self._lock:
                self._open -= 1
                last = self._open == 0
                if last:
                    self.log.close()
            if look or last:
                self.got_url.set()  # EOF on stdout: no URL is coming
            if last:
                self.done.set()


def _http_ready(root: str, health_paths: Sequence[str], client: object) -> bool:
    """Ready when the first health path that exists (not 404/405) answers 200."""

    assert isinstance(client, httpx.Client)
    for path in health_paths:
        try:
            r = client.get(root + path)
        except httpx.HTTPError:
            return False
        if r.status_code == 200:
            return True
        if r.status_code in (404, 405):
            continue
        return False
    return False


class _PortClash(Exception):
    """The engine died because its (picked) port was taken: pick another and start again."""


def launch(
    cmd: str | Sequence[str],
    *,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    ready_timeout_s: float = 120.0,
    log_path: Optional[str] = None,
    health_paths: Sequence[str] = ("/health", "/v1/models"),
    host: str = "127.0.0.1",
    base_url: Optional[str] = None,
    url_from_stdout: Optional[bool] = None,
    grace_s: float = 10.0,
    cpus: Optional[Sequence[int]] = None,
    unset: Sequence[str] = (),
) -> LaunchedEngine:
    """Start ``cmd`` and return once it answers on a health path.

    The URL comes from, in this order: a ``{port}`` placeholder in ``cmd`` (filled with a
    free port, ``base_url`` then defaults to ``http://{host}:{port}/v1``); an explicit
    ``base_url`` (may use ``{host}``/``{port}``); else the first stdout line that is a URL
    (``url_from_stdout``). ``env`` is added to the current environment, less the ``unset``
    names. ``cpus`` pins the
    engine and everything it starts to those CPUs. Raises ``EngineStartError`` with the
    command, the reason and the log tail.
    """
    argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
    if not argv:
        raise ValueError("empty engine command")
    has_port = any(PORT_PLACEHOLDER in a for a in argv)
    if url_from_stdout is None:
        url_from_stdout = not has_port and base_url is None
    if not has_port and not url_from_stdout and base_url is None:
        raise ValueError("give base_url, a {port} placeholder, or url_from_stdout=True")
    if not has_port and base_url and PORT_PLACEHOLDER in base_url:
        raise ValueError("base_url uses {port} but the command has no {port} placeholder")
    register_command(shlex.join(argv))
    for name, value in (env or {}).items():
        if secret_name(name):
            register(value)
    log_dir = None
    if log_path is None:
        log_dir = tempfile.mkdtemp(prefix="goodput-engine-")
        log_path = os.path.join(log_dir, "engine.log")
    opts = dict(
        env={**{k: v for k, v in os.environ.items() if k not in unset}, **(env or {})}, cwd=cwd, ready_timeout_s=ready_timeout_s,
        log_path=log_path, log_dir=log_dir, health_paths=tuple(health_paths), host=host, base_url=base_url,
        url_from_stdout=url_from_stdout, grace_s=grace_s, cpus=tuple(cpus) if cpus else None,
    )
    if not has_port:
        return _launch_once(argv, None, retry_on_clash=False, **opts)  # type: ignore[arg-type]
    try:
        return _launch_once(argv, free_port(host), retry_on_clash=True, **opts)  # type: ignore[arg-type]
    except _PortClash:
        return _launch_once(argv, free_port(host), retry_on_clash=False, **opts)  # type: ignore[arg-type]


def _fixed_port(base_url: Optional[str]) -> Optional[int]:
    if not base_url or "{port}" in base_url:
        return None
    try:
        return urllib.parse.urlsplit(base_url).port
    except ValueError:
        return None


def _launch_once(
    argv: list[str], port: Optional[int], *, env: dict[str, str], cwd: Optional[str],
    ready_timeout_s: float, log_path: str, log_dir: Optional[str], health_paths: tuple[str, ...],
    host: str,
    base_url: Optional[str], url_from_stdout: bool, grace_s: float, retry_on_clash: bool,
    cpus: Optional[tuple[int, ...]] = None,
) -> LaunchedEngine:
    real = [a.replace(PORT_PLACEHOLDER, str(port)) for a in argv] if port is not None else argv
    shown = redact(shlex.join(real))
    fixed = _fixed_port(base_url) if port is None else None
    if fixed is not None and not url_from_stdout and port_in_use(fixed, host):
        raise EngineStartError(
            f"engine command: {shown}\nport {fixed} is already in use on {host}: another "
            f"server holds it, so readiness checks would reach that server, not this engine"
        )
    url: Optional[str] = None
    if not url_from_stdout:
        tmpl = base_url or "http://{host}:{port}/v1"
        url = normalize_base_url(tmpl.replace("{host}", host).replace("{port}", str(port)))

    log = open(log_path, "ab", buffering=0)
    since = log.tell()
    log.write(f"$ {shown}\n".encode())
    if cpus:
        log.write(f"# on CPUs {format_cpus(cpus)}\n".encode())
    spawned = [sys.executable, "-m", "pytest_goodput.engines.pinned", format_cpus(cpus), "--", *real] if cpus else real
    try:
        proc = subprocess.Popen(
            spawned, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cwd, env=env, start_new_session=True,
        )
    except OSError as e:
        log.close()
        raise EngineStartError(redact(f"engine command: {shown}\ncould not start: {e}")) from None
    engine_port = port if port is not None else fixed
    engine = LaunchedEngine(
        proc, cmd=real, base_url=url or "", log_path=log_path, port=engine_port,
        watchdog=start_watchdog(proc.pid, grace_s), grace_s=grace_s, log_dir=log_dir,
    )
    pump = _LogPump(log, proc, url_from_stdout)
    found, got_url = pump.found, pump.got_url

    def fail(reason: str) -> EngineStartError:
        engine.close(grace_s=min(grace_s, 5.0), keep_log=True)
        pump.done.wait(2.0)  # the engine's last words reach the log before its tail is read
        return EngineStartError(redact(
            f"engine command: {shown}\n{reason}\nlog: {log_path}\n"
            f"--- last {_TAIL_LINES} log lines ---\n{_tail(log_path)}"
        ))


    t0 = time.monotonic()
    deadline, delay = t0 + ready_timeout_s, 0.05
    try:
        with httpx.Client(timeout=httpx.Timeout(2.0), trust_env=False) as client:
            while True:
                code = proc.poll()
                if code is not None:
                    pump.done.wait(2.0)  # its last words (a port clash?) into the log first
                    said = _tail(log_path, since=since)
                    clash = engine_port is not None and (
                        CLASH_PATTERNS.search(said) is not None or port_in_use(engine_port, host)
                    )
                    named = clashed_port(said) if clash else None
                    if clash and named is not None and named != engine_port:
                        # The command binds a port of its own: another {port} would not help.
                        raise fail(
                            f"port {named} is already in use (engine exited with code {code}); the "
                            f"command binds port {named} itself, not the port {engine_port} it was "
                            f"given for {PORT_PLACEHOLDER}: free port {named} or pass {PORT_PLACEHOLDER} "
                            f"where the command takes its port")
                    if clash and retry_on_clash:
                        pump.note(f"port {port} was taken; retrying on another port")
                        raise _PortClash()
                    if clash:
                        raise fail(f"port {engine_port} is already in use (engine exited with code {code})")
                    raise fail(f"engine exited with code {code} before it was ready")
                if url is None and found:
                    url = engine.base_url = normalize_base_url(found[0])
                if url is not None and _http_ready(url[: -len("/v1")], health_paths, client):
                    if proc.poll() is None:
                        pump.note(f"ready at {url} after {time.monotonic() - t0:.2f} s")
                        return engine
                    continue  # it died meanwhile: report that
                now = time.monotonic()
                if now >= deadline:
                    what = "no URL on stdout" if url is None else f"no 200 from {list(health_paths)}"
                    raise fail(f"not ready after {ready_timeout_s:g} s ({what})")
                if url is None:  # the pump also sets it at EOF, i.e. when the engine exits
                    got_url.wait(min(delay, deadline - now))
                else:
                    try:  # sleep, but wake at once if the engine exits
                        proc.wait(timeout=min(delay, deadline - now))
                    except subprocess.TimeoutExpired:
                        pass
                delay = min(delay * 2, 1.0)
    except BaseException:
        # EngineStartError, _PortClash, KeyboardInterrupt, pytest's timeouts: never leak it.
        engine.close(grace_s=min(grace_s, 5.0))
        raise

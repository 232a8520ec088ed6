"""The engine launcher: readiness, failures with the log tail, ports, and no orphans."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

import pytest_goodput
from pytest_goodput.engines import launch as launch_mod
from pytest_goodput.engines.launch import EngineStartError, launch

PY = sys.executable
REPO = str(Path(pytest_goodput.__file__).resolve().parent.parent)

# A tiny engine stand-in: /health, /v1/models; optional child process, SIGTERM deafness,
# delayed readiness, and port 0 with the URL printed on stdout.
FAKE_ENGINE = textwrap.dedent(
    """
    import argparse, http.server, json, os, signal, subprocess, sys, time
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--child-pid-file")
    ap.add_argument("--ignore-term", action="store_true")
    ap.add_argument("--ready-after", type=float, default=0.0)
    ap.add_argument("--no-health", action="store_true")
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    print("fake engine argv:", sys.argv[1:], file=sys.stderr, flush=True)
    if a.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if a.child_pid_file:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(a.child_pid_file, "w") as f:
            f.write(str(child.pid))
    t0 = time.monotonic()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/health" and not a.no_health:
                code = 200 if time.monotonic() - t0 >= a.ready_after else 503
            elif self.path == "/v1/models":
                code = 200
            else:
                code = 404
            body = json.dumps({"object": "list", "data": [{"id": "fake"}]}).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), H)
    print(f"http://127.0.0.1:{srv.server_address[1]}/v1", flush=True)
    srv.serve_forever()
    """
)

# Launches an engine, reports pids, then exits normally or waits to be killed.
DRIVER = textwrap.dedent(
    """
    import sys, time
    from pytest_goodput.engines.launch import launch
    script, pidfile, mode = sys.argv[1:4]
    eng = launch([sys.executable, script, "--port", "{port}", "--child-pid-file", pidfile],
                 ready_timeout_s=30)
    print(eng.pid, flush=True)
    if mode == "wait":
        time.sleep(120)
    """
)


def gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie awaiting its reaper)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def wait_gone(*pids: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return all(gone(p) for p in pids)


def read_pid(path: Path, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    p = tmp_path / "fake_engine.py"
    p.write_text(FAKE_ENGINE)
    return p


def test_port_placeholder_is_substituted_inside_an_argument(fake: Path, tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    with launch([PY, str(fake), "--port={port}"], log_path=str(log), ready_timeout_s=30) as eng:
        assert eng.alive()
        assert eng.port is not None and eng.base_url == f"http://127.0.0.1:{eng.port}/v1"
        assert httpx.get(eng.base_url + "/models").json()["data"][0]["id"] == "fake"
        assert f"--port={eng.port}" in log.read_text()
    assert not eng.alive()


def test_string_command_is_split_never_run_by_a_shell(fake: Path) -> None:
    with launch(f"{PY} {fake} --port {{port}} --tag '$HOME;echo x'", ready_timeout_s=30) as eng:
        assert "'--tag', '$HOME;echo x'" in Path(eng.log_path).read_text()


def test_url_from_stdout_mode(fake: Path) -> None:
    with launch([PY, str(fake), "--port", "0"], ready_timeout_s=30) as eng:
        port = int(eng.base_url.rsplit(":", 1)[1].split("/")[0])
        assert eng.base_url == f"http://127.0.0.1:{port}/v1"
        assert httpx.get(eng.base_url[:-3] + "/health").status_code == 200
        assert "ready at" in Path(eng.log_path).read_text()


def test_waits_for_health_200_and_falls_back_to_models(fake: Path) -> None:
    with launch([PY, str(fake), "--port", "{port}", "--ready-after", "0.5"], ready_timeout_s=30) as eng:
        assert httpx.get(eng.base_url[:-3] + "/health").status_code == 200
    with launch([PY, str(fake), "--port", "{port}", "--no-health"], ready_timeout_s=30) as eng:
        assert httpx.get(eng.base_url[:-3] + "/health").status_code == 404


def test_readiness_timeout_names_the_wait_and_shows_the_log_tail(tmp_path: Path) -> None:
    script = "import time; print('loading weights 1/3', flush=True); time.sleep(60)"
    with pytest.raises(EngineStartError) as ei:
        launch([PY, "-c", script, "{port}"], ready_timeout_s=1.0, log_path=str(tmp_path / "e.log"))
    msg = str(ei.value)
    assert "not ready after 1 s" in msg
    assert "loading weights 1/3" in msg
    assert "time.sleep(60)" in msg  # the command
    assert str(tmp_path / "e.log") in msg


def test_crash_reports_exit_code_and_log_tail() -> None:
    lines = "; ".join(f"print('line {i}', file=sys.stderr)" for i in range(60))
    script = f"import sys; {lines}; print('fatal: CUDA out of memory', file=sys.stderr); sys.exit(3)"
    with pytest.raises(EngineStartError) as ei:
        launch([PY, "-c", script, "{port}"], ready_timeout_s=30)
    msg = str(ei.value)
    assert "exited with code 3" in msg
    assert "fatal: CUDA out of memory" in msg
    assert "line 59" in msg and "line 5\n" not in msg  # only the tail


def test_missing_executable_is_an_engine_start_error() -> None:
    with pytest.raises(EngineStartError, match="could not start"):
        launch(["/nonexistent/engine-binary", "--port", "{port}"], ready_timeout_s=5)


def test_fixed_port_already_in_use_is_named(fake: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(EngineStartError, match=f"port {port} is already in use"):
            launch([PY, str(fake), "--port", str(port)], base_url=f"http://127.0.0.1:{port}/v1")


def test_port_clash_on_the_picked_port_retries_once(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, not listening: binds clash, connects are refused
        taken = s.getsockname()[1]
        picks = iter([taken, launch_mod.free_port()])
        monkeypatch.setattr(launch_mod, "free_port", lambda host="127.0.0.1": next(picks))
        with launch([PY, str(fake), "--port", "{port}"], ready_timeout_s=30) as eng:
            assert eng.port != taken and eng.alive()
            assert f"port {taken} was taken" in Path(eng.log_path).read_text()


def test_port_clash_twice_names_the_port(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, not listening: binds clash, connects are refused
        taken = s.getsockname()[1]
        monkeypatch.setattr(launch_mod, "free_port", lambda host="127.0.0.1": taken)
        with pytest.raises(EngineStartError, match=f"port {taken} is already in use") as ei:
            launch([PY, str(fake), "--port", "{port}"], ready_timeout_s=30)
        assert "Address already in use" in str(ei.value)


def test_close_kills_the_whole_group(fake: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    eng = launch([PY, str(fake), "--port", "{port}", "--child-pid-file", str(pidfile)], ready_timeout_s=30)
    child = read_pid(pidfile)
    assert not gone(eng.pid) and not gone(child)
    assert eng.close() == -signal.SIGTERM
    assert wait_gone(eng.pid, child, timeout_s=5)
    assert eng.close() == -signal.SIGTERM  # idempotent


def test_close_escalates_to_sigkill_after_the_grace_period(fake: Path) -> None:
    eng = launch([PY, str(fake), "--port", "{port}", "--ignore-term"], ready_timeout_s=30, grace_s=0.5)
    assert eng.close() == -signal.SIGKILL
    assert gone(eng.pid)


@pytest.mark.parametrize("mode", ["exit", "kill"])
def test_no_orphans_when_the_parent_exits_or_is_killed(fake: Path, tmp_path: Path, mode: str) -> None:
    """``exit``: the atexit hook closes it; ``kill``: SIGKILL to the parent, the watchdog does."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    pidfile = tmp_path / "child.pid"
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [PY, str(driver), str(fake), str(pidfile), "wait" if mode == "kill" else "exit"],
        stdout=subprocess.PIPE, env=env, text=True,
    )
    try:
        assert proc.stdout is not None
        engine_pid = int(proc.stdout.readline())
        child = read_pid(pidfile)
        if mode == "kill":
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert wait_gone(engine_pid, child), "engine processes outlived their parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("line,port", [
    ("OSError: [Errno 98] error while attempting to bind on address ('127.0.0.1', 8123): "
     "address already in use", 8123),  # uvicorn (vLLM, SGLang)
    ("couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080", 8080),  # llama.cpp
    ("listen tcp 127.0.0.1:8000: bind: address already in use", 8000),
    ("ERROR: [Errno 98] Address already in use", None),
    ("serving on port 8000", None),  # not a clash line
])
def test_the_port_a_clash_line_names(line: str, port: object) -> None:
    assert launch_mod.clashed_port(f"loading\n{line}\n") == port

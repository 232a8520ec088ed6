"""Every server fault through both entry points: the CLI and the plugin, same verdicts.

Each case runs ``python -m pytest_goodput run`` and ``pytest`` (a pytester project) as
subprocesses in their own process group against a misbehaving server, and asserts: the run
ends (a generous timeout, never a timing assertion), the exit status, the failure kinds of
the requests, and that no process of the run is left behind.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from echoserver import gone, pid_gone  # noqa: E402
from faultserver import serve_in_thread  # noqa: E402

pytest_plugins = ["pytester"]

ECHO = Path(__file__).resolve().parent / "echoserver.py"
PY = shlex.quote(sys.executable)
LOAD = dict(scenario="concurrency", concurrency=1, requests=3, warmup_requests=0, isl=8, osl=3,
            timeout_s=1)
CLI_LOAD = ["--scenario", "concurrency", "--concurrency", "1", "--requests", "3", "--warmup", "0",
            "--isl", "8", "--osl", "3", "--timeout", "1"]

FAULTS = {  # fault server options -> (exit status, failure kinds of the 3 requests)
    "reset mid-stream": ({"reset_mid_stream": True}, 1, {"transport": 3}),
    "garbage event": ({"raw_event": "not json {"}, 1, {"malformed_stream": 3}),
    "stall": ({"stall_s": 3}, 1, {"timeout": 3}),
    "HTTP 503": ({"status": 503}, 1, {"http_status": 3}),
    "HTTP 429": ({"status": 429}, 1, {"http_status": 3}),
    "missing [DONE]": ({"no_done": True}, 0, {}),
    "SSE split into 3-byte writes": ({"split_bytes": 3}, 0, {}),
    "HTML page": ({"html": True}, 1, {"malformed_stream": 3}),
    "2 MiB line": ({"line_bytes": 2 * 1024 * 1024}, 1, {"malformed_stream": 3}),
    "half headers": ({"half_headers": True}, 1, {"transport": 3}),
}


def run_bounded(cmd: list[str], cwd: Path, *, interrupt_when: Path | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own process group; afterwards nothing of that group may be left.

    ``interrupt_when``: once this file exists (the engine answered a request: the run is
    under way), send Ctrl-C."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    if interrupt_when is not None:
        deadline = time.monotonic() + 60
        while not interrupt_when.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        if not interrupt_when.exists():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError(f"{cmd[:4]} never got an answer from its engine")
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert gone(lambda: os.killpg(proc.pid, 0)), f"processes of {cmd[:4]} outlived it"
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def kinds(requests: list[dict]) -> dict[str, int]:
    return dict(Counter(r["error_kind"] for r in requests if r["error_kind"]))


def cli_run(tmp_path: Path, *engine: str, load: list[str] = CLI_LOAD, **kw) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "cli.json"
    res = run_bounded([sys.executable, "-m", "pytest_goodput", "run", *engine, *load,
                       "--json", str(out)], tmp_path, **kw)
    own = res.stderr.split("--- last")[0]  # the engine's log tail may hold its own traceback
    assert "Traceback" not in own, res.stderr
    return res, kinds(json.loads(out.read_text())["requests"]) if out.exists() else {}


def plugin_run(pytester, *options: str, load: dict = LOAD, **kw) -> tuple[subprocess.CompletedProcess, dict]:
    pytester.makepyfile(test_perf=f"""
import pytest

@pytest.mark.goodput(**{load!r})
def test_gate():
    pass
""")
    res = run_bounded([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                       "--goodput-json", "plugin.json", *options], pytester.path, **kw)
    assert "INTERNALERROR" not in res.stdout + res.stderr, res.stdout
    out = pytester.path / "plugin.json"
    found: dict = {}
    if out.exists():
        for test in json.loads(out.read_text())["tests"]:
            for run in test["runs"]:
                found.update(kinds(run["requests"]))
    return res, found


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_server_fault_through_cli_and_plugin(fault, tmp_path, pytester):
    opts, status, expected = FAULTS[fault]
    with serve_in_thread(**opts) as srv:
        res, found = cli_run(tmp_path, "--url", srv.url, "--model", "fault-model")
        assert (res.returncode, found) == (status, expected), res.stdout + res.stderr
        res, found = plugin_run(pytester, f"--goodput-url={srv.url}", "--goodput-model=fault-model")
        assert (res.returncode, found) == (status, expected), res.stdout


def test_engine_killed_mid_run_through_cli_and_plugin(tmp_path, pytester):
    serve = f"{PY} {shlex.quote(str(ECHO))} --port {{port}} --mode ok --die-after 2"
    load = dict(LOAD, requests=6)
    res, found = cli_run(tmp_path, "--serve", serve, load=CLI_LOAD[:5] + ["6"] + CLI_LOAD[6:])
    assert res.returncode == 1 and found.get("transport", 0) >= 1, res.stdout + res.stderr
    assert "engine log kept:" in res.stderr
    res, found = plugin_run(pytester, f"--goodput-serve={serve}", load=load)
    assert res.returncode == 1 and found.get("transport", 0) >= 1, res.stdout


def test_port_clash_through_cli_and_plugin(tmp_path, pytester):
    with serve_in_thread() as srv:  # holds the port the engine insists on
        serve = f"{PY} {shlex.quote(str(ECHO))} --port {srv.port} --tag {{port}}"
        named = f"port {srv.port} is already in use"  # the engine's own port, not {port}'s
        res, _ = cli_run(tmp_path, "--serve", serve)
        assert res.returncode == 1 and named in res.stderr, res.stderr
        res, _ = plugin_run(pytester, f"--goodput-serve={serve}")
        assert res.returncode == 1 and named in res.stdout, res.stdout


def test_ctrl_c_through_cli_and_plugin_leaves_no_engine(tmp_path, pytester):
    pidfile, served = tmp_path / "engine.pid", tmp_path / "served"
    serve = (f"{PY} {shlex.quote(str(ECHO))} --port {{port}} --mode ok --pidfile {pidfile} "
             f"--served-file {served}")
    long_cli = CLI_LOAD[:5] + ["100000"] + CLI_LOAD[6:]
    res = run_bounded([sys.executable, "-m", "pytest_goodput", "run", "--serve", serve, *long_cli],
                      tmp_path, interrupt_when=served)
    assert res.returncode == 130 and "interrupted" in res.stderr, res.stderr
    assert pid_gone(pidfile)
    pidfile.unlink()
    served.unlink()
    pytester.makepyfile(test_perf=f"""
import pytest

@pytest.mark.goodput(**{dict(LOAD, requests=100000)!r})
def test_gate():
    pass
""")
    res = run_bounded([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                       f"--goodput-serve={serve}"], pytester.path, interrupt_when=served)
    assert res.returncode == pytest.ExitCode.INTERRUPTED, res.stdout
    assert pid_gone(pidfile)

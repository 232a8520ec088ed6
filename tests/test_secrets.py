"""Secrets planted in every input channel never reach any output channel.

Planted: a password in the URL (``http://alice:<pw>@...``), the API key in a variable whose
name does not look secret, a serve command's ``--api-key`` argument, ``env HF_TOKEN=...`` in
the serve command, a secret-named variable in the environment, and servers that echo all of
them back (in streamed content, in a 200 body that is not SSE, in a 401 body echoing the
Basic-auth header). Run through the plugin (JUnit XML, ``--goodput-json``, the Markdown
report, GitHub's step summary and annotations, baselines) and the CLI (``run --json``), then
every byte of stdout, stderr and every file written (engine logs included: the runs' temp
directory is their own) is searched for every secret and its encodings.
"""

from __future__ import annotations

import base64
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
ECHO = HERE / "echoserver.py"

URL_USER, URL_PW = "alice", "urlpw-Q7x9Kd2"
API_KEY = "apikey-M3n8Vb5"  # in MY_ENGINE_VAR: a name that does not look secret
SERVE_ARG = "servearg-Z5w1Lq4"  # the serve command's --api-key
SERVE_ENV = "hftoken-R2t6Yp0"  # env HF_TOKEN=... in the serve command
ENV_SECRET = "envsecret-C4v7Nm1"  # DEPLOY_SECRET in the environment
SECRETS = [URL_PW, API_KEY, SERVE_ARG, SERVE_ENV, ENV_SECRET,
           base64.b64encode(f"{URL_USER}:{URL_PW}".encode()).decode()]

SMALL = dict(scenario="concurrency", concurrency=1, requests=6, warmup_requests=0, isl=8, osl=4,
             timeout_s=5)
CLI_SMALL = ["--scenario", "concurrency", "--concurrency", "1", "--requests", "6", "--warmup", "0",
             "--isl", "8", "--osl", "4", "--timeout", "5"]


def serve_cmd(mode: str) -> str:
    return (f"env HF_TOKEN={SERVE_ENV} {shlex.quote(sys.executable)} {shlex.quote(str(ECHO))} "
            f"--port {{port}} --api-key {SERVE_ARG} --mode {mode} --max-seconds 60")


#: A serve command that prints its arguments and environment, then exits before it is ready.
FAILING_SERVE = (f"env HF_TOKEN={SERVE_ENV} {shlex.quote(sys.executable)} -c "
                 + shlex.quote("import os, sys; print(sys.argv, os.environ.get('HF_TOKEN'), "
                               "os.environ.get('DEPLOY_SECRET'), flush=True); sys.exit(3)")
                 + f" --api-key {SERVE_ARG} --port {{port}}")


@pytest.fixture
def planted(monkeypatch, tmp_path) -> Path:
    """The secrets in the environment; a temp directory of the runs' own (engine logs)."""
    monkeypatch.setenv("MY_ENGINE_VAR", API_KEY)
    monkeypatch.setenv("DEPLOY_SECRET", ENV_SECRET)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def echo_server(mode: str) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(ECHO), "--port", "0", "--mode", mode,
                             "--max-seconds", "60"], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url.replace("http://", f"http://{URL_USER}:{URL_PW}@")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def ok_url() -> Iterator[str]:
    yield from echo_server("ok")


@pytest.fixture
def mixed_url() -> Iterator[str]:
    yield from echo_server("mixed")


def leaks(texts: dict[str, str]) -> list[str]:
    return [f"{secret!r} in {where}" for where, text in texts.items() for secret in SECRETS
            if secret in text]


def files_under(*roots: Path) -> dict[str, str]:
    """Every file the runs wrote (not the test module, which holds the planted inputs)."""
    out = {}
    for root in roots:
        for p in root.rglob("*"):
            if p.is_file() and p.name != "test_perf.py" and p.suffix != ".pyc":
                out[str(p)] = p.read_bytes().decode("utf-8", "replace")
    return out


PLUGIN_TESTS = f"""
import pytest

@pytest.mark.goodput(**{SMALL!r})
def test_gate(goodput):
    goodput.run()

def test_engine_that_fails_to_start(goodput_engine_factory):
    goodput_engine_factory(serve={FAILING_SERVE!r})
"""


def run_plugin(pytester, *args: str, ci: bool = True):
    pytester.makepyfile(test_perf=PLUGIN_TESTS)
    summary = pytester.path / "step-summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)} if ci else {}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--junitxml", "junit.xml", "--goodput-json", "results.json",
            "--goodput-report", "report.md", "--goodput-allow-new", *args, timeout=240)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_plugin_attached_engine_with_url_credentials_and_echoing_server(
        pytester, planted, ok_url, mixed_url):
    # An update run that passes writes a baseline (provenance: the engine's URL) ...
    first = run_plugin(pytester, "--goodput-url", ok_url, "--goodput-update-baseline",
                       "-k", "test_gate")
    assert first.ret == 0, first.stdout.str()
    baselines = list((pytester.path / ".goodput" / "baselines").rglob("*.json"))
    assert baselines and "***@127.0.0.1" in baselines[0].read_text()
    outputs = {"stdout 1": first.stdout.str(), "stderr 1": first.stderr.str()}
    outputs.update({f"{k} (run 1)": v for k, v in files_under(pytester.path, planted).items()})
    # ... then a compare run against a server that echoes credentials in every way fails.
    second = run_plugin(pytester, "--goodput-url", mixed_url, "--goodput-baseline")
    assert second.ret == 1, second.stdout.str()
    outputs.update({"stdout 2": second.stdout.str(), "stderr 2": second.stderr.str()})
    outputs.update(files_under(pytester.path, planted))
    results = (pytester.path / "results.json").read_text()
    assert "Basic ***" in results  # the 401 and 200 bodies echoed the header: seen, redacted
    assert (pytester.path / "step-summary.md").exists() and "::error" in second.stdout.str()
    assert leaks(outputs) == []


def test_plugin_launched_engine_with_secret_command_env_and_api_key(pytester, planted):
    res = run_plugin(pytester, "--goodput-serve", serve_cmd("mixed"),
                     "--goodput-api-key-env", "MY_ENGINE_VAR")
    assert res.ret == 1, res.stdout.str()
    res.stdout.fnmatch_lines(["*test_engine_that_fails_to_start*", "*engine log kept: *engine.log"])
    outputs = {"stdout": res.stdout.str(), "stderr": res.stderr.str(), **files_under(pytester.path, planted)}
    logs = [p for p in planted.rglob("engine.log")]
    assert len(logs) >= 2  # the failing start's and the failed run's, both kept
    assert all(p.read_text().startswith("$ env HF_TOKEN=***") for p in logs)
    assert "Bearer ***" in (pytester.path / "results.json").read_text()
    assert leaks(outputs) == []


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", *args], capture_output=True,
                          text=True, timeout=180, cwd=cwd)


def test_cli_every_engine_kind_and_failure(planted, tmp_path, mixed_url):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://{URL_USER}:{URL_PW}@127.0.0.1:{s.getsockname()[1]}/v1"
    runs = {
        "attached": (["run", "--url", mixed_url, "--json", "attached.json", *CLI_SMALL], 1),
        "launched": (["run", "--serve", serve_cmd("mixed"), "--api-key-env", "MY_ENGINE_VAR",
                      "--json", "launched.json", *CLI_SMALL], 1),
        "not starting": (["run", "--serve", FAILING_SERVE, *CLI_SMALL], 1),
        "unreachable": (["run", "--url", dead, "--model", "m", *CLI_SMALL], 2),
    }
    outputs: dict[str, str] = {}
    for name, (args, expected) in runs.items():
        res = cli(*args, cwd=tmp_path)
        assert res.returncode == expected, (name, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr, res.stderr
        outputs[f"{name} stdout"], outputs[f"{name} stderr"] = res.stdout, res.stderr
    outputs.update(files_under(tmp_path))
    assert "Bearer ***" in (tmp_path / "launched.json").read_text()
    assert "Basic ***" in (tmp_path / "attached.json").read_text()
    assert "engine log kept:" in outputs["launched stderr"]
    assert leaks(outputs) == []

"""Launched engines: the readiness timeout as a setting, and engine logs that do not pile up.

An engine that never becomes ready fails in the configured time with a message naming the
timeout and the log, and leaves no process behind; the timeout is checked like every other
setting. A launched engine's log folder (``goodput-engine-*`` in the temp directory) is
removed after a clean stop of a passing run, and kept — its path printed — when the engine
failed to start, died, or the run failed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_goodput.plugin.settings import SettingsError, resolve

sys.path.insert(0, str(Path(__file__).parent))
from echoserver import pid_gone  # noqa: E402

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
ECHO = HERE / "echoserver.py"
PY = shlex.quote(sys.executable)
CLI_SMALL = ["--scenario", "concurrency", "--concurrency", "1", "--requests", "4", "--warmup", "0",
             "--isl", "8", "--osl", "4", "--timeout", "5"]


def never_ready(pidfile: Path) -> str:
    """A serve command whose process runs but never listens (bounded: it exits after 60 s)."""
    script = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    return f"{PY} -c {shlex.quote(script)} --port {{port}}"


def echo(mode: str) -> str:
    return f"{PY} {shlex.quote(str(ECHO))} --port {{port}} --mode {mode} --max-seconds 60"


@pytest.fixture
def tmpdir_env(tmp_path, monkeypatch) -> Path:
    """The runs' temp directory (where engine logs go), empty at the start."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def engine_dirs(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("goodput-engine-*"))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


# --- the readiness timeout ------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "90000"])
def test_cli_ready_timeout_out_of_range_exits_2_naming_the_flag(tmp_path, value):
    res = cli("run", "--serve", "true {port}", "--ready-timeout", value, *CLI_SMALL, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "--ready-timeout" in res.stderr and "<= 86400" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("cli_args, ini, env, expected", [
    ({"ready_timeout": "2.5"}, {}, {}, 2.5),
    ({}, {"ready_timeout": "7"}, {}, 7.0),
    ({}, {}, {"GOODPUT_READY_TIMEOUT": "11"}, 11.0),
    ({}, {}, {}, 300.0),
])
def test_ready_timeout_setting_from_flag_ini_and_environment(cli_args, ini, env, expected):
    assert resolve(cli_args, ini, env).ready_timeout == expected


@pytest.mark.parametrize("raw", ["0", "-5", "nan", "1e9", "soon"])
def test_ready_timeout_setting_out_of_range_names_source_and_range(raw):
    with pytest.raises(SettingsError) as ei:
        resolve({}, {"ready_timeout": raw}, {})
    msg = str(ei.value)
    assert "ini goodput_ready_timeout" in msg and "ready_timeout" in msg


def test_cli_engine_never_ready_fails_in_the_timeout_with_its_log(tmp_path, tmpdir_env):
    pidfile = tmp_path / "engine.pid"
    res = cli("run", "--serve", never_ready(pidfile), "--ready-timeout", "2", *CLI_SMALL, cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "not ready after 2 s" in res.stderr and "Traceback" not in res.stderr
    assert pid_gone(pidfile)  # no orphan
    kept = engine_dirs(tmpdir_env)
    assert len(kept) == 1 and str(kept[0] / "engine.log") in res.stderr


def test_plugin_engine_never_ready_fails_in_the_ini_timeout(pytester, tmp_path, tmpdir_env):
    pidfile = tmp_path / "engine.pid"
    pytester.makeini(f"[pytest]\ngoodput_ready_timeout = 2\ngoodput_serve = {never_ready(pidfile)}\n")
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=1, requests=4, isl=8, osl=4)
def test_gate():
    pass
""")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert res.ret == 1
    res.stdout.fnmatch_lines(["*pytest-goodput: engine command:*", "*not ready after 2 s*"])
    assert "Traceback" not in res.stdout.str() and "INTERNALERROR" not in res.stdout.str()
    assert pid_gone(pidfile)
    assert len(engine_dirs(tmpdir_env)) == 1


def test_plugin_ready_timeout_flag_out_of_range_is_a_usage_error(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--goodput-ready-timeout=0")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--goodput-ready-timeout" in res.stderr.str() and "greater than 0" in res.stderr.str()


# --- engine log folders ---------------------------------------------------------------------
def test_cli_log_folder_removed_after_a_passing_run_kept_after_a_failing_one(tmp_path, tmpdir_env):
    ok = cli("run", "--serve", echo("ok"), *CLI_SMALL, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert engine_dirs(tmpdir_env) == [] and "engine log kept" not in ok.stderr
    bad = cli("run", "--serve", echo("mixed"), *CLI_SMALL, cwd=tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    kept = engine_dirs(tmpdir_env)
    assert len(kept) == 1 and f"engine log kept: {kept[0] / 'engine.log'}" in bad.stderr


def test_cli_log_folder_kept_when_the_engine_dies_mid_run(tmp_path, tmpdir_env):
    # The echo server crashes after 3 requests: the engine is gone before the run is.
    serve = f"{PY} {shlex.quote(str(ECHO))} --port {{port}} --mode ok --die-after 3"
    res = cli("run", "--serve", serve, *CLI_SMALL[:5], "40", *CLI_SMALL[6:], cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    kept = engine_dirs(tmpdir_env)
    assert len(kept) == 1 and "engine log kept:" in res.stderr


def test_plugin_log_folders_removed_after_a_passing_session(pytester, tmpdir_env):
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=1, requests=4, isl=8, osl=4)
def test_launched():
    pass

@pytest.mark.goodput(scenario="concurrency", concurrency=1, requests=4, isl=8, osl=4)
def test_simulated(goodput_engine_factory):
    goodput_engine_factory()  # a second engine, the simulator: its log folder too
""")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--goodput-serve={echo('ok')}",
                                        timeout=120)
    assert res.ret == 0, res.stdout.str()
    assert engine_dirs(tmpdir_env) == []
    assert "engine log kept" not in res.stdout.str()

"""``--ray`` / ``--goodput-ray`` alone mean a Ray runtime started on this machine; a value names a
cluster. Decided here without starting Ray: a run that asks for packet capture on the Ray
backend is refused before any Ray runtime, engine or load starts (``docs/capture.md``), so
the refusal shows which backend the flags chose. ``tests/test_ray_backend.py`` runs on Ray.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

ALLOWED = ("expected local (start Ray on this machine), auto (this machine's cluster), "
           "HOST:PORT or ray://HOST:PORT")
SMALL = ["--scenario", "offline", "--requests", "4"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", *args], capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.parametrize("command", [
    ["run", "--ray", "--capture", "on"],              # alone, another flag after it
    ["run", "--capture", "on", "--ray"],              # alone, last
    ["run", "--ray", "local", "--capture", "on"],
    ["run", "--ray", "10.0.0.5:6379", "--capture", "on"],
    ["ab", "--base-sim", "default", "--head-sim", "default", "--capture", "on", "--ray"],
])
def test_the_cli_takes_ray_alone_or_with_an_address(command: list[str]) -> None:
    done = _cli(*command, *SMALL)
    assert done.returncode == 2, done.stderr
    assert "--capture on: the Ray workers' connections may be on other hosts" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [["run"], ["ab", "--base-sim", "default", "--head-sim", "default"]])
def test_the_cli_names_the_allowed_ray_addresses(command: list[str]) -> None:
    done = _cli(*command, "--ray", "head", *SMALL)
    assert done.returncode == 2
    assert f"--ray: 'head' is not a Ray address; {ALLOWED}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


CAPTURED_ON_RAY = """
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=1, requests=2, isl=8, osl=4, capture="on")
def test_perf():
    pass
"""


@pytest.mark.parametrize("flag", ["--goodput-ray", "--goodput-ray=local"])
def test_the_plugin_takes_goodput_ray_alone(pytester: pytest.Pytester, flag: str) -> None:
    pytester.makepyfile(test_perf=CAPTURED_ON_RAY)
    res = pytester.runpytest("test_perf.py", flag)
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*capture=on: the Ray workers' connections may be on other hosts*"])


def test_a_test_path_after_goodput_ray_and_a_space_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=CAPTURED_ON_RAY)
    res = pytester.runpytest("--goodput-ray", "test_perf.py")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert f"--goodput-ray: 'test_perf.py' is not a Ray address; {ALLOWED}" in err, err
    assert ("after a space, 'test_perf.py' could be a test path: write --goodput-ray=ADDRESS, or "
            "--goodput-ray alone after the test paths") in err


def test_the_plugin_names_the_allowed_ray_addresses(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=CAPTURED_ON_RAY)
    res = pytester.runpytest("--goodput-ray=head")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--goodput-ray: 'head' is invalid for ray: 'head' is not a Ray address; {ALLOWED}" in res.stderr.str()

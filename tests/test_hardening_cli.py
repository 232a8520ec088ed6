"""``python -m pytest_goodput`` as a user runs it: one exit-status contract, clear errors.

0 pass; 1 regression, broken SLO or failed requests beyond ``max_error_rate``; 2 usage or
bad input (including an output path that cannot be written); 3 invalid run (the client set
the pace). Every case is a subprocess; servers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from closed_loop_results import result  # noqa: E402


SMALL = ["--scenario", "concurrency", "--concurrency", "2", "--requests", "20",
         "--isl", "16", "--osl", "8", "--timeout", "10"]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", *args], capture_output=True,
                          text=True, timeout=timeout)


def start_sim(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "pytest_goodput", "sim", "--host", "127.0.0.1",
                             "--port", "0", *args], stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return proc, url


def generated(url: str, tokens: int, wait_s: float = 60.0) -> None:
    """Wait until the simulator at ``url`` has generated ``tokens`` tokens (its /metrics)."""
    root = url.rsplit("/v1", 1)[0]
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        text = httpx.get(root + "/metrics", timeout=5).text
        done = sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("vllm:generation_tokens_total"))
        if done >= tokens:
            return
        time.sleep(0.05)
    raise AssertionError(f"the simulator at {url} generated fewer than {tokens} tokens in {wait_s:.0f} s")


@pytest.fixture
def failing_sim():
    proc, url = start_sim("--error-rate", "1")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def result_file(path: Path, scale: float, seed: int, valid: bool = True) -> str:
    """A ``run --json`` file of 400 closed-loop requests (see closed_loop_results)."""
    r = result(scale, seed, valid)
    path.write_text(r.model_dump_json())
    return str(path)


def test_run_passes_with_exit_0(tmp_path):
    out = tmp_path / "r.json"
    res = cli("run", *SMALL, "--json", str(out))
    assert res.returncode == 0, res.stderr
    assert out.exists()


def test_run_where_every_request_fails_exits_1(failing_sim):
    res = cli("run", "--url", failing_sim, *SMALL)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def test_run_failures_within_max_error_rate_are_not_the_exit_status(failing_sim):
    # The spec's max_error_rate is the judge: a failed request beyond it fails the run.
    res = cli("run", "--url", failing_sim, *SMALL, "--slo", "ttft_ms=100000")
    assert res.returncode == 1, res.stdout + res.stderr


def test_run_against_an_unreachable_url_exits_2():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = cli("run", "--url", f"http://127.0.0.1:{port}/v1", "--model", "m", *SMALL)
    assert res.returncode == 2, res.stdout + res.stderr  # the --url given answers nothing
    assert res.stderr.startswith("error: cannot reach") and "Traceback" not in res.stderr


def test_run_whose_engine_is_killed_mid_run_exits_1():
    proc, url = start_sim()
    try:
        run = subprocess.Popen([sys.executable, "-m", "pytest_goodput", "run", "--url", url,
                                "--scenario", "concurrency", "--concurrency", "2", "--requests", "400",
                                "--isl", "16", "--osl", "64", "--timeout", "5"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        generated(url, 2 * 64)  # the run is under way: its first two requests were served
        proc.kill()
        out, err = run.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert run.returncode == 1, out + err
    assert "Traceback" not in err


@pytest.mark.parametrize("args,needle", [
    (["run", "--rate", "inf", "--scenario", "server"], "rate"),
    (["run", "--scenario", "sweep", "--sweep", "0.5,2"], "whole numbers"),
    (["run", "--scenario", "server", "--rate", "1", "--slo", "ttft_p99_ms=nan"], "ttft_p99_ms"),
    (["run", "--timeout", "inf"], "timeout_s"),
    (["compare", "/nonexistent/a.json", "/nonexistent/b.json"], "no such file"),
])
def test_bad_input_exits_2_with_one_line(args, needle):
    res = cli(*args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr


@pytest.mark.real_selfcheck  # compare judges the runs' self-check again
def test_compare_exit_codes_0_1_and_3(tmp_path):
    a = result_file(tmp_path / "a.json", 1.0, 1)
    a2 = result_file(tmp_path / "a2.json", 1.0, 2)
    slow = result_file(tmp_path / "slow.json", 1.5, 3)
    bad = result_file(tmp_path / "bad.json", 1.0, 4, valid=False)
    bad_slow = result_file(tmp_path / "bad_slow.json", 1.5, 5, valid=False)
    assert cli("compare", a, a2).returncode == 0
    assert cli("compare", a, slow).returncode == 1
    res = cli("compare", a, bad)  # the new side's client set the pace, nothing regressed
    assert res.returncode == 3, res.stdout + res.stderr
    assert cli("compare", bad, a2).returncode == 3  # the baseline side's runs are invalid
    assert cli("compare", a, bad_slow).returncode == 1  # a regression wins over invalid


def test_compare_bad_file_exits_2(tmp_path):
    a = result_file(tmp_path / "a.json", 1.0, 1)
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\xff\xfe not json")
    for args in (("compare", a, str(junk)), ("frontier", str(junk))):
        res = cli(*args)
        assert res.returncode == 2, res.stderr
        assert str(junk) in res.stderr and "UTF-8" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs POSIX permissions, not root")
def test_unwritable_report_and_json_exit_2_naming_the_path(tmp_path):
    a = result_file(tmp_path / "a.json", 1.0, 1)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        for flag in ("--report", "--json"):
            target = ro / "out"
            res = cli("compare", a, a, flag, str(target))
            assert res.returncode == 2, res.stdout + res.stderr
            assert f"error: cannot write {target}: Permission denied" in res.stderr
            assert "Traceback" not in res.stderr
        res = cli("run", *SMALL, "--json", str(ro / "r.json"))
        assert res.returncode == 2
        assert f"error: cannot write {ro / 'r.json'}: Permission denied" in res.stderr
    finally:
        ro.chmod(0o755)
    assert not list(ro.iterdir())  # no temporary file left behind


def test_output_path_that_is_a_directory_exits_2(tmp_path):
    a = result_file(tmp_path / "a.json", 1.0, 1)
    res = cli("compare", a, a, "--report", str(tmp_path))
    assert res.returncode == 2
    assert f"error: cannot write {tmp_path}: it is a directory" in res.stderr
    assert "Traceback" not in res.stderr


def test_sim_on_a_busy_port_prints_one_line_and_exits_2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "pytest_goodput", "sim", "--host", "127.0.0.1",
                               "--port", str(port)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_output_under_a_file_exits_2_naming_the_path(tmp_path):
    a = result_file(tmp_path / "a.json", 1.0, 1)
    target = Path(a) / "report.md"  # its parent is a file: nothing can be written there
    res = cli("compare", a, a, "--json", str(target))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: cannot write {target}: ") and "Traceback" not in res.stderr

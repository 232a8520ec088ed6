"""Packet capture in a run: the setting, the self-check's relaxation, and one blocked event loop.

The end-to-end case needs CAP_NET_RAW (root on CI runners) and is skipped without it. It
asserts decisions (valid or not, mapped or not), never timings.
"""

from __future__ import annotations

import asyncio
import json
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_goodput.load.selfcheck import capture, health
from pytest_goodput.load.selfcheck.capture import CaptureError, CaptureFallbackWarning, begin, unavailable
from pytest_goodput.measure.metrics import judge_loop_lag
from pytest_goodput.plugin.settings import SettingsError, resolve

LATE_LOOP = [30.0] * 100  # event-loop lag samples, ms: far over the 10 ms ceiling


def test_capture_times_lift_loop_lag_but_not_send_lag() -> None:
    plain = health.judge(cpu_utilization=0.1, loop_lags_ms=LATE_LOOP, send_lags_ms=[], open_loop=False)
    assert not plain.valid and "event-loop lag" in plain.reasons[0]
    exact = health.judge(cpu_utilization=0.1, loop_lags_ms=LATE_LOOP, send_lags_ms=[], open_loop=False,
                            exact_receive=True)
    assert exact.valid and exact.exact_receive and "not held against the run" in exact.notes[0]
    # after the run the limit scales with the latencies; capture times stay exempt
    assert judge_loop_lag(exact, ttft_p50_ms=5.0, itl_p50_ms=2.0).valid
    assert not judge_loop_lag(plain.model_copy(update={"reasons": [], "valid": True,
                                                       "loop_lag_limit_ms": None}), 5.0, 2.0).valid
    # a late loop also sends late: an open loop's send lag still invalidates the run
    late_sends = health.judge(cpu_utilization=0.1, loop_lags_ms=LATE_LOOP, send_lags_ms=[50.0] * 100,
                                 open_loop=True, exact_receive=True)
    assert not late_sends.valid and late_sends.reasons[0].startswith("send lag P99")


def test_the_capture_setting_from_flag_ini_and_environment() -> None:
    assert resolve({}, {}, {"GOODPUT_CAPTURE": "auto"}).capture == "auto"
    assert resolve({"capture": "ON"}, {"capture": "off"}, {}).capture == "on"
    with pytest.raises(SettingsError, match=r"ini goodput_capture: 'sometimes' is invalid for "
                                            r"capture: allowed: off, auto, on"):
        resolve({}, {"capture": "sometimes"}, {})


def test_on_fails_clearly_and_auto_falls_back_once_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture, "_SAID", set())
    with pytest.raises(CaptureError, match="capture=on: https:// streams are encrypted"):
        begin("on", "process", "https://example.invalid/v1")
    with pytest.warns(CaptureFallbackWarning, match="read-time stamps used: the Ray workers"):
        cap, why = begin("auto", "ray", "http://127.0.0.1:1/v1")
    assert cap is None and why is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second run with the same reason: not said again
        assert begin("auto", "ray", "http://127.0.0.1:1/v1") == (None, why)
    assert begin("off", "process", "http://127.0.0.1:1/v1") == (None, "capture off")


def test_on_without_the_permission_is_refused_with_the_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_goodput.plugin.machine import capture_refused

    def refused() -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(capture, "open_socket", refused)
    why = capture_refused()
    assert why is not None and "CAP_NET_RAW" in why and "setcap cap_net_raw+ep" in why


class _BlockedLoop:
    """Blocks the client's event loop 30 ms in every 60 ms while the self-check runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        start, stop = health.SelfCheck.start, health.SelfCheck.stop
        tasks: list[Any] = []

        async def block() -> None:
            while True:
                await asyncio.sleep(0.03)
                time.sleep(0.03)  # the loop runs nothing else meanwhile: reads pile up

        def patched_start(check: health.SelfCheck) -> None:
            start(check)
            tasks.append(asyncio.get_running_loop().create_task(block()))

        async def patched_stop(check: health.SelfCheck) -> None:
            for t in tasks:
                t.cancel()
            await stop(check)

        monkeypatch.setattr(health.SelfCheck, "start", patched_start)
        monkeypatch.setattr(health.SelfCheck, "stop", patched_stop)


@pytest.mark.real_selfcheck
@pytest.mark.skipif(unavailable("http://127.0.0.1:1") is not None,
                    reason="packet capture needs CAP_NET_RAW (root)")
def test_a_blocked_loop_invalidates_the_run_only_without_capture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_goodput.cli import main

    _BlockedLoop(monkeypatch)
    small = ["run", "--scenario", "concurrency", "--concurrency", "4", "--requests", "24",
             "--isl", "16", "--osl", "24", "--timeout", "20"]
    runs = {}
    for mode in ("off", "on"):
        out = tmp_path / f"{mode}.json"
        with warnings.catch_warnings():
            warnings.simplefilter("error", CaptureFallbackWarning)
            code = main([*small, "--capture", mode, "--json", str(out)])
        runs[mode] = (code, json.loads(out.read_text()))
    capsys.readouterr()
    code, off = runs["off"]
    assert code == 3 and not off["client"]["valid"], off["client"]
    assert any("event-loop lag" in r for r in off["client"]["reasons"])
    assert off["receive_timestamps"]["source"] == "read"
    code, on = runs["on"]
    ts = on["receive_timestamps"]
    assert ts["source"] == "capture" and ts["packets_dropped"] == 0, ts
    assert ts["responses"] == ts["responses_mapped"] == 24 + on["spec"]["warmup_requests"], ts
    assert ts["events"] == ts["events_mapped"] > 24 * 24, ts
    assert code == 0 and on["client"]["valid"] and on["client"]["exact_receive"], on["client"]
    assert any("not held against the run" in n for n in on["client"]["notes"])
    # every request's sent_at is its captured departure, which the run says
    assert ts["requests_departed"] == ts["responses"], ts
    assert off["receive_timestamps"]["requests_departed"] == 0
    assert any(n.startswith("departures from the capture for") for n in on["client"]["notes"]), on["client"]


@pytest.mark.parametrize("command", [
    ["run", "--url", "https://127.0.0.1:9/v1"],
    ["run", "--ray", "local"],
    ["ab", "--base-url", "https://127.0.0.1:9/v1", "--head-sim", "default"],
])
def test_the_cli_refuses_capture_on_before_starting_anything(command: list[str]) -> None:
    """``--capture on`` that cannot be honoured is a usage error naming why, with no engine,
    Ray runtime or load started first (the command returns at once)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest_goodput", *command, "--capture", "on",
                           "--scenario", "offline", "--requests", "4"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--capture on:" in done.stderr and "--capture auto falls back" in done.stderr, done.stderr
    assert ("encrypted" if "https" in " ".join(command) else "Ray workers") in done.stderr
    assert "engine log" not in done.stderr and "Traceback" not in done.stderr

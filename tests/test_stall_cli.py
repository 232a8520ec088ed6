"""Through the CLI: one planted 80 ms stall of the client's loop in the measured phase makes
the run invalid, naming how many requests it delayed (on a quiet machine the loop-lag P99
alone passes such a run)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from pytest_goodput.load.selfcheck import health

#: One stall, this long, this far into each job long enough to reach it (the measured one).
STALL_S, AFTER_S = 0.080, 0.15


def plant_one_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    start = health.SelfCheck.start

    async def stall() -> None:
        await asyncio.sleep(AFTER_S)
        time.sleep(STALL_S)  # the loop runs nothing else meanwhile

    def patched_start(check: health.SelfCheck) -> None:
        start(check)
        task = asyncio.get_running_loop().create_task(stall())
        check.monitor.stalls_planted = task  # type: ignore[attr-defined]  # kept alive

    monkeypatch.setattr(health.SelfCheck, "start", patched_start)


@pytest.mark.real_selfcheck
def test_one_planted_stall_in_the_measured_phase_makes_the_run_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_goodput.cli import main

    plant_one_stall(monkeypatch)
    out = tmp_path / "run.json"
    # 8 streams of 2-token answers (~20 ms each): the stall holds up every one in flight
    code = main(["run", "--scenario", "concurrency", "--concurrency", "8", "--requests", "200",
                 "--isl", "16", "--osl", "2", "--json", str(out)])
    printed = capsys.readouterr()
    client = json.loads(out.read_text())["client"]
    assert code == 3, printed.out[-2000:]
    assert not client["valid"] and client["measured"] == 200
    assert client["loop_lag_ms"]["max"] >= 70.0
    assert client["delayed_requests"] >= 2  # over 0.5 % of 200
    # the stall rule's reason (a busy machine may add the loop-lag P99's; a quiet one does not)
    assert any("measured requests late" in r and "longest loop stall" in r for r in client["reasons"])

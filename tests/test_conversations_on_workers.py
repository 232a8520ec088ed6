"""Conversations (``turns>1``) on several client processes, end to end through the CLI.

The plan deals conversations whole (by user in the closed loop, by arrival in the open loop),
so every turn of a conversation is sent by one worker, after the turn before it answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

TURNS, CONVERSATIONS = 3, 4


@pytest.mark.parametrize("load", [["--scenario", "concurrency", "--concurrency", "2"],
                                  ["--scenario", "server", "--rate", "20"]], ids=["closed", "open"])
def test_each_conversation_runs_on_one_worker_in_order_and_is_judged(tmp_path: Path, load: list[str]) -> None:
    out = tmp_path / "run.json"
    res = subprocess.run(
        [sys.executable, "-m", "pytest_goodput", "run", "--turns", str(TURNS), "--workers", "2",
         "--api", "chat", *load, "--requests", str(TURNS * CONVERSATIONS), "--warmup", "0", "--osl", "4",
         "--slo", "ttft_ms=5000,tpot_ms=1000", "--json", str(out)],
        capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr  # judged: every request within the SLOs
    run = json.loads(out.read_text())
    assert run["goodput"]["met"] is True and run["goodput"]["good"] == TURNS * CONVERSATIONS
    by_conversation: dict[int, list[dict]] = defaultdict(list)
    for rec in run["requests"]:
        by_conversation[rec["conversation"]].append(rec)
    assert sorted(by_conversation) == list(range(CONVERSATIONS))
    workers = {c: {r["worker"] for r in recs} for c, recs in by_conversation.items()}
    assert all(len(w) == 1 for w in workers.values()), workers  # one worker per conversation
    assert set().union(*workers.values()) == {0, 1}  # and both workers ran some
    for recs in by_conversation.values():
        recs.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in recs] == list(range(1, TURNS + 1))
        # turn t+1 leaves only after turn t's answer arrived: the history it carries
        assert all(b["sent_at"] >= a["end_at"] for a, b in zip(recs, recs[1:]))

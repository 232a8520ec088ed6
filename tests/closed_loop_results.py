"""Hand-made closed-loop run results for the CLI's tests: 400 requests whose TPOT scales."""

from __future__ import annotations

import numpy as np

from pytest_goodput.measure.metrics import summarize
from pytest_goodput.schema.runs.results import ClientHealth, RequestRecord, RunResult
from pytest_goodput.schema.scenario.spec import build_spec

SPEC = build_spec({"scenario": "concurrency", "concurrency": 4, "requests": 400})


def result(scale: float, seed: int, valid: bool = True) -> RunResult:
    """400 closed-loop requests whose TPOT and duration scale with ``scale``; the client valid or not."""
    rng = np.random.default_rng(seed)
    records, t = [], 0.0
    for i in range(400):
        tpot = float(rng.normal(10.0, 0.5)) * scale
        e2e = 20.0 + 63 * tpot
        records.append(RequestRecord(
            index=i, ok=True, scheduled_at=t, sent_at=t, end_at=t + e2e / 1000, ttft_ms=20.0,
            tpot_ms=tpot, e2e_ms=e2e, output_tokens=64, prompt_tokens=16, send_lag_ms=0.1,
            token_count_source="usage"))
        t += e2e / 1000 / 4
    health = ClientHealth(valid=valid, cpu_utilization=0.1,
                          reasons=[] if valid else ["client CPU saturated"])
    return summarize(records, SPEC, health, load={"concurrency": 4})

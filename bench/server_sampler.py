"""Does sampling the engine's ``/metrics`` during a run disturb the client? Side by side.

The runner scrapes ``/metrics`` every second in a thread of the client's process
(``pytest_goodput.run.engine_view.GaugeSampler``). A thread holding the GIL delays the client's
event loop, which the self-check would see as loop lag. This runs the same closed-loop
scenario on one simulator with the sampler on and off, alternating, and prints each run's
event-loop lag P99 against its limit and the medians of both groups.

    python bench/server_sampler.py                   # 12 runs of 2 s, about 40 s
    python bench/server_sampler.py --pairs 10 --concurrency 16
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from pytest_goodput.engines.engine import simulator
from pytest_goodput.run import runner
from pytest_goodput.run.engine_view import GaugeSampler
from pytest_goodput.schema.scenario.spec import build_spec


class NoSampler:
    """Stands in for the sampler: no thread, no scrapes."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def start(self) -> "NoSampler":
        return self

    def stop(self) -> dict[str, float]:
        return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--duration", type=float, default=2.0)
    args = ap.parse_args()
    spec = build_spec({"scenario": "concurrency", "concurrency": args.concurrency,
                       "duration_s": args.duration, "isl": 128, "osl": 64})
    lags: dict[str, list[float]] = {"on": [], "off": []}
    invalid = {"on": 0, "off": 0}
    with simulator() as eng:
        for i in range(args.pairs):
            for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
                runner.GaugeSampler = GaugeSampler if mode == "on" else NoSampler  # type: ignore[misc]
                r = runner.run_once(spec, eng)
                c = r.client
                lags[mode].append(c.loop_lag_p99_ms or 0.0)
                invalid[mode] += not c.valid
                print(f"sampler {mode:3}: loop lag P99 {c.loop_lag_p99_ms:.2f} ms "
                      f"(limit {c.loop_lag_limit_ms:.2f}), scrapes {r.server_metrics.get('scrapes', 0):.0f}")
    runner.GaugeSampler = GaugeSampler  # type: ignore[misc]
    for mode in ("on", "off"):
        print(f"sampler {mode}: median loop lag P99 {statistics.median(lags[mode]):.2f} ms, "
              f"{invalid[mode]} of {args.pairs} runs invalid")
    print(f"ratio on/off of the medians: {statistics.median(lags['on']) / statistics.median(lags['off']):.2f}")


if __name__ == "__main__":
    main()

"""Fuzz the four inputs users and servers control with a large hypothesis budget.

The targets are the property tests' (``tests/fuzz_targets.py``): marker arguments (spec),
baseline files, SSE byte streams (any split), records built from raw exchanges. Every
generated input is counted; an exception outside the target's documented error types is a
crash, grouped by exception type and the product's innermost frame. Exit 1 on any crash.

    nice -n 10 python bench/fuzz.py --examples 13000        # per target; 52,000 in all
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fuzz_targets import TARGETS, Target  # noqa: E402


def _site(exc: BaseException) -> str:
    """Exception type and the innermost frame inside the product (or the check)."""
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if "pytest_goodput" in f.filename] or frames
    f = inside[-1]
    where = f.filename.split("pytest_goodput", 1)[-1].lstrip("/") if "pytest_goodput" in f.filename \
        else Path(f.filename).name
    return f"{type(exc).__name__} at {where}:{f.lineno}"


def fuzz(target: Target, examples: int, seed: int) -> tuple[int, Counter, dict[str, str]]:
    """Run ``examples`` inputs through ``target``; return the count, crash sites, one example each."""
    count = 0
    crashes: Counter = Counter()
    first: dict[str, str] = {}

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(target.strategy)
    def run(example: object) -> None:
        nonlocal count
        count += 1
        try:
            target.check(example)
        except Exception as exc:  # noqa: BLE001 - every crash is what this script reports
            site = _site(exc)
            crashes[site] += 1
            first.setdefault(site, f"{exc!r}"[:300] + f"\n    input: {example!r}"[:600])

    run._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    run()
    return count, crashes, first


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=13000, help="inputs per target")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", action="append", choices=[t.name for t in TARGETS],
                    help="only these targets (default: all)")
    ns = ap.parse_args(argv)
    total, crashed = 0, 0
    print(f"{'target':<10} {'inputs':>8} {'crashes':>8} {'seconds':>8}  documented errors")
    for target in TARGETS:
        if ns.target and target.name not in ns.target:
            continue
        t0 = time.perf_counter()
        count, crashes, first = fuzz(target, ns.examples, ns.seed)
        n_crash = sum(crashes.values())
        total += count
        crashed += n_crash
        print(f"{target.name:<10} {count:>8} {n_crash:>8} {time.perf_counter() - t0:>8.1f}  {target.allowed}",
              flush=True)
        for site, n in crashes.most_common():
            print(f"    {n} x {site}\n    e.g. {first[site]}")
    print(f"total      {total:>8} {crashed:>8}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())

"""What does building a trace test's spec at collection cost, and checking its file at run?

A trace test's spec is built when the test is collected (``plugin/spec.py``): the trace file
is read and parsed then (``load/trace.read_trace``: errors named before anything runs, the
SHA-256 filled in). Before measuring, the harness checks that the file still has that digest
(``load/trace.trace_changed``: the bytes hashed, not parsed). The replay then reads the file
once more unless its parse is still cached (two files are). This script writes a synthetic
Mooncake-shaped JSONL trace (``--rows`` rows, shared ``hash_ids``) in a temporary directory
and times, in interleaved pairs (the order flips every pair, so drift on a shared machine
hits both arms alike):

    parse   read_trace(path)          what collection pays per trace test (and the replay)
    check   trace_changed(spec)       what the run adds before measuring

Printed: each arm's median wall time, and check / parse as a ratio. Timing is only printed.

    python bench/trace_spec_cost.py                 # 100,000 rows, 15 pairs; about 10 s
    python bench/trace_spec_cost.py --rows 23608    # the size of Mooncake's conversation trace
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from pytest_goodput.load.trace import identified_spec, read_trace, trace_changed


def write_trace(path: Path, rows: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    t = 0
    with path.open("w") as fh:
        for i in range(rows):
            blocks = [0, 1 + i % 40] + [1000 + i * 8 + k for k in range(rng.randint(0, 12))]
            fh.write(json.dumps({"timestamp": t, "input_length": 512 * len(blocks) - rng.randint(0, 500),
                                 "output_length": rng.randint(20, 800), "hash_ids": blocks}) + "\n")
            t += rng.randint(0, 400)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=15)
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        write_trace(path, ns.rows)
        spec = identified_spec({"scenario": "trace", "trace": str(path)}, "bench")
        times: dict[str, list[float]] = {"parse": [], "check": []}

        def parse() -> None:
            read_trace(str(path))

        def check() -> None:
            assert not trace_changed(spec)

        arms = {"parse": parse, "check": check}
        for i in range(ns.pairs):
            for name in (("parse", "check") if i % 2 == 0 else ("check", "parse")):
                t0 = time.perf_counter()
                arms[name]()
                times[name].append(time.perf_counter() - t0)
        size = path.stat().st_size
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"trace: {ns.rows:,} rows, {size / 1e6:.1f} MB; {ns.pairs} interleaved pairs")
    print(f"parse (collection, per trace test): median {med['parse'] * 1e3:.1f} ms")
    print(f"check (run, before measuring):      median {med['check'] * 1e3:.1f} ms")
    print(f"check / parse: {med['check'] / med['parse']:.3f}")


if __name__ == "__main__":
    main()

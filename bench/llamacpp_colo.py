"""A co-located CPU engine gated on a small machine: how many gate runs does the client's self-check accept?

llama.cpp's server (``xllamacpp`` wheel, the ``llamacpp`` extra) serves a tiny random-weight
model on the same machine as pytest. The plugin splits the CPUs itself
(``--goodput-engine-cpus=auto``). A three-test suite is gated ``--runs`` times in a row:

* ``test_four_users`` and ``test_eight_users``: closed loops of 4 and 8 users (judged on
  event-loop lag and client CPU);
* ``test_poisson``: open-loop Poisson arrivals (also judged on send lag).

Each capture mode in ``--capture`` (default ``off,auto``) records its own one-session
baseline, then the gate runs alternate between the modes (run 1 off, run 1 auto, run 2 off,
...) so both see the same neighbours. ``--busy`` starts one CPU-bound process per CPU for the
whole invocation. The machine may be shared: every row carries ``os.getloadavg()``.

For each test the script prints whether the final outcome was valid, whether the plugin had to
re-measure (the first run was invalid, and why), and the worst run's send lag P99, event-loop
lag P99, client CPU and receive-time source, read back from the ``--goodput-json`` document.

    python bench/llamacpp_colo.py --runs 10 --busy
    python bench/llamacpp_colo.py --runs 2 --capture auto      # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from pytest_goodput.engines.tinyllama import write_tiny_llama
from pytest_goodput.schema.outcomes.outcome import TestOutcome

SUITE = '''
import pytest

ISL, OSL = {isl}, {osl}


@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests={requests}, warmup_requests=8,
                     isl=ISL, osl=OSL)
def test_four_users():
    pass


@pytest.mark.goodput(scenario="concurrency", concurrency=8, requests={requests}, warmup_requests=8,
                     isl=ISL, osl=OSL)
def test_eight_users():
    pass


@pytest.mark.goodput(scenario="server", rate={rate}, requests={requests}, warmup_requests=8,
                     isl=ISL, osl=OSL)
def test_poisson():
    pass
'''

TESTS = ("test_four_users", "test_eight_users", "test_poisson")


@dataclass
class TestRow:
    """One test of one gate run: final validity, the first run's reasons, the worst run's figures."""

    status: str = "?"
    valid: bool = False
    first_reasons: list[str] = field(default_factory=list)
    final_reasons: list[str] = field(default_factory=list)
    send_p99: Optional[float] = None
    loop_p99: Optional[float] = None
    cpu: Optional[float] = None
    source: str = "?"

    def cell(self) -> str:
        mark = "valid" if self.valid else "INVALID"
        if self.valid and self.first_reasons:
            mark = "valid(2nd)"

        def num(x: Optional[float], fmt: str) -> str:
            return "-" if x is None else format(x, fmt)
        return (f"{mark:<10} {self.status:<9} send {num(self.send_p99, '5.1f')} loop {num(self.loop_p99, '5.1f')} "
                f"cpu {num(self.cpu, '.2f')} {self.source}")


def short(reason: str) -> str:
    """The self-check reason's kind and figures: 'send lag P99 12.3 ms > 10.0 ms'."""
    m = re.match(r"(?:worker \d+ of \d+: )?([^:]*?)(?::|$)", reason)
    return m.group(1).strip() if m else reason[:60]


def serve_command(model: Path, parallel: int) -> str:
    return shlex.join([sys.executable, "-m", "pytest_goodput.engines.llamacpp_server", "--model", str(model),
                       "--port", "{port}", "--parallel", str(parallel), "--threads", "1", "--alias", "tiny"])


def run_pytest(work: Path, label: str, *args: str) -> tuple[int, dict[str, TestRow]]:
    out = work / f"{label}.json"
    cmd = [sys.executable, "-m", "pytest", "test_colo.py", "-q", "-p", "no:cacheprovider",
           f"--goodput-json={out}", "--goodput-engine-cpus=auto", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    (work / f"{label}.log").write_text(proc.stdout + proc.stderr)
    rows: dict[str, TestRow] = {}
    if not out.is_file():
        return proc.returncode, rows
    for test in json.loads(out.read_text())["tests"]:
        o = TestOutcome.model_validate(test["outcome"])
        row = rows.setdefault(o.nodeid.rsplit("::", 1)[-1], TestRow())
        row.status, row.valid, row.final_reasons = o.status, o.client_valid, o.client_reasons
        for note in o.notes:
            if note.startswith("re-measured once"):
                row.first_reasons = [short(r) for r in note.split("(", 1)[1].rstrip(")").split("; ")]
        for run in test["runs"]:
            c = run["client"]
            for attr, value in (("send_p99", c.get("send_lag_p99_ms")), ("loop_p99", c.get("loop_lag_p99_ms")),
                                ("cpu", c.get("cpu_utilization"))):
                if value is not None:
                    setattr(row, attr, max(value, getattr(row, attr) or 0.0))
            row.source = (run.get("receive_timestamps") or {}).get("source", "read")
    return proc.returncode, rows


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="consecutive gate runs per capture mode (default 10)")
    ap.add_argument("--capture", default="off,auto", help="capture modes to compare (default off,auto)")
    ap.add_argument("--busy", action="store_true", help="one CPU-bound neighbour process per CPU throughout")
    ap.add_argument("--requests", type=int, default=48, help="requests per test (default 48)")
    ap.add_argument("--isl", type=int, default=64, help="prompt tokens per request (default 64)")
    ap.add_argument("--osl", type=int, default=32, help="output tokens per request (default 32)")
    ap.add_argument("--rate", type=float, default=8.0, help="the Poisson test's arrival rate (req/s, default 8)")
    ap.add_argument("--parallel", type=int, default=4, help="the engine's slots (default 4)")
    ap.add_argument("--keep", type=Path, help="work here and keep the files (default: a temp dir)")
    ns = ap.parse_args()
    modes = [m.strip() for m in ns.capture.split(",") if m.strip()]
    if not modes or any(m not in ("off", "auto", "on") for m in modes):
        print("llamacpp_colo: --capture takes a comma list of off, auto, on", file=sys.stderr)
        return 2
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        print("llamacpp_colo: needs the llamacpp extra: pip install -e '.[llamacpp]'", file=sys.stderr)
        return 2
    work = ns.keep or Path(tempfile.mkdtemp(prefix="llamacpp-colo-"))
    work.mkdir(parents=True, exist_ok=True)
    model = Path(write_tiny_llama(work / "tiny.gguf"))
    (work / "test_colo.py").write_text(SUITE.format(requests=ns.requests, rate=ns.rate, isl=ns.isl, osl=ns.osl))
    serve = f"--goodput-serve={serve_command(model, ns.parallel)}"
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)] \
        if ns.busy else []
    print(f"work dir {work}; {os.cpu_count()} CPUs; {len(busy)} CPU-bound neighbours; modes {modes}; "
          f"load {load()}", flush=True)
    tally: dict[tuple[str, str], list[TestRow]] = defaultdict(list)
    try:
        for mode in modes:
            code, _ = run_pytest(work, f"record-{mode}", serve, f"--goodput-capture={mode}",
                                 f"--goodput-baseline=baseline-{mode}", "--goodput-update-baseline",
                                 "--goodput-sessions=1")
            print(f"record {mode}: exit {code}  load {load()}", flush=True)
        for i in range(1, ns.runs + 1):
            for mode in modes:
                t0 = time.perf_counter()
                code, rows = run_pytest(work, f"gate-{mode}-{i}", serve, f"--goodput-capture={mode}",
                                        f"--goodput-baseline=baseline-{mode}")
                took = time.perf_counter() - t0
                print(f"run {i:>2} {mode:<4} exit {code} {took:5.0f} s  load {load()}", flush=True)
                for name in TESTS:
                    row = rows.get(name, TestRow())
                    tally[(mode, name)].append(row)
                    why = "; ".join(row.first_reasons or row.final_reasons)
                    print(f"    {name:<17} {row.cell()}" + (f"  [{why}]" if why else ""), flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print(f"\nsummary (load {load()}): valid gate outcomes / runs; first-try valid in brackets")
    for name in TESTS:
        cells = []
        for mode in modes:
            rows = tally[(mode, name)]
            cells.append(f"{mode}: {sum(r.valid for r in rows)}/{len(rows)} "
                         f"({sum(r.valid and not r.first_reasons for r in rows)})")
        print(f"  {name:<17} " + "   ".join(cells))
    if not ns.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

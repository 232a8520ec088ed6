"""The whole gate on a real engine: llama.cpp, a three-test suite, A/A runs and a real change.

What a user of the README does, on llama.cpp's server (``xllamacpp`` wheel, the ``llamacpp``
extra) serving a tiny random-weight model this script writes itself:

1. a suite of three gated tests — ``concurrency`` (4 users), ``server`` (Poisson arrivals
   with per-request SLOs, so goodput is gated) and ``sweep`` (1, 4 and 8 users) — with the
   scenarios' default gates and tolerances (the concurrency test also gates median TTFT, at 25 %);
2. ``pytest --goodput-serve=CMD --goodput-update-baseline`` once: the default way, which
   records ``--goodput-sessions`` (5) sessions per test, relaunching the engine between them;
3. ``--aa-runs`` consecutive gate runs (``--goodput-baseline``) of the same engine command:
   an A/A test, where any *regressed* verdict is a false alarm;
4. ``--slow-runs`` gate runs of the same engine with one slot (``--parallel 1``) instead of
   four: requests queue for the slot, and the gate must fail.

The engine runs on ``--engine-cpus`` (one compute thread) and the client on ``--client-cpus``,
through the plugin's own ``--goodput-engine-cpus`` / ``--goodput-client-cpus`` (``--taskset``:
with ``taskset`` around the engine command and the pytest process instead), so the client is
not starved by the engine it measures.
Each run's verdicts are read back from its ``--goodput-json`` document. The script prints
one row per run and a summary, and exits 1 when an A/A run regressed or a ``--parallel 1``
run was not caught.

    python bench/llamacpp_gate.py                      # about 25 minutes
    python bench/llamacpp_gate.py --aa-runs 3 --slow-runs 1 --sessions 3   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from pytest_goodput.engines.tinyllama import write_tiny_llama
from pytest_goodput.schema.outcomes.outcome import TestOutcome

SUITE = '''
import pytest

ISL, OSL = 128, 64


# the scenario's default gates, and the median TTFT: users queueing for a slot wait longer
# for their first token while the few in service stream faster
@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests=240, warmup_requests=8,
                     isl=ISL, osl=OSL, gate=["throughput.output_tokens_per_s", "metrics.tpot_ms.p50",
                                             "metrics.ttft_ms.p99", "metrics.ttft_ms.p50"],
                     tolerances={{"metrics.ttft_ms.p50": 0.25}})
def test_four_users():
    pass


@pytest.mark.goodput(scenario="server", rate={rate}, requests=200, warmup_requests=8,
                     isl=ISL, osl=OSL, ttft_ms={ttft_ms}, tpot_ms={tpot_ms})
def test_poisson_arrivals():
    pass


@pytest.mark.goodput(scenario="sweep", sweep=[1, 4, 8], duration_s=8.0, isl=ISL, osl=OSL)
def test_frontier():
    pass
'''


@dataclass
class GateRun:
    """One pytest invocation, read back from its JSON document."""

    label: str
    exit_code: int
    seconds: float
    statuses: dict[str, str] = field(default_factory=dict)
    regressed: dict[str, list[str]] = field(default_factory=dict)
    slo_failed: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    verdicts: Counter = field(default_factory=Counter)  # (test, metric, verdict) -> count

    @property
    def any_regressed(self) -> bool:
        return any(self.regressed.values())

    @property
    def caught(self) -> bool:
        """The gate failed the build for the engine's sake: a regression or a broken SLO."""
        return self.exit_code == 1 and (self.any_regressed or any(self.slo_failed.values()))

    def row(self) -> str:
        cells = " ".join(f"{name}={status}" for name, status in self.statuses.items())
        worse = "; ".join(f"{t}: {', '.join(m)}" for t, m in self.regressed.items() if m)
        worse += "".join(f"; {t} SLO: {', '.join(m)}" for t, m in self.slo_failed.items() if m)
        return f"{self.label:<10} exit {self.exit_code}  {self.seconds:6.1f} s  {cells}" + (
            f"  [{worse}]" if worse else "")


def serve_command(model: Path, parallel: int, cpus: Optional[str]) -> str:
    return shlex.join([
        *(["taskset", "-c", cpus] if cpus else []), sys.executable, "-m", "pytest_goodput.engines.llamacpp_server",
        "--model", str(model), "--port", "{port}", "--parallel", str(parallel), "--threads", "1",
        "--alias", "tiny", "--metrics",
    ])


def run_pytest(work: Path, label: str, client_cpus: Optional[str], *args: str) -> GateRun:
    """``client_cpus`` wraps pytest in taskset; None leaves placement to the plugin's options."""
    out = work / f"{label}.json"
    cmd = [*(["taskset", "-c", client_cpus] if client_cpus else []), sys.executable, "-m", "pytest", "test_gate.py", "-q",
           "-p", "no:cacheprovider", f"--goodput-json={out}", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - t0
    (work / f"{label}.log").write_text(proc.stdout + proc.stderr)
    run = GateRun(label, proc.returncode, took)
    if not out.is_file():
        run.notes.append(f"no JSON document; see {work / (label + '.log')}")
        return run
    for test in json.loads(out.read_text())["tests"]:
        o = TestOutcome.model_validate(test["outcome"])
        name = o.nodeid.rsplit("::", 1)[-1]
        run.statuses[name] = o.status
        run.regressed[name] = [c.metric for c in o.regressed]
        run.slo_failed[name] = [f.name for f in o.slo_failed]
        run.verdicts.update((name, c.metric, c.verdict) for c in o.comparisons)
        run.notes.extend(f"{name}: {n}" for n in o.notes)
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aa-runs", type=int, default=10, help="A/A gate runs (default 10)")
    ap.add_argument("--slow-runs", type=int, default=3, help="--parallel 1 gate runs (default 3)")
    ap.add_argument("--sessions", type=int, default=5, help="baseline sessions (default 5, the plugin's default)")
    ap.add_argument("--engine-cpus", default="0", help="CPUs of the engine (taskset list, default 0)")
    ap.add_argument("--client-cpus", default="1", help="CPUs of pytest and its client (default 1)")
    ap.add_argument("--taskset", action="store_true",
                    help="place engine and client with taskset instead of the plugin's CPU options")
    ap.add_argument("--rate", type=float, default=10.0, help="the server test's arrival rate (req/s; the 4-slot engine serves about 20)")
    ap.add_argument("--ttft-ms", type=float, default=500.0, help="the server test's TTFT limit (ms)")
    ap.add_argument("--tpot-ms", type=float, default=20.0, help="the server test's TPOT limit (ms)")
    ap.add_argument("--keep", type=Path, help="work here and keep the files (default: a temp dir)")
    ns = ap.parse_args()
    if ns.taskset and shutil.which("taskset") is None:
        print("llamacpp_gate: needs taskset (util-linux) to keep engine and client apart", file=sys.stderr)
        return 2
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        print("llamacpp_gate: needs the llamacpp extra: pip install -e '.[llamacpp]'", file=sys.stderr)
        return 2

    work = ns.keep or Path(tempfile.mkdtemp(prefix="llamacpp-gate-"))
    work.mkdir(parents=True, exist_ok=True)
    model = Path(write_tiny_llama(work / "tiny.gguf"))
    (work / "test_gate.py").write_text(SUITE.format(rate=ns.rate, ttft_ms=ns.ttft_ms, tpot_ms=ns.tpot_ms))
    wrap = ns.engine_cpus if ns.taskset else None
    four, one = serve_command(model, 4, wrap), serve_command(model, 1, wrap)
    pytest_cpus = ns.client_cpus if ns.taskset else None
    placement = [] if ns.taskset else [f"--goodput-engine-cpus={ns.engine_cpus}",
                                       f"--goodput-client-cpus={ns.client_cpus}"]
    print(f"work dir: {work}\nengine: {four}\nengine cpus {ns.engine_cpus}, client cpus {ns.client_cpus} "
          f"({'taskset' if ns.taskset else 'the plugin'})\n")

    record = run_pytest(work, "record", pytest_cpus, *placement, f"--goodput-serve={four}",
                        "--goodput-update-baseline", f"--goodput-sessions={ns.sessions}")
    print(record.row(), flush=True)
    if record.exit_code != 0:
        print(f"recording failed; see {work / 'record.log'}", file=sys.stderr)
        return 1

    def gate_runs(prefix: str, serve: str, count: int) -> list[GateRun]:
        runs = []
        for i in range(count):
            runs.append(run_pytest(work, f"{prefix}-{i + 1}", pytest_cpus, *placement,
                                   f"--goodput-serve={serve}", "--goodput-baseline"))
            print(runs[-1].row(), flush=True)
        return runs

    aa = gate_runs("aa", four, ns.aa_runs)
    slow = gate_runs("slow", one, ns.slow_runs)

    statuses = Counter(s for r in aa for s in r.statuses.values())
    false_alarms = sum(r.any_regressed for r in aa)
    caught = sum(r.caught for r in slow)
    by_metric = Counter(f"{t}: {m}" for r in slow for t, ms in r.regressed.items() for m in ms)
    print("\nsummary")
    print(f"  baseline: {ns.sessions} sessions per test, recorded in {record.seconds:.0f} s")
    print(f"  A/A: {false_alarms} of {len(aa)} gate runs with a regressed verdict; "
          f"test outcomes {dict(statuses)}; mean {sum(r.seconds for r in aa) / max(len(aa), 1):.0f} s per run")
    for title, runs in (("A/A", aa), ("--parallel 1", slow)):
        total = sum((r.verdicts for r in runs), Counter())
        print(f"  {title} verdicts per metric over {len(runs)} runs:")
        for (test, metric, verdict), n in sorted(total.items()):
            print(f"    {test:<24} {metric:<34} {verdict:<13} {n}")
    every = [record, *aa, *slow]
    remeasured = sum(n.count("re-measured") for r in every for n in r.notes)
    invalid = sum(s == "invalid" for r in every for s in r.statuses.values())
    tests = sum(len(r.statuses) for r in every)
    print(f"  client self-check: {remeasured} measurements re-measured after an invalid first run, "
          f"{invalid} of {tests} test outcomes invalid")
    print(f"  --parallel 1: caught in {caught} of {len(slow)} gate runs; regressed metrics {dict(by_metric)}")
    if not ns.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if false_alarms == 0 and caught == len(slow) else 1


if __name__ == "__main__":
    sys.exit(main())

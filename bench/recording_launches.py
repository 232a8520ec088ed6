"""What recording a baseline costs in engine launches: a 3-test suite on llama.cpp.

Records ``--goodput-sessions`` sessions of three small goodput tests with the serve command
wrapped by a shell that appends a line to a file per process it starts, so the count comes
from the processes, not from the product. ``--tree DIR`` runs another checkout of the
package (e.g. the release before session-major recording, exported with ``git archive``);
by default this checkout. Prints the starts, the launches the product reports (when it
reports them) and the wall time::

    python bench/recording_launches.py
    mkdir -p build/before && git archive dc9bc5c pytest_goodput | tar -x -C build/before
    python bench/recording_launches.py --tree build/before

``--plant OSL:N,M`` plants a client stall: the N-th and M-th measurements of the test with
that ``osl`` (16, 24 or 32) come back with their self-check verdict invalid, whatever the
machine did (a ``conftest.py`` wraps the harness's ``measure``). Then each test's sessions
kept in its baseline, those re-measured and the launches replaced are printed, from the
stored provenance::

    python bench/recording_launches.py --plant 24:3          # test_b's session 3 re-measured
    python bench/recording_launches.py --plant 24:3,4        # its launch replaced

Needs the ``llamacpp`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = '''
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, warmup_requests=1, isl=128, osl=16)
def test_a():
    pass

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, warmup_requests=1, isl=128, osl=24)
def test_b():
    pass

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, warmup_requests=1, isl=128, osl=32)
def test_c():
    pass
'''


#: Loaded by the recorded suite's pytest: the planted stalls (``GOODPUT_BENCH_PLANT``: osl ->
#: measurement numbers, 1-based), after the product's self-check, so nothing forces them valid.
PLANT = '''
import json, os
import pytest_goodput.plugin.harness as _h

_plan = {int(k): set(v) for k, v in json.loads(os.environ.get("GOODPUT_BENCH_PLANT", "{}")).items()}
_real, _calls = _h.measure, {}

def _planted(spec, engine, progress=None, stage=None):
    _calls[spec.osl] = _calls.get(spec.osl, 0) + 1
    m = _real(spec, engine, progress=progress, stage=stage)
    if _calls[spec.osl] in _plan.get(spec.osl, ()):
        stall = {"valid": False, "reasons": ["planted stall: loop lag P99 80 ms > 20 ms"]}
        m.results = [r.model_copy(update={"client": r.client.model_copy(update=stall)}) for r in m.results]
    return m

_h.measure = _planted
'''


def planted(spec: str) -> dict[int, list[int]]:
    """``24:3,4`` -> {24: [3, 4]}."""
    osl, _, calls = spec.partition(":")
    return {int(osl): [int(c) for c in calls.split(",") if c]}


def kept(work: Path) -> list[str]:
    """Per test: sessions stored, how many re-measured, how many replaced a launch."""
    lines = []
    for path in sorted((work / ".goodput/baselines/test_three").glob("*.json")):
        facts = [r["environment"]["provenance"] for r in json.loads(path.read_text())["runs"]]
        lines.append(f"  {path.stem}: {len(facts)} sessions kept, "
                     f"{sum('re-measured' in f for f in facts)} re-measured, "
                     f"{sum('replaces launch' in f for f in facts)} launch(es) replaced")
    return lines or ["  no baseline stored"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parent.parent),
                    help="directory holding the pytest_goodput package to run")
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--plant", default=None, metavar="OSL:N,M",
                    help="the N-th, M-th measurements of the test with that osl come back client-paced")
    a = ap.parse_args(argv)
    a.tree = str(Path(a.tree).resolve())  # the suite runs in a temporary directory
    from pytest_goodput.engines.tinyllama import write_tiny_llama

    with tempfile.TemporaryDirectory(prefix="goodput-launches-") as tmp:
        work = Path(tmp)
        model = write_tiny_llama(work / "tiny.gguf")
        starts = work / "starts.log"
        serve = shlex.join([sys.executable, "-m", "pytest_goodput.engines.llamacpp_server", "--model", model,
                            "--port", "{port}", "--parallel", "2", "--threads", "1"])
        counted = shlex.join(["sh", "-c", f"echo started >> {shlex.quote(str(starts))}; exec {serve}"])
        (work / "test_three.py").write_text(SUITE)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [a.tree, os.environ.get("PYTHONPATH")]))}
        if a.plant:
            (work / "conftest.py").write_text(PLANT)
            env["GOODPUT_BENCH_PLANT"] = json.dumps(planted(a.plant))
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_three.py",
                               "--goodput-update-baseline", f"--goodput-sessions={a.sessions}",
                               f"--goodput-serve={counted}", "--goodput-json=out.json",
                               "--goodput-engine-cpus=auto"],
                              cwd=work, env=env, capture_output=True, text=True, check=False)
        wall = time.monotonic() - t0
        n = len(starts.read_text().splitlines()) if starts.exists() else 0
        doc = json.loads((work / "out.json").read_text()) if (work / "out.json").exists() else {}
        reported = doc.get("engines", {})
        print(f"tree: {a.tree}")
        print(f"3 tests x {a.sessions} sessions: {n} engine processes started; "
              f"reported: {reported.get('launches', 'not reported')} launches, "
              f"{reported.get('start_s', float('nan')):.1f} s starting; wall {wall:.1f} s")
        print("pytest: " + (proc.stdout.strip().splitlines() or ["(no output)"])[-1])
        if a.plant:
            print(f"planted stall {a.plant}:")
            print("\n".join(kept(work)))
            for line in proc.stdout.splitlines():
                if "recording kept what is valid" in line or "baseline not recorded" in line:
                    print("  " + line.strip()[:300])
        for line in proc.stdout.splitlines():
            if line.startswith("FAILED"):
                print("  " + line[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())

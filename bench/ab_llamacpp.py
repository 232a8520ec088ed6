"""The llama.cpp A/B commands of ``docs/ab.md`` run as typed, timed (``python bench/ab_llamacpp.py``).

Reads the two commands after ``<!-- ab-llamacpp-commands -->`` in ``docs/ab.md`` (one slot
instead of four; the same build on both sides), the same block ``tests/test_ab_llamacpp.py``
runs, and runs each ``--repeats`` times in a fresh directory with this Python first on
``PATH``. ``--neighbour`` keeps a CPU-bound process (``python -c "while True: pass"``)
running for the whole bench. Printed per job: the exit status, rounds kept and dropped, each
gated metric's change, interval and verdict, and the wall time of the whole command
(engines' start included). Needs the ``llamacpp`` extra and two CPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MARKER = "<!-- ab-llamacpp-commands -->"


def doc_commands() -> dict[str, list[str]]:
    """The block after the marker: each ``# comment`` line names the command below it."""
    text = (REPO / "docs" / "ab.md").read_text()
    block = text.split(MARKER, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    out: dict[str, list[str]] = {}
    for part in re.split(r"^# ", block, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        out[title.strip()] = shlex.split(body.replace("\\\n", " "))
    return out


def run_job(argv: list[str]) -> tuple[int, float, dict[str, Any]]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory(prefix="ab-llamacpp-") as cwd:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, env=env, check=False,
                           capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - t0
        out = Path(cwd) / "ab.json"
        result = json.loads(out.read_text()) if out.is_file() else {}
    return p.returncode, wall, result


def fmt(c: dict[str, Any]) -> str:
    if c.get("change") is None:
        return f"{c['verdict']}"
    lo, hi = c["interval"]
    return f"{c['change']:+.1%} [{lo:+.1%}, {hi:+.1%}] {c['verdict']}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="jobs per command (default 3)")
    ap.add_argument("--neighbour", action="store_true", help="a CPU-bound process alongside")
    args = ap.parse_args()
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.neighbour else None
    try:
        for title, argv in doc_commands().items():
            print(f"== {title}\n   {shlex.join(argv)}", flush=True)
            for i in range(args.repeats):
                code, wall, r = run_job(argv)
                comps = {c["metric"]: c for c in r.get("comparisons", [])}
                rows = "; ".join(f"{m}: {fmt(c)}" for m, c in comps.items() if m != "error_rate")
                print(f"   job {i + 1}: exit {code}, {wall:.1f} s, rounds {r.get('rounds_used')} kept "
                      f"+ {r.get('rounds_dropped')} dropped; {rows}", flush=True)
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()


if __name__ == "__main__":
    main()

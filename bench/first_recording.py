"""What the README's gate costs a new user on the simulator: the first recording, then a gate.

Writes the README's gate (the first ``python`` block of "Writing a gate") into a fresh
directory with ``goodput_engine = sim`` in its ``pytest.ini``, runs
``pytest perf --goodput-update-baseline`` then ``pytest perf --goodput-baseline``, and prints per
command its exit status, wall time, the engine launches and seconds of load the plugin reports
(its ``cost:`` line) and the summary line::

    python bench/first_recording.py [--time-scale 2] [--re-record N]

``--re-record N`` then records again (``--goodput-sessions N``, the history keeping five) and
prints the baseline files' sizes after the first recording and ``git diff --stat`` of the
re-record: what a reviewer reads when a baseline is committed (N = 1: a push's one session).
Beside them, the same two recordings rendered as version-1 files (samples inline, ``indent=1``,
``baseline_format.version1_text``) under ``v1/`` in the same commits: the diff before the
compact format, of the same measurements.

``--time-scale`` stretches the simulator's steps (``GOODPUT_SIM_TIME_SCALE``): fewer tokens a
second for the client to read on a busy machine, the same arrivals, so the same seconds of load.
The figures are what the README's "what it costs" sentence states (docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from baseline_format import version1_text  # bench/, beside this script

from pytest_goodput.store import baseline as store

ROOT = Path(__file__).resolve().parent.parent


def readme_gate() -> str:
    """The README's gate as written: the first python block."""
    return re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)


def run(cwd: Path, *args: str, time_scale: Optional[float] = None) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "GOODPUT_SIM_SLOWDOWN")}
    if time_scale is not None:
        env["GOODPUT_SIM_TIME_SCALE"] = str(time_scale)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "perf", "-p", "no:cacheprovider", *args],
                          cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    out = proc.stdout + proc.stderr
    cost = next((ln.strip() for ln in out.splitlines() if ln.strip().startswith("cost:")), "cost: ?")
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    verdict = next((ln for ln in out.splitlines() if ln.startswith("goodput: ")), "goodput: ?")
    print(f"pytest perf {' '.join(args)}: exit {proc.returncode}, wall {wall:.0f} s; {cost}; {verdict}; "
          f"{summary.strip('= ')}", flush=True)
    for line in out.splitlines():
        if line.lstrip().startswith(("invalid run", "note: re-measured", "baseline NOT written")):
            print("   ", line.strip()[:300], flush=True)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def sizes(cwd: Path) -> None:
    """Bytes of each baseline file (the reviewable JSON and its samples) under ``perf/.goodput``,
    and of its version-1 rendering under ``v1/``."""
    for p in sorted([*(cwd / "perf" / ".goodput").rglob("*"), *(cwd / "v1").rglob("*")]):
        if p.is_file() and ("baselines" in p.parts or "v1" in p.parts):
            lines = p.read_bytes().count(b"\n") if p.suffix == ".json" else None
            print(f"    {p.relative_to(cwd)}: {p.stat().st_size:,} bytes"
                  + (f", {lines:,} lines" if lines is not None else ""), flush=True)


def version1(cwd: Path) -> None:
    """``v1/``: every baseline under ``perf/.goodput/baselines`` as the version-1 file."""
    shutil.rmtree(cwd / "v1", ignore_errors=True)
    directory = cwd / "perf" / ".goodput" / "baselines"
    for path in sorted(directory.rglob("*.json")):
        doc = store.load(path)
        if doc is not None:
            out = cwd / "v1" / path.relative_to(directory)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(version1_text(doc), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, help="GOODPUT_SIM_TIME_SCALE for the simulator")
    parser.add_argument("--re-record", type=int, metavar="N",
                        help="record again with N sessions and print the sizes and git diff --stat")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        perf = Path(tmp) / "perf"
        perf.mkdir()
        (perf / "pytest.ini").write_text("[pytest]\ngoodput_engine = sim\n")
        (perf / "test_chat.py").write_text(readme_gate())
        run(Path(tmp), "--goodput-update-baseline", time_scale=ns.time_scale)
        run(Path(tmp), "--goodput-baseline", time_scale=ns.time_scale)
        if ns.re_record:
            version1(Path(tmp))
            sizes(Path(tmp))
            git(Path(tmp), "init", "-q")
            git(Path(tmp), "add", "-A")
            git(Path(tmp), "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "record")
            run(Path(tmp), "--goodput-update-baseline", f"--goodput-sessions={ns.re_record}",
                "--goodput-history=5", time_scale=ns.time_scale)
            version1(Path(tmp))
            git(Path(tmp), "add", "-A")
            print("the re-record, version 2 (perf/.goodput) and the same as version 1 (v1/):", flush=True)
            print(git(Path(tmp), "diff", "--cached", "--stat=200"), flush=True)


if __name__ == "__main__":
    main()

"""What a reviewer reads when a committed baseline is re-recorded: ``git diff --stat``, version 2
beside the same measurements as version-1 files.

    python bench/rerecord_diff.py REPO [PYTEST_ARGS ...]

``REPO`` is a git repository whose ``perf/`` gate has been recorded (``init``, then ``pytest perf
--goodput-update-baseline``), as a user commits it; run this on a copy, it commits there. Each
baseline is rendered as its version-1 file under ``v1/`` (``baseline_format.version1_text``:
samples inline, ``indent=1``, what the store wrote before version 2) and committed with it; then
``pytest perf --goodput-update-baseline PYTEST_ARGS`` records again, ``v1/`` is rendered again,
and the sizes and ``git diff --cached --stat`` of both formats are printed. The python running
this script runs the pytest (a venv with the wheel installed is the user's view).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from baseline_format import version1_text  # bench/, beside this script

from pytest_goodput.store import baseline as store


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


def rerecord(repo: Path, *args: str, time_scale: Optional[float] = None) -> None:
    """Commit the version-1 rendering, record again with ``args``, print sizes and the diff."""
    version1(repo)
    sizes(repo)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "record")
    run(repo, "--goodput-update-baseline", *args, time_scale=time_scale)
    version1(repo)
    sizes(repo)
    git(repo, "add", "-A")
    print("the re-record, version 2 (perf/.goodput) and the same as version 1 (v1/):", flush=True)
    print(git(repo, "diff", "--cached", "--stat=200"), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rerecord(Path(sys.argv[1]), *sys.argv[2:])

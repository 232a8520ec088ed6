"""The project's one test command (the README's, ``bash scripts/test``) on N clean clones.

What CI's second stage does, repeated to measure the suite's flake rate: ``git clone``, a new
virtual environment, ``pip install -e ".[test]"``, then ``bash scripts/test -p no:cacheprovider
-rfE`` (the layer contracts, then the fast, integration and solo tiers; the command stops at the
first tier that fails, as CI does). Prints one line per clone (exit code, the time of the
install, of each tier and of the whole, the machine's load when it started, every failed test)
and a tally::

    python bench/test_command.py --runs 10

``--tree`` clones another commit or checkout (default: this repository's HEAD); ``--venv DIR``
reuses an existing virtual environment (the clone is then installed into it, editable).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from readme_command import ROOT, fresh_clone, install_clone, venv_env

#: "tests: the fast tier took 56 s", printed by scripts/test after each tier.
TIER = re.compile(r"^tests: the (\w+) tier took (\d+) s$")
#: pytest's last line of a tier: "==== 1612 passed, 3 skipped in 55.12s ====".
TALLY = re.compile(r"^=+ (.*\b(?:passed|failed|error|errors|skipped)\b.*) in [\d.]+s")
#: A failed test of the project's own (pytester sessions inside tests print theirs too).
FAILED = re.compile(r"^(?:FAILED|ERROR) (tests/\S+)")


def run_once(repo: Path, venv_bin: Path) -> tuple[int, str]:
    """``bash scripts/test`` in ``repo`` with ``venv_bin`` first on the PATH, as CI runs it."""
    env = venv_env(venv_bin)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(["bash", "scripts/test", "-p", "no:cacheprovider", "-rfE"], cwd=repo,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def parse(text: str) -> tuple[list[str], list[str], list[str]]:
    """Each tier's time, each tier's pytest tally (the last before its time: the tests' own
    pytester sessions print tallies of theirs) and the failed tests, in order."""
    tiers: list[str] = []
    tallies: list[str] = []
    failed: list[str] = []
    last = ""
    for line in text.splitlines():
        if m := TIER.match(line):
            tiers.append(f"{m.group(1)} {m.group(2)} s")
            tallies.append(last or "no tally")
        elif m := TALLY.match(line):
            last = m.group(1)
        elif m := FAILED.match(line):
            failed.append(m.group(1))
    return tiers, tallies, failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="clean clones, one run each (default 10)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout to clone (default: this one)")
    ap.add_argument("--venv", type=Path, help="an existing virtual environment to install each clone into")
    ap.add_argument("--keep-logs", type=Path, help="a folder to write each run's full output to")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error(f"--runs must be at least 1, got {args.runs}")
    exits: Counter[int] = Counter()
    flaky: Counter[str] = Counter()
    times: list[float] = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="goodput-tests-") as tmp:
            load = os.getloadavg()[0]
            t0 = time.monotonic()
            repo = fresh_clone(args.tree, Path(tmp), args.venv, install=".[test]")
            if args.venv is not None:
                install_clone(repo, args.venv, ".[test]")
            installed = time.monotonic() - t0
            code, text = run_once(repo, (args.venv or Path(tmp) / "venv") / "bin")
            took = time.monotonic() - t0
        if args.keep_logs:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            (args.keep_logs / f"run{i + 1}.log").write_text(text)
        tiers, tallies, failed = parse(text)
        exits[code] += 1
        flaky.update(failed)
        times.append(took)
        print(f"run {i + 1}: exit {code} in {took:.0f} s (install {installed:.0f} s; "
              f"{', '.join(tiers) or 'no tier finished'}; load {load:.1f}); "
              f"{' | '.join(tallies) or 'no tally'}; failed: {', '.join(failed) or 'none'}", flush=True)
    print(f"{args.runs} clean clones: exits {dict(sorted(exits.items()))}; runs with a failure "
          f"{sum(n for c, n in exits.items() if c != 0)}; time {min(times):.0f}-{max(times):.0f} s "
          f"(median {statistics.median(times):.0f} s); failed tests: {dict(flaky) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

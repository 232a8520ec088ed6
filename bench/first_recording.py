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
import re
import tempfile
from pathlib import Path

from rerecord_diff import git, rerecord, run  # bench/, beside this script

ROOT = Path(__file__).resolve().parent.parent


def readme_gate() -> str:
    """The README's gate as written: the first python block."""
    return re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)


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
            git(Path(tmp), "init", "-q")
            rerecord(Path(tmp), f"--goodput-sessions={ns.re_record}", "--goodput-history=5",
                     time_scale=ns.time_scale)


if __name__ == "__main__":
    main()

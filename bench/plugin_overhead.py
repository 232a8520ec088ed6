"""What does installing pytest-goodput cost a test suite that has no goodput test?

pytest imports every installed plugin's entry point (``pytest11``) in every run, so the
plugin's import and hook cost lands on unrelated suites. This script writes a one-test file
(``def test_x(): pass``) in a temporary directory and times

    python -m pytest --co -q -p no:cacheprovider FILE                  (plugin active)
    python -m pytest --co -q -p no:cacheprovider -p no:goodput FILE    (plugin blocked)

in interleaved pairs (the order flips every pair, so drift on a shared machine hits both
arms alike). Printed: the median wall time of each arm, the median paired difference and
the ratio, and whether the difference meets the target (<= 30 ms). It then runs each arm
once more in-process and lists the modules the plugin added to ``sys.modules``, flagging
the heavy ones (pydantic, numpy, httpx, aiohttp, ... and the gate's own core packages): there
should be none until a goodput test is collected or a goodput setting is given.

Timing is only printed, never asserted (tests/test_plugin_overhead.py checks the imports).

    python bench/plugin_overhead.py              # about 20 s
    python bench/plugin_overhead.py --pairs 31
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MS = 30.0
#: Third-party packages the plugin must not import for a suite without goodput tests.
HEAVY_THIRD_PARTY = ("pydantic", "pydantic_core", "numpy", "httpx", "aiohttp", "uvloop",
                     "starlette", "uvicorn", "tabulate", "prometheus_client", "scipy")
#: The gate's own core: everything below the plugin's entry point and settings table.
CORE_PREFIXES = tuple(f"pytest_goodput.{p}" for p in (
    "schema", "stats", "measure", "judge", "load", "engines", "sim", "store", "run",
    "report", "cli", "plugin.session", "plugin.harness"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)  # the point is to load installed plugins
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_PLUGINS", None)
    for key in [k for k in env if k.startswith("GOODPUT_")]:
        env.pop(key)  # a goodput setting in the environment would rightly load the core
    return env


def _cmd(test_file: Path, plugin: bool) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
    if not plugin:
        cmd += ["-p", "no:goodput"]
    return cmd + [str(test_file)]


def _time_once(test_file: Path, plugin: bool, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(_cmd(test_file, plugin), cwd=test_file.parent, env=env,
                          capture_output=True, text=True)
    elapsed = (time.perf_counter() - t0) * 1000.0
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return elapsed


#: One run in-process, then the names in ``sys.modules``: exact, and needs no conftest.
#: (``-X importtime`` misses modules pytest loads through ``importlib.import_module``,
#: such as the entry point itself.)
_LIST_MODULES = (
    "import sys, pytest; rc = pytest.main(sys.argv[1:]); "
    "print('MODULES', *sorted(sys.modules)); sys.exit(rc)"
)


def _imported(test_file: Path, plugin: bool, env: dict[str, str]) -> set[str]:
    """The modules loaded by the end of one ``pytest --co`` run of ``test_file``."""
    cmd = _cmd(test_file, plugin)
    cmd = [sys.executable, "-c", _LIST_MODULES, *cmd[cmd.index("pytest") + 1:]]
    proc = subprocess.run(cmd, cwd=test_file.parent, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("MODULES ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"pytest failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return set(lines[-1].split()[1:])


def _is_heavy(name: str) -> bool:
    top = name.split(".")[0]
    return top in HEAVY_THIRD_PARTY or name.startswith(CORE_PREFIXES)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=15, help="interleaved pairs (default 15)")
    args = ap.parse_args()
    env = _env()
    with tempfile.TemporaryDirectory(prefix="goodput-overhead-") as tmp:
        test_file = Path(tmp) / "test_one.py"
        test_file.write_text("def test_x():\n    pass\n", encoding="utf-8")
        for plugin in (True, False):  # warm the OS and bytecode caches for both arms
            _time_once(test_file, plugin, env)
        with_plugin: list[float] = []
        without: list[float] = []
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            times = {plugin: _time_once(test_file, plugin, env) for plugin in order}
            with_plugin.append(times[True])
            without.append(times[False])
        on, off = _imported(test_file, True, env), _imported(test_file, False, env)

    diffs = [a - b for a, b in zip(with_plugin, without, strict=True)]
    med_on, med_off, med_diff = (statistics.median(x) for x in (with_plugin, without, diffs))
    print(f"pytest --co of a one-test file, {args.pairs} interleaved pairs "
          f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f})")
    print(f"  with the plugin        median {med_on:7.1f} ms "
          f"(min {min(with_plugin):.1f}, max {max(with_plugin):.1f})")
    print(f"  with -p no:goodput     median {med_off:7.1f} ms "
          f"(min {min(without):.1f}, max {max(without):.1f})")
    q = statistics.quantiles(diffs, n=4) if len(diffs) >= 2 else [diffs[0]] * 3
    print(f"  paired difference      median {med_diff:+7.1f} ms "
          f"(quartiles {q[0]:+.1f} / {q[2]:+.1f}); ratio {med_on / med_off:.3f}")
    verdict = "met" if med_diff <= TARGET_MS else "NOT met"
    print(f"  target: <= {TARGET_MS:.0f} ms added -> {verdict}")

    added = sorted(on - off)
    ours = [m for m in added if m == "pytest_goodput" or m.startswith("pytest_goodput.")]
    heavy: dict[str, int] = {}
    for m in added:
        if _is_heavy(m):
            group = next((c for c in CORE_PREFIXES if m.startswith(c)), m.split(".")[0])
            heavy[group] = heavy.get(group, 0) + 1
    print(f"\nmodules the plugin added to sys.modules during --co: {len(added)}")
    print("  pytest_goodput modules: " + (", ".join(ours) or "none"))
    others = sorted({m.split(".")[0] for m in added if not m.startswith("pytest_goodput")})
    print("  other top-level modules: " + (", ".join(others) or "none"))
    print("  heavy (pydantic, numpy, httpx, aiohttp, ..., the gate's core): "
          + (", ".join(f"{g} ({n})" for g, n in sorted(heavy.items())) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

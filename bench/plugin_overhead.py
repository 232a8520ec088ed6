"""What does installing pytest-goodput cost a test suite that has no goodput test?

pytest imports every installed plugin's entry point (``pytest11``) in every run, so the
plugin's import and hook cost lands on unrelated suites. This script writes a one-test file
(``def test_x(): pass``) in a temporary directory and times

    python -m pytest --co -q -p no:cacheprovider FILE                  (plugin active)
    python -m pytest --co -q -p no:cacheprovider -p no:goodput FILE    (plugin blocked)

in interleaved pairs (the order flips every pair, so drift on a shared machine hits both
arms alike). Printed: the median wall time of each arm, the median paired difference and
the ratio, and whether the difference meets the target (<= 30 ms); then the same for the CPU
time (user + system) each run's process used, which other processes on a busy machine
inflate far less than the wall time. It then runs each arm once more in-process and lists
the modules the plugin added to ``sys.modules``, flagging the heavy ones (pydantic, numpy,
httpx, httptools, ... and the gate's own core packages): there should be none until the
session has goodput work (a goodput test or fixture collected, baselines recorded).

``--env NAME=VALUE`` (repeatable) sets a variable for both arms: goodput settings a CI job
exports for every pytest run of the job (``GOODPUT_CAPTURE=on``, ``GOODPUT_BASE_SIM=...``)
must not cost a suite without goodput tests either. Without it, ``GOODPUT_*`` variables of
the caller's environment are removed.

Timing is only printed, never asserted (tests/test_plugin_overhead.py checks the imports).

    python bench/plugin_overhead.py              # about 20 s
    python bench/plugin_overhead.py --pairs 31
    python bench/plugin_overhead.py --env GOODPUT_CAPTURE=on --env GOODPUT_BASE_SIM=default
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MS = 30.0
#: Third-party packages the plugin must not import for a suite without goodput tests.
HEAVY_THIRD_PARTY = ("pydantic", "pydantic_core", "numpy", "httpx", "httptools", "uvloop",
                     "starlette", "uvicorn", "tabulate", "prometheus_client", "scipy")
#: The gate's own core: everything below the plugin's entry point and settings table.
CORE_PREFIXES = tuple(f"pytest_goodput.{p}" for p in (
    "schema", "stats", "measure", "judge", "load", "engines", "sim", "store", "run",
    "report", "cli", "plugin.session", "plugin.harness", "plugin.machine"))
#: Plain-Python modules (no third-party import) the settings table checks values with.
SETTINGS_CHECKS = ("pytest_goodput.schema", "pytest_goodput.schema.cpus", "pytest_goodput.schema.addresses")


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)  # the point is to load installed plugins
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_PLUGINS", None)
    for key in [k for k in env if k.startswith("GOODPUT_")]:
        env.pop(key)  # only the settings asked for with --env
    return {**env, **extra}


def _children_cpu_ms() -> float:
    """CPU time (user + system) of this process's waited-for children so far, ms."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000.0


def _cmd(test_file: Path, plugin: bool) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
    if not plugin:
        cmd += ["-p", "no:goodput"]
    return cmd + [str(test_file)]


def _time_once(test_file: Path, plugin: bool, env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time of one run, ms."""
    cpu0, t0 = _children_cpu_ms(), time.perf_counter()
    proc = subprocess.run(_cmd(test_file, plugin), cwd=test_file.parent, env=env,
                          capture_output=True, text=True)
    elapsed, cpu = (time.perf_counter() - t0) * 1000.0, _children_cpu_ms() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return elapsed, cpu


def _paired(label: str, with_plugin: list[float], without: list[float]) -> float:
    """Print one measure's arms, median paired difference and ratio; return the difference."""
    diffs = [a - b for a, b in zip(with_plugin, without, strict=True)]
    med_on, med_off, med_diff = (statistics.median(x) for x in (with_plugin, without, diffs))
    print(f" {label}")
    print(f"  with the plugin        median {med_on:7.1f} ms "
          f"(min {min(with_plugin):.1f}, max {max(with_plugin):.1f})")
    print(f"  with -p no:goodput     median {med_off:7.1f} ms "
          f"(min {min(without):.1f}, max {max(without):.1f})")
    q = statistics.quantiles(diffs, n=4) if len(diffs) >= 2 else [diffs[0]] * 3
    print(f"  paired difference      median {med_diff:+7.1f} ms "
          f"(quartiles {q[0]:+.1f} / {q[2]:+.1f}); ratio {med_on / med_off:.3f}")
    return med_diff


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
    return top in HEAVY_THIRD_PARTY or (name.startswith(CORE_PREFIXES) and name not in SETTINGS_CHECKS)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=15, help="interleaved pairs (default 15)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="set this variable in both arms (repeatable), e.g. GOODPUT_CAPTURE=on")
    args = ap.parse_args()
    extra = dict(e.split("=", 1) for e in args.env)
    env = _env(extra)
    with tempfile.TemporaryDirectory(prefix="goodput-overhead-") as tmp:
        test_file = Path(tmp) / "test_one.py"
        test_file.write_text("def test_x():\n    pass\n", encoding="utf-8")
        for plugin in (True, False):  # warm the OS and bytecode caches for both arms
            _time_once(test_file, plugin, env)
        runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            for plugin in order:
                runs[plugin].append(_time_once(test_file, plugin, env))
        on, off = _imported(test_file, True, env), _imported(test_file, False, env)

    settings = " ".join(f"{k}={v}" for k, v in extra.items()) or "none"
    print(f"pytest --co of a one-test file, {args.pairs} interleaved pairs "
          f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; goodput settings in the environment: {settings})")
    med_diff = _paired("wall time", [w for w, _ in runs[True]], [w for w, _ in runs[False]])
    cpu_diff = _paired("CPU time (user + system)", [c for _, c in runs[True]], [c for _, c in runs[False]])
    verdict = "met" if med_diff <= TARGET_MS else "NOT met"
    print(f"  target: <= {TARGET_MS:.0f} ms added -> {verdict} (wall time); "
          f"{'met' if cpu_diff <= TARGET_MS else 'NOT met'} (CPU time)")

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
    print("  heavy (pydantic, numpy, httpx, httptools, ..., the gate's core): "
          + (", ".join(f"{g} ({n})" for g, n in sorted(heavy.items())) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

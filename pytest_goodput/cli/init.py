"""``python -m pytest_goodput init``: a repository's first gate, its settings and its workflows.

Writes, from the root of the user's repository: the gate's directory (``perf/`` by default) with
a ``pytest.ini`` naming the engine and a first gate whose request count proves its P99 SLOs
(MLPerf's early stopping, ``stats/binomial.py``), ``requirements-goodput.txt`` pinning this
version, and the GitHub workflows shipped in ``pytest_goodput/templates/github/``: the hosted
one and its fork-safe comment workflow, or with ``--gpu CLASS...`` the self-hosted GPU one and
its own.

The gate's files are named ``perf_*.py`` and only the directory's own ini collects them, so a
plain ``pytest`` elsewhere in the repository never launches the engine. Idempotent: a file
already as it would be written is left alone; one that differs is never overwritten without
``--force`` (nothing is written then).
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
from importlib import resources
from pathlib import Path

from pytest_goodput._version import __version__
from pytest_goodput.cli.run import CLIError
from pytest_goodput.schema.cpus import CpuSetError, parse_cpus
from pytest_goodput.schema.scenario.spec import SLO_PRESETS
from pytest_goodput.stats.binomial import percentile_proof

#: The gate's files: ``perf/pytest.ini`` collects these, a plain ``pytest`` does not.
GATE_FILES = "perf_*.py"
#: The first gate: MLPerf's server shape at the README's rate, two repeats per session.
DEFAULT_RATE = 8.0
DEFAULT_SLO = "mlperf/llama3.1-8b/interactive"
REPEATS = 2
#: The workflow lines init fills in: the gate's directory and the GPU classes.
SUITE_LINE = re.compile(r"^(\s*GOODPUT_SUITE: ).*$", re.M)
MATRIX_LINE = re.compile(r"^(\s*gpu: )\[[^\]]*\](.*)$", re.M)


def add_init_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "init", help="write a first gate, its pytest.ini and the GitHub workflows into this repository",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    engine = p.add_mutually_exclusive_group()
    engine.add_argument("--serve", metavar="CMD", help="the command that launches the engine, "
                        "with {port} for the port (e.g. 'vllm serve MODEL --port {port}')")
    engine.add_argument("--url", help="the URL of an engine already running (http://host:port/v1)")
    engine.add_argument("--sim", action="store_true",
                        help="the embedded simulator (the default): try the loop without a GPU")
    p.add_argument("--dir", default="perf", help="the gate's directory (default perf)")
    p.add_argument("--hardware", metavar="LABEL", help="label this machine class in the ini "
                   "(CI's workflows label their runners themselves: leave it out for them)")
    p.add_argument("--gpu", nargs="+", metavar="CLASS", help="self-hosted GPU runner classes: "
                   "write the GPU workflow (goodput-gpu.yml), one job per class, instead of the hosted one")
    p.add_argument("--engine-cpus", metavar="CPUS", help="the CPUs an engine the plugin starts runs on "
                   "(goodput_engine_cpus: 'auto', or a list such as 0-5): 'auto' for a CPU engine "
                   "(llama.cpp, vLLM's CPU build) on a small machine, whose client would otherwise "
                   "share the engine's CPUs and fall behind")
    p.add_argument("--no-workflows", action="store_true", help="write the gate only, no GitHub files")
    p.add_argument("--rate", type=float, default=DEFAULT_RATE, help="the first gate's arrival rate, "
                   f"requests/s (default {DEFAULT_RATE:g})")
    p.add_argument("--slo", default=DEFAULT_SLO, help=f"the first gate's SLO preset (default {DEFAULT_SLO})")
    p.add_argument("--root", type=Path, default=Path("."), help="the repository's root (default .)")
    p.add_argument("--force", action="store_true", help="overwrite files that differ")


def proving_requests(percentile: float = 99.0, repeats: int = REPEATS) -> int:
    """Requests per repeat that prove a P-th percentile SLO when none exceeds it, rounded up to
    ten: with fewer the gate can only say "held, not proven"."""
    needed = percentile_proof(1, 0, percentile)[1] or 1
    return int(math.ceil(needed / repeats / 10.0) * 10)


def gate_file(rate: float, slo: str) -> str:
    """The first gate: a server test at ``rate`` whose requests prove the preset's P99 SLOs."""
    if slo not in SLO_PRESETS:
        raise CLIError(f"--slo {slo!r}: unknown SLO preset; allowed: {', '.join(sorted(SLO_PRESETS))}")
    if not (math.isfinite(rate) and rate > 0):
        raise CLIError(f"--rate {rate!r}: the arrival rate must be a number > 0 (requests/s)")
    ttft, tpot = SLO_PRESETS[slo]
    requests = proving_requests()
    proof = percentile_proof(1, 0, 99.0)[1]
    return f'''"""The serving gate: pytest-goodput measures the engine this directory's pytest.ini names.

Record on main, gate every pull request (from the repository's root):

    pytest {{dir}} --goodput-update-baseline     # record the baselines
    pytest {{dir}} --goodput-baseline            # gate: exit 1 on a regression or a broken SLO
"""

import pytest


@pytest.mark.goodput(
    scenario="server", rate={rate!r}, requests={requests}, repeats={REPEATS},  # Poisson arrivals
    isl=128, osl=64, warmup_requests=20,          # synthetic prompts: 128 tokens in, 64 out
    slo={slo!r},  # P99 TTFT <= {ttft:g} ms, P99 TPOT <= {tpot:g} ms
)
def test_chat_serving():
    """Requests at {rate:g} req/s meet the SLOs and do not regress. {requests} x {REPEATS} requests: a
    P99 SLO is proven by {proof} requests with none over its limit (docs/guide.md)."""
'''


def ini_file(ns: argparse.Namespace) -> str:
    """The gate directory's pytest.ini: its files, strictness, the engine and the label."""
    if ns.serve:
        if "{port}" not in ns.serve:
            raise CLIError(f"--serve {ns.serve!r}: write {{port}} where the engine's port goes "
                           "(the plugin picks a free one)")
        engine = f"goodput_serve = {ns.serve}"
    elif ns.url:
        engine = f"goodput_url = {ns.url}"
    else:
        engine = "# The embedded simulator: name a real engine (goodput_serve, goodput_url) to measure it.\n" \
                 "goodput_engine = sim"
    lines = [
        "[pytest]",
        "# pytest-goodput's gate (`python -m pytest_goodput init`). Only this directory's ini collects",
        f"# its files ({GATE_FILES}): a plain `pytest` elsewhere in the repository never starts the engine.",
        f"python_files = {GATE_FILES}",
        "# A misspelt marker or ini key is an error, not a warning.",
        "addopts = --strict-markers --strict-config",
        engine,
    ]
    if ns.hardware and ns.gpu:
        raise CLIError(f"--hardware {ns.hardware}: with --gpu the workflow labels each class itself "
                       "(GOODPUT_HARDWARE), and an ini label that differs would stop every run")
    if ns.hardware:
        lines += ["# CI labels its runners with GOODPUT_HARDWARE; a label here that differs stops the run.",
                  f"goodput_hardware = {ns.hardware}"]
    if ns.engine_cpus:
        if ns.url:
            raise CLIError(f"--engine-cpus {ns.engine_cpus}: applies to an engine the plugin starts "
                           "(--serve or --sim), not to one reached by --url")
        if ns.engine_cpus.strip().lower() != "auto":
            try:
                parse_cpus(ns.engine_cpus)
            except CpuSetError as exc:
                raise CLIError(f"--engine-cpus {ns.engine_cpus}: {exc}; allowed: auto or a CPU list "
                               "such as 0-5,8") from None
        lines += ["# The engine on these CPUs, the client on the others: a client sharing a CPU engine's",
                  "# cores falls behind and its runs are refused as invalid.",
                  f"goodput_engine_cpus = {ns.engine_cpus}"]
    return "\n".join(lines) + "\n"


def template(name: str) -> str:
    return (resources.files("pytest_goodput") / "templates" / "github" / name).read_text(encoding="utf-8")


def workflow_files(ns: argparse.Namespace) -> dict[str, str]:
    """The GitHub files, from the packaged templates, with the gate's directory (and classes)."""
    if ns.no_workflows:
        return {}
    files = {".github/scripts/goodput-comment.js": template("goodput-comment.js")}
    if ns.gpu:
        bad = [c for c in ns.gpu if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", c)]
        if bad:
            raise CLIError(f"--gpu {' '.join(bad)}: a GPU class is a runner label (letters, digits, . _ -)")
        files[".github/workflows/goodput-gpu.yml"] = _suite(_classes(template("goodput-gpu.yml"), ns.gpu), ns.dir)
        files[".github/workflows/goodput-gpu-comment.yml"] = _classes(template("goodput-gpu-comment.yml"), ns.gpu)
    else:
        files[".github/workflows/goodput.yml"] = _suite(template("goodput.yml"), ns.dir)
        files[".github/workflows/goodput-comment.yml"] = template("goodput-comment.yml")
    return files


def _classes(workflow: str, classes: list[str]) -> str:
    return MATRIX_LINE.sub(lambda m: f"{m.group(1)}[{', '.join(classes)}]{m.group(2)}", workflow, count=1)


def _suite(workflow: str, directory: str) -> str:
    return SUITE_LINE.sub(lambda m: m.group(1) + directory, workflow, count=1)


def planned_files(ns: argparse.Namespace) -> dict[str, str]:
    """Every file init writes, by its path from the repository's root."""
    directory = ns.dir.strip("/") or "."
    if Path(directory).is_absolute() or ".." in Path(directory).parts or not re.fullmatch(r"[\w./-]+", directory):
        raise CLIError(f"--dir {ns.dir!r}: a directory inside the repository, written plainly (e.g. perf)")
    ns.dir = directory
    gate = gate_file(ns.rate, ns.slo).replace("{dir}", directory)
    files = {f"{directory}/pytest.ini": ini_file(ns), f"{directory}/perf_serving.py": gate}
    if not ns.no_workflows:
        files["requirements-goodput.txt"] = f"pytest-goodput=={__version__}\n"
    files.update(workflow_files(ns))
    return files


def cmd_init(ns: argparse.Namespace) -> int:
    root: Path = ns.root
    files = planned_files(ns)
    status = {}
    for rel, text in files.items():
        path = root / rel
        if not path.exists():
            status[rel] = "wrote"
        elif path.read_text(encoding="utf-8") == text:
            status[rel] = "unchanged"
        else:
            status[rel] = "overwrote" if ns.force else "differs"
    differ = [rel for rel, s in status.items() if s == "differs"]
    if differ:
        raise CLIError("these files exist and differ from what init writes: " + ", ".join(differ)
                       + "; nothing written (--force overwrites them)")
    for rel, text in files.items():
        if status[rel] != "unchanged":
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
    for rel in files:
        print(f"{status[rel]:<9} {rel}")
    d = shlex.quote(ns.dir)
    print("\nnext, from the repository's root:\n"
          f"  pytest {d} --goodput-update-baseline   # record: 5 sessions, one engine launch each\n"
          f"  pytest {d} --goodput-baseline          # gate: exit 1 on a regression or a broken SLO")
    if files.keys() & {".github/workflows/goodput.yml", ".github/workflows/goodput-gpu.yml"}:
        print("then commit the files and merge them to main first: a push to main records the "
              "baselines every pull request is gated against (README, \"GitHub Actions\")")
    return 0

"""The package as a user installs it, for the tests that run it: the wheel built from the source
tree, installed (not editable) into a clean venv.

Cheap on purpose: the wheel is built once per module (the ``wheel`` fixture, imported by the
modules that use it), installed with ``--no-deps`` into a venv without pip whose only other
path is this environment's site-packages (the dependencies, already installed; its ``.pth``
files are not processed there, so this checkout's editable install is not on the path), so
nothing but the build backend is fetched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built by the build backend as a release is: the sdist from a copy of what a
    release is made of, then the wheel from the sdist (so the sdist is complete); the sdist
    sits beside it."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src)
    shutil.copytree(ROOT / "pytest_goodput", src / "pytest_goodput",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (whl,) = dist.glob("*.whl")
    return whl


@dataclass(frozen=True)
class Installed:
    """A clean venv holding the wheel: its python, its scripts and the environment a user's
    shell gives them (no checkout on the path, no CI or goodput settings of this session)."""

    venv: Path
    site: Path
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def script(self, name: str) -> Path:
        return self.venv / "bin" / name


def install(wheel: Path, venv: Path) -> Installed:
    """``pip install`` the wheel into a new venv at ``venv``; its dependencies from this one."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The dependencies from this environment, after the venv's own packages (the wheel first).
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                                "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # No checkout on the path: only what the wheel installed (and the test suite's self-check
    # setting, GOODPUT_TEST_*, where the calling test has one).
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "VIRTUAL_ENV")
           and (not k.startswith("GOODPUT_") or k.startswith("GOODPUT_TEST_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and Path(p).resolve() != ROOT)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])  # as if activated
    return Installed(venv=venv, site=Path(site), env=env)


def imported_from(inst: Installed, cwd: Path) -> Path:
    """Where the venv's python imports pytest_goodput from, run in ``cwd``."""
    where = subprocess.run([str(inst.python), "-c", "import pytest_goodput; print(pytest_goodput.__file__)"],
                           cwd=cwd, env=inst.env, capture_output=True, text=True, check=True).stdout.strip()
    return Path(where)

"""The package as PyPI would ship it: the wheel built from the source tree carries the workflows
``init`` writes, the license and the project's metadata; installed (not editable) into a clean
environment, its ``pytest-goodput init`` and the first recording run from it alone.

Cheap on purpose: the wheel is built once for the module, installed with ``--no-deps`` into a
venv without pip whose only other path is this environment's site-packages (the dependencies,
already installed), so nothing but the build backend is fetched.
"""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from pytest_goodput import __version__

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = sorted(p.name for p in (ROOT / "pytest_goodput/templates/github").iterdir())
REPOSITORY = "https://github.com/pytest-goodput/pytest-goodput"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built by the build backend from a copy of what a release is made of."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src)
    shutil.copytree(ROOT / "pytest_goodput", src / "pytest_goodput",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (whl,) = dist.glob("*.whl")
    return whl


def test_the_wheel_ships_the_workflows_the_license_and_the_metadata(wheel):
    assert wheel.name == f"pytest_goodput-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = email.message_from_bytes(z.read(f"pytest_goodput-{__version__}.dist-info/METADATA"))
        assert z.read(f"pytest_goodput-{__version__}.dist-info/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        for name in TEMPLATES:
            path = f"pytest_goodput/templates/github/{name}"
            assert z.read(path) == (ROOT / path).read_bytes(), name
    assert TEMPLATES == ["goodput-comment.js", "goodput-comment.yml", "goodput-gpu-comment.yml",
                         "goodput-gpu.yml", "goodput.yml"]
    assert not any(n.startswith(("tests/", "example_suite/", "bench/")) for n in names)
    assert meta["Version"] == __version__ and meta["License-Expression"] == "Apache-2.0"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Repository"] == urls["Homepage"] == REPOSITORY
    assert {"Changelog", "Documentation"} <= urls.keys()
    classifiers = meta.get_all("Classifier")
    assert "Framework :: Pytest" in classifiers and any(c.startswith("Development Status") for c in classifiers)


def test_the_installed_wheel_inits_and_records_on_its_own(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The dependencies from this environment, after the venv's own packages (the wheel first).
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                                "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    # No checkout on the path: only what the wheel installed (and the suite's passing self-check).
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "VIRTUAL_ENV")
           and (not k.startswith("GOODPUT_") or k.startswith("GOODPUT_TEST_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and Path(p).resolve() != ROOT)
    where = subprocess.run([str(python), "-c", "import pytest_goodput; print(pytest_goodput.__file__)"],
                           cwd=repo, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(site), where
    done = subprocess.run([str(venv / "bin" / "pytest-goodput"), "init"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (repo / ".github/workflows/goodput.yml").read_bytes() == \
        (ROOT / "pytest_goodput/templates/github/goodput.yml").read_bytes()
    # The README's record command, from the installed package (small: one session).
    record = subprocess.run([str(python), "-m", "pytest", "perf", "--goodput-update-baseline", "-p", "no:cacheprovider",
                             "--assert=plain", "--goodput-scale=0.05", "--goodput-sessions=1"],
                            cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-2000:]
    assert (repo / "perf/.goodput/baselines/perf_serving/test_chat_serving.json").is_file()

"""The package as PyPI would ship it: the wheel built from the source tree carries the workflows
``init`` writes, the license and the project's metadata; installed (not editable) into a clean
environment, its ``pytest-goodput init`` and the first recording run from it alone.

Cheap on purpose (tests/wheel_build.py): the wheel is built once for the module and installed
with ``--no-deps``, its dependencies from this environment.
"""

from __future__ import annotations

import email
import subprocess
import sys
import tarfile
import zipfile

import pytest

from pytest_goodput import __version__
from wheel_build import ROOT, imported_from, install, wheel  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow

TEMPLATES = sorted(p.name for p in (ROOT / "pytest_goodput/templates/github").iterdir())
REPOSITORY = "https://github.com/pytest-goodput/pytest-goodput"


def test_the_sdist_and_the_wheel_pass_twine_check_and_the_sdist_is_complete(wheel):
    """What PyPI would be given: both distributions pass ``twine check`` (metadata, the README
    rendered as the long description), and the wheel was built from the sdist."""
    (sdist,) = wheel.parent.glob("*.tar.gz")
    assert sdist.name == f"pytest_goodput-{__version__}.tar.gz"
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "pytest_goodput/templates/github/goodput.yml"} <= names


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
    inst = install(wheel, tmp_path / "venv")
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    # No checkout on the path: only what the wheel installed (and the suite's passing self-check).
    assert imported_from(inst, repo).is_relative_to(inst.site)
    done = subprocess.run([str(inst.script("pytest-goodput")), "init"], cwd=repo, env=inst.env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (repo / ".github/workflows/goodput.yml").read_bytes() == \
        (ROOT / "pytest_goodput/templates/github/goodput.yml").read_bytes()
    # The README's record command, from the installed package (small: one session).
    record = subprocess.run([str(inst.python), "-m", "pytest", "perf", "--goodput-update-baseline", "-p", "no:cacheprovider",
                             "--assert=plain", "--goodput-scale=0.05", "--goodput-sessions=1"],
                            cwd=repo, env=inst.env, capture_output=True, text=True, timeout=300)
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-2000:]
    assert (repo / "perf/.goodput/baselines/perf_serving/test_chat_serving.json").is_file()

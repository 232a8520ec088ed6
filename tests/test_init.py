"""``python -m pytest_goodput init`` as a new user runs it: in an empty git repository, then the
two commands it prints, from the files it wrote; never overwriting a file of theirs, and a
plain ``pytest`` in the repository never collecting the gate."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_goodput.schema.scenario.spec import build_spec
from pytest_goodput.stats.binomial import percentile_proof

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "pytest_goodput" / "templates" / "github"
HOSTED = ["perf/pytest.ini", "perf/perf_serving.py", "requirements-goodput.txt",
          ".github/scripts/goodput-comment.js", ".github/workflows/goodput.yml",
          ".github/workflows/goodput-comment.yml"]


def user_env() -> dict[str, str]:
    """A developer's shell: no CI, none of the user's goodput settings (the suite's own kept)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "GITHUB_ACTIONS") and (not k.startswith("GOODPUT_") or k.startswith("GOODPUT_TEST_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    return env


def init(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", "init", *args], cwd=repo,
                          env=user_env(), capture_output=True, text=True, timeout=120)


def pytest_in(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # --assert=plain: pytest's assertion rewriting would import the plugin's modules ahead of
    # the passing self-check (tests/selfcheck_site) that this test's processes get.
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--assert=plain", *args], cwd=repo,
                          env=user_env(), capture_output=True, text=True, timeout=300)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def test_init_then_record_then_gate_from_the_files_it_wrote(repo):
    done = init(repo)
    assert done.returncode == 0, done.stderr
    assert [line.split()[1] for line in done.stdout.splitlines()[:len(HOSTED)]] == HOSTED
    assert all(line.startswith("wrote ") for line in done.stdout.splitlines()[:len(HOSTED)])
    # The next two commands, as printed, are the ones run below.
    nxt = re.findall(r"^  (pytest perf --goodput-[\w-]+)", done.stdout, flags=re.M)
    assert nxt == ["pytest perf --goodput-update-baseline", "pytest perf --goodput-baseline"]
    # Small: a fifth of a second of load per run, two sessions (the environment's sizes are
    # the user's to set; the files are as written).
    small = ["--goodput-scale=0.05", "--goodput-sessions=2"]
    record = pytest_in(repo, *nxt[0].split()[1:], *small)
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-2000:]
    assert "engine: embedded simulator" in record.stdout
    baseline = repo / "perf/.goodput/baselines/perf_serving/test_chat_serving.json"
    assert baseline.is_file(), sorted(str(p) for p in repo.rglob("*.json"))
    gate = pytest_in(repo, *nxt[1].split()[1:], "--goodput-scale=0.05")
    assert gate.returncode == 0, gate.stdout[-3000:]
    assert re.search(r"^goodput: 1 test - 1 (passed|underpowered|inconclusive)$", gate.stdout, re.M), gate.stdout
    # A plain `pytest` from the root never collects the gate: it launches nothing.
    plain = pytest_in(repo)
    assert plain.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, plain.stdout
    assert "perf_serving" not in plain.stdout and "engine:" not in plain.stdout


def test_the_first_gate_proves_its_slos_and_the_workflows_are_the_shipped_ones(repo):
    assert init(repo).returncode == 0
    namespace: dict = {}
    exec(compile((repo / "perf/perf_serving.py").read_text(), "perf_serving.py", "exec"), namespace)
    (mark,) = namespace["test_chat_serving"].pytestmark
    spec = build_spec(dict(mark.kwargs))
    assert spec.percentile_slos == {"ttft_p99_ms": 500.0, "tpot_p99_ms": 30.0}
    assert percentile_proof(spec.requests * spec.repeats, 0, 99.0) == (True, None)
    ini = (repo / "perf/pytest.ini").read_text()
    assert "addopts = --strict-markers --strict-config" in ini and "goodput_engine = sim" in ini
    assert "goodput_hardware" not in ini  # CI labels its runners; an ini label would have to agree
    for rel in HOSTED[3:]:
        assert (repo / rel).read_bytes() == (TEMPLATES / Path(rel).name).read_bytes(), rel
    from pytest_goodput import __version__
    assert (repo / "requirements-goodput.txt").read_text() == f"pytest-goodput=={__version__}\n"


def test_a_cpu_engine_on_its_own_cpus_records_from_the_ini_init_wrote(repo):
    """``--engine-cpus auto`` (the README's advice for llama.cpp on a small machine): the ini
    names the placement and a recording from it stores the engine's CPU set."""
    done = init(repo, "--sim", "--engine-cpus", "auto", "--no-workflows")
    assert done.returncode == 0, done.stderr
    assert "goodput_engine_cpus = auto" in (repo / "perf/pytest.ini").read_text().splitlines()
    record = pytest_in(repo, "perf", "--goodput-update-baseline", "--goodput-scale=0.05", "--goodput-sessions=2")
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-2000:]
    doc = json.loads((repo / "perf/.goodput/baselines/perf_serving/test_chat_serving.json").read_text())
    assert all(s["environment"]["provenance"].get("engine_cpus") for s in doc["sessions"]), doc["sessions"][0]


def test_init_never_overwrites_a_file_that_differs_without_force(repo):
    assert init(repo).returncode == 0
    again = init(repo)
    assert again.returncode == 0
    assert all(line.startswith("unchanged ") for line in again.stdout.splitlines()[:len(HOSTED)])
    ini = repo / "perf/pytest.ini"
    ini.write_text(ini.read_text() + "goodput_tolerance = 0.1\n")
    (repo / ".github/workflows/goodput.yml").unlink()
    refused = init(repo, "--url", "http://127.0.0.1:8000/v1")
    assert refused.returncode == 2
    assert refused.stderr.strip() == ("error: these files exist and differ from what init writes: "
                                      "perf/pytest.ini; nothing written (--force overwrites them)")
    assert "goodput_tolerance = 0.1" in ini.read_text()
    assert not (repo / ".github/workflows/goodput.yml").exists()  # nothing written at all
    forced = init(repo, "--url", "http://127.0.0.1:8000/v1", "--force")
    assert forced.returncode == 0
    assert "overwrote perf/pytest.ini" in forced.stdout and "wrote     .github/workflows/goodput.yml" in forced.stdout
    assert "goodput_url = http://127.0.0.1:8000/v1" in ini.read_text()


def test_init_for_gpu_runners_writes_the_gpu_workflow_with_the_classes_and_the_serve_command(repo):
    serve = "vllm serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --port {port}"
    done = init(repo, "--serve", serve, "--gpu", "l4", "h100x8", "--dir", "gpu/perf")
    assert done.returncode == 0, done.stderr
    assert "pytest gpu/perf --goodput-update-baseline" in done.stdout
    assert f"goodput_serve = {serve}" in (repo / "gpu/perf/pytest.ini").read_text()
    wf = yaml.safe_load((repo / ".github/workflows/goodput-gpu.yml").read_text())
    job = wf["jobs"]["goodput"]
    assert job["strategy"]["matrix"]["gpu"] == ["l4", "h100x8"]
    assert job["env"]["GOODPUT_SUITE"] == "gpu/perf" and job["env"]["GOODPUT_HARDWARE"] == "${{ matrix.gpu }}"
    assert job["permissions"]["pull-requests"] == "write"
    comment = yaml.safe_load((repo / ".github/workflows/goodput-gpu-comment.yml").read_text())
    assert comment["jobs"]["comment"]["strategy"]["matrix"]["gpu"] == ["l4", "h100x8"]
    assert comment[True]["workflow_run"]["workflows"] == [wf["name"]]  # YAML 1.1 reads `on` as True
    assert not (repo / ".github/workflows/goodput.yml").exists()
    assert (repo / ".github/scripts/goodput-comment.js").is_file()


@pytest.mark.parametrize("args,needle", [
    (["--serve", "vllm serve m --port 8000"], "write {port} where the engine's port goes"),
    (["--slo", "mlperf/llama3.1-8b/interactiv"], "unknown SLO preset"),
    (["--gpu", "a10g;rm"], "a GPU class is a runner label"),
    (["--dir", "../elsewhere"], "a directory inside the repository"),
    (["--url", "http://x", "--serve", "y {port}"], "not allowed with argument"),
    (["--gpu", "a10g", "--hardware", "h100x1"], "with --gpu the workflow labels each class itself"),
    (["--url", "http://x", "--engine-cpus", "auto"], "not to one reached by --url"),
    (["--serve", "y {port}", "--engine-cpus", "two"], "allowed: auto or a CPU list"),
])
def test_bad_arguments_are_refused_naming_what_is_allowed(repo, args, needle):
    done = init(repo, *args)
    assert done.returncode == 2 and needle in done.stderr, done.stderr
    assert list(repo.iterdir()) == [repo / ".git"]

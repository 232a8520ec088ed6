"""The shipped GitHub workflows, executed step by step without GitHub.

A scratch repository is set up the way the README's "GitHub Actions" section says, by running
that section's commands (`python -m pytest_goodput init`: the gate's perf/ directory, its
pytest.ini, the workflows and the comment script), its gate then reduced to seconds (a
closed-loop test and a two-point sweep). The workflows init wrote then run unmodified on
`actions_runner` (run steps in bash, actions emulated on
folders, the comment script in node against a mocked API):

a. a push to main records baselines into the cache and an artifact;
b. an unchanged pull request passes, writes the step summary and creates the sticky comment;
c. the same pull request made 20 % slower fails at the gate step, annotates every failing
   test at its line, still writes the summary and updates the one comment;
d. a pull request from a fork after the cache's eviction fetches main's baselines from the
   last successful push run's artifact, its one failing test gives one annotation, and the
   comment workflow posts its report without running its code;
e. with no baseline anywhere the gate fails, saying why.

The self-hosted GPU workflow (goodput-gpu.yml, from `init --gpu a10g h100 --serve CMD`) runs the
same way, with llama.cpp's server (the `llamacpp` extra) standing in for the GPU engine, served by
the suite's own pytest.ini:
pushes record one session each (five on the first), an unchanged PR passes on both GPU
classes and keeps one sticky comment per class, a PR whose serve command halves the batch slots
fails at the gate step, a fork's PR waits for its environment's reviewers, and the two classes
keep separate baselines.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from actions_runner import Actions, RunResult

from pytest_goodput.schema.outcomes import outcome as outcome_schema

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
#: The workflows and the comment script, as shipped in the package (what init writes).
TEMPLATES = ROOT / "pytest_goodput/templates/github"
REPO = "acme/serving"
FORK = "someone/serving"
MARKER = "<!-- pytest-goodput -->"
FAILING = ("error", "invalid", "slo-failed", "regressed")
BOT = "github-actions[bot]"

SUITE = '''"""The example suite, reduced to seconds: a closed-loop test and a two-point sweep."""

import pytest


@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests=24, warmup_requests=4,
                     isl=64, osl=16)
def test_concurrency_per_user():
    """Four closed-loop users."""


@pytest.mark.goodput(scenario="sweep", sweep=[1, 8], duration_s=2.0, warmup_requests=4,
                     isl=64, osl=16)
def test_frontier():
    """The frontier of one and eight users."""
'''
# The runner's engine: the simulator with every step three times longer, so that a token
# every ~15 ms leaves the client's self-check a margin on a busy two-core machine.
RUNNER_ENV = {"GOODPUT_SIM_TIME_SCALE": "3"}
# A pull request's change that makes the engine 20 % slower (what .ci/run's step 3 injects).
SLOWER = '\nimport os\n\nos.environ["GOODPUT_SIM_SLOWDOWN"] = "1.2"\n'
# A pull request adding a test whose SLO no engine meets.
NEW_FAILING_TEST = '''

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, isl=32, osl=8,
                     e2e_ms=0.01, attainment=0.99)
def test_new_endpoint():
    """An SLO of 10 microseconds."""
'''


def readme_install_commands() -> str:
    """The bash block of the README's "GitHub Actions" section: the copy-paste path."""
    section = (ROOT / "README.md").read_text().split("\n## GitHub Actions\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL).group(1)


def python_first_env() -> dict[str, str]:
    """The environment with this Python first on PATH: the README's `python` is the user's."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def make_repo(path: Path, suite: str = SUITE, conftest_extra: str = "") -> Path:
    """A repository set up as the README says (init), its gate reduced to ``suite``."""
    path.mkdir(parents=True)
    subprocess.run(["bash", "-e", "-c", readme_install_commands()], cwd=path, check=True, env=python_first_env())
    (path / "perf" / "conftest.py").write_text((ROOT / "example_suite" / "conftest.py").read_text() + conftest_extra)
    (path / "perf" / "perf_serving.py").write_text(suite)
    return path


def def_lines(suite: str) -> dict[str, int]:
    """1-based line of each test's first decorator: where pytest (and GitHub) place the test."""
    lines = suite.splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r"def (test_\w+)", line)
        if m:
            j = i
            while j > 0 and lines[j - 1].startswith(("@", " ")):
                j -= 1
            out[m.group(1)] = j + 1
    return out


def pr_payload(number: int, sha: str, fork: bool = False) -> dict:
    head = FORK if fork else REPO
    return {"number": number, "pull_request": {
        "number": number, "head": {"sha": sha, "ref": "feature", "repo": {"full_name": head, "fork": fork}},
        "base": {"ref": "main", "repo": {"full_name": REPO}}}}


def annotations(log: str) -> list[str]:
    assert not any("::error" in ln and not ln.startswith("::error") for ln in log.splitlines()), \
        "an ::error command not at the start of its line is lost"
    return [ln for ln in log.splitlines() if ln.startswith("::error")]


def outcomes(run: RunResult) -> dict[str, outcome_schema.TestOutcome]:
    doc = json.loads((run.workspace / "goodput.json").read_text())
    return {t["outcome"]["nodeid"].rsplit("::", 1)[1]: outcome_schema.TestOutcome.model_validate(t["outcome"])
            for t in doc["tests"]}


def verdicts_of(outcome: outcome_schema.TestOutcome) -> str:
    """A failing outcome's comparisons, one line each (what a reader needs to see why)."""
    return "\n".join([outcome.status, *(json.dumps(c.model_dump(mode="json"), default=str)[:1500]
                                          for c in outcome.comparisons)])


def bot_comments(gh: Actions, issue: int) -> list[dict]:
    return [c for c in gh.api()["comments"] if c["issue_number"] == issue and c["user"]["login"] == BOT]


def assert_frontier_chart(summary: str) -> None:
    """The step summary holds the sweep's Mermaid chart with a current and a baseline line."""
    charts = re.findall(r"```mermaid\n(.*?)```", summary, flags=re.DOTALL)
    frontier = [c for c in charts if "xychart-beta" in c]
    assert frontier, summary[:2000]
    names = re.findall(r'^\s*line "([^"]+)"', frontier[0], flags=re.MULTILINE)
    assert sorted(names) == ["baseline", "current"], frontier[0]


class World:
    """One repository on the emulated GitHub; each scenario runs once, after what it needs."""

    def __init__(self, root: Path):
        self.root = root
        self.gh = Actions(root / "github", REPO)
        self.main = make_repo(root / "main")
        self.workflow = self.main / ".github/workflows/goodput.yml"
        self.comment_workflow = self.main / ".github/workflows/goodput-comment.yml"

    def pr(self, number: int, source: Path, fork: bool = False, base: str = "main") -> tuple[RunResult, str]:
        sha = uuid.uuid4().hex
        state = self.gh.api()
        state["pulls"][str(number)] = {"head_sha": sha}
        self.gh.set_api(state)
        run = self.gh.run(source / ".github/workflows/goodput.yml", event="pull_request",
                          payload=pr_payload(number, sha, fork), source=source,
                          ref=f"refs/pull/{number}/merge", base_ref=base, head_ref="feature",
                          extra_env=RUNNER_ENV)
        return run, sha

    @functools.cached_property
    def push(self) -> RunResult:
        return self.gh.run(self.workflow, event="push", payload={"ref": "refs/heads/main", "after": uuid.uuid4().hex},
                           source=self.main, extra_env=RUNNER_ENV)

    @functools.cached_property
    def pr_unchanged(self) -> RunResult:
        assert self.push.conclusion == "success"
        # A reviewer quoted an old report: the bot must never edit that comment.
        state = self.gh.api()
        state["pulls"]["1"] = {"head_sha": "0" * 40}
        state["comments"].append({"id": 1, "issue_number": 1, "body": f"{MARKER}\nquoted", "user": {"login": "reviewer"}})
        self.gh.set_api(state)
        return self.pr(1, self.main)[0]

    @functools.cached_property
    def pr_slower(self) -> RunResult:
        assert self.pr_unchanged.conclusion == "success"
        return self.pr(1, make_repo(self.root / "slower", conftest_extra=SLOWER))[0]

    @functools.cached_property
    def fork_pr_after_eviction(self) -> tuple[RunResult, str]:
        assert self.push.conclusion == "success"
        self.gh.evict_caches()
        return self.pr(2, make_repo(self.root / "fork", suite=SUITE + NEW_FAILING_TEST), fork=True)

    def comment_run(self, gate: RunResult, head_sha: str) -> RunResult:
        payload = {"workflow_run": {
            "id": gate.run_id, "name": "goodput", "event": "pull_request", "conclusion": gate.conclusion,
            "head_sha": head_sha, "head_repository": {"full_name": FORK},
            "html_url": f"https://github.com/{REPO}/actions/runs/{gate.run_id}"}}
        return self.gh.run(self.comment_workflow, event="workflow_run", payload=payload, source=self.main)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("github"))


def test_readme_installs_the_shipped_files(world):
    for name in ("workflows/goodput.yml", "workflows/goodput-comment.yml", "scripts/goodput-comment.js"):
        shipped = TEMPLATES / Path(name).name
        assert (world.main / ".github" / name).read_bytes() == shipped.read_bytes(), name


def test_workflows_hand_no_write_token_to_pull_request_code():
    """What the runs below cannot show: the permissions each workflow asks for."""
    gate = yaml.safe_load((TEMPLATES / "goodput.yml").read_text())
    comment = yaml.safe_load((TEMPLATES / "goodput-comment.yml").read_text())
    for wf in (gate, comment):
        assert "pull_request_target" not in wf[True]  # YAML 1.1 reads the key `on` as True
    assert gate["permissions"] == {"contents": "read"}
    assert gate["jobs"]["goodput"]["permissions"] == {
        "contents": "read", "actions": "read", "pull-requests": "write"}
    # The comment workflow runs with write permission: it checks out the default branch only.
    [checkout] = [s for s in comment["jobs"]["comment"]["steps"] if s.get("uses", "").startswith("actions/checkout")]
    assert set(checkout["with"]) == {"sparse-checkout", "persist-credentials"}
    assert not any("run" in s for s in comment["jobs"]["comment"]["steps"])


def test_push_records_baselines_in_the_cache_and_an_artifact(world):
    run = world.push
    job = run.job()
    assert run.conclusion == "success", [(s.name, s.outcome, s.log[-3000:]) for s in job.steps]
    assert "Cache not found" in job.step("Restore the baselines").log
    # The first push finds no earlier run either, and says so.
    fetch = job.step("Fetch the baselines from the last successful run (cache miss)")
    assert fetch.outcome == "success" and "::warning title=goodput::no baselines of main" in fetch.log
    record = job.step("Run the suite and record new baselines")
    assert "2 passed" in record.log, record.log[-3000:]
    for name in ("Goodput gate", "Sticky PR comment", "Upload the report"):
        assert job.step(name).outcome == "skipped"
    [(key, cached)] = world.gh.caches
    assert key == f"goodput-baselines-main-{run.run_id}"
    artifact = world.gh.artifact_dir(run.run_id, "goodput-baselines-main")
    wanted = {f"ci-baselines/perf_serving/{t}.json" for t in ("test_concurrency_per_user", "test_frontier")}
    wanted |= {f"history/perf_serving/{t}.jsonl" for t in ("test_concurrency_per_user", "test_frontier")}
    for where in (cached, artifact):  # the artifact too: .goodput/ is a hidden directory
        files = {str(p.relative_to(where)) for p in where.rglob("*") if p.is_file()}
        samples = {f for f in files if f.endswith(".samples.json.gz")}  # named by their digest
        assert files - samples == wanted, where
        assert sorted(f.split(".")[0] for f in samples) == sorted(w[:-5] for w in wanted if w.endswith(".json"))
        doc = json.loads((where / "ci-baselines/perf_serving/test_frontier.json").read_text())
        assert len(doc["sessions"]) == 5  # the default five sessions


def test_unchanged_pull_request_passes_summarizes_and_comments(world):
    run = world.pr_unchanged
    job = run.job()
    gate = job.step("Goodput gate")
    assert run.conclusion == "success", gate.log[-4000:]
    assert f"Cache restored from key: goodput-baselines-main-{world.push.run_id}" in job.step("Restore the baselines").log
    assert job.step("Fetch the baselines from the last successful run (cache miss)").outcome == "skipped"
    assert annotations(gate.log) == []
    assert all(o.baseline_status != "new" for o in outcomes(run).values())
    # A pull request never writes the baselines main is judged by.
    assert job.step("Save the baselines").outcome == "skipped" and len(world.gh.caches) == 1
    assert not world.gh.artifact_dir(run.run_id, "goodput-baselines-main").exists()
    assert "test_frontier" in gate.summary
    assert_frontier_chart(gate.summary)
    report = world.gh.artifact_dir(run.run_id, "goodput-report")
    assert (report / "pr-number.txt").read_text().strip() == "1" and (report / "goodput.md").is_file()
    [mine] = bot_comments(world.gh, 1)
    assert mine["body"].startswith(MARKER) and "test_frontier" in mine["body"]
    assert f"actions/runs/{run.run_id}" in mine["body"]
    quoted = next(c for c in world.gh.api()["comments"] if c["id"] == 1)
    assert quoted["body"] == f"{MARKER}\nquoted"


def test_slower_pull_request_fails_at_the_gate_and_still_reports(world):
    run = world.pr_slower
    job = run.job()
    gate = job.step("Goodput gate")
    assert gate.outcome == "failure" and run.conclusion == "failure"
    assert [s.name for s in job.steps if s.outcome == "failure"] == ["Goodput gate"]
    for name in ("Record the pull request number", "Upload the report", "Sticky PR comment"):
        assert job.step(name).outcome == "success", job.step(name).log
    got = outcomes(run)
    failing = {name for name, o in got.items() if o.status in FAILING}
    assert "regressed" in {got[n].status for n in failing}, {n: o.status for n, o in got.items()}
    lines = def_lines(SUITE)
    # One annotation per failing test, at its file (relative to the checkout) and line.
    located = sorted(re.match(r"::error file=([^,]+),line=(\d+),", a).groups() for a in annotations(gate.log))
    assert located == sorted(("perf/perf_serving.py", str(lines[n])) for n in failing)
    assert "regressed" in gate.summary
    assert_frontier_chart(gate.summary)
    # The same sticky comment, updated in place.
    [mine] = bot_comments(world.gh, 1)
    assert "regressed" in mine["body"] and f"actions/runs/{run.run_id}" in mine["body"]
    calls = world.gh.api()["calls"]
    assert ["createComment", 1] in calls and ["updateComment", mine["id"]] in calls
    assert sum(c[0] == "createComment" and c[1] == 1 for c in calls) == 1


def test_fork_pull_request_after_cache_eviction(world):
    run, sha = world.fork_pr_after_eviction
    job = run.job()
    assert "Cache not found" in job.step("Restore the baselines").log
    fetch = job.step("Fetch the baselines from the last successful run (cache miss)")
    assert f"restored from run {world.push.run_id}'s artifact" in fetch.log, fetch.log
    gate = job.step("Goodput gate")
    assert gate.outcome == "failure"
    got = outcomes(run)
    # The baselines came from the artifact: main's tests were compared, and only the new one fails.
    assert got["test_new_endpoint"].status == "slo-failed"
    for name in ("test_concurrency_per_user", "test_frontier"):
        assert got[name].baseline_status != "new"
        assert got[name].status not in FAILING, verdicts_of(got[name])
    line = def_lines(SUITE + NEW_FAILING_TEST)["test_new_endpoint"]
    [one] = annotations(gate.log)
    assert one.startswith(f"::error file=perf/perf_serving.py,line={line},")
    assert_frontier_chart(gate.summary)
    # A fork's token cannot comment: the gate job leaves it to the comment workflow.
    assert job.step("Sticky PR comment").outcome == "skipped"
    assert bot_comments(world.gh, 2) == []
    posted = world.comment_run(run, sha)
    assert posted.conclusion == "success", [(s.name, s.log) for s in posted.job().steps]
    assert not (posted.workspace / "perf").exists()  # the fork's code was never checked out
    [mine] = bot_comments(world.gh, 2)
    assert "test_new_endpoint" in mine["body"] and f"actions/runs/{run.run_id}" in mine["body"]
    # An artifact that does not name the PR's current head is not posted.
    state = world.gh.api()
    state["pulls"]["2"]["head_sha"] = "f" * 40
    world.gh.set_api(state)
    refused = world.comment_run(run, sha)
    assert refused.conclusion == "failure" and "not commenting" in refused.job().steps[-1].log
    assert len(world.gh.api()["calls"]) == len(state["calls"])


def test_no_baseline_anywhere_fails_the_gate_loudly(world):
    assert world.push.conclusion == "success"
    run, _ = world.pr(3, world.main, base="release")  # no run of `release` ever recorded any
    job = run.job()
    assert "no baselines of release" in job.step("Fetch the baselines from the last successful run (cache miss)").log
    gate = job.step("Goodput gate")
    assert gate.outcome == "failure" and "judged nothing" in gate.log, gate.log[-3000:]


def test_comment_script_cuts_a_long_report_at_a_paragraph(tmp_path):
    script = TEMPLATES / "goodput-comment.js"
    report = "# report\n\n" + "\n\n".join(f"paragraph {i} " + "x" * 990 for i in range(100))
    (tmp_path / "r.md").write_text(report)
    out = subprocess.run(
        ["node", "-e", (f"const m = require({json.dumps(str(script))});"
                        "process.stdout.write(m.commentBody(require('fs').readFileSync(process.argv[1], 'utf8'), 'URL'))"),
         str(tmp_path / "r.md")], capture_output=True, text=True, check=True).stdout
    assert len(out) <= 65536
    # Cut at the last paragraph break starting at or before character 60,000.
    kept = report[:report.rfind("\n\n", 0, 60_000 + 2)]
    assert kept.endswith("x" * 990)
    assert out == (f"{MARKER}\n{kept}\n\n> ✂️ Cut to fit a comment; the full report is in the "
                   "[run summary](URL).\n\n<sub>[workflow run](URL)</sub>")


def test_expression_subset_follows_github_and_refuses_the_rest(tmp_path):
    from actions_expressions import Evaluator, ExpressionError

    ctx = {"github": {"event_name": "push", "ref": "refs/heads/main", "base_ref": "", "ref_name": "main",
                      "event": {}},
           "env": {}, "steps": {"cache": {"outputs": {}}}}
    failed = Evaluator(ctx, tmp_path, status=lambda name: name in ("failure", "always"))
    ev = Evaluator(ctx, tmp_path)
    assert ev.evaluate("github.event.pull_request.number || github.ref") == "refs/heads/main"
    assert ev.interpolate("x-${{ github.base_ref || github.ref_name }}") == "x-main"
    assert ev.evaluate("github.event_name == 'PUSH'")  # strings compare case-insensitively
    assert ev.condition("steps.cache.outputs.cache-matched-key == ''")  # a missing output is null
    assert not failed.condition("github.event_name == 'push'")  # implicit success() after a failure
    assert failed.condition("${{ !cancelled() && github.event_name == 'push' }}")
    assert ev.interpolate("${{ hashFiles('nothing.md') }}") == ""
    for unknown in ("github.no_such_key", "steps.nope.outputs.x", "vars.X", "contains('a', 'b')", "a ~ b"):
        with pytest.raises(ExpressionError):
            ev.evaluate(unknown)


def test_emulator_refuses_an_action_it_does_not_know(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    wf = tmp_path / "wf.yml"
    wf.write_text("name: x\non: push\njobs:\n  j:\n    steps:\n      - uses: some/action@v1\n")
    with pytest.raises(AssertionError, match="some/action@v1 is not emulated"):
        Actions(tmp_path / "gh").run(wf, event="push", payload={}, source=src)


# --- The self-hosted GPU workflow (goodput-gpu.yml), llama.cpp standing in for the GPU engine ---

GPU_SUITE = '''"""The user's GPU suite, reduced: two users on the engine its pytest.ini serves."""

import pytest


@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=16, warmup_requests=2,
                     isl=128, osl=512, gate=["metrics.ttft_ms.p99"], tolerances={"metrics.ttft_ms.p99": 0.9})
def test_two_users():
    """Two closed-loop users: with one batch slot for two users, every other request waits
    for a whole request before its first token (the tail of TTFT, not its median). Long
    answers make that wait several times the first token's own time (at 256 tokens out the
    change was +150 % against a 90 % tolerance, and one job in about twelve missed it)."""
'''
GPU_CLASSES = ("a10g", "h100")


def gpu_repo(path: Path, model: str, parallel: int) -> Path:
    """A user's repository as ``init --gpu a10g h100 --serve CMD`` writes it: the GPU workflow,
    pytest-goodput as a requirement, a gate whose pytest.ini serves llama.cpp with ``parallel``
    batch slots (the PR's own serve command), its gate replaced by a reduced one. Long prompts
    (~580 llama.cpp tokens) so that prefill, not per-request overhead, is timed."""
    path.mkdir(parents=True)
    serve = shlex.join(["nice", "-n", "10", sys.executable, "-m", "pytest_goodput.engines.llamacpp_server",
                        "--model", model, "--port", "{port}", "--parallel", str(parallel), "--threads", "1"])
    subprocess.run([sys.executable, "-m", "pytest_goodput", "init", "--gpu", *GPU_CLASSES, "--serve", serve],
                   cwd=path, check=True, stdout=subprocess.DEVNULL)
    suite = path / "perf"
    # On this CPU stand-in the engine and the client get a core each, as a GPU engine and its
    # client would not compete (`auto`: docs/engines.md).
    with (suite / "pytest.ini").open("a") as ini:
        ini.write("goodput_engine_cpus = auto\n")
    (suite / "perf_serving.py").unlink()
    (suite / "perf_gpu.py").write_text(GPU_SUITE)
    return path


class GPUWorld:
    """One repository with self-hosted GPU runners of two classes on the emulated GitHub."""

    def __init__(self, root: Path):
        from pytest_goodput.engines.tinyllama import write_tiny_llama

        self.root = root
        self.gh = Actions(root / "github", REPO)
        self.gh.secrets = {"HF_TOKEN": "hf_emulated_secret"}
        self.gh.reviewed_environments = {"goodput-fork"}  # required reviewers, none approved
        self.model = write_tiny_llama(root / "tiny.gguf")
        self.main = gpu_repo(root / "main", self.model, parallel=2)
        self.workflow = self.main / ".github/workflows/goodput-gpu.yml"
        self.head_shas: dict[int, str] = {}

    def env(self) -> dict[str, str]:
        # The steps import this checkout's pytest-goodput (and the tests' self-check) as CI's
        # `pip install -r requirements-goodput.txt` would import the released one.
        return {k: os.environ[k] for k in ("PYTHONPATH", "GOODPUT_TEST_SELFCHECK") if k in os.environ}

    def run_push(self) -> RunResult:
        return self.gh.run(self.workflow, event="push", payload={"ref": "refs/heads/main", "after": uuid.uuid4().hex},
                           source=self.main, extra_env=self.env())

    def pr(self, number: int, source: Path, fork: bool = False) -> RunResult:
        sha = self.head_shas[number] = uuid.uuid4().hex
        state = self.gh.api()
        state["pulls"][str(number)] = {"head_sha": sha}  # the PR the sticky comment goes on
        self.gh.set_api(state)
        return self.gh.run(source / ".github/workflows/goodput-gpu.yml", event="pull_request",
                           payload=pr_payload(number, sha, fork), source=source,
                           ref=f"refs/pull/{number}/merge", base_ref="main", head_ref="feature",
                           extra_env=self.env())

    @functools.cached_property
    def pushes(self) -> tuple[RunResult, RunResult]:
        return self.run_push(), self.run_push()

    @functools.cached_property
    def pr_unchanged(self) -> RunResult:
        assert all(p.conclusion == "success" for p in self.pushes)
        return self.pr(11, self.main)

    @functools.cached_property
    def pr_half_the_slots(self) -> RunResult:
        assert self.pr_unchanged.conclusion == "success"
        return self.pr(12, gpu_repo(self.root / "half", self.model, parallel=1))


@pytest.fixture(scope="module")
def gpu_world(tmp_path_factory) -> GPUWorld:
    pytest.importorskip("xllamacpp", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")
    pytest.importorskip("gguf", reason="needs the llamacpp extra: pip install 'pytest-goodput[llamacpp]'")
    return GPUWorld(tmp_path_factory.mktemp("gpu"))


def gpu_job(run: RunResult, gpu: str):  # type: ignore[no-untyped-def]
    return run.job(f"goodput ({gpu})")


@pytest.mark.llamacpp
def test_gpu_workflow_runs_on_its_pool_one_measurement_at_a_time(gpu_world):
    """Runner labels per GPU class; one concurrency group per pool, the same for a push and
    for every PR (two PRs never measure at once on one host), never cancelled."""
    push = gpu_world.pushes[0]
    pr = gpu_world.pr_unchanged
    for gpu in GPU_CLASSES:
        for run in (push, pr):
            job = gpu_job(run, gpu)
            assert job.runs_on == ["self-hosted", "gpu", gpu]
            assert job.concurrency == f"goodput-gpu-{gpu}"
    wf = yaml.safe_load((TEMPLATES / "goodput-gpu.yml").read_text())
    assert wf["jobs"]["goodput"]["concurrency"]["cancel-in-progress"] is False
    assert wf["jobs"]["goodput"]["permissions"] == {
        "contents": "read", "actions": "read", "pull-requests": "write"}
    assert "pull_request_target" not in wf[True]


@pytest.mark.llamacpp
def test_gpu_push_records_one_launch_appended_per_class(gpu_world):
    first, second = gpu_world.pushes
    keys = [k for k, _ in gpu_world.gh.caches]
    for gpu in GPU_CLASSES:
        for n, run in enumerate((first, second), start=1):
            job = gpu_job(run, gpu)
            step = job.step("Record one session on main")
            assert job.conclusion == "success", step.log[-3000:]
            # the first push finds no baselines and records five sessions, on five launches
            # shared by the suite's tests; the next appends one session for one launch
            launches = 5 if n == 1 else 1
            assert f"cost: {launches} engine launch" in step.log, step.log[-3000:]
            assert f"goodput-{gpu}-main-{run.run_id}" in keys
            art = gpu_world.gh.artifact_dir(run.run_id, f"goodput-baselines-{gpu}-main")
            doc = json.loads((art / "ci-baselines/perf_gpu/test_two_users.json").read_text())
            assert len(doc["sessions"]) == 5  # the newest five kept: the second push replaced the oldest
            assert {r["environment"]["identity"]["hardware"] for r in doc["sessions"]} == {gpu}
        restored = gpu_job(second, gpu).step("Restore the baselines").log
        assert restored == f"Cache restored from key: goodput-{gpu}-main-{first.run_id}"  # its own class's


@pytest.mark.llamacpp
def test_gpu_unchanged_pull_request_passes_on_every_class(gpu_world):
    run = gpu_world.pr_unchanged
    for gpu in GPU_CLASSES:
        job = gpu_job(run, gpu)
        gate = job.step("Goodput gate")
        assert job.conclusion == "success", gate.log[-4000:]
        assert job.environment == "goodput"  # a same-repository PR waits for nobody
        got = json.loads((run.workspace / f"goodput_({gpu})" / "goodput.json").read_text())
        assert [t["outcome"]["baseline_status"] for t in got["tests"]] == ["compared"]
        assert gpu_world.gh.artifact_dir(run.run_id, f"goodput-report-{gpu}").is_dir()
    # One sticky comment per GPU class, each found again by its class's marker.
    firsts = sorted(c["body"].split("\n", 1)[0] for c in bot_comments(gpu_world.gh, 11))
    assert firsts == [f"<!-- pytest-goodput:{gpu} -->" for gpu in GPU_CLASSES]


@pytest.mark.llamacpp
def test_gpu_comment_workflow_posts_each_class_report_without_running_the_pr(gpu_world):
    """goodput-gpu-comment.yml, as for a fork's finished run: each class's report, from its
    artifact, updates that class's one comment; the PR's code is never checked out."""
    gate = gpu_world.pr_unchanged
    before = {c["id"] for c in bot_comments(gpu_world.gh, 11)}
    payload = {"workflow_run": {
        "id": gate.run_id, "name": "goodput-gpu", "event": "pull_request", "conclusion": gate.conclusion,
        "head_sha": gpu_world.head_shas[11], "head_repository": {"full_name": FORK},
        "html_url": f"https://github.com/{REPO}/actions/runs/{gate.run_id}"}}
    posted = gpu_world.gh.run(gpu_world.main / ".github/workflows/goodput-gpu-comment.yml", event="workflow_run",
                              payload=payload, source=gpu_world.main)
    assert posted.conclusion == "success", [(j, [(s.name, s.log[-2000:]) for s in posted.job(j).steps])
                                            for j in (f"comment ({g})" for g in GPU_CLASSES)]
    for gpu in GPU_CLASSES:
        assert posted.job(f"comment ({gpu})").conclusion == "success"
        assert not (posted.workspace / f"comment_({gpu})" / "perf").exists()  # only .github/scripts
    after = bot_comments(gpu_world.gh, 11)
    assert {c["id"] for c in after} == before and len(after) == len(GPU_CLASSES)
    calls = gpu_world.gh.api()["calls"]
    assert all(["updateComment", i] in calls for i in before)


@pytest.mark.llamacpp
def test_gpu_pull_request_halving_the_batch_slots_fails_at_the_gate(gpu_world):
    run = gpu_world.pr_half_the_slots
    assert run.conclusion == "failure"
    for gpu in GPU_CLASSES:
        job = gpu_job(run, gpu)
        gate = job.step("Goodput gate")
        # The gate's log on any failure: a miss must show the verdict it read.
        failed = [s.name for s in job.steps if s.outcome == "failure"]
        assert failed == ["Goodput gate"], f"{gpu}: failed steps {failed}; the gate's log: {gate.log[-4000:]}"
        assert "regressed: TTFT P99" in gate.log and "--parallel 1" in gate.log, gate.log[-4000:]
        assert job.step("Upload the report").outcome == "success"


@pytest.mark.llamacpp
def test_gpu_fork_pull_request_waits_for_approval(gpu_world):
    """The environment rule, evaluated as GitHub would for each event: a fork's run names the
    environment with required reviewers and no step runs (nothing reaches the runner)."""
    from actions_expressions import Evaluator

    rule = yaml.safe_load((TEMPLATES / "goodput-gpu.yml").read_text())["jobs"]["goodput"]["environment"]
    for fork, wanted in ((True, "goodput-fork"), (False, "goodput")):
        github = {"event_name": "pull_request", "repository": REPO, "event": pr_payload(13, "a" * 40, fork)}
        assert Evaluator({"github": github}, gpu_world.root).interpolate(rule) == wanted
    push = {"event_name": "push", "repository": REPO, "event": {"ref": "refs/heads/main"}}
    assert Evaluator({"github": push}, gpu_world.root).interpolate(rule) == "goodput"
    run = gpu_world.pr(13, gpu_repo(gpu_world.root / "fork", gpu_world.model, parallel=2), fork=True)
    assert run.conclusion == "waiting"
    for gpu in GPU_CLASSES:
        job = gpu_job(run, gpu)
        assert job.conclusion == "waiting" and job.environment == "goodput-fork" and job.steps == []

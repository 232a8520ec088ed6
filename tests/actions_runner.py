"""A local stand-in for GitHub Actions: runs a workflow file's jobs, step by step, on this machine.

What runs for real: every ``run:`` step, in ``bash -e`` (GitHub's default shell), in a fresh
workspace, with the workflow's, job's and step's ``env`` and every ``${{ }}`` expression
evaluated (`actions_expressions`), ``$GITHUB_OUTPUT``, ``$GITHUB_ENV``, ``$GITHUB_STEP_SUMMARY``
and the ``GITHUB_*`` variables the runner sets; ``actions/github-script`` scripts, in node,
against a mocked API (`github_script.js`). What is emulated on local folders: the checkout
(a copy of a source tree), the actions cache (immutable keys, restored by exact key then by
prefix, newest first), artifacts (upload-artifact's root and hidden-file rules) and the
``gh run list`` / ``gh run download`` calls a step makes (a ``gh`` on the step's PATH).
Jobs: a ``strategy.matrix`` of lists runs one job per combination, each in a workspace of its
own with the ``matrix`` context; ``runs-on``, ``environment`` and the job's ``concurrency``
group are evaluated and kept on the job's result; a job whose environment has required
reviewers (``Actions.reviewed_environments``) waits, running no step, as on GitHub until
someone approves; repository secrets (``Actions.secrets``) reach every run but a fork's.
One substitution: ``pip install -e .`` (or ``pip install -r requirements-goodput.txt``)
checks the package is importable instead (it is installed already; the workspace holds the
suite, not the package). An action, expression,
or ``gh`` call the emulator does not know is an error, never a skipped step.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from actions_expressions import Evaluator, to_string

HERE = Path(__file__).resolve().parent
PIP_INSTALL = "pip install -e ."
#: Installing pytest-goodput from a requirements file: checked importable, as PIP_INSTALL.
PIP_REQUIREMENTS = "pip install -r requirements-goodput.txt"
STEP_TIMEOUT_S = 600


#: What the project's test suite hands to the processes it starts (tests/conftest.py: the
#: self-check forced valid where it is not the subject), kept in every step's environment.
SUITE_ENV = ("PYTHONPATH", "GOODPUT_TEST_SELFCHECK")


@dataclass
class StepResult:
    name: str
    outcome: str  # success | failure | skipped
    log: str = ""
    summary: str = ""


@dataclass
class JobResult:
    name: str
    conclusion: str  # success | failure | skipped | waiting (an environment's reviewers)
    steps: list[StepResult] = field(default_factory=list)
    runs_on: list[str] = field(default_factory=list)
    environment: str = ""
    concurrency: str = ""

    def step(self, name: str) -> StepResult:
        found = [s for s in self.steps if s.name == name]
        assert len(found) == 1, f"no single step {name!r} in {[s.name for s in self.steps]}"
        return found[0]

    @property
    def summary(self) -> str:
        return "".join(s.summary for s in self.steps)


@dataclass
class RunResult:
    run_id: int
    conclusion: str
    jobs: dict[str, JobResult]
    workspace: Path

    def job(self, name: str | None = None) -> JobResult:
        if name is None:
            assert len(self.jobs) == 1, list(self.jobs)
            return next(iter(self.jobs.values()))
        return self.jobs[name]


def step_name(step: dict) -> str:
    return step.get("name") or step.get("uses") or step["run"].strip().splitlines()[0]


def read_key_values(path: Path) -> dict[str, str]:
    """``$GITHUB_OUTPUT`` / ``$GITHUB_ENV``: ``k=v`` lines and ``k<<DELIM`` blocks."""
    out: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delim = line.split("<<", 1)
            end = lines.index(delim, i + 1)
            out[key] = "\n".join(lines[i + 1:end])
            i = end + 1
            continue
        if line.strip():
            key, _, value = line.partition("=")
            out[key] = value
        i += 1
    return out


def copy_tree(src: Path, dst: Path, only: list[str] | None = None) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if only is not None and item.is_dir() and not any(
                o == item.name or o.startswith(item.name + "/") for o in only):
            continue
        if item.is_dir():
            if only is not None:
                inner = [o.split("/", 1)[1] for o in only if o.startswith(item.name + "/")]
                copy_tree(item, dst / item.name, inner or None)
            else:
                shutil.copytree(item, dst / item.name, dirs_exist_ok=True)
        else:
            shutil.copy2(item, dst / item.name)


class Actions:
    """GitHub for one repository: its caches, artifacts, workflow runs and (mocked) API state."""

    def __init__(self, root: Path, repository: str = "acme/serving"):
        self.root = root
        self.repository = repository
        self.caches: list[tuple[str, Path]] = []
        self.runs: list[dict[str, Any]] = []
        self.secrets: dict[str, str] = {}  # repository secrets (none reach a fork's run)
        self.reviewed_environments: set[str] = set()  # environments with required reviewers
        root.mkdir(parents=True, exist_ok=True)
        self.api_state = root / "api.json"
        self.api_state.write_text(json.dumps({"pulls": {}, "comments": [], "next_id": 1000, "calls": []}))
        self.bin = root / "bin"
        self.bin.mkdir()
        gh = self.bin / "gh"
        gh.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(HERE)!r})\n"
                      f"from actions_gh import main\nsys.exit(main(sys.argv[1:], {str(root)!r}))\n")
        gh.chmod(0o755)
        self._save_runs()

    # --- state the tests arrange and inspect -----------------------------------------------
    def api(self) -> dict[str, Any]:
        return json.loads(self.api_state.read_text())

    def set_api(self, state: dict[str, Any]) -> None:
        self.api_state.write_text(json.dumps(state))

    def evict_caches(self) -> None:
        """The cache's 7-day eviction."""
        self.caches.clear()

    def artifact_dir(self, run_id: int, name: str) -> Path:
        return self.root / "artifacts" / str(run_id) / name

    def _save_runs(self) -> None:
        (self.root / "runs.json").write_text(json.dumps(self.runs))

    # --- a workflow run ---------------------------------------------------------------------
    def run(self, workflow: Path, *, event: str, payload: dict[str, Any], source: Path,
            ref: str = "refs/heads/main", base_ref: str = "", head_ref: str = "",
            extra_env: dict[str, str] | None = None) -> RunResult:
        wf = yaml.safe_load(workflow.read_text())
        triggers = wf[True]  # YAML 1.1 reads the key `on` as True
        if not isinstance(triggers, dict):  # `on: push` or `on: [push, pull_request]`
            triggers = dict.fromkeys([triggers] if isinstance(triggers, str) else triggers)
        assert event in triggers, f"{workflow.name} does not run on {event}"
        branches = (triggers[event] or {}).get("branches") if event == "push" else None
        assert branches is None or ref.rsplit("/", 1)[-1] in branches, f"{workflow.name}: {ref} not in {branches}"
        run_id = 7000 + len(self.runs) + 1
        home = self.root / "runs" / str(run_id)
        workspace = home / "workspace"
        workspace.mkdir(parents=True)
        (home / "event.json").write_text(json.dumps(payload))
        sha = payload.get("after") or (payload.get("pull_request") or {}).get("head", {}).get("sha") \
            or uuid.uuid4().hex
        github = {
            "event_name": event, "event": payload, "ref": ref, "ref_name": ref.rsplit("/", 1)[-1],
            "base_ref": base_ref, "head_ref": head_ref, "sha": sha, "repository": self.repository,
            "repository_owner": self.repository.split("/")[0], "run_id": str(run_id),
            "run_number": str(len(self.runs) + 1), "workspace": str(workspace),
            "server_url": "https://github.com", "api_url": "https://api.github.com",
            "workflow": wf.get("name", workflow.name), "token": "ghs_emulated_token",
            "actor": "octocat",
        }
        if event == "workflow_run":
            assert payload["workflow_run"]["name"] in triggers["workflow_run"]["workflows"]
        ev = Evaluator({"github": github}, workspace)
        ev.interpolate(json.dumps(wf.get("concurrency", {})))  # must at least evaluate
        wf_env = {k: ev.interpolate(str(v)) for k, v in (wf.get("env") or {}).items()}
        fork = bool(payload.get("pull_request")) and \
            payload["pull_request"]["head"]["repo"]["full_name"] != self.repository
        jobs = {}
        for job_id, job in wf["jobs"].items():
            for matrix in matrix_entries(job):
                name = job_id + (f" ({', '.join(str(v) for v in matrix.values())})" if matrix else "")
                jobs[name] = self._job(name, job, wf, wf_env, github, matrix, home, workspace, source,
                                       run_id, fork, extra_env or {})
        conclusion = "failure" if any(j.conclusion == "failure" for j in jobs.values()) else \
            "waiting" if any(j.conclusion == "waiting" for j in jobs.values()) else "success"
        branch = head_ref or github["ref_name"]
        self.runs.append({"id": run_id, "workflow": github["workflow"], "path": workflow.name,
                          "branch": branch, "event": event, "conclusion": conclusion, "head_sha": sha})
        self._save_runs()
        return RunResult(run_id, conclusion, jobs, workspace)


    def _job(self, name: str, job: dict, wf: dict, wf_env: dict, github: dict, matrix: dict, home: Path,
             workspace: Path, source: Path, run_id: int, fork: bool, extra_env: dict) -> JobResult:
        """One job (one matrix entry): skipped by its ``if``, held by a protected environment
        (``self.reviewed_environments``: required reviewers, nobody approved yet), else run."""
        if matrix:  # each matrix job runs on a runner of its own: its own workspace
            workspace = workspace / name.replace(" ", "_").replace(",", "")
            github = {**github, "workspace": str(workspace)}
            wf_env = {k: Evaluator({"github": github}, workspace).interpolate(str(v))
                      for k, v in (wf.get("env") or {}).items()}
        ev = Evaluator({"github": github, "matrix": matrix}, workspace)
        if "if" in job and not ev.condition(job["if"]):
            return JobResult(name, "skipped")
        labels = job.get("runs-on", [])
        labels = [ev.interpolate(str(x)) for x in ([labels] if isinstance(labels, str) else labels)]
        environment = ev.interpolate(str(job.get("environment") or ""))
        group = ev.interpolate(str((job.get("concurrency") or {}).get("group", "")))
        held = JobResult(name, "waiting", runs_on=labels, environment=environment, concurrency=group)
        if environment in self.reviewed_environments:
            return held
        perms = {**(wf.get("permissions") or {}), **(job.get("permissions") or {})}
        can_write = perms.get("pull-requests") == "write" and not fork
        ctx = RunContext(self, home, workspace, github,
                         wf_env, job, source, run_id, can_write, extra_env, matrix,
                         {} if fork else self.secrets)
        result = ctx.run_job(name)
        result.runs_on, result.environment, result.concurrency = labels, environment, group
        return result


def matrix_entries(job: dict) -> list[dict]:
    """The job's ``strategy.matrix`` as one dict per job (lists of values: their product)."""
    matrix = (job.get("strategy") or {}).get("matrix") or {}
    assert set(matrix) <= {k for k, v in matrix.items() if isinstance(v, list)}, "only lists are emulated"
    entries: list[dict] = [{}]
    for key, values in matrix.items():
        entries = [{**e, key: v} for e in entries for v in values]
    return entries


class RunContext:
    """One job of one run: its environment, steps context and the emulated actions."""

    def __init__(self, actions: Actions, home: Path, workspace: Path, github: dict, wf_env: dict,
                 job: dict, source: Path, run_id: int, can_write: bool, extra_env: dict,
                 matrix: dict | None = None, secrets: dict | None = None):
        self.a, self.home, self.ws, self.github = actions, home, workspace, github
        self.matrix, self.secrets = matrix or {}, secrets or {}
        workspace.mkdir(parents=True, exist_ok=True)
        self.job, self.source, self.run_id, self.can_write = job, source, run_id, can_write
        self.env = dict(wf_env)
        base = Evaluator({"github": github, "env": self.env, "matrix": self.matrix, "secrets": self.secrets},
                         workspace)
        self.env.update({k: base.interpolate(str(v)) for k, v in (job.get("env") or {}).items()})
        self.steps: dict[str, dict] = {s["id"]: {"outputs": {}, "outcome": None, "conclusion": None}
                                       for s in job["steps"] if "id" in s}
        self.failed = False
        self.temp = home / ("temp-" + "-".join(str(v) for v in self.matrix.values()) if self.matrix else "temp")
        self.temp.mkdir()
        self.base_env = {
            "PATH": os.pathsep.join([str(actions.bin), str(Path(sys.executable).parent),
                                     "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": os.environ.get("HOME", str(home)), "LANG": "C.UTF-8", **extra_env,
            # the suite's forced-valid self-check (tests/conftest.py), where the test set it
            **{k: os.environ[k] for k in SUITE_ENV if k in os.environ},
            "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_EVENT_NAME": github["event_name"], "GITHUB_EVENT_PATH": str(home / "event.json"),
            "GITHUB_REF": github["ref"], "GITHUB_REF_NAME": github["ref_name"],
            "GITHUB_BASE_REF": github["base_ref"], "GITHUB_HEAD_REF": github["head_ref"],
            "GITHUB_SHA": github["sha"], "GITHUB_REPOSITORY": github["repository"],
            "GITHUB_RUN_ID": github["run_id"], "GITHUB_WORKFLOW": github["workflow"],
            "GITHUB_SERVER_URL": github["server_url"], "GITHUB_API_URL": github["api_url"],
            "RUNNER_OS": "Linux", "RUNNER_TEMP": str(self.temp),
        }

    def evaluator(self) -> Evaluator:
        return Evaluator({"github": self.github, "env": self.env, "steps": self.steps, "matrix": self.matrix,
                          "secrets": self.secrets, "runner": {"os": "Linux", "temp": str(self.temp)}},
                         self.ws, status=self.status)

    def status(self, name: str) -> bool:
        return {"success": not self.failed, "failure": self.failed, "cancelled": False,
                "always": True}[name]

    def run_job(self, job_id: str) -> JobResult:
        result = JobResult(job_id, "success")
        for n, step in enumerate(self.job["steps"]):
            name = step_name(step)
            ev = self.evaluator()
            if not ev.condition(step.get("if")):
                result.steps.append(StepResult(name, "skipped"))
                self._record(step, "skipped", {})
                continue
            step_env = {k: ev.interpolate(str(v)) for k, v in (step.get("env") or {}).items()}
            summary = self.temp / f"summary-{n}.md"
            summary.touch()
            files = {"GITHUB_OUTPUT": self.temp / f"output-{n}", "GITHUB_ENV": self.temp / f"env-{n}"}
            for f in files.values():
                f.touch()
            env = {**self.base_env, **self.env, **step_env, "GITHUB_STEP_SUMMARY": str(summary),
                   **{k: str(v) for k, v in files.items()}}
            if "run" in step:
                ok, log = self._run(ev.interpolate(step["run"]), env, step)
                outputs = read_key_values(files["GITHUB_OUTPUT"])
            else:
                inputs = {k: ev.interpolate(to_string(v)) for k, v in (step.get("with") or {}).items()}
                ok, log, outputs = self._uses(step["uses"], inputs, env)
            self.env.update(read_key_values(files["GITHUB_ENV"]))
            outcome = "success" if ok else "failure"
            result.steps.append(StepResult(name, outcome, log, summary.read_text()))
            self._record(step, outcome, outputs)
            if not ok and not step.get("continue-on-error"):
                self.failed = True
        result.conclusion = "failure" if self.failed else "success"
        return result

    def _record(self, step: dict, outcome: str, outputs: dict) -> None:
        if "id" in step:
            self.steps[step["id"]] = {"outputs": outputs, "outcome": outcome, "conclusion": outcome}

    def _run(self, script: str, env: dict, step: dict) -> tuple[bool, str]:
        if script.strip() in (PIP_INSTALL, PIP_REQUIREMENTS):  # the one substitution (module docstring)
            script = 'python -c "import pytest_goodput"'
        path = self.temp / f"step-{uuid.uuid4().hex}.sh"
        path.write_text(script)
        cwd = self.ws / step.get("working-directory", ".")
        proc = subprocess.run(["bash", "-e", str(path)], cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False,
                              timeout=min(STEP_TIMEOUT_S, 60 * self.job.get("timeout-minutes", 360)))
        return proc.returncode == 0, proc.stdout

    # --- the emulated actions --------------------------------------------------------------
    def _uses(self, uses: str, inputs: dict, env: dict) -> tuple[bool, str, dict]:
        action, _, version = uses.partition("@")
        assert version, f"{uses}: pin a version"
        handler = {
            "actions/checkout": self._checkout, "actions/setup-python": self._setup_python,
            "actions/cache/restore": self._cache_restore, "actions/cache/save": self._cache_save,
            "actions/upload-artifact": self._upload, "actions/download-artifact": self._download,
            "actions/github-script": self._github_script,
        }.get(action)
        if handler is None:
            raise AssertionError(f"action {uses} is not emulated")
        return handler(inputs, env)

    def _checkout(self, inputs: dict, env: dict) -> tuple[bool, str, dict]:
        sparse = [p.strip().strip("/") for p in inputs.get("sparse-checkout", "").splitlines() if p.strip()]
        copy_tree(self.source, self.ws, sparse or None)
        return True, f"checked out {self.github['sha']}", {}

    def _setup_python(self, inputs: dict, env: dict) -> tuple[bool, str, dict]:
        assert inputs.get("python-version"), "setup-python without python-version"
        return True, f"python {sys.version.split()[0]} (the test's interpreter)", {}

    def _cache_restore(self, inputs: dict, env: dict) -> tuple[bool, str, dict]:
        path, key = Path(inputs["path"]), inputs["key"]
        prefixes = [p.strip() for p in inputs.get("restore-keys", "").splitlines() if p.strip()]
        outputs = {"cache-primary-key": key}
        hit = [d for k, d in self.a.caches if k == key]
        for prefix in prefixes:
            if hit:
                break
            hit = [d for k, d in reversed(self.a.caches) if k.startswith(prefix)]
        if not hit:
            return True, f"Cache not found for input keys: {key}, {', '.join(prefixes)}", outputs
        matched = next(k for k, d in self.a.caches if d == hit[0])
        copy_tree(hit[0], path)
        outputs.update({"cache-hit": str(matched == key).lower(), "cache-matched-key": matched})
        return True, f"Cache restored from key: {matched}", outputs

    def _cache_save(self, inputs: dict, env: dict) -> tuple[bool, str, dict]:
        path, key = Path(inputs["path"]), inputs["key"]
        if any(k == key for k, _ in self.a.caches):
            return True, f"Warning: Failed to save: Unable to reserve cache with key {key}", {}
        if not path.exists():
            return True, "Warning: Path Validation Error: Path(s) specified in the action for caching do(es) not exist", {}
        dest = self.a.root / "cache" / f"{len(self.a.caches)}"
        shutil.copytree(path, dest)
        self.a.caches.append((key, dest))
        return True, f"Cache saved with key: {key}", {}

    def _upload(self, inputs: dict, env: dict) -> tuple[bool, str, dict]:
        name = inputs["name"]
        dest = self.a.artifact_dir(self.run_id, name)
        if dest.exists() and inputs.get("overwrite", "false") != "true":
            return False, f"an artifact named {name} already exists in this run", {}
        hidden_ok = inputs.get("include-hidden-files", "false") == "true"
        searched, found = [], []
        for line in (p.strip() for p in inputs["path"].splitlines()):
            if not line:
                continue
            assert not line.startswith("!") and not any(c in line for c in "*?["), f"pattern {line!r} not emulated"
            p = (self.ws / line).resolve()
            searched.append(p if p.is_dir() else p.parent)
            files = [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else [p] if p.is_file() else []
            rel = lambda f: f.relative_to(self.ws) if f.is_relative_to(self.ws) else f
            found += [f for f in files if hidden_ok or not any(c.startswith(".") for c in rel(f).parts)]
        if not found:
            policy = inputs.get("if-no-files-found", "warn")
            msg = f"No files were found with the provided path: {inputs['path'].strip()}. No artifacts will be uploaded."
            return policy != "error", ("Error: " if policy == "error" else "Warning: ") + msg, {}
        root = Path(os.path.commonpath([str(s) for s in searched]))
        for f in found:
            (dest / f.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest / f.relative_to(root))
        return True, f"Artifact {name} uploaded: {len(found)} files", {}

    def _download(self, inputs: dict, env: dict) -> tuple[bool, str, dict]:
        run_id = int(inputs.get("run-id") or self.run_id)
        if run_id != self.run_id and not inputs.get("github-token"):
            return False, "downloading another run's artifact needs github-token", {}
        src = self.a.artifact_dir(run_id, inputs["name"])
        if not src.is_dir():
            return False, f"Unable to download artifact(s): Artifact not found for name: {inputs['name']}", {}
        copy_tree(src, self.ws / inputs.get("path", "."))
        return True, f"Artifact {inputs['name']} downloaded from run {run_id}", {}

    def _github_script(self, inputs: dict, env: dict) -> tuple[bool, str, dict]:
        script = self.temp / f"script-{uuid.uuid4().hex}.js"
        script.write_text(inputs["script"])
        proc = subprocess.run(
            ["node", str(HERE / "github_script.js"), str(script), str(self.a.api_state),
             "write" if self.can_write else "read"],
            cwd=self.ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
            check=False)
        return proc.returncode == 0, proc.stdout, {}

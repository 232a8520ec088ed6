"""Same sessions, same baselines, same outcomes: the gate's verdicts before and after a change.

Two steps, so two versions of the package judge identical inputs:

1. ``python bench/gate_identity.py measure DIR``: every committed example baseline's spec
   measured once on the simulator; the sessions saved as JSON in ``DIR``.
2. ``python bench/gate_identity.py judge DIR OUT``: each saved session gated, with the package
   on the path, against a copy of the committed baselines: compared (one launch), as a PR
   measured over three launches (the session as each look), and recorded (update mode, into
   a scratch copy); every outcome written to ``OUT`` as JSON, the fields that hold the time of
   day blanked. Run it once per version (``PYTHONPATH=<other checkout>`` for the other one)
   and ``diff`` the two files.

The environment is fingerprinted in a scratch git repository with one fixed commit, so the
two versions see the same commit; the gate of either version is called through what it
exposes (``TestGate`` or the older ``gate``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ROOT / "example_suite" / "baselines"


def measure(out: Path) -> None:
    from pytest_goodput.engines.engine import select
    from pytest_goodput.run.runner import measure as run_measure
    from pytest_goodput.schema.scenario.spec import ScenarioSpec
    from pytest_goodput.store import baseline as store

    out.mkdir(parents=True, exist_ok=True)
    engine = select(url=None, serve=None, model=None, api_key_env=None)
    engine.start()
    try:
        for nodeid, path in sorted(store.find_all(BASELINES).items()):
            doc = store.load(path, nodeid)
            spec = ScenarioSpec.model_validate(doc.spec)
            m = run_measure(spec, engine)
            name = nodeid.replace("/", "_").replace("::", "__")
            fresh = {"spec": m.spec.model_dump(mode="json") if m.spec else None, "notes": m.notes,
                     "results": [r.model_dump(mode="json") for r in m.results], "provenance": m.provenance}
            (out / f"{name}.json").write_text(json.dumps({"nodeid": nodeid, "session": m.model_dump(mode="json"),
                                                          "fresh": fresh}))
            print(f"measured {nodeid}: {len(m.results)} run(s), client valid {all(r.client.valid for r in m.results)}")
    finally:
        engine.close()


def _blank(o: Any) -> Any:
    """The outcome with the time of day and scratch paths blanked."""
    if isinstance(o, dict):
        return {k: ("<blank>" if k in ("recorded_at", "measured_at", "timestamp", "cost") else _blank(v))
                for k, v in o.items()}
    if isinstance(o, list):
        return [_blank(v) for v in o]
    if isinstance(o, str) and tempfile.gettempdir() in o:
        return "<scratch path>"
    return o


def judge(saved: Path, out: Path) -> None:
    import pytest_goodput.run.gating as gating
    from pytest_goodput.engines.engine import Engine
    from pytest_goodput.judge.judge import Policy
    from pytest_goodput.schema.runs.results import RunResult
    from pytest_goodput.schema.runs.session import Session
    from pytest_goodput.schema.scenario.spec import ScenarioSpec

    print("package:", Path(gating.__file__).parent.parent)
    # The engine the committed baselines were recorded on, so the verdicts are comparisons.
    engine = Engine(kind="sim", base_url="http://127.0.0.1:1", model="goodput-sim",
                    provenance={"engine": "pytest-goodput-sim", "engine_version": "0.2.0"})
    outcomes: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        env = {**os.environ, "GIT_AUTHOR_DATE": "2026-01-01T00:00:00", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00"}
        for cmd in (["init", "-q"], ["-c", "user.name=g", "-c", "user.email=g@g", "commit", "-q", "--allow-empty", "-m", "x"]):
            subprocess.run(["git", *cmd], cwd=repo, env=env, check=True)
        for f in sorted(saved.glob("*.json")):
            doc = json.loads(f.read_text())
            fresh = doc["fresh"]  # what a stored session never keeps
            m = Session.model_validate(doc["session"]).model_copy(update={
                "spec": ScenarioSpec.model_validate(fresh["spec"]), "notes": fresh["notes"],
                "provenance": fresh["provenance"], "results": [RunResult.model_validate(r) for r in fresh["results"]]})
            nodeid = doc["nodeid"]
            assert m.spec is not None
            for mode, policy, planned, sessions in (("compared", Policy(), 1, [m]),
                                                    ("look 2 of 3", Policy(), 3, [m, m]),
                                                    ("recorded", Policy(compare=False, update=True), 1, [m, m])):
                base = Path(tmp) / mode.replace(" ", "_")
                if not base.exists():
                    shutil.copytree(BASELINES, base)
                kw = dict(baseline_dir=base, policy=policy, cwd=repo)
                if hasattr(gating, "TestGate"):
                    o = gating.TestGate(nodeid, m.spec, engine, planned=planned, **kw).finish(sessions)
                else:  # the gate before it was one per test
                    o = gating.gate(nodeid, sessions[-1], engine, earlier=sessions[:-1], planned=planned, **kw).outcome
                outcomes[f"{nodeid} [{mode}]"] = _blank(o.model_dump(mode="json"))
                print(f"{nodeid} [{mode}]: {o.status}, baseline {o.baseline_status}, "
                      f"{len(o.regressed)} regressed, {len(o.comparisons)} comparisons")
    out.write_text(json.dumps(outcomes, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "measure":
        measure(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "judge":
        judge(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit("usage: python bench/gate_identity.py measure DIR | judge DIR OUT")

"""A test's spec is built once, at collection, and measured as is; its trace digest is stamped once.

Each check runs pytest (in process, through pytester) with the product's spec builder and
trace stamp counted: what the plugin builds at collection is the very object the runner
measures, the only other build is a run's keyword overrides (or a trace file rewritten
between collection and run), and the committed example baselines keep their identity.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

# pytester's in-process runs drop modules first imported inside them; the plugin's lazily
# loaded core (numpy, httpx) is imported here, before any run.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.github  # noqa: F401
import pytest_goodput.report.md.markdown  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.load import trace as trace_mod
from pytest_goodput.plugin import core as core_mod
from pytest_goodput.plugin import harness as harness_mod
from pytest_goodput.plugin import spec as spec_mod
from pytest_goodput.schema.scenario.spec import ScenarioSpec

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

TRACE = "".join(json.dumps({"timestamp": 40 * i, "input_length": 24, "output_length": 4}) + "\n"
                for i in range(6))
OTHER_TRACE = "".join(json.dumps({"timestamp": 40 * i, "input_length": 32, "output_length": 4}) + "\n"
                      for i in range(4))


class Counted:
    """The product's spec builds, trace stamps and measured specs, as one pytest run makes them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.collected: dict[str, ScenarioSpec] = {}  # node id -> the spec stashed at collection
        self.builds: list[str] = []  # where each spec was built (node id)
        self.stamps = 0
        self.measured: list[ScenarioSpec] = []
        collected, built = core_mod.collected_spec, spec_mod.identified_spec
        stamp, measure = trace_mod.with_trace_digest, harness_mod.measure

        def collected_spec(args: dict[str, Any], settings: Any, where: str) -> Any:
            out = collected(args, settings, where)
            self.collected[where] = out[0]
            return out

        def identified_spec(args: dict[str, Any], where: str, *rest: Any) -> ScenarioSpec:
            self.builds.append(where)
            return built(args, where, *rest)

        def with_trace_digest(spec: ScenarioSpec) -> ScenarioSpec:
            self.stamps += 1
            return stamp(spec)

        def measured(spec: ScenarioSpec, engine: Any, **kw: Any) -> Any:
            self.measured.append(spec)
            return measure(spec, engine, **kw)

        monkeypatch.setattr(core_mod, "collected_spec", collected_spec)
        monkeypatch.setattr(spec_mod, "identified_spec", identified_spec)
        monkeypatch.setattr(trace_mod, "with_trace_digest", with_trace_digest)
        monkeypatch.setattr(harness_mod, "measure", measured)


TESTS = """
import pytest


@pytest.mark.goodput(scenario="offline", requests=3, isl=16, osl=4)
def test_plain():
    pass


@pytest.mark.goodput(scenario="trace", trace="t.jsonl", ttft_ms=5000, tpot_ms=1000)
def test_trace():
    pass


@pytest.mark.goodput(scenario="offline", requests=3, isl=16, osl=4)
def test_override(goodput):
    goodput.run(requests=2)
"""


def test_the_spec_built_at_collection_is_the_one_measured(pytester, sim_url, monkeypatch):
    pytester.makepyfile(test_specs=TESTS)
    (pytester.path / "t.jsonl").write_text(TRACE)
    counted = Counted(monkeypatch)
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline", "--goodput-sessions=1",
                             "-p", "no:randomly")
    res.assert_outcomes(passed=3)

    plain, trace, override = (f"test_specs.py::test_{n}" for n in ("plain", "trace", "override"))
    assert counted.builds == [plain, trace, override, override]  # three at collection, one override
    assert counted.stamps == 4  # once per build, never again downstream
    # What is measured is the collected object itself (a re-measure measures it again), or the
    # one spec the override built.
    ran = {id(s) for s in counted.measured}
    assert id(counted.collected[plain]) in ran and id(counted.collected[trace]) in ran
    others = [s for s in counted.measured if s is not counted.collected[plain] and s is not counted.collected[trace]]
    assert others and all(s is others[0] for s in others) and others[0].requests == 2
    digest = hashlib.sha256(TRACE.encode()).hexdigest()
    assert counted.collected[trace].trace_sha256 == digest

    # The trace test's identity is its marker's arguments and its file's digest, as before.
    stored = json.loads((pytester.path / ".goodput" / "baselines" / "test_specs" / "test_trace.json").read_text())
    expected = ScenarioSpec(scenario="trace", trace="t.jsonl", ttft_ms=5000, tpot_ms=1000, trace_sha256=digest)
    assert stored["spec_hash"] == expected.identity_hash()
    pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-baseline", "--goodput-json=out.json", "-p", "no:randomly")
    tests = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert {t["outcome"]["nodeid"]: t["outcome"]["baseline_status"] for t in tests} == {
        plain: "compared", trace: "compared", override: "compared"}


REWRITES = """
import hashlib
from pathlib import Path

import pytest

FIRST = hashlib.sha256(Path("t.jsonl").read_bytes()).hexdigest()


def test_a_rewrite():
    Path("t.jsonl").write_text({other!r})


@pytest.mark.goodput(scenario="trace", trace="t.jsonl", ttft_ms=5000, tpot_ms=1000)
def test_b_trace():
    pass


@pytest.mark.goodput(scenario="trace", trace="t.jsonl", trace_sha256=FIRST, ttft_ms=5000, tpot_ms=1000)
def test_c_pinned():
    pass
"""


def test_a_trace_rewritten_after_collection_is_measured_with_its_new_digest(pytester, sim_url, monkeypatch):
    pytester.makepyfile(test_rewrite=REWRITES.format(other=OTHER_TRACE))
    (pytester.path / "t.jsonl").write_text(TRACE)
    counted = Counted(monkeypatch)
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-update-baseline", "--goodput-sessions=1",
                             "-p", "no:randomly")
    res.assert_outcomes(passed=2, failed=1)

    first, new = (hashlib.sha256(t.encode()).hexdigest() for t in (TRACE, OTHER_TRACE))
    trace = "test_rewrite.py::test_b_trace"
    assert counted.collected[trace].trace_sha256 == first
    assert counted.builds.count(trace) == 2  # at collection, then for the rewritten file
    stored = json.loads((pytester.path / ".goodput" / "baselines" / "test_rewrite" / "test_b_trace.json").read_text())
    assert stored["spec"]["trace_sha256"] == new
    # A digest the marker pins is the test's to keep: the rewritten file is refused, named.
    assert counted.builds.count("test_rewrite.py::test_c_pinned") == 1
    out = res.stdout.str()
    assert f"trace file 't.jsonl' changed: its SHA-256 is {new}, the spec pins trace_sha256={first!r}" in out
    assert "Traceback" not in out


def test_the_example_baselines_keep_their_identity(pytester, monkeypatch):
    """Every committed example baseline's ``spec_hash`` is the identity of the spec its test is
    collected with (the suite's pytest.ini settings included)."""
    shutil.copytree(ROOT / "example_suite", pytester.path, dirs_exist_ok=True)
    counted = Counted(monkeypatch)
    res = pytester.runpytest("--collect-only", "-q")
    assert res.ret == pytest.ExitCode.OK
    stored = {json.loads(p.read_text())["nodeid"]: json.loads(p.read_text())["spec_hash"]
              for p in (pytester.path / "baselines").rglob("*.json")}
    assert stored and set(stored) <= set(counted.collected)
    assert {nodeid: counted.collected[nodeid].identity_hash() for nodeid in stored} == stored

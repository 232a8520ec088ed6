"""A recording keeps what is valid: a session the client paced is re-measured on its launch, a
launch whose session stays paced is replaced, and the valid sessions before it are kept
(``run/launches.py``). Through pytester and the simulator, as users record; the client stall
is planted: the harness's measurement number N comes back with its self-check verdict
invalid, whatever the machine did (the real check is forced valid in integration tests)."""

from __future__ import annotations

import json
from typing import Any

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions such as
# numpy cannot be loaded twice, so everything the plugin imports lazily is imported here.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.run.gating  # noqa: F401
from pytest_goodput.judge.comparability import what_changed
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.plugin import harness as harness_mod
from pytest_goodput.run.launches import Launches, kept_sessions, refusal, valid_session
from pytest_goodput.schema.environment import Fingerprint
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.schema.runs.results import ClientHealth, Interrupted
from pytest_goodput.schema.scenario.spec import build_spec

pytest_plugins = ["pytester"]
# The stalls are planted and the measurements counted: no real one may add a re-measure.
pytestmark = pytest.mark.forced_selfcheck

STALL = "planted stall: loop lag P99 80 ms > 20 ms"

ONE = """
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, warmup_requests=1, isl=16, osl=4)
def test_closed():
    pass
"""


def plant(monkeypatch: pytest.MonkeyPatch, stalled: set[int]) -> list[int]:
    """The harness's measurements numbered ``stalled`` (1-based) come back client-paced."""
    real, calls = harness_mod.measure, [0]

    def measure(spec: Any, engine: Any, progress: Any = None, stage: Any = None) -> Session:
        calls[0] += 1
        m = real(spec, engine, progress=progress, stage=stage)
        if calls[0] in stalled:
            m.results = [r.model_copy(update={"client": r.client.model_copy(update={"valid": False, "reasons": [STALL]})})
                         for r in m.results]
        return m
    monkeypatch.setattr(harness_mod, "measure", measure)
    return calls


def record(pytester: pytest.Pytester) -> tuple[Any, dict, list[dict]]:
    pytester.makepyfile(test_perf=ONE)
    res = pytester.runpytest("--goodput-update-baseline", "--goodput-sessions=5", "--goodput-json=out.json",
                             "--goodput-report=report.md")
    doc = json.loads((pytester.path / "out.json").read_text())
    path = pytester.path / ".goodput/baselines/test_perf/test_closed.json"
    runs = json.loads(path.read_text())["sessions"] if path.is_file() else []
    return res, doc, runs


def test_a_session_the_client_paced_is_re_measured_on_its_launch_and_all_five_are_kept(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = plant(monkeypatch, {3})  # session 3's first run
    res, doc, runs = record(pytester)
    res.assert_outcomes(passed=1)
    assert calls[0] == 6  # five sessions, one of them measured twice
    assert doc["engines"]["launches"] == 5  # re-measured on the same launch
    assert len(runs) == 5
    assert [sorted(set(r["environment"]["provenance"]) & {"re-measured", "replaces launch"}) for r in runs] == [
        [], [], ["re-measured"], [], []]
    assert STALL in runs[2]["environment"]["provenance"]["re-measured"]
    note = ("recording kept what is valid: 5 of 5 sessions valid; re-measured on their launch "
            "(the client set the pace): session 3")
    assert note in doc["tests"][0]["outcome"]["notes"]
    res.stdout.fnmatch_lines([f"*{note}*"])
    assert ("> **Recording kept what is valid:** 5 of 5 sessions valid; re-measured on their launch "
            "(the client set the pace): session 3") in (pytester.path / "report.md").read_text()


def test_a_launch_whose_session_stays_paced_is_replaced_and_the_earlier_launches_kept(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = plant(monkeypatch, {3, 4})  # session 3: both runs on its launch
    res, doc, runs = record(pytester)
    res.assert_outcomes(passed=1)
    assert calls[0] == 7
    assert doc["engines"]["launches"] == 6  # one launch replaced
    assert len(runs) == 5
    facts = [r["environment"]["provenance"] for r in runs]
    assert ["replaces launch" in f for f in facts] == [False, False, True, False, False]
    assert facts[2]["replaces launch"].startswith("session 3's launch, the client set the pace of 2 runs on it")
    assert "re-measured" not in facts[2]  # measured once on its fresh launch
    note = ("recording kept what is valid: 5 of 5 sessions valid; launch replaced (the client set the "
            "pace on it twice), earlier sessions kept: session 3")
    assert note in doc["tests"][0]["outcome"]["notes"]
    res.stdout.fnmatch_lines([f"*{note}*"])
    res.stdout.fnmatch_lines(["*goodput: test_perf.py::test_closed: replacing session 3's launch, the client set "
                              "the pace of 2 runs on it (planted stall*); extra launches left in this recording: 1"])


def test_a_session_still_paced_on_its_replacement_launches_is_left_out_and_the_valid_four_stored(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = plant(monkeypatch, {3, 4, 5, 6, 7, 8})  # session 3: both runs on each of its three launches
    res, doc, runs = record(pytester)
    res.assert_outcomes(passed=1)
    assert calls[0] == 10
    assert doc["engines"]["launches"] == 7  # both extra launches spent on session 3
    assert len(runs) == 4  # sessions 1, 2, 4 and 5
    assert ["replaces launch" in r["environment"]["provenance"] for r in runs] == [False] * 4
    outcome = doc["tests"][0]["outcome"]
    assert outcome["baseline_status"] == "updated" and outcome["client_valid"]
    note = ("recording kept what is valid: 4 of 5 sessions valid; 4 stored; left out, the client set "
            f"their pace on every try: session 3 ({STALL})")
    assert any(n.startswith(note) for n in outcome["notes"]), outcome["notes"]
    res.stdout.fnmatch_lines([f"*{note}*"])


def _m(valid: bool) -> Session:
    spec = build_spec({"scenario": "offline", "requests": 1})
    health = ClientHealth(valid=valid, reasons=[] if valid else [STALL], cpu_utilization=0.1)
    return Session(spec=spec, results=[summarize([], spec, health)])


def test_a_recording_out_of_extra_launches_is_refused_naming_the_valid_sessions_and_what_to_change() -> None:
    launches, relaunched = Launches(), []
    sessions = [valid_session(lambda: _m(True), lambda: relaunched.append(k), launches, k) for k in (1, 2)]
    said: list[str] = []
    sessions.append(valid_session(lambda: _m(False), lambda: relaunched.append(3), launches, 3, "t::t", said.append))
    sessions += [valid_session(lambda: _m(True), lambda: relaunched.append(k), launches, k) for k in (4, 5)]
    assert relaunched == [3, 3] and launches.left == 0 and launches.replaced == ["t::t session 3"] * 2
    assert said[-1] == (f"goodput: t::t: replacing session 3's launch, the client set the pace of 2 runs on it "
                        f"({STALL}); extra launches left in this recording: 0")
    message = refusal("t::t", sessions)
    assert message.startswith("t::t: baseline not recorded: 4 of 5 sessions valid (a recording stores its valid "
                              "sessions when at least 2 are); the client set the pace "
                              "of session 3 even re-measured on its launch and on up to 2 replacement launches "
                              "(of an engine started here)")
    assert STALL in message and "--goodput-client-cpus" in message


def test_an_engine_not_started_here_is_never_replaced() -> None:
    launches = Launches()
    m = valid_session(lambda: _m(False), None, launches, 1)
    assert launches.left == 2 and "replaces launch" not in m.provenance


def test_the_recording_note_counts_valid_sessions_and_names_what_each_took() -> None:
    sessions = [_m(True), _m(True), _m(True), _m(False), _m(True)]
    sessions[1].provenance["re-measured"] = STALL
    sessions[2].provenance["replaces launch"] = "session 3's launch, ..."
    sessions[3].provenance["re-measured"] = STALL
    kept, note = kept_sessions(sessions)
    assert kept == [sessions[0], sessions[1], sessions[2], sessions[4]]  # the paced one left out
    assert note == (
        f"recording kept what is valid: 4 of 5 sessions valid; 4 stored; left out, the client set their "
        f"pace on every try: session 4 ({STALL}); re-measured on their launch (the "
        "client set the pace): session 2, session 4; launch replaced (the client set the pace on it "
        "twice), earlier sessions kept: session 3")
    both = [_m(True), _m(True)]
    assert kept_sessions(both) == (both, None)  # nothing taken, nothing said


def test_fewer_than_two_valid_sessions_are_not_stored_without_the_others() -> None:
    sessions = [_m(False), _m(True), _m(False)]
    kept, note = kept_sessions(sessions)
    assert kept == sessions  # all returned: the gate refuses them (refusal)
    assert note is None  # nothing was taken: the refusal says why
    assert refusal("t::t", kept).startswith("t::t: baseline not recorded: 1 of 3 sessions valid")


def test_an_interrupted_run_says_how_far_it_got() -> None:
    assert Interrupted(reason="interrupted (Ctrl-C)", planned=200, done=81, unfinished=119).describe() == \
        "interrupted (Ctrl-C): 81 of 200 requests done, 119 unfinished"
    assert Interrupted(reason="interrupted (Ctrl-C)", planned=0, done=7, unfinished=None).describe() == \
        "interrupted (Ctrl-C): 7 requests done"


def test_a_sessions_own_facts_are_not_a_change_of_environment() -> None:
    base = Fingerprint(identity={"model": "m"}, provenance={"engine": "vllm 0.9", "re-measured": STALL,
                                                            "replaces launch": "session 3's launch, ..."})
    current = Fingerprint(identity={"model": "m"}, provenance={"engine": "vllm 0.10"})
    assert what_changed(base, current) == {"engine": ("vllm 0.9", "vllm 0.10")}

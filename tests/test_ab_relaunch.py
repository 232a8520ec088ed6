"""A/B mode with every round on fresh launches of both engines (``run_ab(relaunch=True)``,
``--relaunch``, ``--goodput-ab-relaunch``): fakes whose level is drawn per launch, and one
small run on two simulators whose level moves between launches (``launch_cv``)."""

from __future__ import annotations

import pytest

# pytester's in-process runs drop modules first imported inside them; C extensions (numpy)
# must not be loaded twice, so the plugin's lazily loaded core is imported first.
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
from pytest_goodput.judge.scalar.verdicts import MetricDef
from pytest_goodput.run import ab as run_ab_module
from pytest_goodput.run.ab import SHARED_LAUNCH_NOTE, run_ab
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.sim.profile import SimProfile
from test_ab_run import SPEC, THR, fake_result

pytest_plugins = ["pytester"]


class LaunchedEngine:
    """An engine this process starts: each launch serves at the next of ``levels`` (tok/s)."""

    def __init__(self, name: str, levels: list[float], can_relaunch: bool = True) -> None:
        self.name, self.levels, self.can_relaunch = name, levels, can_relaunch
        self.launches = 1

    def relaunch(self) -> None:
        self.launches += 1

    def close(self) -> None:
        pass

    def start(self) -> None:
        self.launches += 1

    @property
    def level(self) -> float:
        return self.levels[(self.launches - 1) % len(self.levels)]


def runner(spec, engine: LaunchedEngine) -> RunResult:
    return fake_result(engine.level, True)


@pytest.fixture(autouse=True)
def values_from_throughput(monkeypatch: pytest.MonkeyPatch) -> None:
    def values(base: RunResult, head: RunResult, defs: list[MetricDef]):
        return ({THR: base.throughput.output_tokens_per_s, "error_rate": 0.0},
                {THR: head.throughput.output_tokens_per_s, "error_rate": 0.0})
    monkeypatch.setattr(run_ab_module, "round_values", values)


# Two unchanged engines whose level moves ±12 % between launches: one launch of the head
# happens to be 12 % below one of the base.
BASE = [600.0, 672.0, 540.0, 612.0, 660.0, 552.0, 630.0, 580.0]
HEAD = [528.0, 640.0, 600.0, 560.0, 680.0, 590.0, 610.0, 650.0]


def test_rounds_on_one_launch_each_call_a_launch_difference_regressed_and_say_so() -> None:
    result = run_ab(SPEC, LaunchedEngine("base", BASE), LaunchedEngine("head", HEAD), run=runner,  # type: ignore[arg-type]
                    min_rounds=3, max_rounds=8)
    assert result.regressed == [THR]  # 528 vs 600 in every round: the launch, not the engine
    assert SHARED_LAUNCH_NOTE in result.notes


def test_relaunched_rounds_carry_the_launch_spread_and_the_same_engines_are_not_called_regressed() -> None:
    base, head = LaunchedEngine("base", BASE), LaunchedEngine("head", HEAD)
    result = run_ab(SPEC, base, head, run=runner, min_rounds=3, max_rounds=8, relaunch=True)  # type: ignore[arg-type]
    assert result.regressed == []
    assert base.launches == head.launches == len(result.rounds)  # round 1 on the running launch
    assert any(n.startswith(f"each round relaunched both engines ({2 * (len(result.rounds) - 1)} starts")
               for n in result.notes)


def test_relaunched_rounds_still_catch_a_head_slower_in_every_launch() -> None:
    slow = [0.7 * x for x in BASE[3:] + BASE[:3]]
    result = run_ab(SPEC, LaunchedEngine("base", BASE), LaunchedEngine("head", slow), run=runner,  # type: ignore[arg-type]
                    min_rounds=3, max_rounds=8, relaunch=True)
    assert result.regressed == [THR]


def test_relaunching_an_engine_attached_by_url_is_refused() -> None:
    with pytest.raises(ValueError, match="relaunching each round needs engines started here.*head engine is attached"):
        run_ab(SPEC, LaunchedEngine("base", BASE), LaunchedEngine("head", HEAD, can_relaunch=False),  # type: ignore[arg-type]
               run=runner, relaunch=True)


def test_one_engine_at_a_time_already_starts_every_run_afresh() -> None:
    base, head = LaunchedEngine("base", BASE), LaunchedEngine("head", HEAD)
    result = run_ab(SPEC, base, head, run=runner, min_rounds=3, max_rounds=4, exclusive=True, relaunch=True)  # type: ignore[arg-type]
    assert base.launches == head.launches == 1 + len(result.rounds)  # one start per run, none more
    assert not any("relaunched both" in n for n in result.notes)


def test_the_simulators_launch_level_is_drawn_per_launch_with_the_asked_spread() -> None:
    levels = [SimProfile(launch_cv=0.1, slowdown=2.0).launched().slowdown / 2.0 for _ in range(400)]
    mean = sum(levels) / len(levels)
    sd = (sum((x - mean) ** 2 for x in levels) / (len(levels) - 1)) ** 0.5
    assert abs(mean - 1.0) < 0.02 and 0.08 < sd < 0.12  # mean 1, CV 0.1 (400 draws: ±0.007, ±0.007)
    assert SimProfile().launched() == SimProfile()  # launch_cv 0: every launch the same


def test_the_gate_relaunches_both_simulators_each_round_and_catches_a_slower_head(pytester, monkeypatch) -> None:
    """``--goodput-ab-relaunch`` on two simulators whose level moves 3 % between launches:
    a head three times as slow regresses at the one look after four rounds, and the note says
    what the relaunches cost."""
    monkeypatch.setenv("GOODPUT_SIM_SLOWDOWN", "3.0")
    monkeypatch.setenv("GOODPUT_SIM_LAUNCH_CV", "0.03")
    pytester.makepyfile(test_ab_gate_perf="""
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests=24, isl=16, osl=8,
                     ab_min_rounds=4, ab_max_rounds=4)
def test_decode(goodput):
    goodput.run()
""")
    r = pytester.runpytest("-p", "no:cacheprovider", "--goodput-base-sim=launch_cv=0.03",
                           "--goodput-ab-relaunch", "--goodput-capture=auto")
    out = r.stdout.str()
    assert r.ret == 1 and "goodput regressed" in out, out
    assert "each round relaunched both engines" in out, out


def test_relaunch_with_an_attached_engine_is_a_usage_error(pytester) -> None:
    pytester.makepyfile(test_x="import pytest\n\n@pytest.mark.goodput(requests=4)\ndef test_a():\n    pass\n")
    r = pytester.runpytest("-p", "no:cacheprovider", "--goodput-base-url=http://127.0.0.1:9",
                           "--goodput-ab-relaunch")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot be restarted" in r.stderr.str()

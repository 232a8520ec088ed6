"""Engine and client on their own CPUs: parsing, the automatic split, and the plugin's wiring."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import fake_selfcheck
from pytest_goodput.engines.engine import simulator
from pytest_goodput.schema.cpus import PRIORITY_BOOST, CpuSetError, format_cpus, parse_cpus, plan_cpus

pytest_plugins = ["pytester"]

TWO_CPUS = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and at least 2 usable CPUs",
)


@pytest.mark.parametrize("text,cpus", [
    ("0", (0,)), ("0-3", (0, 1, 2, 3)), ("0-2,5", (0, 1, 2, 5)), (" 3 , 1 ", (1, 3)), ("2,2,1-2", (1, 2)),
])
def test_cpu_lists_parse_as_linux_writes_them(text: str, cpus: tuple[int, ...]) -> None:
    assert parse_cpus(text) == cpus


@pytest.mark.parametrize("text,needle", [
    ("", "names no CPU"), ("a", "'a' is not a CPU number or range"), ("0-x", "'0-x' is not"),
    ("3-1", "'3-1' is not an ascending range"), ("-1", "'-1' is not"), ("0,,", "'' is not"),
])
def test_bad_cpu_lists_name_the_part_and_the_allowed_forms(text: str, needle: str) -> None:
    with pytest.raises(CpuSetError) as err:
        parse_cpus(text)
    assert needle in str(err.value) and "such as 0, 0-3 or 0-3,6" in str(err.value)


def test_cpu_sets_are_shown_as_ranges() -> None:
    assert format_cpus([5, 0, 1, 2]) == "0-2,5"
    assert format_cpus([7]) == "7"
    assert format_cpus([0, 2, 4]) == "0,2,4"


def test_auto_gives_the_client_the_last_cpu_and_the_engine_the_rest() -> None:
    assert plan_cpus("auto", None, [0, 1]) == ((0,), (1,))
    assert plan_cpus(None, "auto", [0, 1, 2, 3]) == ((0, 1, 2), (3,))
    assert plan_cpus("auto", "auto", range(8), client_count=3) == ((0, 1, 2, 3, 4), (5, 6, 7))
    # workers get their own cores, but never more than half the machine
    assert plan_cpus("auto", None, [0, 1, 2, 3], client_count=8) == ((0, 1), (2, 3))
    assert plan_cpus(None, None, [0, 1]) == (None, None)


def test_an_explicit_side_wins_and_auto_takes_what_is_left() -> None:
    assert plan_cpus("0-1", "auto", range(4)) == ((0, 1), (2, 3))
    assert plan_cpus("auto", "3", range(4)) == ((0, 1, 2), (3,))
    assert plan_cpus("2", None, range(4)) == ((2,), None)  # only the engine pinned
    assert plan_cpus("0", "1", range(2)) == ((0,), (1,))


@pytest.mark.parametrize("engine,client,available,needle", [
    ("0-1", "1", range(4), "overlap on 1"),
    ("0", "7", range(4), "CPU 7 is not available to this process (it may use 0-3)"),
    ("auto", None, [3], "auto needs at least 2 CPUs to split; this process may use 3"),
    ("0-3", "auto", range(4), "leave none of 0-3"),
])
def test_impossible_splits_say_why(engine: str, client: str, available: range, needle: str) -> None:
    with pytest.raises(CpuSetError) as err:
        plan_cpus(engine, client, available)
    assert needle in str(err.value)


def test_the_pinning_wrapper_refuses_bad_lists_and_missing_commands() -> None:
    def wrapper(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_goodput.engines.pinned", *args],
                              capture_output=True, text=True, timeout=60)

    bad = wrapper("x", "--", "true")
    assert bad.returncode == 2 and "cannot run the engine on CPUs x" in bad.stderr
    usage = wrapper("0", "true")
    assert usage.returncode == 2 and "usage:" in usage.stderr
    missing = wrapper("0", "--", "no-such-engine-binary")
    assert missing.returncode == 127 and "cannot start 'no-such-engine-binary'" in missing.stderr


def test_the_pinning_wrapper_raises_the_engines_priority_where_permitted() -> None:
    now = os.getpriority(os.PRIO_PROCESS, 0)
    cpu = str(min(os.sched_getaffinity(0)))
    show = "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"
    p = subprocess.run([sys.executable, "-m", "pytest_goodput.engines.pinned", cpu, "--",
                        sys.executable, "-c", show], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    boosted = max(-20, now - PRIORITY_BOOST)
    if os.geteuid() == 0:  # root may raise it (CAP_SYS_NICE)
        assert int(p.stdout) == boosted
    else:  # without the capability the pinning applies alone
        assert int(p.stdout) in (now, boosted)


@TWO_CPUS
def test_run_and_ab_take_the_plugins_cpu_flags() -> None:
    last = max(os.sched_getaffinity(0))
    # The placement is the subject, not the client's pace: a passing self-check makes a busy
    # machine's neighbour unable to turn the run invalid (exit 3).
    p = subprocess.run(fake_selfcheck.cli("run", "--engine-cpus", "auto",
                                          "--scenario", "concurrency", "--concurrency", "2", "--requests", "8",
                                          "--isl", "16", "--osl", "8"), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"client on CPUs {last}" in p.stderr
    bad = subprocess.run([sys.executable, "-m", "pytest_goodput", "run", "--engine-cpus", "0",
                          "--client-cpus", "0", "--scenario", "offline", "--requests", "4"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "error: --engine-cpus / --client-cpus: engine CPUs 0 and client " \
        "CPUs 0 overlap on 0" in bad.stderr and "Traceback" not in bad.stderr


@TWO_CPUS
def test_a_launched_engine_and_its_children_stay_on_their_cpus() -> None:
    first = min(os.sched_getaffinity(0))
    with simulator(cpus=(first,)) as sim:
        assert sim.pid is not None
        assert os.sched_getaffinity(sim.pid) == {first}
        assert sim.provenance["engine_cpus"] == str(first)


PERF_TEST = """
import os, pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=8, isl=16, osl=8)
def test_perf(goodput):
    goodput.run()
    print("CLIENT", sorted(os.sched_getaffinity(0)), "ENGINE", sorted(os.sched_getaffinity(goodput.engine.pid)))
"""


@TWO_CPUS
def test_auto_split_keeps_the_engine_and_the_client_apart(pytester: pytest.Pytester) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    pytester.makepyfile(test_perf=PERF_TEST)
    res = pytester.runpytest_subprocess("-s", "--goodput-engine-cpus=auto", "--goodput-json=out.json")
    res.assert_outcomes(passed=1)
    assert f"CLIENT {cpus[-1:]} ENGINE {cpus[:-1]}" in res.stdout.str()
    assert f'"engine_cpus": "{format_cpus(cpus[:-1])}"' in (pytester.path / "out.json").read_text()


@pytest.mark.parametrize("args,needle", [
    (["--goodput-engine-cpus=0-x"], "--goodput-engine-cpus: '0-x' is invalid for engine_cpus: '0-x' is not a CPU"),
    (["--goodput-client-cpus=0,4096"], "--goodput-client-cpus: client CPUs 0,4096: CPU 4096 is not available"),
    (["--goodput-engine-cpus=0", "--goodput-url=http://127.0.0.1:9/v1"], "not to one attached by URL"),
])
def test_bad_cpu_settings_are_usage_errors_naming_their_source(
        pytester: pytest.Pytester, args: list[str], needle: str) -> None:
    pytester.makepyfile(test_perf=PERF_TEST)
    res = pytester.runpytest_subprocess(*args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert needle in res.stderr.str()
    assert "Traceback" not in res.stderr.str()


def test_under_xdist_a_bad_cpu_setting_is_a_usage_error_not_an_internal_error(
        pytester: pytest.Pytester) -> None:
    """xdist's controller collects nothing and its workers' usage errors read INTERNALERROR
    (exit 3): the controller checks the setting itself."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_perf=PERF_TEST)
    res = pytester.runpytest_subprocess("-n", "2", "--goodput-client-cpus=0,4096")
    assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout.str()
    assert "--goodput-client-cpus: client CPUs 0,4096: CPU 4096 is not available" in res.stderr.str()
    assert "INTERNALERROR" not in res.stdout.str() + res.stderr.str()


def test_cpu_settings_come_from_the_ini_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=PERF_TEST)
    pytester.makeini("[pytest]\ngoodput_engine_cpus = 9-1\n")
    res = pytester.runpytest_subprocess()
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "ini goodput_engine_cpus: '9-1' is invalid for engine_cpus" in res.stderr.str()


@TWO_CPUS
def test_client_placement_moves_every_thread_and_puts_it_back() -> None:
    import threading

    from pytest_goodput.run.affinity import ClientPlacement

    before = os.sched_getaffinity(0)
    stop = threading.Event()
    seen: dict[str, set[int]] = {}
    worker = threading.Thread(target=lambda: (stop.wait(30), seen.update(cpus=os.sched_getaffinity(0))))
    worker.start()
    placement = ClientPlacement((max(before),))
    try:
        assert os.sched_getaffinity(0) == {max(before)}
    finally:
        stop.set()
        worker.join(30)
        placement.restore()
    assert seen["cpus"] == {max(before)}  # a thread that existed before the placement moved too
    assert os.sched_getaffinity(0) == before


def _autogroup_readable() -> bool:
    from pytest_goodput.engines.autogroup import autogroup_nice

    return autogroup_nice() is not None


# Some kernels and sandboxes show the file but refuse to read it or leave out the nice value.
AUTOGROUP = pytest.mark.skipif(not _autogroup_readable(),
                               reason="no readable autogroup (scheduling by session) here")


@AUTOGROUP
def test_the_session_autogroup_is_favoured_while_placed_and_given_back() -> None:
    """Where CPU is shared by session first, the client's session is favoured as a whole."""
    from pytest_goodput.engines.autogroup import autogroup_nice
    from pytest_goodput.run.affinity import ClientPlacement

    before = autogroup_nice()
    assert before is not None
    placement = ClientPlacement(sorted(os.sched_getaffinity(0))[-1:])
    try:
        during = autogroup_nice()
    finally:
        placement.restore()
    assert autogroup_nice() == before
    if placement.boosted:  # permitted (CAP_SYS_NICE)
        assert during == max(-20, before - PRIORITY_BOOST)
    else:
        assert during == before


@AUTOGROUP
def test_the_pinning_wrapper_favours_only_a_session_of_its_own() -> None:
    """Started by ``launch`` (a new session) the engine's autogroup rises; started from a
    shell's session it is left alone, since that group is the shell's."""
    cpu = str(min(os.sched_getaffinity(0)))
    show = ["cat", "/proc/self/autogroup"]
    wrapped = [sys.executable, "-m", "pytest_goodput.engines.pinned", cpu, "--", *show]
    own = subprocess.run(wrapped, capture_output=True, text=True, timeout=60, start_new_session=True)
    caller = open("/proc/self/autogroup").read()
    shared = subprocess.run(wrapped, capture_output=True, text=True, timeout=60)
    assert shared.stdout == caller  # the caller's group, untouched
    if os.geteuid() == 0:
        assert own.stdout.rstrip().endswith(f"nice {-PRIORITY_BOOST}"), own.stdout


def _realtime_permitted() -> bool:
    if not hasattr(os, "SCHED_RESET_ON_FORK"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_RR | os.SCHED_RESET_ON_FORK, os.sched_param(1))
    except OSError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


@TWO_CPUS
def test_client_placement_takes_real_time_priority_children_do_not_inherit_it() -> None:
    """Where permitted the client preempts ordinary neighbours at once; an engine or worker it
    starts must not run real-time (nor at its raised nice), and restore gives it all back."""
    from pytest_goodput.run.affinity import REALTIME_PRIORITY, ClientPlacement

    if not _realtime_permitted():
        pytest.skip("real-time scheduling not permitted here (needs CAP_SYS_NICE and an RT budget)")
    before = (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))
    placement = ClientPlacement((max(os.sched_getaffinity(0)),))
    try:
        assert placement.realtime and "SCHED_RR" in placement.describe()
        assert os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK == os.SCHED_RR
        assert os.sched_getparam(0).sched_priority == REALTIME_PRIORITY
        child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0), "
                                "os.getpriority(os.PRIO_PROCESS, 0))"], capture_output=True, text=True, timeout=60)
        assert child.stdout.split() == [str(os.SCHED_OTHER), "0"]
        from pytest_goodput.load.pools.processes import share_priority  # a shard worker is the client too
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            share_priority(worker.pid)
            assert os.sched_getscheduler(worker.pid) == os.sched_getscheduler(0)
            assert os.getpriority(os.PRIO_PROCESS, worker.pid) == os.getpriority(os.PRIO_PROCESS, 0)
        finally:
            worker.kill()
            worker.wait()
    finally:
        placement.restore()
    assert (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)) == before

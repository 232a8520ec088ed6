"""The Ray backend: load workers on Ray actors, measured like the process backend's.

One local Ray runtime serves the whole module (the product uses a runtime it finds
initialized and leaves it running); only the CLI test starts its own, in its subprocess.
"""

from __future__ import annotations

import json
import operator
import subprocess
import sys
import time
import zlib
from array import array
from collections import Counter

import fake_selfcheck
import pytest

import pytest_goodput.load.coordinator  # imported before pytester's in-process runs
import pytest_goodput.load.pools.ray.pool
import pytest_goodput.plugin.harness
import pytest_goodput.plugin.session
import pytest_goodput.report.files
import pytest_goodput.report.text.terminal
from pytest_goodput.load import ray_runtime
from pytest_goodput.load.pools.ray.clock_offset import Sample, estimate
from pytest_goodput.load.pools.ray.columns import pack, unpack
from pytest_goodput.load.pools.ray.placement import PlacementError, place
from pytest_goodput.load.plan import worker_count
from pytest_goodput.load.pools import WorkerError
from pytest_goodput.load.pools.ray.actor import LoadWorker
from pytest_goodput.load.scenario import run_scenario
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.plugin.settings import SettingsError, resolve
from pytest_goodput.schema.addresses import RayAddressError, check_ray_address
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from test_shard import _view  # the process backend's own comparison

ray = pytest.importorskip("ray", reason="the Ray backend's tests need pytest-goodput[ray]")
pytest_plugins = ["pytester"]

# --- pure parts -------------------------------------------------------------------------


def test_placement_spreads_one_per_node_then_by_cores():
    nodes = [("a", 2.0), ("b", 8.0), ("c", 0.0)]
    assert place(2, nodes) == ["b", "a"]  # one per node first, the largest first; c has no CPU
    # then by workers per core once added: b (8 cores) takes 6 more before a's second (9th, a tie
    # at 1 per core, broken by list order), and 10 workers end in proportion to cores
    assert place(9, nodes) == ["b", "a"] + ["b"] * 6 + ["a"]
    assert Counter(place(10, nodes)) == {"b": 8, "a": 2}
    assert place(3, [("x", 4.0), ("y", 4.0), ("z", 4.0)]) == ["x", "y", "z"]
    with pytest.raises(PlacementError, match="no alive node with CPUs"):
        place(1, [("c", 0.0)])


def test_clock_offset_keeps_the_shortest_round_trip():
    # driver wall = mono + 1000; the worker's wall runs 5 ms ahead, its mono is 200 s behind
    slow = Sample(1010.0, 10.0, 1010.105, -189.9, 1010.2, 10.2)  # RTT 200 ms
    fast = Sample(1011.0, 11.0, 1011.007, -188.998, 1011.004, 11.004)  # RTT 4 ms, midpoint 11.002
    off = estimate([slow, fast], shared_clock=False)
    assert off.error_s == pytest.approx(0.002) and off.wall_offset_s == pytest.approx(0.005)
    assert off.shift_s == pytest.approx(200.0)  # worker mono -188.998 + 200 = driver mono 11.002
    assert "± 2.000 ms" in off.describe() and "mapped onto the driver's clock" in off.describe()
    same = estimate([fast], shared_clock=True)
    assert same.shift_s == 0.0 and "monotonic clock shared" in same.describe()
    with pytest.raises(ValueError):
        estimate([], shared_clock=True)


def test_columns_round_trip_with_a_clock_shift():
    exs = [
        RawExchange(RequestPlan(3, "hi", 5, 8, 1.5, warmup=True, open_loop=True), 1.6, 2.0, 200,
                    [(1.7, b"data: a"), (1.9, b"")], retries=1),
        RawExchange(RequestPlan(4, "yo", None, 2, 2.5), None, 3.0, None, [], "timeout", "after 60 s"),
        RawExchange(RequestPlan(5, "turn", 4, 2, 3.5, conversation=2, turn=1), 3.6, 4.0, 200, []),
    ]
    cols = pack(exs)
    assert isinstance(cols["read_at"], array) and zlib.decompress(cols["blob"]) == b"data: a"
    back = unpack(cols, shift_s=10.0)
    assert back[0] == RawExchange(RequestPlan(3, "hi", 5, 8, 11.5, True, True), 11.6, 12.0, 200,
                                  [(11.7, b"data: a"), (11.9, b"")], None, None, 1)
    assert back[1] == RawExchange(RequestPlan(4, "yo", None, 2, 12.5), None, 13.0, None, [],
                                  "timeout", "after 60 s", 0)
    assert unpack(cols) == exs


def test_addresses_and_worker_counts():
    assert check_ray_address(" Local ") == "local" and check_ray_address("auto") == "auto"
    assert check_ray_address("10.0.0.5:6379") == "10.0.0.5:6379"
    assert check_ray_address("ray://head:10001") == "ray://head:10001"
    for bad in ("", "head", "http://head:80", "head:99999", "a b:1"):
        with pytest.raises(RayAddressError, match="expected local .*HOST:PORT"):
            check_ray_address(bad)
    assert worker_count(ScenarioSpec(rate=5), nodes=3) == 3  # unset: one per node
    assert worker_count(ScenarioSpec(rate=5, workers=2), nodes=3) == 2
    assert worker_count(ScenarioSpec(scenario="concurrency", concurrency=2, workers=4), nodes=1) == 2


def test_bad_settings_name_their_source():
    with pytest.raises(SettingsError, match=r"environment GOODPUT_RAY: 'nowhere' is invalid for ray: .*expected local"):
        resolve({}, {}, {"GOODPUT_RAY": "nowhere"})
    assert resolve({"ray": "local"}, {}, {}).ray == "local"
    assert resolve({}, {"ray": "head:6379"}, {}).sources["ray"] == "ini goodput_ray"


def test_the_backend_is_not_part_of_the_identity():
    a, b = ScenarioSpec(rate=5), ScenarioSpec(rate=5, backend="ray", workers=2)
    assert a.identity_hash() == b.identity_hash() and "backend" not in b.identity()
    with pytest.raises(Exception, match="'process' or 'ray'"):
        ScenarioSpec(rate=5, backend="mpi")


def test_a_worker_reports_its_own_failure_with_the_traceback():
    w = LoadWorker()
    w.start(b"not a pickle", 0)
    msgs = w.poll(10.0)
    assert msgs[0][0] == "error" and "UnpicklingError" in msgs[0][1] and "Traceback" in msgs[0][1]


class _FakeRay:
    """Just what ``ray_actors`` reads: the session's job id, and kills."""

    def __init__(self, job):
        self.job, self.killed = job, []

    def get_runtime_context(self):
        return self

    def get_job_id(self):
        return self.job

    def is_initialized(self):
        return True

    def kill(self, actor, no_restart=True):
        self.killed.append(actor)


def test_kept_actors_belong_to_their_node_and_ray_session():
    from pytest_goodput.load.pools.ray import actors as ray_actors

    one = _FakeRay("01")
    ray_actors.give_back(one, "node-a", "actor-1")
    assert ray_actors.take(one, "node-b") is None and ray_actors.take(one, "node-a") == "actor-1"
    ray_actors.give_back(one, "node-a", "actor-2")
    assert ray_actors.take(_FakeRay("02"), "node-a") is None  # a new runtime: the old handles are gone
    ray_actors.give_back(one, "node-a", "actor-3")  # back to session 01 (the cache follows it)
    ray_actors.forget(one)
    assert one.killed == ["actor-3"] and ray_actors.idle() == 0


# --- on a local Ray runtime, against the simulator ----------------------------------------


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=ray_runtime.LOCAL_OBJECT_STORE_BYTES,
             log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.mark.parametrize("spec", [
    ScenarioSpec(scenario="server", rate=40, requests=40, warmup_requests=4, isl=16, osl=8,
                 osl_dist="uniform", range_ratio=0.5, workers=2, seed=5),
    ScenarioSpec(scenario="concurrency", concurrency=3, requests=20, warmup_requests=3, isl=8, osl=6,
                 workers=2),
], ids=["server", "concurrency"])
def test_ray_measures_what_processes_do(local_ray, sim_url, spec):
    procs = run_scenario(spec, sim_url, "sim", salt=11)
    on_ray = run_scenario(spec.model_copy(update={"backend": "ray"}), sim_url, "sim", salt=11)
    assert _view(on_ray) == _view(procs)  # same requests in order, warm-up flags, token counts
    assert on_ray.issued == procs.issued == spec.requests and on_ray.completed == spec.requests
    assert on_ray.client.workers == procs.client.workers == 2
    assert on_ray.client.requests == procs.client.requests == spec.requests + spec.warmup_requests
    if spec.scenario == "server":  # the same seeded schedule: the same offsets from t0
        gaps = [[x.scheduled_at - r.requests[0].scheduled_at for x in r.requests] for r in (procs, on_ray)]
        assert gaps[0] == pytest.approx(gaps[1], abs=1e-9)
    clock = [n for n in on_ray.client.notes if "clock offset" in n]
    assert len(clock) == 2 and all("same host: monotonic clock shared" in n for n in clock)
    # How close the two backends' TTFT and ITL are is a figure, not a verdict:
    # `python bench/ray_scaling.py --equal` (a shared machine's load moves it 10-fold).


def test_a_run_above_its_threshold_ships_sketches_and_a_sample(local_ray, sim_url, monkeypatch):
    from pytest_goodput.load import sketch

    monkeypatch.setattr(sketch, "SAMPLE_REQUESTS", 11)  # 11 of 44: a quarter kept
    spec = ScenarioSpec(scenario="server", rate=40, requests=40, warmup_requests=4, isl=8, osl=6,
                        workers=2, seed=3, ttft_ms=5000, ttft_p90_ms=5000)
    procs = run_scenario(spec, sim_url, "sim", salt=5)
    sk = run_scenario(spec.model_copy(update={"backend": "ray", "sketch_above": 43}), sim_url, "sim", salt=5)
    assert procs.percentiles == "exact" and sk.percentiles == "sketch"
    assert (sk.issued, sk.completed, sk.goodput.good) == (procs.issued, procs.completed, procs.goodput.good)
    assert sk.prompt_set == procs.prompt_set and sk.client.requests == procs.client.requests == 44
    kept = sketch.SketchPlan(0.01, 0.25, 3, 44).kept()
    assert [r.index for r in sk.requests] == [i for i in range(44) if kept[i]]  # by index, seeded
    assert sk.sketch.sampled == sum(not r.warmup for r in sk.requests) and sk.sketch.threshold == 43
    assert sk.metrics.ttft_ms.count == procs.metrics.ttft_ms.count == 40
    assert [c.samples for c in sk.percentile_slos] == [c.samples for c in procs.percentile_slos]


def test_a_sessions_runs_reuse_their_actors(local_ray, sim_url):
    from pytest_goodput.load.pools.ray import actors as ray_actors

    spec = ScenarioSpec(scenario="offline", requests=4, isl=8, osl=2, workers=2, backend="ray")
    run_scenario(spec, sim_url, "sim")
    before = dict(ray_actors.counts)
    assert ray_actors.idle() >= 2  # kept, idle, after a run that ended well
    r = run_scenario(spec, sim_url, "sim")
    assert r.completed == 4 and r.client.workers == 2
    assert ray_actors.counts == {"created": before["created"], "reused": before["reused"] + 2}
    ray_actors.forget(ray)
    assert ray_actors.idle() == 0


class _ExplodesInTheWorker:
    """A tokenizer that works here but cannot be unpickled where it is sent."""

    def encode(self, text, add_special_tokens=False):
        return text.split()

    def __reduce__(self):
        return operator.truediv, (1, 0)


def test_a_worker_that_raises_fails_the_run_with_its_traceback(local_ray, sim_url):
    spec = ScenarioSpec(scenario="concurrency", concurrency=2, duration_s=1, isl=8, osl=4,
                        workers=2, backend="ray")
    t = time.perf_counter()
    with pytest.raises(WorkerError, match=r"(?s)worker [12] of 2 \(Ray actor on .*\) failed:.*Traceback.*"
                                         r"ZeroDivisionError: division by zero"):
        run_scenario(spec, sim_url, "sim", tokenizer=_ExplodesInTheWorker())
    assert time.perf_counter() - t < 60


def test_plugin_runs_the_load_on_ray(pytester, local_ray, sim_url):
    pytester.makepyfile(test_perf="""
import pytest

@pytest.mark.goodput(scenario="server", requests=20, rate=20.0, isl=8, osl=4, workers=2)
def test_server(goodput):
    assert goodput.run().completed == 20
""")
    out = pytester.path / "out.json"
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-ray", f"--goodput-json={out}")
    assert res.parseoutcomes().get("passed") == 1, res.stdout.str()[-3000:]
    (run,) = json.loads(out.read_text())["tests"][0]["runs"]
    assert run["spec"]["backend"] == "ray" and run["client"]["workers"] == 2
    assert sum("clock offset" in n for n in run["client"]["notes"]) == 2
    assert ray.is_initialized()  # the module's runtime: used, not shut down by the session


def test_plugin_rejects_a_bad_address(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    res = pytester.runpytest("--goodput-ray=not-an-address")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--goodput-ray: 'not-an-address' is invalid for ray" in res.stderr.str()


def _cli(*args):
    """The CLI with a passing self-check: what is decided here is Ray's wiring, not validity."""
    return subprocess.run(fake_selfcheck.cli("run", *args),
                          capture_output=True, text=True, timeout=240, check=False)


def test_cli_runs_on_a_local_ray_runtime(sim_url, tmp_path):
    out = tmp_path / "r.json"
    p = _cli("--url", sim_url, "--ray", "--workers", "2", "--scenario", "server",  # alone: local
             "--rate", "20", "--requests", "20", "--isl", "8", "--osl", "4", "--json", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["spec"]["backend"] == "ray" and r["client"]["workers"] == 2 and r["completed"] == 20
    assert sum("clock offset" in n for n in r["client"]["notes"]) == 2
    assert p.stdout.count("client note") == len(r["client"]["notes"]) and "± " in p.stdout
    bad = _cli("--url", sim_url, "--ray", "head", "--requests", "2", "--rate", "1")
    assert bad.returncode == 2 and "--ray: 'head' is not a Ray address; expected local" in bad.stderr


def test_ab_runs_both_sides_load_on_ray(sim_url, tmp_path):
    out = tmp_path / "ab.json"
    p = subprocess.run([*fake_selfcheck.cli("ab"), "--base-url", sim_url,
                        "--head-url", sim_url, "--ray", "local", "--workers", "2", "--scenario",
                        "concurrency", "--concurrency", "4", "--requests", "20", "--isl", "8", "--osl",
                        "4", "--min-rounds", "2", "--max-rounds", "2", "--tolerance", "0.5", "--json", str(out)],
                       capture_output=True, text=True, timeout=240, check=False)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["spec"]["backend"] == "ray" and r["spec"]["workers"] == 2 and len(r["rounds"]) == 2
    assert "regressed" not in [c["verdict"] for c in r["comparisons"]]  # one engine on both sides
    bad = subprocess.run([sys.executable, "-m", "pytest_goodput", "ab", "--ray", "head"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "--ray: 'head' is not a Ray address" in bad.stderr


def test_a_killed_worker_fails_the_run_naming_it(local_ray, sim_url, monkeypatch):
    from pytest_goodput.load.pools.ray.pool import RayPool

    send = RayPool.send

    def send_then_kill(pool, k, msg):  # the driver kills worker 2 once its phase has started
        send(pool, k, msg)
        if msg[0] == "go" and k == 1:
            pool.ray.kill(pool.actors[1], no_restart=True)

    monkeypatch.setattr(RayPool, "send", send_then_kill)
    spec = ScenarioSpec(scenario="server", rate=20, requests=100, isl=8, osl=4, workers=2, backend="ray")
    t = time.perf_counter()
    with pytest.raises(WorkerError, match=r"worker 2 of 2 \(Ray actor on .*\) exited before finishing"):
        run_scenario(spec, sim_url, "sim")
    assert time.perf_counter() - t < 60


def test_ray_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if pytest-goodput[ray] were not installed
    with pytest.raises(ray_runtime.RayUnavailableError, match=r'pip install "pytest-goodput\[ray\]"'):
        ray_runtime.ensure()


def test_a_hung_worker_is_named_and_the_run_ends(local_ray, sim_url, monkeypatch):
    import os
    import signal

    from pytest_goodput.load import coordinator
    from pytest_goodput.load.pools.ray.pool import RayPool

    monkeypatch.setattr(coordinator, "SILENCE_S", 3.0)
    send, stopped = RayPool.send, []

    def send_then_stop(pool, k, msg):  # worker 2's process is stopped once its phase started
        send(pool, k, msg)
        if msg[0] == "go" and k == 1:
            pid = pool.ray.get(pool.actors[1].__ray_call__.remote(lambda self: os.getpid()))
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)

    monkeypatch.setattr(RayPool, "send", send_then_stop)
    spec = ScenarioSpec(scenario="server", rate=20, requests=200, isl=8, osl=4, workers=2, backend="ray")
    t = time.perf_counter()
    try:
        with pytest.raises(WorkerError, match=r"worker 2 of 2 \(Ray actor on .*\) sent nothing for 3 s \(hung\)"):
            run_scenario(spec, sim_url, "sim")
    finally:
        for pid in stopped:  # killed by the run; resume it in case it was not
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert stopped and time.perf_counter() - t < 60


def test_workers_taken_for_another_host_are_mapped_within_the_error_bound(local_ray, sim_url, monkeypatch):
    """The cross-host path on one machine: the true offset is 0, so the shift applied must be."""
    import re

    from pytest_goodput.load.pools.ray import pool as ray_pool

    monkeypatch.setattr(ray_pool, "host", lambda: ("driver-elsewhere", "another-boot"))
    spec = ScenarioSpec(scenario="server", rate=40, requests=30, isl=8, osl=4, workers=2, seed=2)
    procs = run_scenario(spec, sim_url, "sim", salt=3)
    on_ray = run_scenario(spec.model_copy(update={"backend": "ray"}), sim_url, "sim", salt=3)
    assert _view(on_ray) == _view(procs)
    gaps = [[x.scheduled_at - r.requests[0].scheduled_at for x in r.requests] for r in (procs, on_ray)]
    assert gaps[0] == pytest.approx(gaps[1], abs=1e-6)  # one schedule: t0 - shift, then + shift
    clock = [n for n in on_ray.client.notes if "clock offset" in n]
    assert len(clock) == 2
    for note in clock:
        m = re.search(r"± ([\d.]+) ms.*mapped onto the driver's clock \(shift ([+-][\d.]+) ms\)", note)
        assert m, note
        assert abs(float(m.group(2))) <= float(m.group(1)) + 0.001  # |shift| <= RTT/2 (+ rounding)

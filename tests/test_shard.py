"""Sharded load generation: plans dealt over worker processes, merged back as one run."""

import os
import signal
import threading
import time

import pytest

from pytest_goodput.load import coordinator, plan as plan_mod
from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.selfcheck.health import WorkerStats, judge_workers
from pytest_goodput.load.plan import count_owned, owned, plan_run, split, worker_count
from pytest_goodput.load.pools import WorkerError
from pytest_goodput.load.pools.processes import ProcessPool
from pytest_goodput.load.scenario import run_scenario
from pytest_goodput.load.requests.schedule import mean_rate, open_loop_schedule
from pytest_goodput.load.worker import Init
from pytest_goodput.schema.scenario.spec import ScenarioSpec

# --- pure parts -------------------------------------------------------------------------


def test_split_and_owned_indices():
    assert split(7, 3) == [3, 2, 2] and split(2, 4) == [1, 1, 0, 0] and sum(split(128, 5)) == 128
    # 5 users over 2 workers (3 + 2): indices 0,1,2 | 3,4 | 5,6,7 | 8,9 ...
    it = owned(0, 3, 0, 5)
    assert [next(it) for _ in range(6)] == [0, 1, 2, 5, 6, 7]
    it = owned(4, 2, 3, 5)  # starting at index 4 (after 4 warm-ups)
    assert [next(it) for _ in range(4)] == [7, 8, 12, 13]
    assert count_owned(0, 10, 0, 3, 0, 5) == 6 and count_owned(0, 10, 0, 2, 3, 5) == 4


def test_open_loop_plan_is_dealt_round_robin_with_one_clock():
    spec = ScenarioSpec(scenario="server", rate=50, requests=20, warmup_requests=3, concurrency=5)
    plan = plan_run(spec, 2, None, None, 7)
    a, b = (phase_job.plans for phase_job in plan.phases[0][0])
    assert [p.index for p in a] == list(range(0, 23, 2)) and [p.index for p in b] == list(range(1, 23, 2))
    offsets = open_loop_schedule(spec).offsets
    assert [p.scheduled_at for p in a + b] == [offsets[p.index] for p in a + b]  # offsets; t0 added at go
    assert [p.warmup for p in a[:3]] == [True, True, False] and b[0].warmup and not b[2].warmup
    assert [j.ceiling for j in plan.phases[0][0]] == [3, 2] and plan.pools == [3, 2]
    assert plan.total == 23 and plan.load == {"rate": 50.0, "max_concurrency": 5.0}
    assert plan.mean_gap_s == pytest.approx(0.02) and plan.phases[0][0][0].mean_gap_s == pytest.approx(0.04)


def test_closed_loop_budget_follows_users():
    spec = ScenarioSpec(scenario="concurrency", concurrency=3, requests=10, warmup_requests=2)
    plan = plan_run(spec, 2, None, None, 7)
    j0, j1 = plan.phases[0][0]
    assert (j0.users, j0.offset, j1.users, j1.offset) == (2, 0, 1, 2)
    # indices 2..11 measured; worker 0 owns i % 3 in {0, 1}: 3,4,6,7,9,10 -> 6 (+ 2, 5, 8, 11 for worker 1)
    assert (j0.budget, j1.budget) == (6, 4)
    assert [i for i, it in enumerate(j1.items) if it is not None] == [2, 5, 8, 11]
    assert plan.pools == [2, 1] and plan.total == 12 and not plan.extendable


def test_offline_phases():
    spec = ScenarioSpec(scenario="offline", requests=6, warmup_requests=3)
    plan = plan_run(spec, 2, None, None, 7)
    (warm, _), (measured, _) = plan.phases
    assert [(j.users, j.warmup, j.count) for j in warm] == [(2, True, 3), (1, True, 3)]
    assert [(j.users, j.first, j.budget) for j in measured] == [(3, 3, 3), (3, 3, 3)]
    assert plan.pools == [3, 3]
    # without warm-up the measured batch is the only phase (it starts at index 0 too)
    (measured, _), = plan_run(ScenarioSpec(scenario="offline", requests=4), 2, None, None, 7).phases
    assert [(j.users, j.first, j.count, j.warmup, j.budget) for j in measured] == [(2, 0, 4, False, 2)] * 2


def test_worker_count(monkeypatch):
    assert worker_count(ScenarioSpec(scenario="concurrency", concurrency=3, workers=8)) == 3
    assert worker_count(ScenarioSpec(scenario="offline", requests=2, workers=4)) == 2
    assert worker_count(ScenarioSpec(rate=5, workers=4)) == 4
    monkeypatch.setattr(plan_mod.sys, "platform", "darwin")
    with pytest.warns(RuntimeWarning, match="needs Linux"):
        assert worker_count(ScenarioSpec(rate=5, workers=4)) == 1


def test_workers_do_not_change_the_identity():
    a, b = ScenarioSpec(rate=5), ScenarioSpec(rate=5, workers=4)
    assert a.identity_hash() == b.identity_hash() and "workers" not in b.identity()


def test_judge_workers_names_the_saturated_worker():
    calm = WorkerStats([1.0] * 50, [1.0] * 50, cpu_s=0.3, wall_s=1.0)
    busy = WorkerStats([2.0] * 50, [30.0] * 50, cpu_s=0.95, wall_s=1.0)
    h = judge_workers([calm, busy], open_loop=True, mean_gap_s=0.01)
    assert not h.valid and h.workers == 2 and h.cpu_utilization == 0.95
    assert len(h.reasons) == 2 and all(r.startswith("worker 2 of 2: ") for r in h.reasons)
    assert h.loop_lag_ms.count == 100 and h.send_lag_p99_ms == 2.0
    assert judge_workers([calm, calm], open_loop=True, mean_gap_s=0.01).valid


# --- against the simulator ----------------------------------------------------------------


def _view(r):
    return [(x.index, x.warmup, x.ok, x.prompt_tokens, x.output_tokens) for x in r.requests]


@pytest.mark.parametrize("spec", [
    ScenarioSpec(scenario="server", rate=40, requests=40, warmup_requests=5, isl=16, osl=8,
                 osl_dist="uniform", range_ratio=0.5),
    ScenarioSpec(scenario="concurrency", concurrency=3, requests=20, warmup_requests=4, isl=8, osl=6),
    ScenarioSpec(scenario="offline", requests=12, warmup_requests=3, concurrency=4, isl=8, osl=4),
], ids=["server", "concurrency", "offline"])
def test_two_workers_measure_what_one_does(sim_url, spec):
    one = run_scenario(spec, sim_url, "sim", salt=11)
    two = run_scenario(spec.model_copy(update={"workers": 2}), sim_url, "sim", salt=11)
    assert one.client.workers == 1 and two.client.workers == 2
    assert _view(one) == _view(two)  # same indices in order, warm-up flags, token counts
    assert two.issued == one.issued == spec.requests and two.completed == spec.requests
    # How close one and two workers' TTFT are is a figure, not a verdict: a shared machine's
    # load moves it 10-fold (`python bench/loadgen_scale.py` prints TTFT P50/P99 per worker count).


def test_closed_loop_never_exceeds_total_concurrency(sim_url):
    spec = ScenarioSpec(scenario="concurrency", concurrency=5, requests=60, isl=8, osl=8, workers=2)
    calls = []
    r = run_scenario(spec, sim_url, "sim", progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (60, 60) and all(t == 60 for _, t in calls)
    events = sorted([(x.sent_at, 1) for x in r.requests] + [(x.end_at, -1) for x in r.requests],
                    key=lambda e: (e[0], e[1]))  # an end before a send at the same instant
    depth = peak = 0
    for _, d in events:
        depth += d
        peak = max(peak, depth)
    assert peak == 5 and r.completed == 60


def test_poisson_rate_holds_across_workers(sim_url):
    spec = ScenarioSpec(scenario="server", rate=80, requests=240, isl=8, osl=4, workers=2)
    r = run_scenario(spec, sim_url, "sim")
    sched = open_loop_schedule(spec)
    assert r.completed == 240
    # what was sent follows the seeded schedule's own rate within 3 % ...
    assert r.load["offered_rate"] == pytest.approx(mean_rate(sched.offsets), rel=0.03)
    # ... and the schedule is a fair Poisson sample of 80 req/s (4 sigma = 4 / sqrt(239) = 26 %)
    assert abs(mean_rate(sched.offsets) / 80 - 1) < 4 / 239 ** 0.5


def _shard_children():
    """Worker processes started by this test process (Linux /proc)."""
    me, out = os.getpid(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and b"pytest_goodput.load.pools.processes" in cmd:
            out.append(int(pid))
    return sorted(out)


def _signal_a_worker_once_running(sig):
    """A progress callback for the run: at its first tick (the measured phase is under way,
    every worker started whatever the machine's load) one worker gets ``sig``."""
    sent = threading.Event()

    def progress(done, total):
        kids = _shard_children()
        if not sent.is_set() and len(kids) == 2:
            sent.set()
            os.kill(kids[-1], sig)

    return progress


def test_a_killed_worker_is_a_clear_error(sim_url):
    spec = ScenarioSpec(scenario="server", rate=20, requests=200, isl=8, osl=4, workers=2)
    t = time.perf_counter()
    with pytest.raises(WorkerError, match=r"worker [12] of 2 \(pid \d+\) exited before finishing; exit code -9"):
        run_scenario(spec, sim_url, "sim", progress=_signal_a_worker_once_running(signal.SIGKILL))
    assert time.perf_counter() - t < 120  # failed, not hung until the phase's bound
    time.sleep(0.2)
    assert _shard_children() == []  # the other worker was stopped too


def test_a_hung_worker_is_killed_and_named(sim_url, monkeypatch):
    monkeypatch.setattr(coordinator, "SILENCE_S", 2.0)
    spec = ScenarioSpec(scenario="server", rate=20, requests=200, isl=8, osl=4, workers=2)
    with pytest.raises(WorkerError, match=r"worker [12] of 2 .* sent nothing for 2 s \(hung\); still running, killed"):
        run_scenario(spec, sim_url, "sim", progress=_signal_a_worker_once_running(signal.SIGSTOP))
    time.sleep(0.2)
    assert _shard_children() == []


def test_an_unpicklable_tokenizer_is_a_clear_error(sim_url):
    class Words:  # a local class: cannot be pickled to a worker
        def encode(self, text, add_special_tokens=False):
            return text.split()

    spec = ScenarioSpec(scenario="concurrency", concurrency=2, duration_s=1, isl=8, osl=4, workers=2)
    with pytest.raises(WorkerError, match="worker 1 of 2 .* could not be sent its work .*picklable"):
        run_scenario(spec, sim_url, "sim", tokenizer=Words())
    time.sleep(0.2)
    assert _shard_children() == []


# --- conversations and sketches over any pool ------------------------------------------------


def _chat(**kw):
    return ScenarioSpec(api="chat", isl=8, osl=4, **kw)


def test_conversations_are_dealt_whole_over_workers():
    closed = plan_run(_chat(scenario="concurrency", concurrency=3, turns=3, requests=18, warmup_requests=3),
                      2, None, None, 7)
    j0, j1 = closed.phases[0][0]
    assert (j0.users, j1.users) == (2, 1) and j0.conversations and j0.budget is None
    # 7 conversations; users 0, 1 (worker 1) own conversations c % 3 in {0, 1}, each all its turns
    assert [i for i, it in enumerate(j1.items) if it is not None] == [6, 7, 8, 15, 16, 17]
    assert sum(it is not None for it in j0.items) == 15 and closed.total == 21
    opened = plan_run(_chat(scenario="server", rate=50, turns=2, requests=8, concurrency=3), 2, None, None, 7)
    a, b = opened.phases[0][0]
    assert [c for c, _ in a.arrivals] == [0, 2] and [c for c, _ in b.arrivals] == [1, 3]
    assert (a.ceiling, b.ceiling) == (2, 1) and [i for i, it in enumerate(b.items) if it] == [2, 3, 6, 7]


@pytest.mark.parametrize("spec", [
    _chat(scenario="concurrency", concurrency=3, turns=3, requests=12, warmup_requests=3),
    _chat(scenario="server", rate=30, turns=2, requests=12, concurrency=4),
], ids=["closed", "open"])
def test_conversations_over_two_workers_send_what_one_does(sim_url, spec):
    one = coordinator.run_plan(spec, sim_url, "sim", salt=11)
    pool = ProcessPool(2)
    two = run(coordinator.coordinate(plan_run(spec, 2, None, None, 11), pool,
                                     Init(spec, sim_url, "sim", None, 1, 11)))

    def view(out):
        return [(ex.plan.index, ex.plan.conversation, ex.plan.turn, ex.plan.warmup, ex.status)
                for ex in out.exchanges]

    assert view(two) == view(one) and all(ex.status == 200 for ex in two.exchanges)
    assert one.check.health().workers == 1 and two.check.health().workers == 2


@pytest.mark.parametrize("workers", [1, 2])
def test_any_pool_sketches_a_run_above_its_threshold(sim_url, workers):
    spec = ScenarioSpec(scenario="server", rate=40, requests=40, warmup_requests=4, isl=8, osl=6,
                        workers=workers, seed=3)
    sk = run_scenario(spec.model_copy(update={"sketch_above": 43}), sim_url, "sim", salt=5)
    assert sk.percentiles == "sketch" and sk.issued == 40 and sk.client.workers == workers
    assert sk.metrics.ttft_ms.count == sk.completed and sk.sketch.threshold == 43

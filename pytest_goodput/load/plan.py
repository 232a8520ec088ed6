"""What a run sends, computed before any worker starts: phases of jobs, one job per worker.

Every run, one worker included, is one :class:`Plan`, executed by ``coordinator.py`` over a
pool of workers. Open loops deal the schedule round-robin (request ``i`` to worker
``i mod N``, each with its share of a concurrency ceiling); closed loops deal users, and
request index ``first + b*users + u`` belongs to user ``u``'s worker, so warm-up and the
measured budget follow the users. Conversations are dealt whole: by arrival (open loop) or
by user (closed loop). ``docs/scenarios.md`` and ``docs/workloads.md`` are the contract.
"""

from __future__ import annotations

import itertools
import math
import resource
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from pytest_goodput.load.requests.schedule import think_times
from pytest_goodput.load.requests.prefix import with_shared_prefixes
from pytest_goodput.load.requests.schedule import Schedule, arrival_offsets, open_loop_schedule
from pytest_goodput.load.trace import Trace, load_trace
from pytest_goodput.load.requests.trace_replay import TracePrompts, mean_gap, trace_items, trace_load, trace_schedule
from pytest_goodput.load.requests.workload import Dataset, WorkItem, build_workload
from pytest_goodput.measure.records.exchange import RequestPlan
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: Prompts built up front for a closed loop whose request count is not known in advance.
INITIAL_SUPPLY = 1024
#: Most connections one client process opens (an open loop without a ceiling).
MAX_CONNECTIONS = 4096
OPEN_LOOP = ("server", "interactive", "trace")


class Supply:
    """Request payloads by index, built in advance and extended (doubling) when a run outgrows them.

    ``prompts``: where the prompts are built on demand instead (a trace replay); the items'
    prompts are then empty and each request's is built just ahead of its send (``bodies.py``).
    """

    def __init__(self, spec: ScenarioSpec, n: int, tokenizer: Any, dataset: Optional[Dataset],
                 salt: Optional[int], items: Optional[list[Any]] = None,
                 prompts: Optional[TracePrompts] = None) -> None:
        self.spec, self.tokenizer, self.dataset, self.salt = spec, tokenizer, dataset, salt
        self.prompts = prompts
        # ``items`` prebuilt by the plan (None where another worker owns the index)
        self.items: list[Any] = items if items is not None else self._build(n)

    def _build(self, n: int) -> list[WorkItem]:
        items = build_workload(self.spec, n, self.tokenizer, dataset=self.dataset, salt=self.salt)
        return with_shared_prefixes(items, self.spec, self.salt, self.tokenizer)

    def __getitem__(self, i: int) -> WorkItem:
        if i >= len(self.items):
            n = max(2 * len(self.items), i + 1)
            self.items = self._build(n)
        return self.items[i]

    def plan(self, i: int, scheduled_at: float, warmup: bool) -> RequestPlan:
        item = self[i]
        return RequestPlan(i, item.prompt, item.prompt_tokens, item.max_tokens, scheduled_at, warmup,
                           images=item.images)


def split(total: int, n: int) -> list[int]:
    """``total`` dealt over ``n`` shares as evenly as possible, the larger shares first."""
    return [total // n + (k < total % n) for k in range(n)]


def owned(first: int, users: int, offset: int, total_users: int) -> Iterator[int]:
    """Closed-loop indices a worker owns: users ``offset .. offset+users-1`` of ``total_users``.

    Index ``first + b*total_users + u`` belongs to user ``u``'s worker, so indices (hence
    warm-up requests and the measured budget) are dealt in proportion to users.
    """
    for block in itertools.count():
        base = first + block * total_users + offset
        yield from range(base, base + users)


def count_owned(lo: int, hi: int, first: int, users: int, offset: int, total_users: int) -> int:
    """How many of the indices ``[lo, hi)`` :func:`owned` gives this worker."""
    return sum(1 for i in range(lo, hi) if offset <= (i - first) % total_users < offset + users)


@dataclass
class Job:
    """One worker's part of one phase. Deadlines are offsets from t0 until ``go`` adds it.

    ``conversations``: the job runs whole conversations (``turns > 1``); in the open loop
    ``arrivals`` holds its conversations and their arrival offsets, in the closed loop its
    users take conversations as :func:`owned` deals them (by conversation number).
    """

    open_loop: bool
    plans: list[RequestPlan] = field(default_factory=list)  # open loop
    ceiling: Optional[int] = None
    mean_gap_s: Optional[float] = None
    users: int = 0  # closed loop (concurrency, offline)
    offset: int = 0
    total_users: int = 1
    first: int = 0
    count: Optional[int] = None
    batch: bool = False
    warmup: Optional[bool] = None
    budget: Optional[int] = None
    items: Optional[list[Any]] = None  # workload by global index, None where not owned
    prompts: Optional[TracePrompts] = None  # open loop: the plans' prompts, built on demand
    conversations: bool = False
    arrivals: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class Plan:
    """The whole run: each phase's jobs (one per worker) and the longest that phase may take."""

    phases: list[tuple[list[Job], float]]
    pools: list[int]  # connections each worker may open
    load: dict[str, float]
    open_loop: bool
    mean_gap_s: Optional[float]
    total: int  # progress total; 0 when unknown
    extendable: bool  # workers may run past the prebuilt prompts (duration-bounded)


def worker_count(spec: ScenarioSpec, nodes: Optional[int] = None) -> int:
    """Workers a run of ``spec`` uses: ``spec.workers``, at most one per user or slot.

    ``nodes``: a Ray cluster's alive nodes; ``workers`` unset there means one per node.
    Processes of one machine (``nodes`` None) need Linux, where ``perf_counter`` is one
    clock across processes: elsewhere this warns and returns 1.
    """
    if spec.scenario in ("sweep", "capacity"):
        return 1
    want = spec.workers
    if nodes is not None and "workers" not in spec.model_fields_set:
        want = max(1, nodes)
    n = max(1, min(want, spec.concurrency or spec.requests or want))
    if nodes is None and n > 1 and not sys.platform.startswith("linux"):
        warnings.warn(f"workers={n} needs Linux (one monotonic clock across processes); "
                      "running in one process", RuntimeWarning, stacklevel=3)
        return 1
    return n


def pool_size(spec: ScenarioSpec) -> int:
    """Connections one client may open: the in-flight bound, or as many as file descriptors allow.

    An open loop without a ceiling has no in-flight bound; a pool smaller than its backlog
    would silently act as one, so it gets ``MAX_CONNECTIONS`` (the self-check flags a full pool).
    """
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    fd_cap = MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(64, soft - 128)
    if spec.concurrency:
        want = spec.concurrency
    elif spec.scenario == "offline":
        want = spec.warmup_requests + (spec.requests or 0)
    else:
        want = MAX_CONNECTIONS
    return max(1, min(want, fd_cap, MAX_CONNECTIONS))


def open_loop_setup(spec: ScenarioSpec, tokenizer: Any, dataset: Any, salt: Optional[int]
                    ) -> tuple[Schedule, Supply, Optional[float], dict[str, float]]:
    """An open-loop run's schedule, payloads, mean gap and offered load (``dataset``: a
    loaded dataset, or for a trace replay its :class:`Trace`)."""
    if spec.scenario == "trace":
        trace = dataset if isinstance(dataset, Trace) else load_trace(spec)
        sched, first = trace_schedule(spec, trace)
        items, prompts = trace_items(spec, trace, sched, first, tokenizer, salt)
        supply = Supply(spec, 0, tokenizer, None, salt, items=items, prompts=prompts)
        load, gap = trace_load(spec, trace, sched, first), mean_gap(sched)
    else:
        assert spec.rate is not None
        sched = open_loop_schedule(spec)
        supply = Supply(spec, len(sched), tokenizer, dataset, salt)
        load, gap = {"rate": float(spec.rate)}, 1.0 / spec.rate
    if spec.concurrency:
        load["max_concurrency"] = float(spec.concurrency)
    return sched, supply, gap, load


def _mine(items: list[Any], owns: Any) -> list[Any]:
    return [it if owns(i) else None for i, it in enumerate(items)]


def _closed_jobs(spec: ScenarioSpec, n: int, users: int, items: list[Any], *, first: int,
                 count: Optional[int], batch: bool, warmup: Optional[bool]) -> list[Job]:
    """Users dealt over workers; each gets its own indices' prompts and measured budget
    (with conversations: its own conversations' turns, the budget left to whole conversations)."""
    jobs, offset, turns = [], 0, spec.turns
    measured_lo = first if warmup is not None else first + spec.warmup_requests
    for u in split(users, n):
        if turns > 1:
            mine = _mine(items, lambda i, o=offset, u=u: u and o <= (i // turns) % users < o + u)
        else:
            mine = _mine(items, lambda i, o=offset, u=u: u and i >= first and o <= (i - first) % users < o + u)
        budget = None
        if spec.requests is not None and warmup is not True and u and turns == 1:
            budget = count_owned(measured_lo, measured_lo + spec.requests, first, u, offset, users)
        jobs.append(Job(False, users=u, offset=offset, total_users=users, first=first, count=count,
                        batch=batch, warmup=warmup, budget=budget, items=mine, conversations=turns > 1))
        offset += u
    return jobs


def _longest_think(spec: ScenarioSpec, conversations: int) -> float:
    """Seconds the slowest-thinking conversation thinks in all (0 without conversations)."""
    if spec.turns < 2 or spec.think_time_s <= 0:
        return 0.0
    return max((sum(think_times(spec, c)) for c in range(conversations)), default=0.0)


def _bound(spec: ScenarioSpec, users: int, count: Optional[int]) -> float:
    """Generous worst case of a closed-loop phase: requests time out, users' shares differ 2x."""
    if spec.turns > 1:  # whole conversations, each ``turns`` requests plus its thinking
        convs = (count or 0) // spec.turns
        each = spec.turns * spec.timeout_s + _longest_think(spec, convs)
        return each * 2 * math.ceil(convs / users)
    by_count = spec.warmup_s + spec.timeout_s * 2 * math.ceil(count / users) if count else math.inf
    if spec.duration_s is None:
        return by_count
    warm = spec.timeout_s * 2 * math.ceil(spec.warmup_requests / users)
    return min(by_count, spec.warmup_s + warm + spec.duration_s + spec.timeout_s)


def _open_plan(spec: ScenarioSpec, n: int, tokenizer: Any, dataset: Any, salt: Optional[int]) -> Plan:
    cap = spec.concurrency
    sched, supply, gap, load = open_loop_setup(spec, tokenizer, dataset, salt)
    ceilings: list[Optional[int]] = list(split(cap, n)) if cap else [None] * n
    pools = [c if c else pool_size(spec) for c in ceilings]
    gaps = n * gap if gap else None
    if spec.turns > 1:  # conversations arrive on the schedule (round-robin); their turns follow
        convs = len(sched) // spec.turns
        offsets = arrival_offsets(spec, convs).tolist()
        jobs = [Job(True, ceiling=ceilings[k], mean_gap_s=gaps, conversations=True,
                    arrivals=[(c, offsets[c]) for c in range(k, convs, n)],
                    items=_mine(supply.items, lambda i, k=k: (i // spec.turns) % n == k))
                for k in range(n)]
        last = offsets[-1] if offsets else 0.0
        each = spec.turns * spec.timeout_s + _longest_think(spec, convs)
        queued = 2 * math.ceil(convs / cap) if cap else 1
        return Plan([(jobs, last + each * queued)], pools, load, True, gap, len(sched), False)
    plans = list(scheduled_plans(sched, supply, 0.0))
    jobs = [Job(True, plans=plans[k::n], ceiling=ceilings[k], mean_gap_s=gaps, prompts=supply.prompts)
            for k in range(n)]
    # with a ceiling, requests queue for slots: each slot may serve its share back to back
    queued = 2 * math.ceil(len(sched) / cap) if cap else 1
    bound = (float(sched.offsets[-1]) if len(sched) else 0.0) + spec.timeout_s * queued
    return Plan([(jobs, bound)], pools, load, True, gap, len(sched), False)


def scheduled_plans(sched: Schedule, supply: Supply, t0: float) -> Iterator[RequestPlan]:
    """The open-loop plans, deadlines ``t0 + offset``, each flagged ``open_loop`` (its
    latencies count from its deadline)."""
    for i, (off, warm) in enumerate(zip(sched.offsets.tolist(), sched.warmup.tolist())):
        plan = supply.plan(i, t0 + off, warm)
        plan.open_loop = True
        yield plan


def plan_run(spec: ScenarioSpec, n: int, tokenizer: Any, dataset: Any, salt: Optional[int]) -> Plan:
    """Prompts, deadlines and shares for ``n`` workers (pure apart from building prompts).

    Raises ``ValueError`` for a spec no single run can execute (a sweep, or an offline run
    bounded by time alone).
    """
    scen, cap = spec.scenario, spec.concurrency
    if scen in ("sweep", "capacity"):
        raise ValueError(f"scenario {scen!r} is a series of runs; run each point as its own spec")
    if scen in OPEN_LOOP:
        return _open_plan(spec, n, tokenizer, dataset, salt)
    nw, nr = spec.warmup_requests, spec.requests
    if scen == "concurrency":
        assert cap is not None
        known = nr is not None and spec.warmup_s == 0
        total = nw + nr if known and nr is not None else 0
        items = Supply(spec, total or INITIAL_SUPPLY, tokenizer, dataset, salt).items
        jobs = _closed_jobs(spec, n, cap, items, first=0, count=None, batch=False, warmup=None)
        bound = _bound(spec, cap, nw + nr if nr is not None else None)
        return Plan([(jobs, bound)], split(cap, n), {"concurrency": float(cap)}, False, None, total, not known)
    if spec.warmup_s > 0:
        raise ValueError("offline sends everything at t0: use warmup_requests=, not warmup_s=")
    if nr is None and not cap:
        raise ValueError("offline with only duration_s= needs a concurrency= ceiling (or requests=)")
    total = nw + (nr or 0)
    items = Supply(spec, total or INITIAL_SUPPLY, tokenizer, dataset, salt).items
    phases: list[tuple[list[Job], float]] = []
    pools = [1] * n
    for warm, first, count, users in ((True, 0, nw, min(cap or nw, nw)), (False, nw, nr, cap or nr or 1)):
        if warm and not nw:
            continue  # no warm-up batch
        jobs = _closed_jobs(spec, n, users, items, first=first, count=count, batch=True, warmup=warm)
        phases.append((jobs, _bound(spec, users, count)))
        pools = [max(p, u) for p, u in zip(pools, split(users, n))]
    load = {"requests": float(nr or 0), **({"max_concurrency": float(cap)} if cap else {})}
    return Plan(phases, pools, load, False, None, total if nr is not None else 0, nr is None)

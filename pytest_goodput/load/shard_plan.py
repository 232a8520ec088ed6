"""Who sends what in a sharded run: prompts, deadlines and shares per worker (no processes).

Open-loop runs deal the schedule round-robin (request i to worker i mod N, each with its
share of a concurrency ceiling); closed-loop runs deal users, and request index
``first + b*users + u`` belongs to user ``u``'s worker, so warm-up and measured budget
follow the users. ``shard.py`` runs the plan in worker processes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from pytest_goodput.load.drive import INITIAL_SUPPLY, Supply, open_loop_setup, pool_size, scheduled_plans
from pytest_goodput.measure.exchange import RequestPlan
from pytest_goodput.schema.spec import ScenarioSpec


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
    """One worker's part of one phase. Deadlines are offsets from t0 until ``go`` adds it."""

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


@dataclass
class Plan:
    """The whole sharded run, computed before any worker starts."""

    phases: list[tuple[list[Job], float]]  # each phase's jobs and the longest it may take
    pools: list[int]
    load: dict[str, float]
    open_loop: bool
    mean_gap_s: Optional[float]
    total: int  # progress total; 0 when unknown
    extendable: bool  # workers may run past the prebuilt prompts (duration-bounded)


def _closed_jobs(spec: ScenarioSpec, n: int, users: int, items: list[Any], *, first: int,
                 count: Optional[int], batch: bool, warmup: Optional[bool]) -> list[Job]:
    """Users dealt over workers; each gets its own indices' prompts and measured budget."""
    jobs, offset = [], 0
    measured_lo = first if warmup is not None else first + spec.warmup_requests
    for u in split(users, n):
        mine = [it if u and i >= first and offset <= (i - first) % users < offset + u else None
                for i, it in enumerate(items)]
        budget = None
        if spec.requests is not None and warmup is not True and u:
            budget = count_owned(measured_lo, measured_lo + spec.requests, first, u, offset, users)
        jobs.append(Job(False, users=u, offset=offset, total_users=users, first=first, count=count,
                        batch=batch, warmup=warmup, budget=budget, items=mine))
        offset += u
    return jobs


def _bound(spec: ScenarioSpec, users: int, count: Optional[int]) -> float:
    """Generous worst case of a closed-loop phase: requests time out, users' shares differ 2x."""
    by_count = spec.warmup_s + spec.timeout_s * 2 * math.ceil(count / users) if count else math.inf
    if spec.duration_s is None:
        return by_count
    warm = spec.timeout_s * 2 * math.ceil(spec.warmup_requests / users)
    return min(by_count, spec.warmup_s + warm + spec.duration_s + spec.timeout_s)


def plan_run(spec: ScenarioSpec, n: int, tokenizer: Any, dataset: Any, salt: Optional[int]) -> Plan:
    """Prompts, deadlines and shares for every worker (pure apart from building prompts)."""
    scen, cap = spec.scenario, spec.concurrency
    if scen in ("server", "interactive", "trace"):
        sched, supply, gap, load = open_loop_setup(spec, tokenizer, dataset, salt)
        plans = list(scheduled_plans(sched, supply, 0.0))
        ceilings: list[Optional[int]] = list(split(cap, n)) if cap else [None] * n
        jobs = [Job(True, plans=plans[k::n], ceiling=ceilings[k], mean_gap_s=n * gap if gap else None)
                for k in range(n)]
        pools = [c if c else pool_size(spec) for c in ceilings]
        # with a ceiling, requests queue for slots: each slot may serve its share back to back
        queued = 2 * math.ceil(len(sched) / cap) if cap else 1
        bound = (float(sched.offsets[-1]) if len(sched) else 0.0) + spec.timeout_s * queued
        return Plan([(jobs, bound)], pools, load, True, gap, len(sched), False)
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

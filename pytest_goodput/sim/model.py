"""A discrete-event performance model of a continuous-batching engine (pure, virtual time).

Shaped after vLLM's V1 scheduler: every step first serves running sequences in order
(one token each when decoding, a chunk when prefilling), then admits waiting ones while
``max_num_seqs``, the per-step token budget and the KV cache allow. A sequence that cannot
get a KV block preempts the newest running one (recompute: its KV is freed and it goes
back to the front of the queue). With prefix caching, full prompt blocks already in the
cache are not prefilled again. The step's duration comes from :class:`SimProfile`. No
sockets, no clocks: the HTTP server and the gate-quality benchmark drive the same model.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Optional, Sequence

from pytest_goodput.sim.profile import SimProfile
from pytest_goodput.sim.speculative import Speculator
from pytest_goodput.sim.vision import image_part


class RequestTooLong(ValueError):
    """prompt + max_tokens can never fit in the KV cache (an engine answers 400)."""


@dataclass(slots=True)
class StepResult:
    """One engine step: how long it takes and what it produced when it ends."""

    duration_s: float
    emitted: list[tuple[Hashable, int, bool]]  # (req_id, n_tokens, finished)
    preempted: list[Hashable]
    decode_seqs: int = 0
    prefill_tokens: int = 0


@dataclass(slots=True)
class SimRequest:
    """A request for :func:`simulate`; ``prefix_tokens`` leading tokens are shared by key."""

    req_id: Hashable
    prompt_tokens: int
    max_tokens: int
    arrival_time: float = 0.0
    prefix_key: Optional[Hashable] = None
    prefix_tokens: Optional[int] = None


@dataclass(slots=True)
class Timeline:
    """Virtual times (s) of one request: arrival and every emitted token."""

    req_id: Hashable
    arrival: float
    prompt_tokens: int
    token_times: list[float] = field(default_factory=list)
    preemptions: int = 0
    cached_tokens: int = 0

    @property
    def ttft(self) -> Optional[float]:
        return self.token_times[0] - self.arrival if self.token_times else None

    @property
    def tpot(self) -> Optional[float]:
        n = len(self.token_times)
        return (self.token_times[-1] - self.token_times[0]) / (n - 1) if n >= 2 else None

    @property
    def e2e(self) -> Optional[float]:
        return self.token_times[-1] - self.arrival if self.token_times else None


@dataclass(slots=True)
class _Seq:
    req_id: Hashable
    prompt_len: int
    target: int
    hashes: Sequence[Hashable]
    generated: int = 0
    computed: int = 0
    blocks: int = 0  # private KV blocks held
    cached: list = field(default_factory=list)  # hashes of shared cached blocks referenced
    preemptions: int = 0
    cached_tokens: int = 0
    prompt_counted: bool = False
    image_tokens: int = 0  # the prompt's last image_tokens tokens are images (after the text)
    extra: int = 0  # accepted draft tokens emitted with this step's token


def draw_output_length(
    rng: random.Random, max_tokens: int, min_tokens: int, eos_prob: float, ignore_eos: bool
) -> int:
    """Output length with a seeded pseudo-EOS: geometric after ``min_tokens``, capped."""
    if ignore_eos or eos_prob <= 0 or max_tokens <= max(min_tokens, 1):
        return max_tokens
    if eos_prob >= 1:
        return max(1, min(max_tokens, min_tokens + 1))
    k = int(math.log(1.0 - rng.random()) / math.log(1.0 - eos_prob)) + 1
    return max(1, min(max_tokens, min_tokens + k))


class EngineModel:
    """The scheduler and KV cache of one engine replica; call :meth:`step` repeatedly."""

    def __init__(self, profile: SimProfile, speed: Optional[Callable[[float], float]] = None) -> None:
        self.profile = profile
        self._speed = speed  # step-time multiplier at virtual time t (sim/drift.py), or None
        self._bs = profile.block_size
        self._num_blocks = profile.num_blocks
        self._free = self._num_blocks
        self._cache: dict[Hashable, int] = {}  # block hash -> refcount
        self._evictable: OrderedDict[Hashable, None] = OrderedDict()  # refcount 0, LRU first
        self._waiting: deque[_Seq] = deque()
        self._running: list[_Seq] = []
        self._seqs: dict[Hashable, _Seq] = {}
        self._rng = random.Random(profile.seed)
        self._sigma = profile.noise_sigma
        p = profile
        f = p.step_factor / 1000.0  # ms -> s, slowdown, time_scale
        self._c_base = p.step_base_ms * f
        self._c_seq = p.step_per_seq_ms * f
        self._c_ctx = p.step_per_ctx_token_ms * f
        self._c_prefill = p.prefill_per_token_ms * f
        self.preemptions_total = 0
        self.generation_tokens_total = 0
        self.prompt_tokens_total = 0
        self.prefix_cache_queries_total = 0
        self.prefix_cache_hits_total = 0
        self.steps_total = 0
        self._c_image = p.prefill_per_token_ms * (p.image_cost - 1.0) * f  # docs/simulator.md
        self.spec = Speculator(p)

    # --- counters ------------------------------------------------------------------------
    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks in use (free and evictable cached blocks are not)."""
        used = self._num_blocks - self._free - len(self._evictable)
        return used / self._num_blocks

    @property
    def has_work(self) -> bool:
        return bool(self._running or self._waiting)

    # --- requests ------------------------------------------------------------------------
    def add_request(
        self, req_id: Hashable, prompt_tokens: int, max_tokens: int, arrival_time: float = 0.0,
        prefix_key: Optional[Hashable] = None, prefix_tokens: Optional[int] = None,
        block_hashes: Optional[Sequence[Hashable]] = None, image_tokens: int = 0,
    ) -> _Seq:
        """Queue a request. Prefix sharing: ``prefix_key`` (+ ``prefix_tokens``, default the
        whole prompt) or explicit per-block ``block_hashes`` (chained, like vLLM's).

        Returns the sequence; its ``cached_tokens`` (prompt tokens its last admission found
        in the prefix cache) is what the server reports in ``usage``."""
        del arrival_time  # the caller decides when to add; kept for a uniform signature
        if prompt_tokens < 1 or max_tokens < 1:
            raise ValueError("prompt_tokens and max_tokens must be >= 1")
        if prompt_tokens + max_tokens > self._num_blocks * self._bs:
            raise RequestTooLong(
                f"prompt ({prompt_tokens}) + max_tokens ({max_tokens}) exceeds the KV cache "
                f"({self._num_blocks * self._bs} tokens)"
            )
        if req_id in self._seqs:
            raise ValueError(f"duplicate request id {req_id!r}")
        hashes: Sequence[Hashable] = ()
        if self.profile.prefix_caching:
            if block_hashes is not None:
                hashes = tuple(block_hashes)
            elif prefix_key is not None:
                shared = prompt_tokens if prefix_tokens is None else min(prefix_tokens, prompt_tokens)
                hashes = [(prefix_key, i) for i in range(shared // self._bs)]
        seq = _Seq(req_id, prompt_tokens, max_tokens, hashes, image_tokens=min(image_tokens, prompt_tokens))
        self._seqs[req_id] = seq
        self._waiting.append(seq)
        return seq

    def abort(self, req_id: Hashable) -> bool:
        """Drop a request (client went away); frees its KV. False if unknown or done."""
        seq = self._seqs.pop(req_id, None)
        if seq is None:
            return False
        if seq in self._running:
            self._running.remove(seq)
        else:
            self._waiting.remove(seq)
        self._release(seq)
        return True

    # --- KV cache ------------------------------------------------------------------------
    def _allocate(self, n: int) -> bool:
        if n <= self._free:
            self._free -= n
            return True
        short = n - self._free
        if short > len(self._evictable):
            return False
        for _ in range(short):
            h, _none = self._evictable.popitem(last=False)
            del self._cache[h]
        self._free += short - n
        return True

    def _release(self, seq: _Seq) -> None:
        self._free += seq.blocks
        seq.blocks = 0
        cache, evictable = self._cache, self._evictable
        for h in seq.cached:
            c = cache[h] - 1
            cache[h] = c
            if c == 0:
                evictable[h] = None
        seq.cached = []
        seq.computed = 0

    def _match_prefix(self, seq: _Seq) -> None:
        """Reference the cached leading blocks of a newly admitted sequence."""
        total = seq.prompt_len + seq.generated
        cache, evictable = self._cache, self._evictable
        limit = (total - 1) // self._bs  # always compute at least one token
        k = 0
        for h in seq.hashes[:limit]:
            if h not in cache:
                break
            k += 1
        for h in seq.hashes[:k]:
            if cache[h] == 0:
                del evictable[h]
            cache[h] += 1
        seq.cached = list(seq.hashes[:k])
        seq.computed = k * self._bs
        seq.cached_tokens = seq.computed

    def _register_prefix(self, seq: _Seq) -> None:
        """After prefill, publish the sequence's hashed full blocks to the cache."""
        cache = self._cache
        for i in range(len(seq.cached), len(seq.hashes)):
            h = seq.hashes[i]
            if h in cache or seq.blocks == 0:
                break
            cache[h] = 1
            seq.cached.append(h)
            seq.blocks -= 1

    def _preempt(self, seq: _Seq) -> None:
        self._release(seq)
        seq.preemptions += 1
        self.preemptions_total += 1
        self._waiting.appendleft(seq)

    # --- the step ------------------------------------------------------------------------
    def step(self, now: float = 0.0) -> StepResult:
        """Schedule one batch, return its duration and the tokens it emits when it ends."""
        bs = self._bs
        budget = self.profile.max_num_batched_tokens
        sched: list[tuple[_Seq, int]] = []
        preempted: list[Hashable] = []
        running = self._running
        i = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            n = seq.prompt_len + seq.generated - seq.computed
            if n > budget:
                n = budget
            accepted, extra = self.spec.draw(n == 1 and seq.generated > 0, seq.target - seq.generated - 1)
            need = -(-(seq.computed + n + extra) // bs) - seq.blocks - len(seq.cached)
            if need > 0:
                lost = False
                while not self._allocate(need):
                    victim = running.pop()  # newest first, like vLLM's FCFS policy
                    self._preempt(victim)
                    preempted.append(victim.req_id)
                    if victim is seq:
                        lost = True
                        break
                if lost:
                    break
                seq.blocks += need
            seq.extra = extra
            self.spec.count(accepted)
            sched.append((seq, n))
            budget -= n
            i += 1
        if not preempted:
            waiting = self._waiting
            max_seqs = self.profile.max_num_seqs
            while waiting and budget > 0 and len(running) < max_seqs:
                seq = waiting[0]
                if seq.hashes:
                    self._match_prefix(seq)
                n = seq.prompt_len + seq.generated - seq.computed
                if n > budget:
                    n = budget
                need = -(-(seq.computed + n) // bs) - len(seq.cached)
                if not self._allocate(need):
                    self._release(seq)
                    break
                if seq.hashes:
                    self.prefix_cache_queries_total += seq.prompt_len + seq.generated
                    self.prefix_cache_hits_total += seq.cached_tokens
                seq.blocks = need
                waiting.popleft()
                running.append(seq)
                sched.append((seq, n))
                budget -= n
        return self._finish_step(sched, preempted, now)

    def _finish_step(self, sched: list[tuple[_Seq, int]], preempted: list[Hashable], now: float = 0.0) -> StepResult:
        decode_seqs = ctx = prefill = vision = 0
        emitted: list[tuple[Hashable, int, bool]] = []
        any_done = False
        for seq, n in sched:
            total = seq.prompt_len + seq.generated
            extra, seq.extra = seq.extra, 0
            if n == 1 and seq.generated and seq.computed + 1 == total:
                decode_seqs += 1
                ctx += total
            else:
                prefill += n
                vision += image_part(seq.computed, n, seq.prompt_len, seq.image_tokens)
            seq.computed += n + extra
            if seq.computed == total + extra:
                if not seq.prompt_counted:
                    seq.prompt_counted = True
                    self.prompt_tokens_total += seq.prompt_len
                if seq.hashes and seq.generated == 0:
                    self._register_prefix(seq)
                seq.generated += 1 + extra
                done = seq.generated >= seq.target
                emitted.append((seq.req_id, 1 + extra, done))
                if done:
                    any_done = True
        self.generation_tokens_total += sum(e[1] for e in emitted)
        if any_done:
            keep = []
            for seq in self._running:
                if seq.generated >= seq.target:
                    self._release(seq)
                    del self._seqs[seq.req_id]
                else:
                    keep.append(seq)
            self._running[:] = keep
        dur = self._c_base + self._c_seq * decode_seqs + self._c_ctx * ctx + self._c_prefill * prefill
        dur += self._c_prefill * self.profile.spec_tokens * decode_seqs + self._c_image * vision
        if self._sigma:
            s = self._sigma
            dur *= self._rng.lognormvariate(-0.5 * s * s, s)
        if self._speed is not None:
            dur *= self._speed(now)
        self.steps_total += 1
        return StepResult(dur, emitted, preempted, decode_seqs, prefill)

    # --- virtual-time driver -------------------------------------------------------------
    def simulate(self, requests: Iterable[SimRequest]) -> list[Timeline]:
        """Run requests to completion in virtual time; one timeline per request, in input order.

        A request arriving during a step is admitted at the next step, as in a real engine.
        """
        reqs = list(requests)
        order = sorted(range(len(reqs)), key=lambda j: reqs[j].arrival_time)
        lines = {r.req_id: Timeline(r.req_id, r.arrival_time, r.prompt_tokens) for r in reqs}
        seqs: dict[Hashable, _Seq] = {}
        now = 0.0
        k = 0
        n_req = len(reqs)
        while k < n_req or self.has_work:
            while k < n_req and reqs[order[k]].arrival_time <= now:
                r = reqs[order[k]]
                self.add_request(r.req_id, r.prompt_tokens, r.max_tokens, r.arrival_time,
                                 r.prefix_key, r.prefix_tokens)
                seqs[r.req_id] = self._seqs[r.req_id]
                k += 1
            if not self.has_work:
                now = reqs[order[k]].arrival_time
                continue
            res = self.step(now)
            now += res.duration_s
            for rid, _n, _done in res.emitted:
                lines[rid].token_times.append(now)
        for rid, seq in seqs.items():
            lines[rid].preemptions = seq.preemptions
            lines[rid].cached_tokens = seq.cached_tokens
        return [lines[r.req_id] for r in reqs]


def simulate(profile: SimProfile, requests: Iterable[SimRequest], speed: Optional[Callable[[float], float]] = None) -> list[Timeline]:
    """Convenience: a fresh :class:`EngineModel` run over ``requests`` in virtual time;
    ``speed(t)`` multiplies the step starting at t (machine drift, sim/drift.py)."""
    return EngineModel(profile, speed).simulate(requests)

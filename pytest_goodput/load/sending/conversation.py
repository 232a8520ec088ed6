"""Multi-turn conversations: closed loop (users) and open loop (conversation arrivals).

``docs/workloads.md`` ("Multi-turn chat") is the contract:

* a run is ``(warmup_requests + requests) / turns`` conversations; conversation ``c``'s turn
  ``t`` (from 1) is request ``c * turns + t - 1``, so request ``i`` is the same turn of the
  same conversation in every run of a spec (the gate pairs them);
* closed loop (``scenario='concurrency'``): ``concurrency`` users each take the next
  conversation when their last one ends; a user keeps its slot while it thinks, so at most
  ``concurrency`` conversations are open;
* open loop (``server``, ``interactive``): conversations arrive on the seeded schedule at
  ``rate`` conversations/s and their turns follow; ``concurrency`` caps open conversations;
* turn ``t`` sends the history (every earlier answered turn's user message and the
  assistant's streamed answer, reasoning left out, as chat clients do) and then its own
  new user message, the workload's prompt ``i``;
* once the client has a turn's answer the user thinks for an exponential time of mean
  ``think_time_s`` (seeded per conversation and turn); the next turn is due after that;
* a turn's ``prompt_tokens`` estimate (used only when the engine reports no usage) adds
  the history's words to the new message's length;
* a failed turn is data (it counts against the SLOs like any failure); the conversation
  goes on without it: the next turn follows the last answered one.
"""

from __future__ import annotations

import asyncio
import time
from typing import Iterator, Optional

from pytest_goodput.load.client.event_loop import sleep_until
from pytest_goodput.load.selfcheck.health import SelfCheck
from pytest_goodput.load.sending.loops import ProgressTicker, Sender
from pytest_goodput.load.plan import Supply
from pytest_goodput.load.requests.schedule import think_times
from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.measure.records.record import parse_body, parse_stream
from pytest_goodput.schema.scenario.spec import ScenarioSpec

def answer_text(ex: RawExchange, stream: bool) -> Optional[str]:
    """The assistant's answer a completed turn streamed (None when the request failed)."""
    if ex.error_kind is not None or ex.status is None or ex.status >= 400:
        return None
    if stream:
        parsed = parse_stream(ex.reads)
    else:
        parsed = parse_body(ex.reads, ex.end_at or 0.0)
    if parsed.problem is not None or not parsed.times:
        return None
    return "".join(parsed.answers)


class _Conversations:
    """Runs conversations and collects their exchanges (shared by both loops below)."""

    def __init__(self, spec: ScenarioSpec, client: Sender, supply: Supply, check: SelfCheck,
                 prog: ProgressTicker) -> None:
        self.spec, self.client, self.supply, self.check, self.prog = spec, client, supply, check, prog
        self.total = (spec.warmup_requests + (spec.requests or 0)) // spec.turns
        self.out: list[RawExchange] = []

    async def run(self, c: int, ready: float, allowed: float, open_loop: bool = False) -> None:
        """Conversation ``c``, its first turn due at ``ready`` (allowed out at ``allowed``)."""
        spec, clock = self.spec, time.perf_counter
        history: list[dict[str, str]] = []
        history_tokens = 0  # approximate (words), for engines that report no usage
        pauses = think_times(spec, c)
        for t in range(spec.turns):
            i = c * spec.turns + t
            plan = self.supply.plan(i, ready, i < spec.warmup_requests)
            plan.messages = history + [{"role": "user", "content": plan.prompt}]
            plan.conversation, plan.turn, plan.open_loop = c, t + 1, open_loop
            if plan.prompt_tokens is not None:
                plan.prompt_tokens += history_tokens
            ex = await self.client.send(plan)
            self.check.record_exchange(allowed, ex)
            self.out.append(ex)
            self.prog.tick(ex)
            answer = answer_text(ex, spec.stream)
            if answer is not None:
                history = plan.messages + [{"role": "assistant", "content": answer}]
                history_tokens += len(plan.prompt.split()) + len(answer.split())
            if t + 1 < spec.turns:
                # the user reads the answer once the client hands it over (after the end of
                # the stream, and after the client's one-off wait to learn keep-alive)
                ready = allowed = clock() + pauses[t]
                if pauses[t] > 0:
                    await sleep_until(ready)


async def conversation_loop(spec: ScenarioSpec, client: Sender, users: int, supply: Supply,
                            check: SelfCheck, prog: ProgressTicker,
                            conversations: Optional[Iterator[int]] = None) -> list[RawExchange]:
    """Closed loop: ``users`` users, each running the next conversation when its last ends.

    ``conversations``: the increasing conversation numbers this worker's users own (default
    all of them, in order); a user stops at the first one past the run's last.
    """
    convs = _Conversations(spec, client, supply, check, prog)
    counter = conversations if conversations is not None else iter(range(convs.total))

    async def user() -> None:
        while (c := next(counter, convs.total)) < convs.total:
            now = time.perf_counter()
            await convs.run(c, now, now)

    await asyncio.gather(*(user() for _ in range(min(users, max(convs.total, 1)))))
    return convs.out


async def open_conversations(spec: ScenarioSpec, client: Sender, supply: Supply, check: SelfCheck,
                             prog: ProgressTicker, arrivals: list[tuple[int, float]], t0: float,
                             ceiling: Optional[int]) -> list[RawExchange]:
    """Open loop: conversation ``c`` of ``arrivals`` arrives at ``t0`` plus its offset.

    Each conversation's first turn is due at its arrival; with a ``ceiling`` it first waits
    for a free slot (kept for the whole conversation), and that wait is in its TTFT. Later
    turns are due when the previous one ended plus the think time. Every turn's latency
    counts from when it was due (``open_loop``), as open-loop requests do.
    """
    convs = _Conversations(spec, client, supply, check, prog)
    sem = asyncio.Semaphore(ceiling) if ceiling else None

    async def arrive(c: int, due: float) -> None:
        await sleep_until(due)
        if sem is None:
            return await convs.run(c, due, due, open_loop=True)
        waited = sem.locked()
        async with sem:
            await convs.run(c, due, max(due, time.perf_counter()) if waited else due, open_loop=True)

    await asyncio.gather(*(arrive(c, t0 + off) for c, off in arrivals))
    return convs.out


__all__ = ["answer_text", "conversation_loop", "open_conversations"]

"""Multi-turn conversations in the closed loop: each user holds one conversation at a time.

``docs/workloads.md`` ("Multi-turn chat") is the contract:

* a run is ``(warmup_requests + requests) / turns`` conversations; conversation ``c``'s turn
  ``t`` (from 1) is request ``c * turns + t - 1``, so request ``i`` is the same turn of the
  same conversation in every run of a spec (the gate pairs them);
* ``concurrency`` users each take the next conversation when their last one ends; a user
  keeps its slot while it thinks, so at most ``concurrency`` conversations are open;
* turn ``t`` sends the history (every earlier answered turn's user message and the
  assistant's streamed answer, reasoning left out, as chat clients do) and then its own
  new user message, the workload's prompt ``i``;
* after a turn ends the user thinks for an exponential time of mean ``think_time_s``
  (seeded per conversation and turn) before sending the next;
* a turn's ``prompt_tokens`` estimate (used only when the engine reports no usage) adds
  the history's words to the new message's length;
* a failed turn is data (it counts against the SLOs like any failure); the conversation
  goes on without it: the next turn follows the last answered one.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Optional

import numpy as np

from pytest_goodput.load.selfcheck import SelfCheck
from pytest_goodput.measure.exchange import RawExchange
from pytest_goodput.measure.record import parse_body, parse_stream
from pytest_goodput.schema.spec import ScenarioSpec

#: ``SeedSequence`` stream key of think times.
THINK_STREAM = 23


def think_times(spec: ScenarioSpec, conversation: int) -> list[float]:
    """Seconds the user thinks after each turn of ``conversation`` but the last (seeded)."""
    if spec.think_time_s <= 0 or spec.turns < 2:
        return [0.0] * max(spec.turns - 1, 0)
    rng = np.random.default_rng([THINK_STREAM, spec.seed & 0xFFFFFFFF, conversation])
    return rng.exponential(spec.think_time_s, size=spec.turns - 1).tolist()


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


async def conversation_loop(spec: ScenarioSpec, client: Any, users: int, supply: Any,
                            check: SelfCheck, prog: Any) -> list[RawExchange]:
    """Run every conversation of the spec through ``users`` users; the raw exchanges.

    ``client`` sends plans, ``supply`` builds them and ``prog`` ticks (``drive.py``'s
    ``Sender``, ``Supply`` and ``ProgressTicker``, which import this module).
    """
    clock = time.perf_counter
    turns = spec.turns
    total = (spec.warmup_requests + (spec.requests or 0)) // turns
    counter = itertools.count()
    out: list[RawExchange] = []

    async def one(c: int) -> None:
        history: list[dict[str, str]] = []
        history_tokens = 0  # approximate (words), for engines that report no usage
        pauses = think_times(spec, c)
        ready = clock()
        for t in range(turns):
            i = c * turns + t
            plan = supply.plan(i, ready, i < spec.warmup_requests)
            ask = {"role": "user", "content": plan.prompt}
            plan.messages = history + [ask]
            plan.conversation, plan.turn = c, t + 1
            if plan.prompt_tokens is not None:
                plan.prompt_tokens += history_tokens
            ex = await client.send(plan)
            check.record_exchange(ready, ex)
            out.append(ex)
            prog.tick()
            answer = answer_text(ex, spec.stream)
            if answer is not None:
                history = plan.messages + [{"role": "assistant", "content": answer}]
                history_tokens += len(plan.prompt.split()) + len(answer.split())
            if t + 1 < turns:
                end = ex.end_at if ex.end_at is not None else clock()
                ready = end + pauses[t]
                if pauses[t] > 0:
                    await asyncio.sleep(max(0.0, ready - clock()))

    async def user() -> None:
        while (c := next(counter)) < total:
            await one(c)

    await asyncio.gather(*(user() for _ in range(min(users, max(total, 1)))))
    return out


__all__ = ["answer_text", "conversation_loop", "think_times"]

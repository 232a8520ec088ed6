"""A closed loop's bodies built ahead of its sends (``load/sending/ahead.py``).

Each body the loop hands the client was built before the send, byte for byte what the client
would have encoded, never more than the window held, and a multi-turn conversation is left to
build its own (its bodies hold the previous answer).
"""

import asyncio

from pytest_goodput.load.sending.ahead import AheadBodies
from pytest_goodput.load.client.http import OpenAIClient
from pytest_goodput.load.selfcheck.health import SelfCheck
from pytest_goodput.load.sending.loops import ProgressTicker, closed_loop
from pytest_goodput.load.plan import Job, Supply
from pytest_goodput.load.requests.workload import WorkItem
from pytest_goodput.load.worker import Init, Worker
from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.schema.scenario.spec import ScenarioSpec

USERS, REQUESTS = 4, 40


class Recorder:
    """Encodes as the real client does; each send takes 20 ms of the loop's idle time."""

    def __init__(self) -> None:
        self.encoder = OpenAIClient("http://127.0.0.1:9", "m")  # never opened: only encodes
        self.sent: dict[int, bytes] = {}
        self.by_send: list[int] = []  # the requests whose body their send had to build
        self.held: list[int] = []
        self.bodies: AheadBodies | None = None

    @property
    def built_by_send(self) -> int:
        return len(self.by_send)

    def body_frame(self, plan):
        return self.encoder.body_frame(plan)

    def build_body(self, plan):
        return self.encoder.build_body(plan)

    async def send(self, plan):
        if plan.body is None:
            self.by_send.append(plan.index)
        body = plan.body if plan.body is not None else self.build_body(plan)
        assert body == self.encoder.build_body(plan)  # the same bytes, whoever built them
        self.sent[plan.index] = body
        assert self.bodies is not None
        self.held.append(len(self.bodies.bodies))
        plan.body = None
        await asyncio.sleep(0.02)
        return RawExchange(plan, plan.scheduled_at, plan.scheduled_at + 0.02, 200, [])


def items(n: int) -> list[WorkItem]:
    # prompts of 40k characters with quotes and non-ASCII to escape: several slices each
    return [WorkItem(prompt=f'{i} "é" ' + "x" * 40_000, prompt_tokens=10_000, max_tokens=4)
            for i in range(n)]


def test_a_closed_loops_bodies_are_built_ahead_and_equal_to_the_clients_own():
    spec = ScenarioSpec(scenario="concurrency", concurrency=USERS, requests=REQUESTS, warmup_requests=0)
    client = Recorder()
    supply = Supply(spec, 0, None, None, 1, items=items(REQUESTS))

    async def main() -> list[RawExchange]:
        bodies = AheadBodies(iter(range(REQUESTS)), supply, client, USERS, limit=REQUESTS)
        client.bodies = bodies
        bodies.prefill()
        assert bodies.last_built == 7 and len(bodies.bodies) == 8  # max(8, 2 x 4 users) before the clock
        out = await closed_loop(spec, client, USERS, supply, SelfCheck(open_loop=False),
                                ProgressTicker(None, 0), bodies=bodies)
        assert bodies.late == 0 and not bodies.bodies  # nothing left held after the phase
        return out

    out = asyncio.run(main())
    assert sorted(ex.plan.index for ex in out) == list(range(REQUESTS))
    assert client.built_by_send == 0
    assert max(client.held) <= 8


def test_a_body_taken_while_it_was_being_built_is_not_kept():
    spec = ScenarioSpec(scenario="concurrency", concurrency=1, requests=3, warmup_requests=0)
    supply = Supply(spec, 0, None, None, 1, items=items(3))
    bodies = AheadBodies(iter(range(3)), supply, Recorder(), 1, limit=3)
    steps = bodies._steps(0)  # noqa: SLF001 - one build cut short by its request's send
    next(steps)
    assert bodies.next_index() == 0
    plan = supply.plan(0, 0.0, False)
    bodies.take(plan)
    assert plan.body is None and bodies.late == 1
    for _ in steps:
        pass
    assert bodies.bodies == {} and bodies.held_bytes == 0


def test_a_conversation_builds_its_own_bodies():
    spec = ScenarioSpec(scenario="concurrency", concurrency=2, requests=8, turns=2, api="chat",
                        warmup_requests=0)
    worker = Worker(Init(spec, "http://127.0.0.1:9", "m", None, 2, 1), Recorder(), lambda m: None)
    worker.prepare(Job(False, users=2, conversations=True, items=items(8)))
    assert worker.ahead is None


def test_a_supply_that_grows_mid_run_is_built_ahead_again():
    # a duration-bounded run's supply holds 4 items at first and doubles when a request
    # outgrows it (at index 4, then 8); the two users' requests end about together (20 ms
    # each), so they ask for 4 and 5 (then 8 and 9) before the window could build them: only
    # those may be encoded at their send (both, when the users ask at once; one, when the
    # scheduler parts them), every other one ahead, the window filling again after each growth
    spec = ScenarioSpec(scenario="concurrency", concurrency=2, duration_s=60.0, warmup_requests=0)
    client = Recorder()
    supply = Supply(spec, 0, None, None, 1, items=items(4))
    indices = iter(range(12))

    async def main() -> AheadBodies:
        bodies = AheadBodies(indices, supply, client, 2)
        client.bodies = bodies
        bodies.prefill()
        await closed_loop(spec.model_copy(update={"requests": 12}), client, 2, supply,
                          SelfCheck(open_loop=False), ProgressTicker(None, 0), bodies=bodies)
        return bodies

    bodies = asyncio.run(main())
    assert bodies.taken == 12 and client.built_by_send == bodies.late
    assert {4, 8} <= set(client.by_send) <= {4, 5, 8, 9}, client.by_send

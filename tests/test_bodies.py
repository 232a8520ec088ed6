"""Request bodies built ahead of the schedule (``load/sending/bodies.py``, ``load/client/body.py``).

A trace of long prompts is sent with every body built before its request starts, by the
window and not by the send, never more than the window's bodies held, and each body exactly
what one ``json.dumps`` of the request gives; a real client writes no request before its
deadline though the loop hands it over early.
"""

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import pytest

from pytest_goodput.load.sending import bodies
from pytest_goodput.load.client.body import PROMPT_SLOT, SLICE_CHARS, encode_body, json_chars
from pytest_goodput.load.client.event_loop import run
from pytest_goodput.load.client.http import OpenAIClient
from pytest_goodput.load.coordinator import coordinate
from pytest_goodput.load.plan import plan_run
from pytest_goodput.load.pools.inprocess import InProcessPool
from pytest_goodput.load.requests.trace_replay import TracePrompts
from pytest_goodput.load.scenario import run_scenario
from pytest_goodput.load.trace import read_trace
from pytest_goodput.load.worker import Init
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.schema.scenario.spec import ScenarioSpec

sys.path.insert(0, str(Path(__file__).parent))
from refserver import serve_in_thread  # noqa: E402

BLOCK = 512


def long_trace(path: Path, rows: int = 96, burst: int = 6, gap_ms: int = 30) -> Path:
    """Bursts of ``burst`` rows at one timestamp, ``gap_ms`` apart; prompts of 2.5k to 24k
    tokens that share their first two blocks within a burst."""
    lines = []
    for i in range(rows):
        b = i // burst
        isl = 2500 + (i * 7919) % 21500
        own = [1000 + 100 * i + j for j in range(-(-isl // BLOCK) - 2)]
        lines.append(json.dumps({"timestamp": b * gap_ms, "input_length": isl, "output_length": 4,
                                 "hash_ids": [2 * b, 2 * b + 1, *own]}))
    path.write_text("\n".join(lines) + "\n")
    return path


class Recorder:
    """A client that encodes bodies as the real one does and sends nothing: it records what
    each send was handed, and how many bodies of the run were built and not yet sent."""

    def __init__(self, plans: list[RequestPlan]) -> None:
        self.encoder = OpenAIClient("http://127.0.0.1:9", "m")  # never opened: only encodes
        self.plans, self.bodies, self.held, self.held_bytes, self.built_by_send = plans, {}, [], [], 0
        self._sending = False

    def body_frame(self, plan):
        return self.encoder.body_frame(plan)

    def build_body(self, plan):
        self.built_by_send += self._sending
        return self.encoder.build_body(plan)

    async def send(self, plan):
        self._sending = True
        body = plan.body if plan.body is not None else self.build_body(plan)
        self._sending = False
        plan.body = None  # as the real client: a sent request keeps no body
        self.bodies[plan.index] = body
        self.held.append(sum(p.body is not None for p in self.plans))
        self.held_bytes.append(sum(len(p.body) for p in self.plans if p.body is not None))
        return RawExchange(plan, plan.scheduled_at, plan.scheduled_at, 200, [], None, None,
                           request_bytes=len(body))


@pytest.mark.parametrize("bound", ["count", "bytes"])
def test_a_trace_of_long_prompts_is_sent_with_bodies_built_ahead_within_the_window(tmp_path, monkeypatch, bound):
    monkeypatch.setattr(bodies, *(("AHEAD", 8) if bound == "count" else ("AHEAD_BYTES", 400_000)))
    spec = ScenarioSpec(scenario="trace", trace=str(long_trace(tmp_path / "t.jsonl")), timeout_s=5)
    trace = read_trace(str(spec.trace))
    plan = plan_run(spec, 1, None, trace, salt=7)
    (job,), _ = plan.phases[0]
    client = Recorder(job.plans)
    windows: list[bodies.BodyWindow] = []
    prefill = bodies.BodyWindow.prefill

    def spy(window: bodies.BodyWindow) -> None:  # the run's window, kept to read its peaks
        windows.append(window)
        prefill(window)

    monkeypatch.setattr(bodies.BodyWindow, "prefill", spy)
    out = run(coordinate(plan, InProcessPool(client), Init(spec, "", "", None, 1, 7)))

    assert len(out.exchanges) == len(trace) == len(client.bodies)
    assert client.built_by_send == 0  # every body came built to its send
    assert max(client.held) >= 2  # bodies were built ahead of their sends
    # never more built ahead of the loop than the window: 8 bodies, or 400 kB (the last body
    # may cross it). A started request keeps its body until it is sent: on a busy machine that
    # may be later, and those bodies are the requests', not the window's.
    (window,) = windows
    if bound == "count":
        assert 2 <= window.peak_held <= 8
    else:
        assert 0 < window.peak_bytes < 400_000 + max(map(len, client.bodies.values()))
    prompts = TracePrompts(trace, 0, BLOCK, spec.seed, 7)
    for i, body in client.bodies.items():
        plan_i = out.exchanges[i].plan
        assert body == client.encoder.build_body(dataclasses.replace(plan_i, prompt=prompts.prompt(i)))
        assert len(json.loads(body)["prompt"].split(" ")) == trace.input_lengths[i]
    # nothing of a prompt outlives its request: the plans hold neither prompt nor body
    assert all(ex.plan.body is None and ex.plan.prompt == "" for ex in out.exchanges)


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("prompt", [
    "plain words only",
    'quotes " and \\ backslashes, \n newlines \t tabs \x00 NULs',
    "ünïcödé, 漢字 and 😀 astral " * 3,
    "x" * (SLICE_CHARS - 1) + "😀" + "y" * SLICE_CHARS,  # a surrogate pair at a slice boundary
])
def test_a_body_built_in_slices_is_byte_for_byte_one_json_dumps(api, prompt):
    client = OpenAIClient("http://127.0.0.1:9", "m", api=api, extra_body={"top_k": 3})
    plan = RequestPlan(3, prompt, None, 16, 0.0)
    head, tail = client.body_frame(plan)
    sliced = head + b"".join(json_chars([prompt[:5], prompt[5:]])) + tail
    whole = encode_body(plan, prompt, model="m", chat=api == "chat", stream=True, ignore_eos=True,
                        extra={"top_k": 3})
    assert sliced == whole == client.build_body(plan)
    assert PROMPT_SLOT.encode() not in sliced and json.loads(sliced)["top_k"] == 3
    # a conversation's history is not a frame around one prompt: built whole
    assert client.body_frame(dataclasses.replace(plan, messages=[{"role": "user", "content": "hi"}])) is None


def test_trace_prompts_travel_to_workers_without_their_cache(tmp_path):
    trace = read_trace(str(long_trace(tmp_path / "t.jsonl", rows=12)))
    source = TracePrompts(trace, 2, BLOCK, seed=0, salt=3)
    first = [source.prompt(i) for i in range(10)]
    import pickle

    again = pickle.loads(pickle.dumps(source))
    assert not again._cache and [again.prompt(i) for i in range(10)] == first
    assert [len(p.split(" ")) for p in first] == list(trace.input_lengths[2:12])


def test_a_trace_replay_writes_no_request_before_its_deadline_and_sends_its_prompts(tmp_path):
    spec = ScenarioSpec(scenario="trace", trace=str(long_trace(tmp_path / "t.jsonl", rows=36, burst=6)),
                        timeout_s=10)
    trace = read_trace(str(spec.trace))
    with serve_in_thread(ttft_ms=5.0, itl_ms=1.0) as srv:
        result = run_scenario(spec, f"http://127.0.0.1:{srv.port}/v1", "ref-model", salt=5)
        log = dict(srv.log)
    prompts = TracePrompts(trace, 0, BLOCK, spec.seed, 5)
    encoder = OpenAIClient("http://127.0.0.1:9", "ref-model")
    assert len(result.requests) == len(trace) and all(r.ok for r in result.requests)
    for r in result.requests:
        entry = log[r.response_id]
        plan = RequestPlan(r.index, prompts.prompt(r.index), None, int(trace.output_lengths[r.index]), 0.0)
        assert entry["body_sha256"] == hashlib.sha256(encoder.build_body(plan)).hexdigest()
        # handed to the client ahead of its deadline, written at it: never early
        assert r.sent_at >= r.scheduled_at and entry["read_at"] >= r.scheduled_at


def test_a_frame_is_encoded_once_per_max_tokens_and_stays_exact():
    client = OpenAIClient("http://127.0.0.1:9", "m", extra_body={"top_k": 3})
    a, b, c = (RequestPlan(i, "p", None, n, 0.0) for i, n in ((0, 16), (1, 16), (2, 32)))
    assert client.body_frame(a) is client.body_frame(b)  # the same max_tokens: one encoding
    assert client.body_frame(c) != client.body_frame(a)
    for plan in (a, c):
        assert client.build_body(plan) == encode_body(plan, "p", model="m", chat=False, stream=True,
                                                      ignore_eos=True, extra={"top_k": 3})

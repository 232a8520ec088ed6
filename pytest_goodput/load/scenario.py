"""The load generator's entry point: run one scenario against an OpenAI-compatible server.

Open loop (server, interactive): request ``i`` is sent at the absolute deadline
``t0 + offset[i]`` of a precomputed, seeded schedule (``requests/schedule.py``), whatever the server
is doing; an optional concurrency ceiling makes a request wait for a free slot, and that
wait counts in its send lag. Closed loop (concurrency): N users, each sending its next
request when its last one ends. Offline: every request at t0 (warm-up first, as a batch of
its own), optionally capped by a concurrency ceiling. ``docs/scenarios.md`` is the contract.

The hot path only sends and stamps times: prompts are built before the run and raw
exchanges are parsed into records after it.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timezone
from typing import Any, Optional

from pytest_goodput.load.selfcheck.capture import begin as begin_capture
from pytest_goodput.load.selfcheck.capture import finish as finish_capture
from pytest_goodput.load.client.event_loop import RunInterrupted
from pytest_goodput.load.coordinator import RunOutput, run_plan
from pytest_goodput.load.pools import RunStopped
from pytest_goodput.load.selfcheck.departures import judge_departures
from pytest_goodput.load.sending.loops import ProgressFn
from pytest_goodput.load.requests.prompt_set import prompt_set, unsalted_prompts
from pytest_goodput.load.trace import load_trace
from pytest_goodput.load.requests.workload import load_dataset
from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.measure.records.retime import think_time_note
from pytest_goodput.measure.run_part import offered_rate as part_offered_rate
from pytest_goodput.measure.run_records import records_of, response_notes
from pytest_goodput.measure.sketched import summarize_part
from pytest_goodput.measure.slices import run_slices
from pytest_goodput.schema.runs.results import Interrupted, ReceiveTimestamps, RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def offered_rate(exchanges: list[RawExchange]) -> Optional[float]:
    """Measured requests per second actually sent: (n - 1) over the span of their send times."""
    sent = sorted(ex.sent_at for ex in exchanges if not ex.plan.warmup and ex.sent_at is not None)
    if len(sent) < 2 or sent[-1] <= sent[0]:
        return None
    return (len(sent) - 1) / (sent[-1] - sent[0])


def run_scenario(
    spec: ScenarioSpec, base_url: str, model: str, *, api_key_env: Optional[str] = None,
    tokenizer: Any = None, progress: Optional[ProgressFn] = None,
    salt: Optional[int] = None,
) -> RunResult:
    """Run one scenario (offline, server, interactive or concurrency) and summarize it.

    Raises ``ConnectionError`` when ``base_url`` does not answer within a few seconds,
    ``WorkloadError`` for an unusable dataset, ``TraceError`` for an unusable trace and ``ValueError`` for a spec this load
    generator cannot run (e.g. a sweep, which is a series of runs). Synthetic prompts carry
    a fresh random run nonce unless ``salt`` is given, so a repeat of the same spec does not
    hit the prefix cache its previous run filled. ``spec.workers > 1`` shards the run over
    worker processes, ``backend="ray"`` over Ray actors (``coordinator.py``; ``RunStopped``
    when a worker crashes or hangs, ``RunInterrupted`` on Ctrl-C: both with the run so far,
    summarized and marked ``interrupted``).
    """
    dataset: Any = load_dataset(str(spec.dataset), spec.workload) if spec.workload != "synthetic" else None
    if spec.scenario == "trace":
        dataset = load_trace(spec)
    if salt is None:
        salt = int.from_bytes(os.urandom(3), "big")
    # started before the first connect: a connection's SYN-ACK gives its sequence numbers
    capture, why_not = begin_capture(spec.capture, spec.backend, base_url)
    started = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    try:
        out = run_plan(spec, base_url, model, api_key_env=api_key_env, tokenizer=tokenizer,
                       progress=progress, dataset=dataset, salt=salt)
    except (RunInterrupted, RunStopped) as exc:  # what the run finished, summarized and marked
        if capture is not None:
            capture.stop()
        out = exc.partial if exc.partial.stopped is not None else dataclasses.replace(
            exc.partial, stopped="interrupted (Ctrl-C) as its last request ended")
        partial = _summarized(spec, out, finish_capture(None, "the run was interrupted", []),
                              tokenizer, dataset, started)
        raise exc.again(partial) from None
    except BaseException:
        if capture is not None:
            capture.stop()
        raise
    return _summarized(spec, out, finish_capture(capture, why_not, out.exchanges), tokenizer, dataset, started)


def _summarized(spec: ScenarioSpec, out: RunOutput, stamps: ReceiveTimestamps, tokenizer: Any,
                dataset: Any, started: str) -> RunResult:
    """The run's records and metrics, its client's verdict, its prompt set; a run that
    stopped before its end (``out.stopped``) is marked interrupted, with how far it got."""
    records = records_of(out.exchanges, spec, tokenizer)
    load = dict(out.load)
    sk = out.sketched
    rate = offered_rate(out.exchanges) if sk is None else part_offered_rate(sk.part)
    if rate is not None:
        load["offered_rate"] = rate
    health = judge_departures(
        out.check.health(exact_receive=stamps.exact), stamps,
        [r.send_lag_ms for r in records if not r.warmup and r.send_lag_ms is not None],
        open_loop=out.check.open_loop, mean_gap_s=out.check.mean_gap_s)
    if sk is None:
        result = summarize(records, spec, health, load=load)
    else:  # a run too large to ship every record: exact counts, sketched percentiles, a sample
        result = summarize_part(sk.part, records, spec, health, sk.info, load=load)
    plans = (ex.plan for ex in out.exchanges) if sk is None else iter(sk.plans)
    fingerprint = prompt_set(spec, plans, unsalted_prompts(spec, tokenizer, dataset))
    update: dict[str, Any] = {"prompt_set": fingerprint, "receive_timestamps": stamps,
                              "measured_at": started, "slices": run_slices(result)}
    note = think_time_note(stamps) if spec.scenario == "concurrency" else None
    notes = [*([note] if note else []), *response_notes(records)]
    if notes:
        update["client"] = result.client.model_copy(update={"notes": [*result.client.notes, *notes]})
    if out.stopped is not None:
        done = len(out.exchanges)
        update["interrupted"] = Interrupted(reason=out.stopped, planned=out.planned, done=done,
                                            unfinished=max(out.planned - done, 0) if out.planned else None)
    return result.model_copy(update=update)

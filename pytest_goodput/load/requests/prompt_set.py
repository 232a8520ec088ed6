"""The fingerprint of the prompts a run sent (``docs/metrics.md``, "Workload sameness").

SHA-256 over each measured request's prompt and requested output length, in schedule order
(request ``i`` of one run is paired with request ``i`` of another, so order is part of the
workload). Every run salts its prompts with a fresh nonce so that a repeat does not hit the
prefix cache its previous run filled: synthetic prompts spell it after their index, shared
prefixes after their group, a trace replay seeds every block's words with it. The
fingerprint is therefore taken over the same requests built *without* the nonce, by the
same builders from the same sources (seed, dataset or trace file, tokenizer): two runs of
one spec differ in nothing else, and a changed source changes it. Duration-bounded runs
send a varying number of requests: their fingerprint covers the first
:data:`DURATION_COVERED` measured requests, so that two runs cover the same ones.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterable, Iterator, Sequence

from pytest_goodput.load.plan import Supply
from pytest_goodput.load.trace import Trace
from pytest_goodput.load.requests.trace_replay import TracePrompts, trace_schedule
from pytest_goodput.measure.records.exchange import RequestPlan
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.schema.outcomes.workload_check import PromptSet

#: Measured requests a duration-bounded run's fingerprint covers (fewer if it sent fewer).
DURATION_COVERED = 64

#: Nonce-free prompts of the given request indices, in order (a trace's built one at a time).
PromptsOf = Callable[[Sequence[int]], Iterable[str]]


def unsalted_prompts(spec: ScenarioSpec, tokenizer: Any = None, dataset: Any = None) -> PromptsOf:
    """The prompts of requests by index, built as the run builds them but without its nonce
    (``dataset``: a loaded dataset, or for a trace replay its :class:`Trace`)."""
    def prompts_of(indices: Sequence[int]) -> Iterator[str]:
        if not indices:
            return iter(())
        if isinstance(dataset, Trace):
            _, first = trace_schedule(spec, dataset)
            source = TracePrompts(dataset, first, spec.trace_block_size, spec.seed, None)
            return (source.prompt(i) for i in indices)
        supply = Supply(spec, max(indices) + 1, tokenizer, dataset, None)
        return (supply[i].prompt for i in indices)
    return prompts_of


def prompt_set(spec: ScenarioSpec, plans: Iterable[RequestPlan], prompts_of: PromptsOf) -> PromptSet:
    """The fingerprint of the measured requests of ``plans`` (any order; sorted by index):
    their nonce-free prompts (``prompts_of``) and requested output lengths."""
    measured = sorted((p for p in plans if not p.warmup), key=lambda p: p.index)
    if spec.requests is None:
        measured = measured[:DURATION_COVERED]
    h = hashlib.sha256()
    for p, prompt in zip(measured, prompts_of([p.index for p in measured])):
        text = prompt.encode("utf-8", "surrogatepass")
        h.update(f"{len(text)}:{p.max_tokens}:".encode())
        h.update(text)
    return PromptSet(sha256=h.hexdigest()[:16], requests=len(measured))


__all__ = ["DURATION_COVERED", "PromptsOf", "prompt_set", "unsalted_prompts"]

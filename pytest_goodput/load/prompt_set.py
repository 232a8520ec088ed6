"""The fingerprint of the prompts a run sent (``docs/metrics.md``, "Workload sameness").

SHA-256 over each measured request's prompt and requested output length, in schedule order
(request ``i`` of one run is paired with request ``i`` of another, so order is part of the
workload). Synthetic prompts carry a per-run nonce (``workload.synthetic_prompts``) so that
repeats do not hit each other's prefix cache; its words are masked, since two runs of one
spec differ in nothing else. Duration-bounded runs send a varying number of requests: their
fingerprint covers the first :data:`DURATION_COVERED` measured requests, so that two runs
cover the same ones.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Optional

from pytest_goodput.load.workload import index_words
from pytest_goodput.measure.exchange import RequestPlan
from pytest_goodput.schema.spec import ScenarioSpec
from pytest_goodput.schema.workload_check import PromptSet

#: Measured requests a duration-bounded run's fingerprint covers (fewer if it sent fewer).
DURATION_COVERED = 64
#: Index-word widths a synthetic prompt can start with (``synthetic_prompts``).
_HEADS = range(3, 7)
_MASK = "<nonce>"


def mask_nonce(prompt: str, salt: Optional[int]) -> str:
    """``prompt`` with the run nonce's words (right after the index words) masked."""
    if salt is None:
        return prompt
    nonce = index_words(salt & 0xFFFFFF, 4)
    words = prompt.split(" ")
    for start in _HEADS:
        tail = words[start:start + len(nonce)]
        if tail and tail == nonce[:len(tail)]:
            return " ".join(words[:start] + [_MASK] + words[start + len(tail):])
    return prompt


def prompt_set(spec: ScenarioSpec, plans: Iterable[RequestPlan], salt: Optional[int]) -> PromptSet:
    """The fingerprint of the measured requests of ``plans`` (any order; sorted by index)."""
    measured = sorted((p for p in plans if not p.warmup), key=lambda p: p.index)
    if spec.requests is None:
        measured = measured[:DURATION_COVERED]
    nonce = salt if spec.workload == "synthetic" else None
    h = hashlib.sha256()
    for p in measured:
        text = mask_nonce(p.prompt, nonce).encode("utf-8", "surrogatepass")
        h.update(f"{len(text)}:{p.max_tokens}:".encode())
        h.update(text)
    return PromptSet(sha256=h.hexdigest()[:16], requests=len(measured))


__all__ = ["DURATION_COVERED", "mask_nonce", "prompt_set"]

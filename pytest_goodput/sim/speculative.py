"""Speculative decoding in the simulator: how many draft tokens a decode step gets accepted.

Each decode step of a sequence verifies ``spec_tokens`` draft tokens along with its own
token; the target model accepts the run of drafts before the first rejection, each draft
accepted with chance ``spec_accept``. The step emits 1 + accepted tokens, in one stream
chunk. The counters are vLLM's (``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``,
``..._num_accepted_tokens``); acceptance rate = accepted / draft tokens. Pure: no I/O.
"""

from __future__ import annotations

import random

from pytest_goodput.sim.profile import SimProfile


class Speculator:
    """Draws accepted draft tokens per decode step (seeded) and counts them as vLLM does."""

    def __init__(self, profile: SimProfile) -> None:
        self.k = profile.spec_tokens
        self.accept = profile.spec_accept
        self._rng = random.Random(profile.seed ^ 0x5BEC)
        self.drafts_total = 0
        self.draft_tokens_total = 0
        self.accepted_tokens_total = 0

    def draw(self, decoding: bool, room: int) -> tuple[int, int]:
        """``(accepted, emitted extra)`` of one step: accepted draft tokens (-1 when the step
        is not a decode or speculation is off) and how many of them the sequence emits, at
        most ``room`` (what is left to ``max_tokens`` after the step's own token). Not yet
        counted: the step may still be preempted (:meth:`count`)."""
        if not decoding or not self.k:
            return -1, 0
        accepted = 0
        while accepted < self.k and self._rng.random() < self.accept:
            accepted += 1
        return accepted, max(0, min(accepted, room))

    def count(self, accepted: int) -> None:
        """Count one verified draft of ``k`` tokens, ``accepted`` of them accepted (-1: no
        draft this step, nothing counted)."""
        if accepted < 0:
            return
        self.drafts_total += 1
        self.draft_tokens_total += self.k
        self.accepted_tokens_total += accepted

"""Shared prefixes: groups of prompts that start with one system prompt or document.

The prefix-cache workload (``docs/workloads.md``, "Shared prefixes"). Group ``g``'s prefix
is ``prefix_len`` words: the group number and the run nonce spelled in words, then seeded
text, so prompts of one group share all of it, groups share nothing, and a repeat of the run
does not find its prefixes cached by the previous one. Each prompt (each conversation's
first turn, when ``turns > 1``) carries a prefix with probability ``prefix_fraction``, of a
group drawn uniformly; both draws are per prompt (per conversation) from a seeded stream,
so they do not change when a run builds more prompts.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from pytest_goodput.load.requests.workload import WORDS, WorkItem, count_tokens, index_words, salt_words
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: ``SeedSequence`` stream keys of the prefix draws and the prefix text.
PREFIX_STREAM, PREFIX_TEXT_STREAM = 21, 22


def prefix_text(group: int, length: int, seed: int, salt: Optional[int]) -> str:
    """Group ``group``'s prefix: exactly ``length`` words."""
    head = index_words(group, 3) + (salt_words(salt) if salt is not None else [])
    picks = np.random.default_rng([PREFIX_TEXT_STREAM, seed & 0xFFFFFFFF, group]).integers(
        0, len(WORDS), size=length)
    body = [WORDS[int(k)] for k in picks[len(head):]]
    return " ".join((head + body)[:length])


def prefix_groups_of(spec: ScenarioSpec, n: int) -> list[Optional[int]]:
    """Per prompt ``i < n``: its prefix group, or None (no prefix; every later turn)."""
    turns = spec.turns
    units = -(-n // turns)
    rng = np.random.default_rng([PREFIX_STREAM, spec.seed & 0xFFFFFFFF])
    draws = rng.random((units, 2))  # row u: (carries a prefix?, which group) of prompt/conversation u
    out: list[Optional[int]] = []
    for i in range(n):
        u, t = divmod(i, turns)
        carries = t == 0 and draws[u, 0] < spec.prefix_fraction
        out.append(min(int(draws[u, 1] * spec.prefix_groups), spec.prefix_groups - 1) if carries else None)
    return out


def with_shared_prefixes(items: list[WorkItem], spec: ScenarioSpec, salt: Optional[int],
                         tokenizer: Any = None) -> list[WorkItem]:
    """``items`` with their group's prefix put before the prompts that carry one."""
    if spec.prefix_len <= 0:
        return items
    texts: dict[int, str] = {}
    out = []
    for item, group in zip(items, prefix_groups_of(spec, len(items))):
        if group is None:
            out.append(item)
            continue
        if group not in texts:
            texts[group] = prefix_text(group, spec.prefix_len, spec.seed, salt)
        prompt = texts[group] + " " + item.prompt
        if tokenizer is not None:
            tokens: Optional[int] = count_tokens(tokenizer, prompt)
        else:
            tokens = None if item.prompt_tokens is None else item.prompt_tokens + spec.prefix_len
        out.append(item._replace(prompt=prompt, prompt_tokens=tokens))
    return out


__all__ = ["prefix_groups_of", "prefix_text", "with_shared_prefixes"]

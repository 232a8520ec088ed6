"""A response's output as a compact fingerprint, and two runs' agreement (``docs/metrics.md``,
"Output agreement").

A faster engine that generates different tokens must not pass as *improved*: with greedy
sampling the same prompt should give the same output, so each response keeps a short hash
of its text, and two runs agree on a prompt when the hashes match. The fingerprint hashes
the text's first :data:`PREFIX_CHARS` characters and the whole text (4 bytes of BLAKE2b
each, ``a1b2c3d4.e5f6a7b8.0c1d2e3f``): an output that diverges late still agrees early, which
tells a kernel's late rounding apart from a model that says something else from the start.
Prompts are keyed by their request index: runs of one spec send the same (nonce-free)
prompt at each index, which the prompt set's fingerprint checks (``judge/workload.py``).
"""

from __future__ import annotations

import hashlib
from typing import Mapping

#: The prefixes, in characters, hashed before the whole text.
PREFIX_CHARS: tuple[int, ...] = (64, 256)
#: Bytes of each hash: a chance match of two different texts is 2**-32.
DIGEST_BYTES = 4


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=DIGEST_BYTES).hexdigest()


def output_print(text: str) -> str:
    """The fingerprint of one response's output text (reasoning and answer, as streamed)."""
    return ".".join([*(_hash(text[:n]) for n in PREFIX_CHARS), _hash(text)])


def agreed_prefix(a: str, b: str) -> int:
    """How many of two fingerprints' levels match from the first (all of them: the outputs agree)."""
    levels = 0
    for x, y in zip(a.split("."), b.split(".")):
        if x != y:
            break
        levels += 1
    return levels


def agreement(a: Mapping[int, str], b: Mapping[int, str]) -> tuple[int, int]:
    """(prompts whose outputs match, prompts both runs completed) of two runs' fingerprints."""
    shared = a.keys() & b.keys()
    return sum(a[k] == b[k] for k in shared), len(shared)


__all__ = ["DIGEST_BYTES", "PREFIX_CHARS", "agreed_prefix", "agreement", "output_print"]

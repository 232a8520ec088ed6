"""What the simulator generates for a prompt, and the knob that changes it (pure).

The text is a window of the engine's fixed word cycle starting at an offset chosen by the
prompt's last :data:`CONTEXT_WORDS` words: like a model continuing its context, the same
prompt always gives the same output (greedy decoding), and the run's nonce, spelled near
a prompt's start (``load/requests/workload.py``), does not change it. ``output_drift`` models a
kernel or quantisation change that is faster but wrong: that share of prompts (a fixed set,
chosen by a second hash of the same words) generate other text from their first token, and
every step takes ``1 - output_drift / 2`` of its time (``SimProfile.step_factor``).
"""

from __future__ import annotations

import zlib

#: Words at the end of a prompt that choose its output.
CONTEXT_WORDS = 8
#: Seeds the second hash that picks the drifted prompts.
DRIFT_SALT = 0x9E3779B9


def text_offset(prompt: str, text_len: int, drift: float = 0.0) -> int:
    """Where in the word cycle of ``text_len`` words the output of ``prompt`` starts."""
    context = " ".join(prompt.split()[-CONTEXT_WORDS:]).encode("utf-8", "surrogatepass")
    offset = zlib.crc32(context) % text_len
    if drift > 0 and zlib.crc32(context, DRIFT_SALT) % 10_000 < drift * 10_000:
        offset = (offset + text_len // 2) % text_len
    return offset


__all__ = ["CONTEXT_WORDS", "text_offset"]

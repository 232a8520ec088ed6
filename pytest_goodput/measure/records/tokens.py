"""What a tokenizer given to the Python API counts, whatever its shape (pure).

``run_scenario(tokenizer=...)`` takes a Hugging Face tokenizer, or any object with
``encode(text)``, and uses it twice: to fit synthetic prompts to their lengths (load layer)
and to count output tokens when the engine reports no usable ``usage`` (here). Records count
with a function of a text; this turns either shape into one, so one tokenizer serves both.
"""

from __future__ import annotations

from typing import Any, Callable, Optional


def token_counter(tokenizer: Any) -> Optional[Callable[[str], int]]:
    """A function counting a text's tokens: ``len(encode(text))`` without special tokens for an
    object with ``encode`` (a Hugging Face tokenizer is also callable, but returns an encoding,
    not a count), else the callable itself; None for None."""
    if tokenizer is None:
        return None
    encode = getattr(tokenizer, "encode", None)
    if encode is None:
        return tokenizer

    def count(text: str) -> int:
        try:
            return len(encode(text, add_special_tokens=False))
        except TypeError:  # an encode() without that keyword
            return len(encode(text))

    return count

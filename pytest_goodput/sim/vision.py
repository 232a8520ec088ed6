"""Images in the simulator: the image tokens a chat request's ``image_url`` parts cost (pure).

The rule is Qwen2-VL's: the vision encoder cuts an image into 14-pixel patches and merges
2x2 of them into one token, so an image of W x H pixels is ``ceil(W/28) * ceil(H/28)``
tokens (448x448: 256; 1024x768: 1,036). Real engines resize first (bounds on the pixel
count); the simulator does not. Image tokens count into ``usage.prompt_tokens`` and are
prefilled like text tokens, each costing ``image_cost`` text tokens' prefill time.
"""

from __future__ import annotations

import math
from typing import Any

from pytest_goodput.measure.records.images import ImageError, decode_data_url, image_dimensions

#: Pixels per image token along each side (a 14-pixel patch, merged 2x2).
PATCH = 28
#: Base64 characters decoded first to find an image's size (its header).
HEAD_CHARS = 4096


def tokens_for_image(width: int, height: int) -> int:
    """Image tokens of one ``width`` x ``height`` image: ``ceil(W/28) * ceil(H/28)``."""
    return math.ceil(width / PATCH) * math.ceil(height / PATCH)


def image_tokens(body: dict[str, Any]) -> int:
    """Image tokens of every ``image_url`` part of a chat body; ``ValueError`` (a 400) when a
    part is not a base64 data URL of a PNG, JPEG or GIF image."""
    total = 0
    for msg in body.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "image_url":
                continue
            ref = part.get("image_url")
            url = ref.get("url") if isinstance(ref, dict) else ref
            if not isinstance(url, str):
                raise ValueError("image_url part has no url")
            try:  # PNG and GIF sizes are in the first bytes; a JPEG's may be further in
                try:
                    size = image_dimensions(decode_data_url(url, HEAD_CHARS))
                except ImageError:
                    size = image_dimensions(decode_data_url(url))
            except ImageError as err:
                raise ValueError(str(err)) from None
            total += tokens_for_image(*size)
    return total


def image_part(computed: int, n: int, prompt_len: int, image_tokens: int) -> int:
    """Image tokens among prompt positions ``[computed, computed + n)``, the images being the
    prompt's last ``image_tokens`` positions (they follow the text)."""
    if not image_tokens:
        return 0
    return max(0, min(computed + n, prompt_len) - max(computed, prompt_len - image_tokens))

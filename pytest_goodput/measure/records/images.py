"""Images of vision-language requests: what one image part is and how big it is (pure).

A request's image is sent as an OpenAI ``image_url`` part holding a ``data:`` URL. Its
pixel size is read from the encoded image's own header (PNG ``IHDR``, JPEG ``SOFn``, GIF
logical screen), never from a decoder: the client needs the pixel count for its records,
the simulator to charge image tokens, and neither needs an imaging library for it.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from typing import Any, NamedTuple, Optional, Sequence

#: MIME types the header reader understands, by file extension.
IMAGE_TYPES: dict[str, str] = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
                               ".gif": "image/gif"}
_DATA_HEAD = re.compile(r"^data:[A-Za-z0-9.+/-]+;base64$")
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: JPEG start-of-frame markers (baseline, progressive, lossless, ...): they carry the size.
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


class ImageError(ValueError):
    """Bytes that are not an image of a known type, or a URL that is not a data URL of one."""


class ImagePart(NamedTuple):
    """One image of a request: its ``data:`` URL and pixel size."""

    url: str
    width: int
    height: int

    @property
    def pixels(self) -> int:
        return self.width * self.height


def image_dimensions(data: bytes) -> tuple[int, int]:
    """``(width, height)`` from a PNG, JPEG or GIF header; :class:`ImageError` otherwise."""
    if data.startswith(_PNG_MAGIC) and len(data) >= 24 and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    if data[:2] == b"\xff\xd8":
        found = _jpeg_dimensions(data)
        if found is not None:
            return found
    raise ImageError("not a PNG, JPEG or GIF image (no size in its header)")


def _jpeg_dimensions(data: bytes) -> Optional[tuple[int, int]]:
    """Walk the JPEG segments to the first start-of-frame; None when there is none."""
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length field
            i += 2
            continue
        length = struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker in _SOF and i + 9 <= n:
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return int(w), int(h)
        i += 2 + length
    return None


def image_parts_json(images: "tuple[ImagePart, ...]") -> bytes:
    """The JSON of a chat message's ``image_url`` parts, comma-separated, without an encoder:
    a data URL checked by :func:`decode_data_url` or made by :func:`data_url` holds only
    characters JSON takes as they are."""
    return b",".join(b'{"type":"image_url","image_url":{"url":"' + im.url.encode("ascii") + b'"}}'
                     for im in images)


def data_url(data: bytes, mime: str) -> str:
    """``data:<mime>;base64,<data>``: how an image travels inside a JSON request body."""
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def decode_data_url(url: str, limit: Optional[int] = None) -> bytes:
    """The bytes of a base64 ``data:`` URL (of its first ``limit`` base64 characters, if
    given); :class:`ImageError` for anything else."""
    head, sep, payload = url.partition(",")
    if not sep or not _DATA_HEAD.match(head):
        raise ImageError("image_url must be a base64 data URL (data:image/...;base64,...)")
    if limit is not None:  # a prefix holds the header: decode whole 4-character groups of it
        payload = payload[:limit - limit % 4]
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("image_url data URL is not valid base64") from None


def image_part(data: bytes, mime: str) -> ImagePart:
    """An image part of ``data`` (its size read from its header)."""
    w, h = image_dimensions(data)
    return ImagePart(data_url(data, mime), w, h)


def image_fields(images: Sequence[ImagePart], prompt_tokens: Optional[int], request_bytes: Optional[int],
                 usage_prompt_tokens: Optional[int]) -> dict[str, Any]:
    """A record's image numbers (``docs/metrics.md``, "Images"), from a plan's ``images`` and
    the text's ``prompt_tokens`` it knew.

    ``image_tokens`` is the engine's prompt count (``usage_prompt_tokens``) minus the
    text's count the plan knew: defined only for requests with images whose engine reported
    a prompt count, and whose text count was known.
    """
    out: dict[str, Any] = {"request_bytes": request_bytes, "images": len(images),
                           "image_pixels": sum(im.pixels for im in images)}
    if images and prompt_tokens is not None and usage_prompt_tokens is not None:
        out["image_tokens"] = usage_prompt_tokens - prompt_tokens
    return out


__all__ = ["image_fields", "IMAGE_TYPES", "ImageError", "ImagePart", "data_url", "decode_data_url",
           "image_dimensions", "image_part"]

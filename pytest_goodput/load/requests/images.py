"""Images for vision-language workloads: generated locally, or read from a dataset's files.

Generated images are PNGs (stdlib ``zlib``, no imaging library) built once, before the run,
never in the send path. Each is unique (seeded by the spec's seed, the request index and the
image's position), so an engine's image or prefix cache cannot make one request look
cheaper than another. Their content is blocks of 4x4 pixels of random colour: about 0.24
bytes per pixel after compression, the size of a photograph's JPEG at the same
resolution, so request bytes are of a realistic order (a 448x448 image: ~48 KB, ~65 KB
as base64; 1024x1024: ~250 KB). Noise per pixel would be ~3 bytes per pixel, ten times a
real photo.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from typing import Sequence, Union

import numpy as np

from pytest_goodput.measure.records.images import (
    IMAGE_TYPES,
    ImageError,
    ImagePart,
    decode_data_url,
    image_dimensions,
    image_part,
)
from pytest_goodput.schema.scenario.spec import MAX_IMAGE_SIDE as MAX_SIDE

#: ``SeedSequence`` stream keys of image counts, sizes and pixels (apart from the text's).
COUNT_STREAM, SIZE_STREAM, PIXEL_STREAM, TAIL_STREAM = 21, 22, 23, 24
#: Side of the square blocks of one colour a generated image is made of.
BLOCK = 4
_SIZE_RE = re.compile(r"^(\d+)x(\d+)$")


def parse_size(text: str) -> tuple[int, int]:
    """``"448x448"`` → ``(448, 448)``; ``ValueError`` naming what is allowed otherwise."""
    m = _SIZE_RE.match(text.strip()) if isinstance(text, str) else None
    if not m or not (1 <= int(m.group(1)) <= MAX_SIDE and 1 <= int(m.group(2)) <= MAX_SIDE):
        raise ValueError(f"image size {text!r} is not WIDTHxHEIGHT with sides 1..{MAX_SIDE}, e.g. '448x448'")
    return int(m.group(1)), int(m.group(2))


def _scanlines(rgb: np.ndarray) -> bytes:
    """PNG scanlines of an ``(height, width, 3)`` uint8 array: filter byte 0, then RGB."""
    h, w, _ = rgb.shape
    rows = np.zeros((h, 1 + 3 * w), dtype=np.uint8)
    rows[:, 1:] = rgb.reshape(h, 3 * w)
    return rows.tobytes()


def _png(width: int, height: int, idat: bytes) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def encode_png(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of an ``(height, width, 3)`` uint8 array (filter 0 on every row)."""
    return _png(rgb.shape[1], rgb.shape[0], zlib.compress(_scanlines(rgb), 6))


def _blocks(rng: np.random.Generator, rows: int, width: int) -> np.ndarray:
    """``rows`` pixel rows of 4x4 blocks of random colour, ``width`` pixels wide."""
    blocks = rng.integers(0, 256, size=(-(-rows // BLOCK), -(-width // BLOCK), 3), dtype=np.uint8)
    return np.ascontiguousarray(np.repeat(np.repeat(blocks, BLOCK, axis=0), BLOCK, axis=1)[:rows, :width])


#: Per (width, height, seed): the scanlines below an image's first block row, shared by every
#: image of that size, and their raw-deflate stream (compressed once).
_TAILS: dict[tuple[int, int, int], tuple[bytes, bytes]] = {}


def _tail(width: int, height: int, seed: int) -> tuple[bytes, bytes]:
    found = _TAILS.get((width, height, seed))
    if found is None:
        rng = np.random.default_rng([TAIL_STREAM, seed & 0xFFFFFFFF, width, height])
        raw = _scanlines(_blocks(rng, max(0, height - BLOCK), width)) if height > BLOCK else b""
        deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
        found = (raw, deflate.compress(raw) + deflate.flush())
        if len(_TAILS) >= 16:  # a few sizes per run; never an unbounded cache
            _TAILS.clear()
        _TAILS[(width, height, seed)] = found
    return found


def synthetic_png(width: int, height: int, seed: int, key: int) -> bytes:
    """A seeded PNG of 4x4 blocks of random colour; ``key`` makes each image unique.

    The first block row (4 pixel rows) is the image's own; the rows below are shared by the
    images of one size and seed, compressed once: the image's zlib stream is its own rows'
    raw deflate, ended by a full flush (byte-aligned, no back-references across it), then
    the shared raw deflate, then the Adler-32 of all the scanlines. A 448x448 image takes
    ~0.3 ms instead of ~7 ms, so a large workload is built in a moment.
    """
    rng = np.random.default_rng([PIXEL_STREAM, seed & 0xFFFFFFFF, key])
    head = _scanlines(_blocks(rng, min(BLOCK, height), width))
    tail_raw, tail_deflate = _tail(width, height, seed)
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    head_deflate = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    adler = zlib.adler32(tail_raw, zlib.adler32(head))
    return _png(width, height, b"\x78\x9c" + head_deflate + tail_deflate + struct.pack(">I", adler))


def _choices(value: Union[int, str, Sequence], n: int, rng: np.random.Generator) -> list:
    """``n`` draws: a single value repeated, or uniform picks from a list (repeats weight it)."""
    if isinstance(value, (int, str)):
        return [value] * n
    picks = rng.integers(0, len(value), size=n)
    return [value[int(k)] for k in picks]


def synthetic_images(images_per_request: Union[int, Sequence[int]], image_size: Union[str, Sequence[str]],
                     n: int, seed: int) -> list[tuple[ImagePart, ...]]:
    """The image parts of the first ``n`` requests (deterministic in ``seed``)."""
    counts = _choices(images_per_request, n, np.random.default_rng([COUNT_STREAM, seed & 0xFFFFFFFF]))
    total = sum(int(c) for c in counts)
    sizes = _choices(image_size, total, np.random.default_rng([SIZE_STREAM, seed & 0xFFFFFFFF]))
    out: list[tuple[ImagePart, ...]] = []
    k = 0
    for i, c in enumerate(counts):
        parts = []
        for j in range(int(c)):
            w, h = parse_size(sizes[k])
            k += 1
            parts.append(image_part(synthetic_png(w, h, seed, (i << 8) | j), "image/png"))
        out.append(tuple(parts))
    return out


def file_image(path: str, base_dir: str = "") -> ImagePart:
    """An image file of a dataset as an image part; a relative path is read from ``base_dir``.

    Only local files are read (a remote URL would make the engine fetch it inside the timed
    request); ``data:`` URLs are taken as they are.
    """
    if path.startswith("data:"):
        w, h = image_dimensions(decode_data_url(path))
        return ImagePart(path, w, h)
    if re.match(r"^[a-z][a-z0-9+.-]*://", path, re.I):
        raise ImageError(f"image {path!r}: only local files and data: URLs are allowed, not remote "
                         "URLs (the engine would fetch them inside the timed request)")
    full = os.path.join(base_dir, path)
    mime = IMAGE_TYPES.get(os.path.splitext(path)[1].lower())
    if mime is None:
        raise ImageError(f"image {path!r}: allowed types are {', '.join(sorted(IMAGE_TYPES))}")
    try:
        with open(full, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ImageError(f"image {path!r} cannot be read: {exc.strerror or exc}") from None
    try:
        return image_part(data, mime)
    except ImageError as exc:
        raise ImageError(f"image {path!r}: {exc}") from None


__all__ = ["encode_png", "file_image", "parse_size", "synthetic_images", "synthetic_png"]

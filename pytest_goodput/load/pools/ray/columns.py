"""Raw exchanges packed as columns, for shipping a worker's share back over the network.

A list of ``RawExchange`` objects pickles as one object graph per request (and one tuple
per chunk read); packed, a worker's whole share is a few flat arrays: one per field, all
chunk timestamps in one float array and all chunk bytes in one blob, with offsets; the blob
(repetitive SSE text, most of the volume) is deflated at level 1. The
unpacking side adds ``shift_s`` to every timestamp, mapping the worker's monotonic clock
onto the driver's (``clock_offset.py``).
"""

from __future__ import annotations

import zlib
from array import array
from typing import Any, Optional, Sequence

from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan

_NAN = float("nan")


def _opt(x: Optional[float]) -> float:
    return _NAN if x is None else x


def _back(x: float, shift_s: float) -> Optional[float]:
    return None if x != x else x + shift_s


def pack(exchanges: Sequence[RawExchange]) -> dict[str, Any]:
    """``exchanges`` as columns (plain arrays, lists and one bytes blob)."""
    read_at, read_ends, blob = array("d"), array("q"), bytearray()
    nreads = array("q")
    for ex in exchanges:
        nreads.append(len(ex.reads))
        for t, chunk in ex.reads:
            read_at.append(t)
            blob += chunk
            read_ends.append(len(blob))
    p = [ex.plan for ex in exchanges]
    return {
        "index": array("q", [x.index for x in p]),
        "prompt": [x.prompt for x in p],
        "prompt_tokens": array("q", [-1 if x.prompt_tokens is None else x.prompt_tokens for x in p]),
        "max_tokens": array("q", [x.max_tokens for x in p]),
        "scheduled_at": array("d", [x.scheduled_at for x in p]),
        "warmup": bytes(x.warmup for x in p),
        "open_loop": bytes(x.open_loop for x in p),
        "conversation": array("q", [-1 if x.conversation is None else x.conversation for x in p]),
        "turn": array("q", [-1 if x.turn is None else x.turn for x in p]),
        "sent_at": array("d", [_opt(ex.sent_at) for ex in exchanges]),
        "end_at": array("d", [_opt(ex.end_at) for ex in exchanges]),
        "status": array("q", [-1 if ex.status is None else ex.status for ex in exchanges]),
        "error_kind": [ex.error_kind for ex in exchanges],
        "error_detail": [ex.error_detail for ex in exchanges],
        "retries": array("q", [ex.retries for ex in exchanges]),
        "nreads": nreads,
        "read_at": read_at,
        "read_ends": read_ends,
        "blob": zlib.compress(bytes(blob), 1),
    }


def unpack(cols: dict[str, Any], shift_s: float = 0.0) -> list[RawExchange]:
    """The exchanges :func:`pack` packed, every timestamp plus ``shift_s``."""
    out: list[RawExchange] = []
    blob, read_at, read_ends = zlib.decompress(cols["blob"]), cols["read_at"], cols["read_ends"]
    r = 0
    for i, idx in enumerate(cols["index"]):
        pt = cols["prompt_tokens"][i]
        plan = RequestPlan(idx, cols["prompt"][i], None if pt < 0 else pt, cols["max_tokens"][i],
                           cols["scheduled_at"][i] + shift_s, bool(cols["warmup"][i]),
                           bool(cols["open_loop"][i]))
        c, t = cols["conversation"][i], cols["turn"][i]
        plan.conversation, plan.turn = (None, None) if c < 0 else (c, t)
        reads = []
        for _ in range(cols["nreads"][i]):
            start = read_ends[r - 1] if r else 0
            reads.append((read_at[r] + shift_s, blob[start:read_ends[r]]))
            r += 1
        status = cols["status"][i]
        out.append(RawExchange(plan, _back(cols["sent_at"][i], shift_s), _back(cols["end_at"][i], shift_s),
                               None if status < 0 else status, reads, cols["error_kind"][i],
                               cols["error_detail"][i], cols["retries"][i]))
    return out

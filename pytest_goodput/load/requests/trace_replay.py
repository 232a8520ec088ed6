"""Replaying a trace: its rows as an open-loop schedule, and prompts that share what it shares.

Schedule: the rows from ``trace_start_s`` (trace seconds after its first row) on, request
``i`` at offset ``(t_i - t_first) / 1000 * trace_time_scale`` seconds; warm-up
(``warmup_requests``, ``warmup_s``) and the bounds (``requests``, ``duration_s``) cut it as
they cut any open-loop schedule. No bound: every row of the window is sent.

Prompts: a row of ``input_length`` L is ``ceil(L / B)`` blocks of B = ``trace_block_size``
words (the last one cut to length). Block ``j`` of a row is the text of ``hash_ids[j]``,
the same words wherever that id appears (seeded by the spec's seed, the run's salt and the
id); blocks past the row's ids are the row's own. So rows with equal leading ids share that
prefix exactly, and an engine's prefix cache sees what it saw when the trace was recorded.
Prompts are built when their request is about to be sent (:class:`TracePrompts`), never
the whole trace's at once.
One word is one token for the embedded simulator and about one for real tokenizers (the
vocabulary is of single-token words), so block boundaries are approximate there.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Hashable, Iterable, Iterator, Optional

import numpy as np

from pytest_goodput.load.requests.schedule import Schedule, bounded, mean_rate, warmup_mask
from pytest_goodput.load.trace import Trace, TraceError
from pytest_goodput.load.requests.workload import WORDS, WorkItem, count_tokens
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: ``SeedSequence`` stream key of trace block text (workload streams are 11-14).
TRACE_TEXT_STREAM = 15
_VOCAB = np.asarray(WORDS, dtype=object)
#: Shared blocks whose text a replay keeps (about 2.5 kB each at 512 words).
CACHED_BLOCKS = 2048


def trace_schedule(spec: ScenarioSpec, trace: Trace) -> tuple[Schedule, int]:
    """The replay's schedule and the trace row its first request is (the window's start)."""
    t = trace.timestamps_ms
    first = int(np.searchsorted(t - t[0], spec.trace_start_s * 1000.0, side="left"))
    if first >= len(t):
        raise TraceError(f"trace file {trace.path!r}: no row at or after trace_start_s="
                         f"{spec.trace_start_s:g} (the trace spans {(t[-1] - t[0]) / 1000:g} s)")
    offsets = (t[first:] - t[first]) / 1000.0 * spec.trace_time_scale
    mask = warmup_mask(offsets, spec.warmup_requests, spec.warmup_s)
    sched, _ = bounded(offsets, mask, spec.requests, spec.duration_s)
    if sched.measured == 0:
        raise TraceError(f"trace file {trace.path!r}: every replayed row is warm-up "
                         f"({len(sched)} rows); lower warmup_requests=/warmup_s=")
    return sched, first


def _block_keys(trace: Trace, row: int, blocks: int) -> list[Hashable]:
    ids = trace.hash_ids[row] or ()
    return [("id", ids[j]) if j < len(ids) else ("row", row, j) for j in range(blocks)]


def _block(key: Hashable, size: int, seed: int, salt: Optional[int]) -> list[str]:
    kind, *rest = key  # type: ignore[misc]
    entropy = [TRACE_TEXT_STREAM, seed & 0xFFFFFFFF, 0 if kind == "id" else 1, *rest]
    if salt is not None:
        entropy.append(salt & 0xFFFFFFFF)
    picks = np.random.default_rng(entropy).integers(0, len(WORDS), size=size)
    return _VOCAB[picks].tolist()


class TracePrompts:
    """The prompts of a replay's requests, built on demand: request ``i`` is row ``first + i``.

    Nothing is built up front, so a replay holds only the prompts it is about to send
    (``load/sending/bodies.py``), not the trace's. The text of a shared id's block is kept in a
    bounded cache (``CACHED_BLOCKS``, least recently used out): the ids a conversation trace
    shares are its recent turns' prefixes. Picklable: workers build their own requests' prompts.
    """

    def __init__(self, trace: Trace, first: int, block_size: int, seed: int, salt: Optional[int]) -> None:
        self.trace, self.first, self.block_size, self.seed, self.salt = trace, first, block_size, seed, salt
        self._cache: OrderedDict[Hashable, str] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": OrderedDict()}

    def _text(self, key: Hashable) -> str:
        text = self._cache.get(key)
        if text is None:
            text = " ".join(_block(key, self.block_size, self.seed, self.salt))
            if key[0] == "id":  # type: ignore[index]
                self._cache[key] = text
                if len(self._cache) > CACHED_BLOCKS:
                    self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return text

    def pieces(self, index: int) -> Iterator[str]:
        """Request ``index``'s prompt in pieces (one per block, the separating space in front):
        concatenated, exactly ``input_length`` words."""
        row = self.first + index
        left = int(self.trace.input_lengths[row])
        size = self.block_size
        for j, key in enumerate(_block_keys(self.trace, row, math.ceil(left / size))):
            text = self._text(key) if left >= size else " ".join(_block(key, size, self.seed, self.salt)[:left])
            yield text if j == 0 else " " + text
            left -= size

    def prompt(self, index: int) -> str:
        return "".join(self.pieces(index))


def trace_prompts(trace: Trace, rows: Iterable[int], block_size: int, seed: int,
                  salt: Optional[int] = None) -> list[str]:
    """The prompt of each row in ``rows``: its blocks' words, exactly ``input_length`` of them."""
    source = TracePrompts(trace, 0, block_size, seed, salt)
    return [source.prompt(r) for r in rows]


def trace_items(spec: ScenarioSpec, trace: Trace, sched: Schedule, first: int, tokenizer: Any = None,
                salt: Optional[int] = None) -> tuple[list[WorkItem], TracePrompts]:
    """One payload per scheduled request, its prompt left to the returned source (built when
    the request is about to be sent): the row's length (a tokenizer's count of the prompt,
    built and dropped one at a time) and ``output_length``."""
    source = TracePrompts(trace, first, spec.trace_block_size, spec.seed, salt)
    items = []
    for i in range(len(sched)):
        row = first + i
        tokens = count_tokens(tokenizer, source.prompt(i)) if tokenizer is not None else int(trace.input_lengths[row])
        items.append(WorkItem("", tokens, int(trace.output_lengths[row])))
    return items, source


def trace_load(spec: ScenarioSpec, trace: Trace, sched: Schedule, first: int) -> dict[str, float]:
    """What load the replay offers (its measured rows): ``docs/metrics.md``, "Trace replay"."""
    measured = np.flatnonzero(~sched.warmup)
    rows = measured + first
    offsets = sched.offsets[measured]
    load = {
        "trace_requests": float(len(measured)),
        "trace_span_s": float(offsets[-1] - offsets[0]),
        "trace_isl_mean": float(trace.input_lengths[rows].mean()),
        "trace_osl_mean": float(trace.output_lengths[rows].mean()),
        "trace_time_scale": float(spec.trace_time_scale),
    }
    rate = mean_rate(offsets)
    if len(offsets) >= 2 and math.isfinite(rate):
        load["trace_rate"] = rate
    return load


def mean_gap(sched: Schedule) -> Optional[float]:
    """Mean gap between the schedule's sends (None: fewer than two, or all at once)."""
    rate = mean_rate(sched.offsets)
    return 1.0 / rate if len(sched) >= 2 and math.isfinite(rate) and rate > 0 else None

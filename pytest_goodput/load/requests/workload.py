"""Workloads: what each request asks for (prompt text, prompt length, requested output length).

Synthetic prompts are seeded and built from a fixed list of common English words, each a
single token in the usual tokenizers, so with no tokenizer one word ≈ one token (the
embedded simulator counts one word as exactly one token). Every prompt starts with its own
index spelled in words, so no two prompts of a run share a long prefix and a prefix cache
cannot make one request look cheaper than it is.

Datasets: JSONL (one ``{"prompt", "output_len"|"max_tokens", "prompt_len"?, "images"?}`` per
line; ``images`` lists image files, relative to the dataset's folder, or data URLs) and
ShareGPT JSON (first human turn = prompt, first gpt turn's word count = output length),
sampled by seeded shuffles that cycle when more requests than entries are asked for.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from pytest_goodput.schema.jsonl import jsonl_objects
from pytest_goodput.load.requests.images import file_image, synthetic_images
from pytest_goodput.measure.records.images import ImageError, ImagePart
from pytest_goodput.schema.scenario.spec import ScenarioSpec

WORDS: tuple[str, ...] = (
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be",
    "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have",
    "an", "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has",
    "there", "been", "if", "more", "when", "will", "would", "who", "so", "no", "model",
    "token", "server", "batch", "cache", "queue", "latency", "request", "stream", "engine",
    "test", "prefill", "decode", "kernel", "memory", "tensor", "layer", "red", "green",
    "blue", "river", "stone", "cloud", "light", "night", "paper", "water", "time", "day",
    "world", "house", "city", "road",
)
"""Prompt vocabulary: common lowercase words, one token each (with a leading space)."""

#: ``SeedSequence`` stream keys: lengths and text draw from streams of their own, so changing
#: one distribution does not reshuffle the others.
ISL_STREAM, OSL_STREAM, TEXT_STREAM, DATASET_STREAM = 11, 12, 13, 14


class WorkloadError(ValueError):
    """A dataset or workload setting is unusable; the message names the file and line."""


class WorkItem(NamedTuple):
    """One request's payload: ``prompt_tokens`` is None when not even approximately known."""

    prompt: str
    prompt_tokens: Optional[int]
    max_tokens: int
    images: tuple[ImagePart, ...] = ()  # chat: image_url parts after the text


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([stream, seed & 0xFFFFFFFF])


def sample_lengths(
    mean: int, n: int, dist: str, *, range_ratio: float = 0.0, cv: float = 0.25,
    min_len: int = 1, max_len: Optional[int] = None, rng: Optional[np.random.Generator] = None,
) -> np.ndarray:
    """``n`` integer lengths around ``mean``, clipped to ``[min_len, max_len]``.

    fixed: all ``mean``; uniform: integers in [mean(1-r), mean(1+r)]; normal: mean ± cv·mean;
    lognormal: mean ``mean`` and CV ``cv`` (sigma² = ln(1+cv²), mu = ln mean − sigma²/2).
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    if dist == "fixed":
        x = np.full(n, float(mean))
    elif dist == "uniform":
        lo = math.floor(mean * (1 - range_ratio))
        hi = math.ceil(mean * (1 + range_ratio))
        x = rng.integers(lo, hi + 1, size=n).astype(float)
    elif dist == "normal":
        x = rng.normal(mean, cv * mean, size=n)
    elif dist == "lognormal":
        s2 = math.log1p(cv * cv)
        x = rng.lognormal(math.log(mean) - s2 / 2, math.sqrt(s2), size=n)
    else:
        raise WorkloadError(f"unknown length distribution {dist!r}; allowed: fixed, uniform, normal, lognormal")
    hi_clip = float(max_len) if max_len is not None else np.inf
    return np.clip(np.rint(x), min_len, hi_clip).astype(np.int64)


def index_words(i: int, width: int = 3) -> list[str]:
    """Request index ``i`` spelled in base-``len(WORDS)`` digits, most significant first."""
    base = len(WORDS)
    digits = []
    while i or len(digits) < width:
        i, d = divmod(i, base)
        digits.append(WORDS[d])
    return digits[::-1]


def salt_words(salt: int) -> list[str]:
    """The run nonce as the four words every salted prompt carries."""
    return index_words(salt & 0xFFFFFF, 4)


def synthetic_prompts(lengths: Sequence[int], seed: int, salt: Optional[int] = None) -> list[str]:
    """One prompt of exactly ``lengths[i]`` words per request, each starting with its index.

    ``salt`` (a run nonce) is spelled right after the index, so two runs of one spec do not
    share prefixes either; the rest of the text depends on ``seed`` only.
    """
    total = int(np.sum(lengths)) if len(lengths) else 0
    picks = _rng(seed, TEXT_STREAM).integers(0, len(WORDS), size=total)
    vocab = np.asarray(WORDS, dtype=object)
    width = max(3, len(index_words(max(len(lengths) - 1, 0), 1)))
    nonce = salt_words(salt) if salt is not None else []
    out: list[str] = []
    pos = 0
    for i, n in enumerate(lengths):
        n = int(n)
        head = (index_words(i, width) + nonce)[:n]
        body = vocab[picks[pos + len(head):pos + n]].tolist()
        pos += n
        out.append(" ".join(head + body))
    return out


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens in ``text`` without special tokens (a Hugging Face tokenizer or any ``encode``)."""
    try:
        return len(tokenizer.encode(text, add_special_tokens=False))
    except TypeError:
        return len(tokenizer.encode(text))


def _fit_to_tokens(prompt: str, target: int, tokenizer: Any) -> tuple[str, int]:
    """Trim or pad ``prompt`` (by words) until the tokenizer counts ``target`` tokens, if it can."""
    words = prompt.split(" ")
    count = count_tokens(tokenizer, prompt)
    for _ in range(8):
        if count == target or not words:
            break
        step = max(1, abs(count - target) * len(words) // max(count, 1))
        if count > target:
            words = words[: max(1, len(words) - step)]
        else:
            words = words + [WORDS[(len(words) + k) % len(WORDS)] for k in range(step)]
        prompt = " ".join(words)
        count = count_tokens(tokenizer, prompt)
    return prompt, count


def load_tokenizer(name_or_path: Optional[str]) -> Any:
    """A Hugging Face tokenizer when ``transformers`` is installed and a name is given, else None.

    ``transformers`` is an optional extra, imported only here.
    """
    if not name_or_path:
        return None
    try:
        from transformers import AutoTokenizer  # type: ignore[import-not-found]
    except ImportError:
        return None
    return AutoTokenizer.from_pretrained(name_or_path)


@dataclass(frozen=True)
class DatasetEntry:
    prompt: str
    output_len: int
    prompt_len: Optional[int] = None
    images: tuple[ImagePart, ...] = ()


@dataclass(frozen=True)
class Dataset:
    """Entries of a dataset file; ``skipped`` counts malformed ShareGPT entries left out."""

    path: str
    entries: tuple[DatasetEntry, ...]
    skipped: int = 0


def _read_text(path: str) -> str:
    if not os.path.exists(path):
        raise WorkloadError(f"dataset file {path!r} does not exist")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"dataset file {path!r} cannot be read: {exc}") from None


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def parse_jsonl(text: str, path: str = "<jsonl>") -> Dataset:
    """Parse JSONL text; any bad line is an error naming ``path`` and the line number."""
    entries = []
    for where, obj in jsonl_objects(enumerate(text.splitlines(), 1), path, WorkloadError):
        prompt = obj.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise WorkloadError(f"{where}: 'prompt' must be a non-empty string")
        out = obj.get("output_len", obj.get("max_tokens"))
        if not _positive_int(out):
            raise WorkloadError(f"{where}: 'output_len' (or 'max_tokens') must be an integer >= 1")
        plen = obj.get("prompt_len")
        if plen is not None and not _positive_int(plen):
            raise WorkloadError(f"{where}: 'prompt_len' must be an integer >= 1")
        entries.append(DatasetEntry(prompt, out, plen, _entry_images(obj.get("images"), where, path)))
    if not entries:
        raise WorkloadError(f"dataset file {path!r} has no entries")
    return Dataset(path, tuple(entries))


def _entry_images(value: Any, where: str, path: str) -> tuple[ImagePart, ...]:
    """A JSONL entry's ``images``: files (relative to the dataset's folder) or data URLs."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise WorkloadError(f"{where}: 'images' must be a list of image file paths or data URLs")
    try:
        return tuple(file_image(v, os.path.dirname(path)) for v in value)
    except ImageError as exc:
        raise WorkloadError(f"{where}: {exc}") from None


def _turn_text(turn: Any, role: str) -> Optional[str]:
    if not isinstance(turn, dict):
        return None
    who, value = turn.get("from", turn.get("role")), turn.get("value", turn.get("content"))
    roles = {"human": ("human", "user"), "gpt": ("gpt", "assistant", "chatgpt")}[role]
    return value if who in roles and isinstance(value, str) and value.strip() else None


def parse_sharegpt(text: str, path: str = "<sharegpt>") -> Dataset:
    """Parse ShareGPT JSON; entries without a usable human then gpt turn are skipped and counted."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, list):
        raise WorkloadError(f"dataset file {path!r}: expected a JSON list of conversations")
    entries, skipped = [], 0
    for item in data:
        conv = item.get("conversations") if isinstance(item, dict) else None
        prompt = answer = None
        if isinstance(conv, list):
            for turn in conv:
                if prompt is None:
                    prompt = _turn_text(turn, "human")
                elif (answer := _turn_text(turn, "gpt")) is not None:
                    break
        if prompt is None or answer is None:
            skipped += 1
            continue
        entries.append(DatasetEntry(prompt, max(1, len(answer.split()))))
    if not entries:
        raise WorkloadError(
            f"dataset file {path!r} has no usable conversations ({skipped} malformed entries skipped)"
        )
    return Dataset(path, tuple(entries), skipped)


def load_dataset(path: str, kind: str) -> Dataset:
    """Read a ``jsonl`` or ``sharegpt`` dataset file; errors name the file (and line)."""
    text = _read_text(path)
    if not text.strip():
        raise WorkloadError(f"dataset file {path!r} is empty")
    if kind == "jsonl":
        return parse_jsonl(text, path)
    if kind == "sharegpt":
        return parse_sharegpt(text, path)
    raise WorkloadError(f"unknown dataset kind {kind!r}; allowed: jsonl, sharegpt")


def sample_order(m: int, n: int, seed: int) -> np.ndarray:
    """``n`` indices into ``m`` entries: a seeded shuffle, reshuffled each time it is used up."""
    rng = _rng(seed, DATASET_STREAM)
    rounds = -(-n // m) if m else 0
    order = np.concatenate([rng.permutation(m) for _ in range(rounds)]) if rounds else np.zeros(0, int)
    return order[:n]


def _dataset_items(spec: ScenarioSpec, n: int, tokenizer: Any, dataset: Optional[Dataset],
                   salt: Optional[int] = None) -> list[WorkItem]:
    """Dataset prompts in the spec's seeded order, each led by the run nonce's four words
    (``salt``): one prefix for the whole run, so the dataset's own shared prefixes and
    repeats within the run stay as they are while a repeat of the run finds nothing of it
    cached. A dataset's own prompt length gains the four words."""
    ds = dataset or load_dataset(str(spec.dataset), spec.workload)
    hi = spec.max_len if spec.max_len is not None else math.inf
    lead = salt_words(salt) if salt is not None else []
    items = []
    for k in sample_order(len(ds.entries), n, spec.seed):
        e = ds.entries[int(k)]
        prompt = " ".join([*lead, e.prompt]) if lead else e.prompt
        ptok = e.prompt_len + len(lead) if e.prompt_len is not None else None
        if ptok is None and tokenizer is not None:
            ptok = count_tokens(tokenizer, prompt)
        items.append(WorkItem(prompt, ptok, int(min(max(e.output_len, spec.min_len), hi)), e.images))
    if spec.api != "chat" and any(item.images for item in items):
        raise WorkloadError(f"dataset file {ds.path!r} has images: they need api='chat'")
    return items


def build_workload(
    spec: ScenarioSpec, n: int, tokenizer: Any = None, *, dataset: Optional[Dataset] = None,
    salt: Optional[int] = None,
) -> list[WorkItem]:
    """The payloads of the first ``n`` requests of ``spec`` (deterministic in the seed and salt).

    ``dataset`` lets a caller pass an already loaded file (the loader reads it once);
    ``salt`` (the run nonce) varies the first words of every prompt: a synthetic prompt's
    after its index (:func:`synthetic_prompts`), a dataset prompt's before it.
    """
    if n <= 0:
        return []
    if spec.images_per_request != 0:  # generated images follow each request's own (if any)
        text = build_workload(spec.model_copy(update={"images_per_request": 0}), n, tokenizer,
                              dataset=dataset, salt=salt)
        more = synthetic_images(spec.images_per_request, spec.image_size, n, spec.seed)
        return [item._replace(images=item.images + m) for item, m in zip(text, more)]
    if spec.workload != "synthetic":
        return _dataset_items(spec, n, tokenizer, dataset, salt)
    common = dict(range_ratio=spec.range_ratio, cv=spec.length_cv, min_len=spec.min_len, max_len=spec.max_len)
    isl = sample_lengths(spec.isl, n, spec.isl_dist, rng=_rng(spec.seed, ISL_STREAM), **common)
    osl = sample_lengths(spec.osl, n, spec.osl_dist, rng=_rng(spec.seed, OSL_STREAM), **common)
    prompts = synthetic_prompts(isl, spec.seed, salt)
    if tokenizer is None:
        return [WorkItem(p, int(k), int(o)) for p, k, o in zip(prompts, isl, osl)]
    items = []
    for p, k, o in zip(prompts, isl, osl):
        p, count = _fit_to_tokens(p, int(k), tokenizer)
        items.append(WorkItem(p, count, int(o)))
    return items

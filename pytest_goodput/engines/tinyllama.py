"""Write a tiny random-weight llama GGUF that a real llama.cpp server can serve.

Why: CI has no GPU and cannot download weights, yet the plugin must be exercised against a
real engine. A 64-dim, 2-layer model with a word-piece vocabulary streams thousands of
tokens/s on one CPU thread, and it is built so that it *never* emits EOS, control or byte
tokens — so ``max_tokens`` is always honoured exactly and streamed text is plain ASCII.

How the "never" works: hidden dimension 0 is set to a constant in every token embedding and
no layer writes to it (row 0 of ``attn_output`` and ``ffn_down`` is zero), so after the final
RMS norm it is always positive; the output rows of the banned tokens carry a large negative
weight on that dimension, pushing their logits far below every word piece.

Needs the ``gguf`` package (the ``llamacpp`` extra); it is imported lazily.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

DEFAULT_WORDS: tuple[str, ...] = (
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with",
    "be", "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but",
    "have", "an", "had", "they", "you", "were", "their", "one", "all", "we", "can", "her",
    "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no",
    "model", "token", "server", "batch", "cache", "queue", "latency", "request", "stream",
    "engine", "test", "goodput", "prefill", "decode", "kernel", "memory", "tensor", "layer",
    "red", "green", "blue", "river", "stone", "cloud", "light", "night", "paper", "water",
)
"""Word pieces beyond the byte tokens; each becomes ``▁word`` (a leading space)."""

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""ChatML: recognised by llama.cpp both as a built-in template and through Jinja."""

#: Named models for ``llamacpp_server --write-tiny-model SIZE`` (``write_tiny_llama`` keywords).
#: ``tiny`` (0.5 MB) streams a token in ~0.3 ms on one CPU thread. ``deep`` is the same width
#: 256 layers deep (42 MB): ~12 ms a token at one slot and ~27 ms a step of four, since
#: llama.cpp's cost per layer is mostly fixed per step, so four slots serve ~1.5x the tokens
#: of one (as batching pays on a GPU). Its token gaps stay above the 10 ms a loaded machine's
#: scheduler can hold the client up, where the tiny model's sub-millisecond gaps set the
#: client's self-check its 3 ms floor (docs/performance.md).
SIZES: dict[str, dict[str, int]] = {
    "tiny": {},
    "deep": {"n_layer": 256},
}

_SPACE = "\u2581"
_BAN = -1000.0  # output weight of banned tokens on the constant hidden dimension


def _gguf() -> Any:
    """The optional ``gguf`` writer (a test extra), imported here only."""
    import gguf

    return gguf


def _vocab(words: Sequence[str]) -> tuple[list[str], list[float], list[int]]:
    """SentencePiece-style vocabulary: <unk>, <s>, </s>, 256 byte tokens, letters, words."""
    gguf = _gguf()

    tokens = ["<unk>", "<s>", "</s>"]
    types = [int(gguf.TokenType.UNKNOWN), int(gguf.TokenType.CONTROL), int(gguf.TokenType.CONTROL)]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [int(gguf.TokenType.BYTE)] * 256
    pieces: list[str] = [_SPACE] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    for w in words:
        p = _SPACE + w
        if p not in pieces:
            pieces.append(p)
    tokens += pieces
    types += [int(gguf.TokenType.NORMAL)] * len(pieces)
    # SPM merges prefer higher scores: longer pieces win, so words stay whole.
    scores = [0.0] * (3 + 256) + [float(len(p)) - 100.0 for p in pieces]
    return tokens, scores, types


def write_tiny_llama(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_ff: int = 128,
    n_ctx: int = 4096,
    vocab_words: Sequence[str] = DEFAULT_WORDS,
) -> str:
    """Write the model to ``path`` and return it; same arguments → byte-identical file."""
    gguf = _gguf()

    if n_embd % n_head:
        raise ValueError(f"n_embd {n_embd} is not a multiple of n_head {n_head}")
    rng = np.random.default_rng(seed)
    tokens, scores, types = _vocab(vocab_words)
    n_vocab = len(tokens)

    def rand(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = gguf.GGUFWriter(os.fspath(path), "llama")
    w.add_name("pytest-goodput tiny random llama")
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    embd = rand(n_vocab, n_embd, scale=1.0)
    embd[:, 0] = 1.0  # the constant dimension
    w.add_tensor("token_embd.weight", embd)
    for i in range(n_layer):
        attn_out = rand(n_embd, n_embd, scale=0.1)
        attn_out[0, :] = 0.0
        ffn_down = rand(n_embd, n_ff, scale=0.1)
        ffn_down[0, :] = 0.0
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", rand(n_embd, n_embd, scale=0.2))
        w.add_tensor(f"blk.{i}.attn_k.weight", rand(n_embd, n_embd, scale=0.2))
        w.add_tensor(f"blk.{i}.attn_v.weight", rand(n_embd, n_embd, scale=0.2))
        w.add_tensor(f"blk.{i}.attn_output.weight", attn_out)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(n_ff, n_embd, scale=0.2))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(n_ff, n_embd, scale=0.2))
        w.add_tensor(f"blk.{i}.ffn_down.weight", ffn_down)
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    out = rand(n_vocab, n_embd, scale=0.3)
    out[:, 0] = 0.0
    banned = [i for i, t in enumerate(types) if t != int(gguf.TokenType.NORMAL)]
    out[banned, 0] = _BAN
    w.add_tensor("output.weight", out)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return os.fspath(path)

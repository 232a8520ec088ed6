"""Write a small random-weight Llama model and its tokenizer, for vLLM to serve without a download.

Run with the Python that has vLLM (it brings ``torch``, ``transformers`` and ``tokenizers``)::

    python bench/vllm_tiny_model.py OUT_DIR [--hidden 256] [--layers 4] [--seed 0]

The tokenizer is a byte-level BPE trained here on text of the load generator's prompt words
(``pytest_goodput.load.requests.workload.WORDS``, repeated below so this script needs nothing
but the engine's environment), so a synthetic prompt word is about one token, as in the usual
tokenizers. ``tokenizer_config.json`` carries a ChatML chat template, so the chat route works.
The weights are random (seeded): the model's text is nonsense, its cost per token is real.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

#: The load generator's prompt words (``load/requests/workload.py``) and the number words its
#: prompts open with; each becomes a single token with a leading space.
WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an had they you were their one all we can her has there been if more when will "
    "would who so no model token server batch cache queue latency request stream engine test "
    "prefill decode kernel memory tensor layer red green blue river stone cloud light night paper "
    "water time day world house city road zero two three four five six seven eight nine ten "
    "hundred thousand"
).split()
SPECIAL = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] "
          "+ '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
          "{% endif %}")


def write_tokenizer(out: Path, vocab_size: int, seed: int) -> int:
    """A byte-level BPE over the prompt words; returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    rng = random.Random(seed)
    corpus = [" ".join(rng.choice(WORDS) for _ in range(64)) for _ in range(2000)]
    corpus += [" " + w for w in WORDS for _ in range(50)]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "<|im_end|>",
              "unk_token": "<unk>", "pad_token": "</s>", "model_max_length": 4096,
              "add_bos_token": False, "chat_template": CHATML}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    (out / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "<|im_end|>", "unk_token": "<unk>", "pad_token": "</s>"}))
    return tok.get_vocab_size()


def write_model(out: Path, hidden: int, layers: int, seed: int, vocab_size: int = 1024,
                max_len: int = 2048) -> None:
    """Random Llama weights (bfloat16, seeded) and the tokenizer, in ``out``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab = write_tokenizer(out, vocab_size, seed)
    torch.manual_seed(seed)
    heads = max(hidden // 64, 1)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 4,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=max_len, bos_token_id=1, eos_token_id=4,
                         pad_token_id=2, tie_word_embeddings=False, torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 4}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    write_model(args.out, args.hidden, args.layers, args.seed)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

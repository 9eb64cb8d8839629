"""A tiny Qwen2-shaped chat model built offline, so every pipeline runs on a laptop or in CI.

Nothing here touches the network: the tokenizer is trained on text shipped in the package and
the model is randomly initialised. The result loads like any Hugging Face checkpoint (TRL,
LLaMA-Factory with template ``qwen``, verl's ``RLHFDataset``), which is the point: the same code
path trains Qwen3-8B on a cluster and this model on CPU.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "TAG_TOKENS", "build_tiny_model"]

#: ChatML special tokens, with the ids Qwen gives them relative to each other.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: Verdict tags the judges emit; single tokens so even a random model can produce them.
TAG_TOKENS = ("<think>", "</think>", "<score>", "</score>", "<better>", "</better>")

#: Qwen-style ChatML without a default system prompt.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_VOCAB_SIZE = 2048  # BPE vocabulary incl. ChatML tokens; the six tags come on top
_SAMPLE_CHARS_PER_FILE = 200_000  # keeps the build a few seconds however large samples grow


def build_tiny_model(out_dir: str | Path, *, seed: int = 0) -> Path:
    """Write a tokenizer + randomly initialised Qwen2 model to `out_dir` and return it.

    Deterministic: the same package text and seed give byte-identical files.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _build_tokenizer()
    tokenizer.save_pretrained(out)
    model = _build_model(tokenizer, seed=seed)
    model.save_pretrained(out, safe_serialization=True)
    return out


def _corpus() -> Iterator[str]:
    """The shipped corpus, then the text fields of the packaged samples (sorted, for determinism)."""
    yield resources.files("judgeflow.dev").joinpath("corpus.txt").read_text(encoding="utf-8")
    samples = resources.files("judgeflow").joinpath("samples")
    if not samples.is_dir():
        return
    for entry in sorted(samples.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".jsonl"):
            continue
        text = entry.read_text(encoding="utf-8")[:_SAMPLE_CHARS_PER_FILE]
        for line in text.splitlines():
            try:
                yield from _strings(json.loads(line))
            except json.JSONDecodeError:
                continue  # a cut-off last line, or not JSON at all: not worth failing the build


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _build_tokenizer():  # -> PreTrainedTokenizerFast (imported lazily: importing judgeflow stays cheap)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_SIZE,
        min_frequency=1,  # a small corpus: let rare pairs merge so the vocabulary fills up
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        model_input_names=["input_ids", "attention_mask"],
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )
    fast.add_tokens(list(TAG_TOKENS))  # plain added tokens: kept when special tokens are skipped
    return fast


def _build_model(tokenizer, *, seed: int):
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        # With tied embeddings and the usual 0.02, the residual dominates and greedy decoding
        # echoes the last prompt token forever; 0.1 gives varied text, closer to a real model.
        initializer_range=0.1,
        bos_token_id=None,  # ChatML has no BOS; a BOS id here disagrees with the tokenizer
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id)
    return model

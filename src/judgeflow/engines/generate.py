"""Batched chat generation behind one small interface.

Evaluation asks a `Generator` for completions and does not care how they are made; the
transformers backend here runs on CPU or one GPU, and a vLLM backend can implement the same
protocol for cluster-scale evaluation.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = ["Generator", "HFGenerator", "Messages", "generate"]

#: One model loads at a time: transformers' lazy imports are not safe on two threads at once
#: (`ImportError: cannot import name 'AutoModelForCausalLM'`), and two copies would not fit.
_LOADING = threading.Lock()

Messages = Sequence[Mapping[str, str]]  # one chat: [{"role": "user", "content": "..."}]


class Generator(Protocol):
    """Turns chats into assistant replies, in order; temperature 0 means greedy."""

    def generate(
        self,
        prompts: Sequence[Messages],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> list[str]: ...


def render_prompts(tokenizer: Any, prompts: Sequence[Messages]) -> list[str]:
    """Each conversation as the model is asked it: the tokenizer's chat template with the
    assistant's turn opened (as TRL and verl render a GRPO prompt)."""
    return [
        tokenizer.apply_chat_template(list(p), add_generation_prompt=True, tokenize=False)
        for p in prompts
    ]


@dataclass
class HFGenerator:
    """transformers `generate` with left padding; the model loads on first use and stays loaded."""

    model_dir: str | Path
    batch_size: int = 8
    device: str | None = None  # None: CUDA when available, else CPU
    #: a reply ends where one of these appears, the string kept (open-instruct's --stop_strings)
    stop_strings: tuple[str, ...] = ()
    #: Jinja the prompts are rendered with in place of the tokenizer's own (`data.chat_template`)
    chat_template: str | None = None
    _loaded: tuple[Any, Any] | None = field(default=None, init=False, repr=False)

    def generate(
        self,
        prompts: Sequence[Messages],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> list[str]:
        import torch

        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive (got {self.batch_size})")
        model, tokenizer = self._model_and_tokenizer()
        texts = render_prompts(tokenizer, prompts)
        # Longest first, so each batch holds similar lengths (less padding) and OOM shows early.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        config = self._generation_config(model, tokenizer, max_new_tokens, temperature, top_p)
        if self.stop_strings:
            config.stop_strings = list(self.stop_strings)
        replies: list[str] = [""] * len(texts)
        with torch.random.fork_rng(devices=[]), torch.inference_mode():  # leave global RNG alone
            torch.manual_seed(seed)
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                enc = tokenizer(
                    [texts[i] for i in batch],
                    return_tensors="pt",
                    padding=True,
                    add_special_tokens=False,  # the chat template already wrote every token
                ).to(model.device)
                out = model.generate(**enc, generation_config=config, tokenizer=tokenizer)
                new_tokens = out[:, enc["input_ids"].shape[1] :]
                decoded = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
                for i, text in zip(batch, decoded, strict=True):
                    replies[i] = text
        return replies

    def _model_and_tokenizer(self) -> tuple[Any, Any]:
        with _LOADING:  # a served judge's first requests arrive together, on several threads
            return self._load()

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
            tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir), padding_side="left")
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            if self.chat_template is not None:
                tokenizer.chat_template = self.chat_template
            model: Any = AutoModelForCausalLM.from_pretrained(str(self.model_dir), dtype=dtype)
            self._loaded = (model.to(device).eval(), tokenizer)
        return self._loaded

    @staticmethod
    def _generation_config(
        model: Any, tokenizer: Any, max_new_tokens: int, temperature: float, top_p: float
    ) -> Any:
        """A fresh config: the checkpoint's sampling defaults (Qwen3 ships some) must not leak in."""
        from transformers import GenerationConfig

        sampling = {"temperature": temperature, "top_p": top_p} if temperature > 0 else {}
        return GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=temperature > 0,
            eos_token_id=model.generation_config.eos_token_id or tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            **sampling,
        )


def generate(
    model_dir: str | Path,
    prompts: Sequence[Messages],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    batch_size: int = 8,
    seed: int = 0,
) -> list[str]:
    """One-shot convenience over `HFGenerator`: the reply to each chat, in order."""
    return HFGenerator(model_dir, batch_size=batch_size).generate(
        prompts, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed
    )

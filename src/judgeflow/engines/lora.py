"""A LoRA adapter merged into its base model, so what a LoRA run registers loads like any model.

LLaMA-Factory merges its own adapters (`llamafactory-cli export`) and TRL's peft model merges in
process; verl's model merger writes the base weights and the adapter apart (`lora_adapter/`,
its `lora_alpha` left at 0 for the user to set), so the verl stage merges it here with the alpha
it trained with.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

__all__ = ["ADAPTER_CONFIG", "merge_adapter"]

#: peft's adapter description, beside `adapter_model.safetensors`.
ADAPTER_CONFIG = "adapter_config.json"


def merge_adapter(
    base_dir: str | Path,
    adapter_dir: str | Path,
    output_dir: str | Path,
    *,
    alpha: int | None = None,
) -> Path:
    """The adapter in `adapter_dir` merged into the model in `base_dir`, saved with the base's
    tokenizer to `output_dir` (written beside it, then renamed: never half a model there).
    `alpha`: the scale numerator the adapter trained with, written into its config first."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter, out = Path(adapter_dir), Path(output_dir)
    if alpha is not None:
        config_path = adapter / ADAPTER_CONFIG
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if config.get("lora_alpha") != alpha:
            config["lora_alpha"] = alpha
            config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), torch_dtype="auto")
    with torch.no_grad():
        merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    merged.save_pretrained(str(partial))
    AutoTokenizer.from_pretrained(str(base_dir)).save_pretrained(str(partial))
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out

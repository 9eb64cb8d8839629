"""What counts as a secret in a configuration, and the configuration as MLflow params with the
secrets left out. Secret-ness is judged by a key's words (`HF_TOKEN`, `DB_PASSWORD`,
`AWS_SECRET_ACCESS_KEY`), not by any substring (`max_new_tokens` is a number users need)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judgeflow.config import RunConfig

__all__ = ["flatten", "is_secret_key"]


def flatten(cfg: RunConfig) -> dict[str, str]:
    """Dotted key -> string value, for MLflow params; secret-looking values are redacted."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
            return
        out[prefix] = (
            "***"
            if is_secret_key(prefix)
            else json.dumps(value)
            if isinstance(value, list)
            else str(value)
        )

    walk("", cfg.model_dump(mode="json"))
    return out


_SECRET_WORDS = {"secret", "secrets", "password", "passwd", "pwd", "credential", "credentials",
                 "apikey", "passphrase"}  # fmt: skip
_SECRET_ENDINGS = {("token",), ("api", "key"), ("access", "key"), ("private", "key"),
                   ("secret", "key"), ("auth",)}  # fmt: skip


def is_secret_key(key: str) -> bool:
    """Whether a (dotted) key names a secret: `cluster.env.HF_TOKEN`, `…AWS_SECRET_ACCESS_KEY`,
    `…DB_PASSWORD`; not `evaluation.max_new_tokens` or `grpo.ppo_max_token_len_per_gpu`."""
    words = [w for w in re.split(r"[_\-\s]+", key.rsplit(".", 1)[-1].lower()) if w]
    if _SECRET_WORDS.intersection(words):
        return True
    return any(tuple(words[-len(end) :]) == end for end in _SECRET_ENDINGS)

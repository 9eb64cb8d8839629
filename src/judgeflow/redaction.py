"""What counts as a secret in a configuration, and the configuration as MLflow params with the
secrets left out. Secret-ness is judged by a key's words (`HF_TOKEN`, `DB_PASSWORD`,
`AWS_SECRET_ACCESS_KEY`), not by any substring (`max_new_tokens` is a number users need), and
by credentials in a URL (`postgresql://user:password@db/x`): `strip_userinfo` is how every URL
judgeflow prints or stores loses them."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from judgeflow.config import RunConfig

__all__ = [
    "flatten",
    "has_url_credentials",
    "is_secret",
    "is_secret_key",
    "split_userinfo",
    "strip_userinfo",
]


def flatten(cfg: RunConfig) -> dict[str, str]:
    """Dotted key -> string value, for MLflow params: secret-looking keys are `***`, and every
    URL loses its credentials (`cluster.env.DATABASE_URL=postgresql://db/x`)."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
            return
        text = json.dumps(value) if isinstance(value, list) else str(value)
        out[prefix] = "***" if is_secret_key(prefix) else strip_userinfo(text)

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


def is_secret(key: str, value: object) -> bool:
    """Whether a setting (`cluster.env` entry, flattened key) holds a secret: its key's words say
    so, or its value holds a URL with credentials (`DATABASE_URL=postgresql://u:pw@db/x`)."""
    return is_secret_key(key) or (isinstance(value, str) and has_url_credentials(value))


# The userinfo of `scheme://userinfo@host…`: everything from `//` to the last `@` before the
# path, query or fragment starts — where urllib.parse.urlsplit puts it too.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s]+)@")


def has_url_credentials(text: str) -> bool:
    """Whether `text` holds a URL with a user (and perhaps a password) in it."""
    return _USERINFO.search(text) is not None


def strip_userinfo(text: str) -> str:
    """`text` with every URL in it stripped of its credentials: `http://alice:s3cret@host:5000/x`
    becomes `http://host:5000/x`. Anything else is left as it is."""
    return _USERINFO.sub(r"\g<scheme>", text)


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """`(url without credentials, user, password)`, the user and password percent-decoded;
    `None` for what the URL does not hold."""
    from urllib.parse import unquote

    match = _USERINFO.match(url.strip())
    if match is None:
        return url, None, None
    user, colon, password = match.group("userinfo").partition(":")
    return strip_userinfo(url.strip()), unquote(user), unquote(password) if colon else None

"""What counts as a secret in a configuration, and the configuration as MLflow params with the
secrets left out. Secret-ness is judged by a key's words (`HF_TOKEN`, `DB_PASSWORD`,
`AWS_SECRET_ACCESS_KEY`), not by any substring (`max_new_tokens` is a number users need), and
by credentials in a URL (`postgresql://user:password@db/x`, `…?password=pw`, a presigned
`…?X-Amz-Signature=…`): `strip_credentials` is how every URL judgeflow prints or stores loses
them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "flatten",
    "has_url_credentials",
    "is_secret",
    "is_secret_key",
    "split_userinfo",
    "strip_credentials",
    "strip_credentials_within",
]


def flatten(cfg: BaseModel) -> dict[str, str]:
    """Dotted key -> string value, for MLflow params: secret-looking keys are `***`, and every
    URL loses its credentials (`cluster.env.DATABASE_URL=postgresql://db/x`)."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
            return
        text = json.dumps(value) if isinstance(value, list) else str(value)
        out[prefix] = "***" if is_secret_key(prefix) else strip_credentials(text)

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


# A URL and what follows it up to whitespace: `scheme://` starts one.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://\S*")
_MASK = "***"
#: Query parameter words that name a secret (`password=`, `access_token=`, `X-Amz-Signature=`,
#: Azure's `sig=`, an API `key=`), besides the words `is_secret_key` knows.
_SECRET_PARAM_WORDS = {"password", "passwd", "pwd", "secret", "token", "signature", "sig", "key",
                       "apikey", "credential", "credentials", "auth"}  # fmt: skip
#: ... and endings of run-together ones (`sslpassword`, `accesstoken`).
_SECRET_PARAM_ENDINGS = ("password", "passwd", "secret", "token", "signature", "apikey")


def has_url_credentials(text: str) -> bool:
    """Whether `text` holds a URL with credentials: a user (and perhaps a password) before its
    host, or a query parameter named like a secret (`?password=…`, `?access_token=…`,
    `?X-Amz-Signature=…`). Doubtful cases count: `http://u:pa/ss@host` (a password with an
    unencoded `/`, `?` or `#`) holds credentials."""
    return any(_redact(m.group(0))[1] for m in _URL.finditer(text))


def strip_credentials(text: str) -> str:
    """`text` with every URL in it stripped of its credentials: `http://alice:s3cret@host:5000/x`
    becomes `http://host:5000/x`, `postgresql://db/x?user=u&password=pw` becomes
    `postgresql://db/x?user=u&password=***`. Anything else is left as it is (`@` in a path, a
    query's `mail=a@b`)."""
    return _URL.sub(lambda m: _redact(m.group(0))[0], text)


def strip_credentials_within(data: Any) -> Any:
    """`data` (JSON-like: mappings, lists, strings) with every URL in its strings stripped of its
    credentials (`strip_credentials`); numbers and the rest unchanged. Tuples become lists."""
    if isinstance(data, str):
        return strip_credentials(data)
    if isinstance(data, Mapping):
        return {k: strip_credentials_within(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [strip_credentials_within(v) for v in data]
    return data


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """`(url without its user and password, user, password)`, the user and password
    percent-decoded; `None` for what the URL does not hold. The query is left as it is."""
    from urllib.parse import unquote

    url = url.strip()
    match = _URL.match(url)
    span = _userinfo_span(match.group(0)) if match else None
    if span is None:
        return url, None, None
    user, colon, password = url[span[0] : span[1]].partition(":")
    bare = url[: span[0]] + url[span[1] + 1 :]
    return bare, unquote(user), unquote(password) if colon else None


def _userinfo_span(url: str) -> tuple[int, int] | None:
    """Where the userinfo of `url` (a `_URL` match) starts and ends (at its `@`), or None.

    It ends at the last `@` before the path, query or fragment (where urllib.parse.urlsplit
    ends it too). When none is there but the host has a port that is not a number and an `@`
    follows (`http://u:pa/ss@host`: a password with an unencoded `/`), it ends at the last `@`:
    a URL is rather shown short than with a piece of a password."""
    start = url.index("://") + 3
    authority = re.match(r"[^/?#]*", url[start:]).group(0)  # type: ignore[union-attr]
    if "@" in authority:
        return start, start + authority.rindex("@")
    port = authority.rpartition(":")[2] if ":" in authority else ""
    odd_port = port and not authority.endswith("]") and not port.isdigit()
    if odd_port and "@" in url[start + len(authority) :]:
        return start, url.rindex("@")
    return None


def _redact(url: str) -> tuple[str, bool]:
    """`url` without its credentials, and whether it held any."""
    span = _userinfo_span(url)
    found = span is not None
    if span is not None:
        url = url[: span[0]] + url[span[1] + 1 :]
    head, fragment_mark, fragment = url.partition("#")
    head, query_mark, query = head.partition("?")
    query, in_query = _mask_params(query)
    fragment, in_fragment = _mask_params(fragment)  # `#access_token=…` (OAuth) too
    return head + query_mark + query + fragment_mark + fragment, found or in_query or in_fragment


def _mask_params(query: str) -> tuple[str, bool]:
    """`a=1&password=pw` -> `a=1&password=***`, and whether a value was masked."""
    params = re.split(r"([&;])", query)  # separators kept, in place
    found = False
    for i, param in enumerate(params):
        name, equals, value = param.partition("=")
        if equals and value and value != _MASK and _is_secret_param(name):
            params[i], found = f"{name}={_MASK}", True
    return "".join(params), found


def _is_secret_param(name: str) -> bool:
    from urllib.parse import unquote

    words = [w for w in re.split(r"[^a-z0-9]+", unquote(name).lower()) if w]
    return is_secret_key(name) or any(
        w in _SECRET_PARAM_WORDS or w.endswith(_SECRET_PARAM_ENDINGS) for w in words
    )

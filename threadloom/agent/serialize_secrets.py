"""The secrets rule of ``threadloom.agent.serialize``: no secret is ever written.

A literal string under a secret-looking key is refused; an API key or a credential-bearing
header is written as ``{"env": NAME}``, the environment variable that holds it, and refused
when none does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from threadloom.errors import SecurityError
from threadloom.redact import is_secret_header

_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "credential")


def secret_name(key: Any) -> bool:
    """Whether a config key names a secret (``api_key``, ``token``..., not ``max_tokens``)."""
    low = str(key).lower()
    return any(word in low for word in _SECRET_WORDS) and not low.endswith("tokens")


def refuse_secrets(value: Any, where: str) -> Any:
    """Return ``value``, refusing literal strings under secret-looking keys."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if secret_name(key) and isinstance(item, str) and item:
                raise SecurityError(
                    f"refusing to serialize {where}.{key}: it looks like a secret; read it "
                    "from the environment at run time instead")
            refuse_secrets(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            refuse_secrets(item, f"{where}[{i}]")
    return value


def headers_to_data(headers: Mapping[str, Any]) -> dict[str, Any]:
    """Headers as data: a credential-bearing one (``Authorization``, ``Cookie``,
    ``X-Session-Id``, a ``Bearer ...`` value; ``redact.is_secret_header``) is written as
    ``{"env": NAME}``, the environment variable holding it, like an API key.

    Raises:
        SecurityError: no environment variable holds a credential header's value.
    """
    out: dict[str, Any] = {}
    for name, value in headers.items():
        if not is_secret_header(name, value):
            out[name] = value
            continue
        names = sorted(k for k, v in os.environ.items() if v == value)
        if not names:
            raise SecurityError(
                f"refusing to serialize model.default_headers.{name}: it carries a "
                "credential found in no environment variable; put it in one and it is "
                "written as {'env': NAME}")
        out[name] = {"env": ([k for k in names if secret_name(k)] or names)[0]}
    return out


def env_name_of(secret: str, hint: str | None) -> str:
    """The environment variable holding ``secret`` (``hint`` when given and right).

    Raises:
        SecurityError: ``hint`` does not hold it, or no variable does.
    """
    if hint is not None:
        if os.environ.get(hint) != secret:
            raise SecurityError(f"api_key_env={hint!r} does not hold the model's API key")
        return hint
    names = sorted(k for k, v in os.environ.items() if v == secret)
    preferred = [k for k in names if secret_name(k)]
    if not (preferred or names):
        raise SecurityError(
            "the model was given a literal API key found in no environment variable; it "
            "will not be written. Put it in an environment variable (e.g. OPENAI_API_KEY) "
            "or pass api_key_env='NAME'")
    return (preferred or names)[0]


__all__ = ["env_name_of", "headers_to_data", "refuse_secrets", "secret_name"]

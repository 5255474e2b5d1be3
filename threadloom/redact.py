"""Masking the credentials of URLs in text meant for people: error messages, reprs, logs.

``mask_url("http://user:pw@host/v1?api-key=k&x=1")`` gives
``"http://user:***@host/v1?api-key=***&x=1"``: the password of the userinfo and the value
of every query parameter whose name looks secret (it contains ``key``, ``token``,
``secret``, ``passw``, ``pwd``, ``auth``, ``sig`` or ``credential``, in any case) become
``***``; everything else (scheme, user name, host, port, path) stays, so the message still
says where. ``mask_urls(text)`` does the same to every URL inside a longer text, and can
also mask a known URL's secrets wherever they appear on their own.

Known secrets: ``register_secrets`` records values threadloom was given as credentials
(a model's API key, its credential-bearing header values, the secrets of its base URL);
``mask_urls`` and ``mask_secrets`` replace each of them wherever it appears, so a
provider's error body that echoes the key is masked in ``ModelError`` text, in the error
saved in the checkpoint and in the CLI's output. ``mask_http_logs`` puts the same masking
on the HTTP client's loggers (httpx logs every request URL at INFO).

Only the standard library is imported, so any module (a model adapter, a checkpointer,
the CLI) can use it.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from typing import Any
from urllib.parse import unquote

__all__ = ["MASK", "is_secret_header", "mask_data", "mask_http_logs", "mask_secrets",
           "mask_url", "mask_urls", "register_secrets", "url_secrets"]

MASK = "***"
"""What a secret is replaced with."""

_MIN_LITERAL = 4  # shorter secrets are masked inside URLs only (not as bare words)
# scheme://user:password@ - the password runs to the last "@" before the path/query/space
_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:?#@]*:)([^\s/?#]*)@", re.IGNORECASE)
# a URL in prose: up to a space or quote, not counting punctuation that ends a sentence
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,;:!?)\]]", re.IGNORECASE)
_PARAM = re.compile(r"([?&;]([^=&;#\s]*)=)([^&;#\s'\"<>]*)")
_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether a config key or parameter name looks like it holds a secret (``api_key``,
    ``token``, ``password``, ``auth``, ``signature``, ``credential``...)."""
    return _SECRET_NAME.search(name) is not None


def _mask_params(url: str) -> str:
    def one(m: re.Match[str]) -> str:
        secret = _SECRET_NAME.search(m.group(2)) and m.group(3)
        return m.group(1) + MASK if secret else m.group(0)

    return _PARAM.sub(one, url)


def mask_url(url: str) -> str:
    """``url`` with its password and secret-looking query values replaced by ``***``.

    Args:
        url: a URL (``http://user:pw@host:port/path?token=...``); text that is not a URL
            comes back unchanged.

    Returns:
        The masked URL; the user name, host, port and path are kept.
    """
    return _mask_params(_USERINFO.sub(rf"\1{MASK}@", str(url)))


def _secrets(url: str) -> set[str]:
    """The secrets ``mask_url`` would hide in ``url``, raw and percent-decoded."""
    found = {m.group(2) for m in _USERINFO.finditer(url)}
    found |= {m.group(3) for m in _PARAM.finditer(url) if _SECRET_NAME.search(m.group(2))}
    found |= {unquote(s) for s in found}
    return {s for s in found if len(s) >= _MIN_LITERAL and s != MASK}


def mask_urls(text: str, *known: str | None) -> str:
    """``text`` with every URL in it passed through :func:`mask_url`.

    Args:
        text: a message that may name URLs.
        *known: URLs whose secrets (password, secret query values; raw and
            percent-decoded, 4 characters or longer) are also masked wherever they appear
            in ``text`` on their own, e.g. quoted by a library's error message; None is
            skipped.

    Returns:
        The masked text.
    """
    text = _URL.sub(lambda m: mask_url(m.group(0)), str(text))
    for url in known:
        for secret in sorted(_secrets(str(url)) if url else (), key=len, reverse=True):
            text = text.replace(secret, MASK)
    return mask_secrets(text)


def url_secrets(url: str) -> set[str]:
    """The secrets ``mask_url`` hides in ``url`` (password, secret query values), raw and
    percent-decoded, 4 characters or longer; for a ``user:password@`` URL also the
    ``Basic`` authorization token the HTTP client makes of it."""
    found = _secrets(str(url))
    for m in _USERINFO.finditer(str(url)):
        user = unquote(m.group(1).rpartition("/")[2].rstrip(":"))
        pair = f"{user}:{unquote(m.group(2))}".encode()
        found.add(base64.b64encode(pair).decode("ascii"))
    return found


_SECRET_HEADER = re.compile(
    r"auth|cookie|key|token|secret|session|passw|pwd|credential|signature", re.IGNORECASE)
_SCHEME_VALUE = re.compile(r"\A\s*(bearer|basic|token|digest|apikey)\s+(\S+)", re.IGNORECASE)
_MIN_REGISTERED = 8  # a shorter value is too likely an ordinary word to mask everywhere
_PLACEHOLDERS = frozenset({"not-needed", "lm-studio", "sk-no-key-required", "no-key"})
_KNOWN: set[str] = set()
_KNOWN_SORTED: tuple[str, ...] = ()
_KNOWN_LOCK = threading.Lock()


def is_secret_header(name: Any, value: Any) -> bool:
    """Whether an HTTP header carries a credential: its name says so (``Authorization``,
    ``Cookie``, ``X-Api-Key``, ``X-Session-Id``, anything with ``token``/``secret``...) or
    its value is an auth scheme (``Bearer ...``, ``Basic ...``)."""
    return bool(_SECRET_HEADER.search(str(name))) or (
        isinstance(value, str) and bool(_SCHEME_VALUE.match(value)))


def register_secrets(*values: Any) -> None:
    """Remember credentials so that ``mask_secrets``/``mask_urls`` mask them everywhere.

    Strings shorter than 8 characters, the placeholder keys local servers take
    (``not-needed``, ``lm-studio``...) and non-strings are ignored. For an auth-scheme
    value (``Bearer X``) the token ``X`` is remembered too, and for a cookie header
    (``a=b; c=d``) each value.
    """
    global _KNOWN_SORTED
    found: set[str] = set()
    for value in values:
        if not isinstance(value, str):
            continue
        found.add(value.strip())
        scheme = _SCHEME_VALUE.match(value)
        if scheme:
            found.add(scheme.group(2))
        if "=" in value:
            found |= {part.partition("=")[2].strip() for part in value.split(";")}
    found = {s for s in found if len(s) >= _MIN_REGISTERED and s not in _PLACEHOLDERS}
    if found - _KNOWN:
        with _KNOWN_LOCK:
            _KNOWN.update(found)
            _KNOWN_SORTED = tuple(sorted(_KNOWN, key=len, reverse=True))


def mask_secrets(text: str) -> str:
    """``text`` with every secret given to ``register_secrets`` replaced by ``***``."""
    text = str(text)
    for secret in _KNOWN_SORTED:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def mask_data(value: Any) -> Any:
    """``value`` (a decoded JSON body) with ``mask_urls`` applied to every string in it."""
    if isinstance(value, str):
        return mask_urls(value)
    if isinstance(value, dict):
        return {k: mask_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_data(v) for v in value]
    return value


class _MaskFilter(logging.Filter):
    """Masks URL credentials and known secrets in each record's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot format is left to the handler
            return True
        masked = mask_urls(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


_FILTER = _MaskFilter()
HTTP_LOGGERS = ("httpx", "httpx2", "openai", "openai._base_client")
"""The loggers ``mask_http_logs`` masks: the HTTP clients' and the ``openai`` package's."""


def mask_http_logs(*names: str) -> None:
    """Add the masking filter to the loggers ``names`` (default ``HTTP_LOGGERS``); idempotent."""
    for name in names or HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)

"""Masking the credentials of URLs in text meant for people: error messages, reprs, logs.

``mask_url("http://user:pw@host/v1?api-key=k&x=1")`` gives
``"http://user:***@host/v1?api-key=***&x=1"``: the password of the userinfo and the value
of every query parameter whose name looks secret (it contains ``key``, ``token``,
``secret``, ``passw``, ``pwd``, ``auth``, ``sig`` or ``credential``, in any case) become
``***``; everything else (scheme, user name, host, port, path) stays, so the message still
says where. ``mask_urls(text)`` does the same to every URL inside a longer text, and can
also mask a known URL's secrets wherever they appear on their own.

Only the standard library is imported, so any module (a model adapter, a checkpointer,
the CLI) can use it.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["MASK", "mask_url", "mask_urls"]

MASK = "***"
"""What a secret is replaced with."""

_MIN_LITERAL = 4  # shorter secrets are masked inside URLs only (not as bare words)
# scheme://user:password@ - the password runs to the last "@" before the path/query/space
_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:?#@]*:)([^\s/?#]*)@", re.IGNORECASE)
# a URL in prose: up to a space or quote, not counting punctuation that ends a sentence
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,;:!?)\]]", re.IGNORECASE)
_PARAM = re.compile(r"([?&;]([^=&;#\s]*)=)([^&;#\s'\"<>]*)")
_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential", re.IGNORECASE)


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
    return text

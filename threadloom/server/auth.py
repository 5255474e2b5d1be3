"""Who is calling: API keys, principals and scopes, owners.

With no keys configured (the default, allowed only on a loopback address), every caller
is the anonymous principal with every scope. With keys, each request carries one
(``Authorization: Bearer KEY`` or ``X-Api-Key: KEY``); the server keeps only the key's
SHA-256 (a keys file lists ``{"sha256", "principal", "scopes"}``; ``hash_key`` makes the
digest), compares digests in constant time, and refuses a request without a known key
(401) or without the scope its route needs (403).

Every thread and run belongs to the principal that made it, and every query names the
owner: another principal's thread answers 404, exactly as one that does not exist.

A program may replace key checking with its own ``authenticate(headers)`` hook (sync or
async), returning a ``Principal`` or None (401).
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCOPES = ("assistants:read", "assistants:write", "threads:read", "threads:write",
          "runs:read", "runs:write")
_READ_POSTS = ("/search", "/count", "/history", "/state/checkpoint", "/versions")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: ``identity`` owns what it makes; ``scopes`` limit what it
    may do (``"*"`` is every scope, ``"threads:*"`` every threads scope)."""

    identity: str
    scopes: frozenset[str] = field(default_factory=lambda: frozenset({"*"}))

    def allows(self, scope: str) -> bool:
        """Whether this principal holds ``scope``."""
        kind = scope.split(":", 1)[0]
        return bool({"*", scope, f"{kind}:*"} & self.scopes)


ANONYMOUS = Principal("")
Authenticate = Callable[[Mapping[str, str]],
                        Principal | None | Awaitable[Principal | None]]


def hash_key(key: str) -> str:
    """The hex SHA-256 of an API key, as a keys file stores it."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries (``Authorization: Bearer`` or ``X-Api-Key``)."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip()
    key = headers.get("x-api-key", "").strip()
    return key or None


class KeyAuth:
    """API keys known by their SHA-256 digests.

    Args:
        entries: ``{"sha256": hex digest, "principal": name, "scopes": [...]}`` each
            (scopes default to every scope).

    Raises:
        ValueError: an entry without a 64-hex-digit ``sha256`` or a ``principal``, an
            unknown scope, or an entry holding a plain key (never store one).
    """

    def __init__(self, entries: Sequence[Mapping[str, Any]]) -> None:
        self.entries: list[tuple[bytes, Principal]] = []
        for number, entry in enumerate(entries):
            where = f"API key entry {number}"
            if "key" in entry:
                raise ValueError(f"{where} holds a plain key: store only its SHA-256 "
                                 "(threadloom.server.auth.hash_key)")
            digest = str(entry.get("sha256", "")).lower()
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ValueError(f"{where}: 'sha256' must be 64 hex digits")
            principal = entry.get("principal")
            if not isinstance(principal, str) or not principal:
                raise ValueError(f"{where}: 'principal' must be a non-empty string")
            scopes = entry.get("scopes", ["*"])
            unknown = [s for s in scopes if s not in SCOPES and s != "*"
                       and not (s.endswith(":*") and s[:-2] in {x.split(":")[0] for x in SCOPES})]
            if unknown:
                raise ValueError(f"{where}: unknown scopes {unknown}; known: {list(SCOPES)}")
            self.entries.append((bytes.fromhex(digest), Principal(principal, frozenset(scopes))))
        if not self.entries:
            raise ValueError("no API keys given")

    def __call__(self, headers: Mapping[str, str]) -> Principal | None:
        """The principal of the request's key, or None."""
        key = presented_key(headers)
        if key is None:
            return None
        digest = hashlib.sha256(key.encode("utf-8")).digest()
        found = None
        for known, principal in self.entries:  # no early exit: time does not tell which
            if hmac.compare_digest(digest, known):
                found = principal
        return found

    @classmethod
    def from_file(cls, path: str | Path) -> KeyAuth:
        """Keys from a JSON file: ``{"keys": [{"sha256", "principal", "scopes"}, ...]}``
        (or the list alone).

        Raises:
            ValueError: the file is missing, not JSON, or an entry is invalid (the
                message names the file).
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read API keys file {str(path)!r}: {exc}") from exc
        entries = data.get("keys") if isinstance(data, dict) else data
        if not isinstance(entries, list):
            raise ValueError(f"API keys file {str(path)!r}: expected a list of keys")
        try:
            return cls(entries)
        except ValueError as exc:
            raise ValueError(f"API keys file {str(path)!r}: {exc}") from exc


async def authenticate(hook: Authenticate | None, headers: Mapping[str, str]
                       ) -> Principal | None:
    """Run the hook (sync or async); no hook means the anonymous principal."""
    if hook is None:
        return ANONYMOUS
    result = hook(headers)
    if inspect.isawaitable(result):
        result = await result
    if result is not None and not isinstance(result, Principal):
        raise TypeError(f"the authenticate hook returned {type(result).__name__}, "
                        "not a Principal or None")
    return result


def scope_for(method: str, path: str) -> str | None:
    """The scope a request needs (None: a public route such as ``/ok``)."""
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] in ("ok", "info", "openapi.json", "docs"):
        return None
    head = parts[0]
    reads = method in ("GET", "HEAD") or (method == "POST" and path.endswith(_READ_POSTS))
    if head == "assistants":
        return "assistants:read" if reads else "assistants:write"
    if head == "v1":
        return "runs:read" if method == "GET" else "runs:write"
    if head == "threads" and parts[2:3] in (["runs"], ["stream"]):  # runs and their events
        return "runs:read" if reads else "runs:write"
    if head == "threads":
        return "threads:read" if reads else "threads:write"
    if head == "runs":
        return "runs:write"
    return None

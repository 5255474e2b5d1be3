"""Refusing cross-site requests to a server on this machine.

A web page the user visits can make the browser send requests to a server on
``localhost``: a ``POST`` whose body is ``text/plain`` goes out with no CORS preflight,
and a page on a domain that resolves to 127.0.0.1 (DNS rebinding) reads the answers.
So every request whose ``Origin`` header names an origin that is not allowed (one of
``--cors-origin``, or the server's own) is refused with 403, and a server bound to a
loopback address answers only requests whose ``Host`` is a loopback name
(``localhost``, ``127.0.0.1``, ``[::1]``, any port). Clients that are not browsers
(curl, ``langgraph_sdk``, the OpenAI client) send no ``Origin`` and pass.
"""

from __future__ import annotations

import ipaddress

from starlette.types import ASGIApp, Receive, Scope, Send

from threadloom.server.http import JSON


def is_loopback_name(host: str) -> bool:
    """Whether ``host`` (no port) is ``localhost`` or a loopback address."""
    host = host.strip().lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The name part of a ``Host`` header (``[::1]:2024`` -> ``[::1]``)."""
    value = value.strip()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class GuardMiddleware:
    """See the module docstring.

    Args:
        app: the app it guards.
        origins: the CORS origins allowed (``*`` allows every one).
        loopback: the server is bound to a loopback address: only loopback ``Host``s.
    """

    def __init__(self, app: ASGIApp, origins: list[str], loopback: bool) -> None:
        self.app = app
        self.origins = {o.rstrip("/") for o in origins}
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        detail = self.refusal(headers.get("host"), headers.get("origin"))
        if detail is None:
            await self.app(scope, receive, send)
            return
        await JSON({"detail": detail}, status_code=403)(scope, receive, send)

    def refusal(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these ``Host`` and ``Origin`` headers is refused (None:
        it is not)."""
        if self.loopback and host and not is_loopback_name(host_name(host)):
            return (f"Host {host!r} refused: this server listens on a loopback address "
                    "and answers only localhost, 127.0.0.1 or [::1]")
        if origin is None or "*" in self.origins:
            return None
        origin = origin.strip().rstrip("/")
        if origin in self.origins or (host and origin in (f"http://{host}",
                                                          f"https://{host}")):
            return None
        return (f"cross-origin request from {origin!r} refused: allow the origin with "
                "--cors-origin")

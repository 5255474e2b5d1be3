"""What ``threadloom serve`` serves and how: the graphs, the store, the address, keys.

``ServerConfig.build`` reads the command line's pieces and an optional ``langgraph.json``
(the file ``langgraph dev`` reads: ``{"dependencies": ["."], "graphs": {"agent":
"./agent.py:graph"}, "env": ".env" | {...}, "auth": {"path": "./auth.py:hook"}}``;
``dependencies`` are accepted and left to the user's environment, paths are relative to
the file's folder). ``open_app`` opens the checkpointer and the server's tables and
builds the ASGI app.

Safety: the server binds 127.0.0.1 by default and refuses any other address unless API
keys (or an authenticate hook) are configured; CORS is off unless origins are given.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadloom.server.auth import Authenticate, KeyAuth
from threadloom.server.graphs import GraphLoadError, load_object


class ConfigError(Exception):
    """A configuration that cannot be served; the message says what and where."""


@dataclass
class ServerConfig:
    """Everything ``open_app`` needs."""

    graphs: dict[str, str]
    base_dir: Path = field(default_factory=Path.cwd)
    db: str = "threadloom-server.db"
    postgres: str | None = None
    host: str = "127.0.0.1"
    port: int = 2024
    keys_file: str | None = None
    auth_spec: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    run_timeout_s: float | None = 86400.0  # LangGraph's BG_JOB_TIMEOUT_SECS default

    @classmethod
    def build(cls, targets: list[str], *, config: str | None = None, **kw: Any) -> ServerConfig:
        """Graphs from ``targets`` (``MODULE:ATTR`` named after ATTR, or
        ``NAME=MODULE:ATTR``) and from ``config`` (a langgraph.json), other settings as
        keywords.

        Raises:
            ConfigError: a malformed target, an unreadable or invalid config file, two
                graphs with one name.
        """
        graphs: dict[str, str] = {}
        base = Path.cwd()
        env: dict[str, str] = {}
        auth_spec = kw.pop("auth_spec", None)
        if config is not None:
            data, base = _read_config(config)
            graphs.update(data["graphs"])
            env = _env(data.get("env"), base)
            auth = data.get("auth")
            if isinstance(auth, dict) and auth.get("path") and auth_spec is None:
                auth_spec = str(auth["path"])
        for target in targets:
            name, sep, spec = target.partition("=")
            if not sep:
                spec, name = target, target.rpartition(":")[2].split(".")[-1]
            if ":" not in spec or not name:
                raise ConfigError(f"expected MODULE:ATTR or NAME=MODULE:ATTR, got {target!r}")
            if name in graphs:
                raise ConfigError(f"two graphs are named {name!r}; name one NAME=MODULE:ATTR")
            graphs[name] = spec
        if not graphs:
            raise ConfigError("no graph to serve: give MODULE:ATTR or --config langgraph.json")
        return cls(graphs=graphs, base_dir=base, env=env, auth_spec=auth_spec, **kw)

    def check_address(self, hook: Authenticate | None) -> None:
        """Refuse a non-loopback address without authentication.

        Raises:
            ConfigError: naming the address.
        """
        if hook is None and not _is_loopback(self.host):
            raise ConfigError(f"refusing to listen on {self.host!r} without API keys: anyone "
                              "who reaches it could run your graphs; pass --api-keys FILE "
                              "(or an auth hook), or bind 127.0.0.1")

    def auth_hook(self) -> Authenticate | None:
        """The authenticate hook: the auth spec's callable, else the keys file's keys,
        else ``THREADLOOM_API_KEYS_FILE``; None when nothing is configured.

        Raises:
            ConfigError: a keys file or hook that cannot be loaded.
        """
        if self.auth_spec:
            try:
                hook = load_object(self.auth_spec, self.base_dir)
            except GraphLoadError as exc:
                raise ConfigError(f"auth hook: {exc}") from exc
            if not callable(hook):
                raise ConfigError(f"auth hook {self.auth_spec!r} is not callable")
            return hook  # type: ignore[no-any-return]
        path = self.keys_file or os.environ.get("THREADLOOM_API_KEYS_FILE")
        if not path:
            return None
        try:
            return KeyAuth.from_file(path)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read_config(path: str) -> tuple[dict[str, Any], Path]:
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path!r}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"{path!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("graphs"), dict) \
            or not data["graphs"]:
        raise ConfigError(f"{path!r}: expected an object with a non-empty \"graphs\" object")
    for name, spec in data["graphs"].items():
        if isinstance(spec, dict):  # {"path": "...", "description": ...}
            spec = spec.get("path")
        if not isinstance(spec, str) or ":" not in spec:
            raise ConfigError(f"{path!r}: graph {name!r} must be \"path/file.py:attr\"")
        data["graphs"][name] = spec
    deps = data.get("dependencies", [])
    if not isinstance(deps, list):
        raise ConfigError(f"{path!r}: \"dependencies\" must be a list")
    return data, file.resolve().parent


def _env(value: Any, base: Path) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str):
        return _dotenv(base / value)
    raise ConfigError("\"env\" must be an object or the path of a .env file")


def _dotenv(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read env file {str(path)!r}: {exc.strerror or exc}") from exc
    out = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        out[key.strip()] = value.strip().strip("'\"")
    return out

"""Opening and running a server: the checkpointer, the tables, the app, uvicorn.

``open_app(config)`` builds the ASGI app (useful to mount it, or to run it under any ASGI
server); ``serve(config)`` runs it with uvicorn on ``config.host:config.port``; ``main``
is ``python -m threadloom.server`` (the ``threadloom serve`` command calls ``serve``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from threadloom.server.app import create_app
from threadloom.server.assistants_store import Assistants
from threadloom.server.config import ConfigError, ServerConfig
from threadloom.server.db import Database
from threadloom.server.graphs import GraphLoadError, load_graphs
from threadloom.server.guard import is_loopback_name
from threadloom.server.state import Limits


def server_tables_path(db: str) -> str:
    """Where the server's own tables live beside the SQLite checkpoints ``db``: a second
    file (``x.db`` -> ``x.server.db``), so the run bookkeeping and the event log never
    wait for the checkpointer's write lock (SQLite has one writer per file)."""
    path = Path(db)
    return str(path.with_name(path.stem + ".server" + (path.suffix or ".db")))


def open_store(config: ServerConfig) -> tuple[Any, Database]:
    """The checkpointer and the server's tables: one SQLite file, or one PostgreSQL
    database (its ``search_path``)."""
    if config.postgres:
        from threadloom.checkpoint.postgres import PostgresCheckpointer

        return (PostgresCheckpointer(config.postgres),
                Database.postgres_db(config.postgres))
    from threadloom.checkpoint.sqlite import SqliteCheckpointer

    return SqliteCheckpointer(config.db), Database.sqlite(server_tables_path(config.db))


def open_app(config: ServerConfig, limits: Limits | None = None) -> Any:
    """The ASGI app serving ``config``'s graphs (``limits``: by default, the
    ``Limits`` defaults with ``config``'s run timeout).

    Raises:
        ConfigError: a graph that does not load, an address that may not be bound
            without keys, a keys file or auth hook that cannot be read.
    """
    hook = config.auth_hook()
    config.check_address(hook)
    for key, value in config.env.items():
        os.environ.setdefault(key, value)
    checkpointer, db = open_store(config)
    try:
        graphs = load_graphs(config.graphs, checkpointer, config.base_dir)
    except GraphLoadError as exc:
        db.close()
        checkpointer.close()
        raise ConfigError(str(exc)) from exc
    return create_app(Assistants(graphs), checkpointer, db, authenticate_hook=hook,
                      limits=limits or Limits(run_timeout_s=config.run_timeout_s),
                      cors_origins=config.cors_origins,
                      loopback=is_loopback_name(config.host))


def serve(config: ServerConfig, *, log_level: str = "warning") -> None:
    """Run the server until interrupted (Ctrl-C, SIGTERM).

    Raises:
        ConfigError: see ``open_app``.
    """
    import uvicorn

    app = open_app(config)
    uvicorn.run(app, host=config.host, port=config.port, log_level=log_level,
                timeout_graceful_shutdown=5, lifespan="on")


def parser() -> argparse.ArgumentParser:
    """The arguments of ``threadloom serve`` / ``python -m threadloom.server``."""
    p = argparse.ArgumentParser(prog="threadloom serve", description=(
        "Serve graphs over the HTTP API of LangGraph's SDK (and an OpenAI-compatible one)."))
    p.add_argument("targets", nargs="*", metavar="[NAME=]MODULE:ATTR")
    p.add_argument("--config", help="a langgraph.json")
    p.add_argument("--db", default="threadloom-server.db", help="SQLite file (default)")
    p.add_argument("--postgres", help="PostgreSQL conninfo (instead of --db)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=2024)
    p.add_argument("--api-keys", dest="keys_file", help="JSON file of SHA-256 API keys")
    p.add_argument("--auth", dest="auth_spec", help="MODULE:ATTR of an authenticate hook")
    p.add_argument("--cors-origin", dest="cors_origins", action="append", default=[])
    p.add_argument("--run-timeout", type=float, default=86400.0, metavar="SECONDS",
                   help="a run still going after this ends 'timeout' (default: one day)")
    p.add_argument("--log-level", default="warning")
    return p


def main(argv: list[str] | None = None) -> int:
    """``python -m threadloom.server ...``; returns the exit code."""
    args = parser().parse_args(argv)
    try:
        config = ServerConfig.build(
            args.targets, config=args.config, db=args.db, postgres=args.postgres,
            host=args.host, port=args.port, keys_file=args.keys_file,
            auth_spec=args.auth_spec, cors_origins=args.cors_origins,
            run_timeout_s=args.run_timeout)
        serve(config, log_level=args.log_level)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0

"""``threadloom serve``: graphs behind the HTTP API of LangGraph's SDK (docs/server.md).

The work is ``threadloom.server``'s; this module reads the command line and reports a
configuration that cannot be served as one line (exit 2).
"""

from __future__ import annotations

from pathlib import Path

import typer

from threadloom.cli.common import CliError, friendly

__all__ = ["serve_command"]


@friendly
def serve_command(
    targets: list[str] = typer.Argument(
        None, metavar="[NAME=]MODULE:ATTR ...",
        help="graphs to serve (the name defaults to ATTR)"),
    config: Path | None = typer.Option(None, "--config", help="a langgraph.json"),
    db: str = typer.Option("threadloom-server.db", "--db", help="SQLite file"),
    postgres: str | None = typer.Option(None, "--postgres", help="PostgreSQL conninfo"),
    host: str = typer.Option("127.0.0.1", "--host",
                             help="address; other than loopback only with --api-keys"),
    port: int = typer.Option(2024, "--port"),
    api_keys: Path | None = typer.Option(None, "--api-keys",
                                         help="JSON file of SHA-256 API keys"),
    auth: str | None = typer.Option(None, "--auth", help="MODULE:ATTR of an auth hook"),
    cors_origin: list[str] = typer.Option(None, "--cors-origin", help="allowed origin"),
    run_timeout: float = typer.Option(86400.0, "--run-timeout",
                                      help="seconds a run may take (then 'timeout')"),
    log_level: str = typer.Option("warning", "--log-level"),
) -> None:
    """Serve graphs to langgraph_sdk clients (and OpenAI clients, under /v1)."""
    try:
        from threadloom.server.config import ConfigError, ServerConfig
        from threadloom.server.serve import serve
    except ImportError as exc:
        raise CliError(f"threadloom serve needs the server extra: pip install "
                       f"'threadloom[server]' ({exc})", 2) from exc
    try:
        cfg = ServerConfig.build(
            list(targets or []), config=str(config) if config else None, db=db,
            postgres=postgres, host=host, port=port,
            keys_file=str(api_keys) if api_keys else None, auth_spec=auth,
            cors_origins=list(cors_origin or []), run_timeout_s=run_timeout)
        serve(cfg, log_level=log_level)
    except ConfigError as exc:
        raise CliError(str(exc), 2) from exc

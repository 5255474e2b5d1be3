"""``threadloom draw``: a graph as Mermaid text, or a PNG rendered offline (matplotlib),
the format from ``--format`` or the suffix of ``-o``."""

from __future__ import annotations

import enum
from pathlib import Path

import typer

from threadloom.cli.common import CliError, friendly
from threadloom.cli.target import as_graph, load_target

__all__ = ["DrawFormat", "draw"]


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


@friendly
def draw(
    target: str = typer.Argument(
        ..., metavar="MODULE:ATTR",
        help="a StateGraph or CompiledGraph; MODULE is imported (its top-level code runs)"),
    fmt: DrawFormat | None = typer.Option(
        None, "--format", "-f", show_default=False,
        help="mermaid or png; default: png for an --output ending in .png, else mermaid"),
    output: Path | None = typer.Option(
        None, "--output", "-o",
        help="file to write (mermaid: default stdout); its suffix must match the format: "
             ".png for png, not an image suffix for mermaid"),
) -> None:
    """Draw a graph: Mermaid text, or a PNG rendered offline with matplotlib.

    This imports MODULE, which runs its top-level code (and a factory ATTR names); the
    graph's nodes are not run. Use it only on code you trust.
    """
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

"""The ``threadloom`` command line (typer + rich).

Commands, one module each (their shared layer: ``common`` errors and JSON arguments,
``target`` loading ``MODULE:ATTR``, ``store`` which file and opening it, ``status`` a
thread's state in words, ``render`` JSON output, ``view`` a run's live output):
    demo      the offline demo agent (local model, SQLite checkpoints, approvals): ``demo``,
              with ``demo_model`` (which model) and ``approval`` (asking y/n/e)
    run       run any graph (``MODULE:ATTR``) with streaming and SQLite checkpoints: ``run``
    resume    answer a pending interrupt (``--approve``, ``--reject [REASON]``, ``--edit``):
              ``resume``
    threads   list / show / history (``threads``), fork / delete (``threads_edit``)
    draw      the graph as Mermaid text or a PNG rendered offline: ``draw``
    models    pull / list the local GGUF models: ``models``
    serve     graphs behind the HTTP API of LangGraph's SDK: ``serve`` (``threadloom.server``)

Every command reports a failure as one line on stderr (``error: ...``) and exits with 1
(2 for usage problems such as a module path that does not import); set
``THREADLOOM_DEBUG=1`` for tracebacks. The imports go one way: this module -> the command
modules -> the shared layer; ``resume`` uses ``demo`` for demo threads and ``demo`` the
progress bar of ``models``; no module of the package imports this one.
"""

from __future__ import annotations

import sys

import typer

from threadloom.cli import draw, models, threads, threads_edit
from threadloom.cli.demo import demo_command
from threadloom.cli.resume import resume_command
from threadloom.cli.run import run_command
from threadloom.cli.serve import serve_command

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

threads_app = typer.Typer(help="Inspect and edit saved threads.", no_args_is_help=True,
                          add_completion=False)
threads_app.command("list")(threads.list_threads)
threads_app.command("show")(threads.show)
threads_app.command("history")(threads.history)
threads_app.command("fork")(threads_edit.fork)
threads_app.command("delete")(threads_edit.delete)
app.add_typer(threads_app, name="threads")

app.command("draw")(draw.draw)

models_app = typer.Typer(help="Local GGUF models for LocalChatModel.", no_args_is_help=True,
                         add_completion=False)
models_app.command("pull")(models.models_pull)
models_app.command("list")(models.models_list)
app.add_typer(models_app, name="models")
app.command("serve")(serve_command)


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

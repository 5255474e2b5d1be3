"""The demo's chat model: which one ``threadloom demo`` (and ``resume`` of a demo thread)
uses, and making it ready before a thread is touched.

The order: ``--scripted``; ``--model SPEC`` (``local:smollm2``, ``openai:gpt-4o-mini``,
``ollama:llama3.2``, ``scripted``); the model a resumed thread used before;
``openai:gpt-4o-mini`` when ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set; else the
local model (pulled first, with a progress bar, when it is not cached). When the local
model cannot be had (``xllamacpp`` missing, no file and no network, or the server does
not start), a one-line notice says so and the scripted demo model is used instead.

An OpenAI-compatible model's client is made here, before the thread starts, so missing
credentials are refused at once; with ``OPENAI_BASE_URL`` set, errors name that URL.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import typer
from rich.console import Console

from threadloom.cli.common import CliError
from threadloom.cli.models import pull_with_progress
from threadloom.demo import demo_brain

__all__ = ["LOCAL_DEFAULT", "LOCAL_KWARGS", "choose_model", "scripted_model"]


LOCAL_DEFAULT = "local:smollm2"


LOCAL_KWARGS: dict[str, Any] = {"temperature": 0.2, "max_tokens": 256, "seed": 7}


def scripted_model() -> Any:
    from threadloom.models import ScriptedChatModel

    return ScriptedChatModel(demo_brain, name="threadloom-demo-scripted")


def _local(name: str) -> tuple[Any, str | None]:
    """A started ``LocalChatModel``, or ``(None, why not)``."""
    from threadloom.errors import ModelError

    if importlib.util.find_spec("xllamacpp") is None:
        return None, "xllamacpp is not installed (pip install 'threadloom[local]')"
    from threadloom.models.local import LOCAL_MODELS, LocalChatModel, resolve_model

    try:
        resolve_model(name)
    except ModelError as exc:
        if name.lower() not in LOCAL_MODELS:
            return None, str(exc)
        try:
            pull_with_progress(name, Console(stderr=True))
        except ModelError as pull_exc:
            return None, f"model {name!r} is not cached and could not be fetched ({pull_exc})"
    model = LocalChatModel(name, **LOCAL_KWARGS)
    try:
        _ = model.base_url  # starts the llama.cpp server now, not mid-run
    except ModelError as exc:
        return None, f"the llama.cpp server did not start ({exc})"
    return model, None


def choose_model(spec: str | None, scripted: bool = False,
                 remembered: str | None = None) -> tuple[Any, str]:
    """Pick the demo's chat model (see the module doc for the order).

    Returns:
        ``(model, spec)`` where ``spec`` is what was used (``"scripted"`` after a fallback).

    Raises:
        CliError: an explicitly requested local model cannot be had, or a bad spec.
    """
    explicit = "scripted" if scripted else spec
    chosen = explicit or remembered
    if chosen is None:
        env = os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")
        chosen = "openai:gpt-4o-mini" if env else LOCAL_DEFAULT
    if chosen == "scripted":
        return scripted_model(), "scripted"
    if chosen.startswith("local:"):
        model, why = _local(chosen.partition(":")[2] or "smollm2")
        if model is not None:
            return model, chosen
        if explicit:
            raise CliError(f"{chosen} is not available: {why}")
        typer.echo(f"notice: local model unavailable ({why}); using the scripted demo model",
                   err=True)
        return scripted_model(), "scripted"
    return _remote(chosen), chosen


def _remote(spec: str) -> Any:
    """An OpenAI-compatible model for ``spec``, its client made now (no request is sent):
    missing credentials fail here, before a thread is started. With ``OPENAI_BASE_URL``
    set, an ``openai:`` model gets that URL explicitly, so errors name it.

    Raises:
        CliError: an unknown provider or empty name, or a malformed ``OPENAI_BASE_URL``
            (exit 2), or the client cannot be made.
    """
    from threadloom.errors import ModelError
    from threadloom.models import init_chat_model
    from threadloom.models.openai import check_base_url

    provider, sep, _ = spec.partition(":")
    kwargs: dict[str, Any] = {}
    if (provider == "openai" or not sep) and os.environ.get("OPENAI_BASE_URL"):
        kwargs["base_url"] = os.environ["OPENAI_BASE_URL"]
    try:
        if kwargs:
            check_base_url(kwargs["base_url"], "OPENAI_BASE_URL")
        model = init_chat_model(spec, **kwargs)
    except ValueError as exc:
        raise CliError(str(exc), 2) from exc
    try:
        _ = model.client
    except ModelError as exc:
        raise CliError(f"cannot use --model {spec}: {exc}") from exc
    return model
